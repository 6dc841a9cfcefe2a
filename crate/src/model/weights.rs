//! GPT-2 weights as named views into one f32 buffer (llm.c's `ParameterTensors`).
//!
//! Matrices are stored row-major as `[out, in]`, so every matmul reads a weight row contiguously
//! (one dot product per output). Hugging Face GPT-2 keeps its `Conv1D` weights as `[in, out]`;
//! [`conv1d_to_rows`] is the one place that transposes them.

use crate::error::Result;
use crate::formats::safetensors::SafetensorsFile;
use crate::model::Config;

/// A tensor's place in [`Weights::data`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct View {
    offset: usize,
    len: usize,
}

/// One transformer block. Names follow the checkpoint (`h.{i}.…`).
#[derive(Clone, Debug)]
pub struct LayerWeights {
    pub ln_1_weight: View,        // [d]
    pub ln_1_bias: View,          // [d]
    pub attn_c_attn_weight: View, // [3d, d]  rows: q (d) | k (d) | v (d)
    pub attn_c_attn_bias: View,   // [3d]
    pub attn_c_proj_weight: View, // [d, d]
    pub attn_c_proj_bias: View,   // [d]
    pub ln_2_weight: View,        // [d]
    pub ln_2_bias: View,          // [d]
    pub mlp_c_fc_weight: View,    // [d_ff, d]
    pub mlp_c_fc_bias: View,      // [d_ff]
    pub mlp_c_proj_weight: View,  // [d, d_ff]
    pub mlp_c_proj_bias: View,    // [d]
}

#[derive(Clone, Debug)]
pub struct Weights {
    data: Vec<f32>,
    pub wte: View, // [V, d]  token embedding
    pub wpe: View, // [n_ctx, d]  learned position embedding
    pub layers: Vec<LayerWeights>,
    pub ln_f_weight: View, // [d]
    pub ln_f_bias: View,   // [d]
    /// `[V, d]`: the same view as `wte` when the head is tied (GPT-2's default).
    pub lm_head: View,
}

impl Weights {
    /// The values of one tensor. Views are only made by this module's layout, always inside `data`.
    pub fn get(&self, view: View) -> &[f32] {
        &self.data[view.offset..view.offset + view.len]
    }

    pub fn tied_head(&self) -> bool {
        self.lm_head == self.wte
    }

    /// Number of stored parameters (a tied head counted once).
    pub fn n_params(&self) -> usize {
        self.data.len()
    }

    /// Reads a GPT-2 checkpoint: names with or without the `transformer.` prefix, an optional
    /// explicit `lm_head.weight`. Every tensor's presence, shape and dtype is checked before the
    /// f32 buffer is allocated, so a lying header cannot make us allocate.
    pub fn from_safetensors(config: &Config, file: &SafetensorsFile) -> Result<Weights> {
        let prefix = if file.contains("transformer.wte.weight") { "transformer." } else { "" };
        // An untied model must have its own head; a tied one may store a copy, which we skip.
        let explicit_head = !config.tied_head
            || (file.contains("lm_head.weight")
                && file.raw("lm_head.weight")? != file.raw(&format!("{prefix}wte.weight"))?);
        let plan = Plan::new(config, prefix, explicit_head);
        for t in &plan.tensors {
            file.check(&t.name, &t.stored_shape())?;
        }
        let mut data = vec![0f32; plan.total];
        for t in &plan.tensors {
            let out = &mut data[t.view.offset..t.view.offset + t.view.len];
            if t.conv1d {
                let mut stored = vec![0f32; t.view.len];
                file.read_f32(&t.name, &t.stored_shape(), &mut stored)?;
                conv1d_to_rows(&stored, t.shape[1], t.shape[0], out);
            } else {
                file.read_f32(&t.name, &t.shape, out)?;
            }
        }
        Ok(plan.into_weights(data))
    }

    /// Weights with every value drawn from a seeded generator: for benchmarks and tests that need
    /// a model of a given shape without a checkpoint file.
    pub fn random(config: &Config, seed: u64) -> Weights {
        let plan = Plan::new(config, "", !config.tied_head);
        let mut rng = crate::sample::Rng::new(seed);
        let data = (0..plan.total).map(|_| (rng.next_f32() - 0.5) * 0.2).collect();
        plan.into_weights(data)
    }
}

/// `[in, out]` (Conv1D) → `[out, in]` (one row per output).
fn conv1d_to_rows(stored: &[f32], n_in: usize, n_out: usize, rows: &mut [f32]) {
    for i in 0..n_in {
        for o in 0..n_out {
            rows[o * n_in + i] = stored[i * n_out + o];
        }
    }
}

/// Where each checkpoint tensor goes in the buffer, decided before any data is read.
struct Plan {
    tensors: Vec<PlannedTensor>,
    total: usize,
    explicit_head: bool,
    n_layer: usize,
}

struct PlannedTensor {
    name: String,
    /// Shape in memory: `[out, in]` for matrices.
    shape: Vec<usize>,
    /// Stored transposed, as `[in, out]`.
    conv1d: bool,
    view: View,
}

impl PlannedTensor {
    fn stored_shape(&self) -> Vec<usize> {
        if self.conv1d {
            vec![self.shape[1], self.shape[0]]
        } else {
            self.shape.clone()
        }
    }
}

impl Plan {
    fn new(c: &Config, prefix: &str, explicit_head: bool) -> Plan {
        let (d, f, v) = (c.d_model, c.d_ff, c.vocab_size);
        let mut plan = Plan { tensors: Vec::new(), total: 0, explicit_head, n_layer: c.n_layer };
        plan.push(format!("{prefix}wte.weight"), vec![v, d], false);
        plan.push(format!("{prefix}wpe.weight"), vec![c.n_ctx, d], false);
        for l in 0..c.n_layer {
            let h = format!("{prefix}h.{l}");
            plan.push(format!("{h}.ln_1.weight"), vec![d], false);
            plan.push(format!("{h}.ln_1.bias"), vec![d], false);
            plan.push(format!("{h}.attn.c_attn.weight"), vec![3 * d, d], true);
            plan.push(format!("{h}.attn.c_attn.bias"), vec![3 * d], false);
            plan.push(format!("{h}.attn.c_proj.weight"), vec![d, d], true);
            plan.push(format!("{h}.attn.c_proj.bias"), vec![d], false);
            plan.push(format!("{h}.ln_2.weight"), vec![d], false);
            plan.push(format!("{h}.ln_2.bias"), vec![d], false);
            plan.push(format!("{h}.mlp.c_fc.weight"), vec![f, d], true);
            plan.push(format!("{h}.mlp.c_fc.bias"), vec![f], false);
            plan.push(format!("{h}.mlp.c_proj.weight"), vec![d, f], true);
            plan.push(format!("{h}.mlp.c_proj.bias"), vec![d], false);
        }
        plan.push(format!("{prefix}ln_f.weight"), vec![d], false);
        plan.push(format!("{prefix}ln_f.bias"), vec![d], false);
        if explicit_head {
            plan.push("lm_head.weight".to_string(), vec![v, d], false);
        }
        plan
    }

    fn push(&mut self, name: String, shape: Vec<usize>, conv1d: bool) {
        let len = shape.iter().product();
        self.tensors.push(PlannedTensor { name, shape, conv1d, view: View { offset: self.total, len } });
        self.total += len;
    }

    /// Hands out the views in the order [`Plan::new`] pushed them.
    fn into_weights(self, data: Vec<f32>) -> Weights {
        let mut views = self.tensors.iter().map(|t| t.view);
        let mut next = || views.next().unwrap_or(View { offset: 0, len: 0 });
        let wte = next();
        let wpe = next();
        let layers = (0..self.n_layer)
            .map(|_| LayerWeights {
                ln_1_weight: next(),
                ln_1_bias: next(),
                attn_c_attn_weight: next(),
                attn_c_attn_bias: next(),
                attn_c_proj_weight: next(),
                attn_c_proj_bias: next(),
                ln_2_weight: next(),
                ln_2_bias: next(),
                mlp_c_fc_weight: next(),
                mlp_c_fc_bias: next(),
                mlp_c_proj_weight: next(),
                mlp_c_proj_bias: next(),
            })
            .collect();
        let ln_f_weight = next();
        let ln_f_bias = next();
        let lm_head = if self.explicit_head { next() } else { wte };
        Weights { data, wte, wpe, layers, ln_f_weight, ln_f_bias, lm_head }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Conv1D stores `[in=2, out=3]`:
    /// ```text
    /// 1 2 3        rows ([out=3, in=2]):  1 4
    /// 4 5 6                               2 5
    ///                                     3 6
    /// ```
    #[test]
    fn conv1d_becomes_one_row_per_output() {
        let mut rows = [0.0; 6];
        conv1d_to_rows(&[1., 2., 3., 4., 5., 6.], 2, 3, &mut rows);
        assert_eq!(rows, [1., 4., 2., 5., 3., 6.]);
    }
}
