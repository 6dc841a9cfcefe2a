//! Training a GPT-2-style model (learned or sinusoidal positions): the backward pass
//! ([`pass`]), AdamW as PyTorch defines it (decoupled weight decay, bias correction; no decay on
//! norms, biases and embeddings), gradient clipping by the global norm, and nanoGPT's warmup +
//! cosine schedule. Native and wasm share it; the matmuls run on the engine's kernels.
//!
//! Checked against PyTorch (`tests/fixtures/train/make_train_fixtures.py`, `crate/tests/train.rs`):
//! every parameter's gradient on a fixed batch, the parameters after three AdamW steps, a clipped
//! step, and the schedule.

mod params;
mod pass;
pub mod recipe;

use std::sync::Arc;

pub use params::{check_trainable, ParamLayout, ParamTensor};

use crate::error::{Error, Result};
use crate::model::{Config, Model};

/// AdamW's settings (PyTorch's names and meaning).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdamW {
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    /// Decoupled weight decay of the decaying tensors ([`ParamTensor::decays`]).
    pub weight_decay: f32,
}

impl Default for AdamW {
    /// nanoGPT's: β = (0.9, 0.95), ε = 1e-8, weight decay 0.1.
    fn default() -> AdamW {
        AdamW { beta1: 0.9, beta2: 0.95, eps: 1e-8, weight_decay: 0.1 }
    }
}

/// nanoGPT's learning rate at step `it`: linear warmup over `warmup` steps, then a cosine from `lr`
/// down to `min_lr` at `decay_steps`, then `min_lr`.
pub fn scheduled_lr(it: usize, warmup: usize, decay_steps: usize, lr: f32, min_lr: f32) -> f32 {
    let (lr, min_lr) = (f64::from(lr), f64::from(min_lr));
    if it < warmup {
        return (lr * (it + 1) as f64 / (warmup + 1) as f64) as f32;
    }
    if it > decay_steps {
        return min_lr as f32;
    }
    let ratio = (it - warmup) as f64 / (decay_steps - warmup).max(1) as f64;
    let coeff = 0.5 * (1.0 + (std::f64::consts::PI * ratio).cos());
    (min_lr + coeff * (lr - min_lr)) as f32
}

/// A model being trained: its parameters, their gradients and AdamW's moments, in one layout.
pub struct Trainer {
    config: Config,
    layout: ParamLayout,
    params: Vec<f32>,
    grads: Vec<f32>,
    m: Vec<f32>,
    v: Vec<f32>,
    /// AdamW steps taken (its bias correction counts from 1).
    steps: u64,
    acts: Option<pass::Activations>,
}

impl Trainer {
    /// Starts from a loaded model's weights (f32, GPT-2-style; see [`check_trainable`]).
    pub fn from_model(model: &Model) -> Result<Trainer> {
        let layout = ParamLayout::new(&model.config)?;
        Trainer::check_memory(&model.config, layout.len, 1, 1)?;
        let params = params::params_of(model, &layout)?;
        Ok(Trainer::with_params(model.config.clone(), layout, params))
    }

    /// Refuses a model whose parameters, gradients and AdamW's two moments (16 bytes per
    /// parameter), with a training pass over `batch` sequences of `t` positions, do not fit in the
    /// platform's memory budget (`GPTLENS_MEMORY_BUDGET` natively; what wasm32 leaves).
    fn check_memory(config: &Config, n_params: usize, batch: usize, t: usize) -> Result<()> {
        use crate::formats::limits::{human_bytes, Budget};
        let budget = Budget::resolve(None, 0)?;
        let state = (n_params as u64).checked_mul(16);
        let pass = pass::pass_bytes(config, batch, t);
        let need = state.zip(pass).and_then(|(s, p)| s.checked_add(p)).unwrap_or(u64::MAX);
        if need <= budget.bytes {
            return Ok(());
        }
        Err(Error::OverBudget {
            need,
            budget: budget.bytes,
            breakdown: format!(
                "training: parameters, gradients and AdamW's moments {} + a pass over {batch} × {t} positions {}",
                state.map_or("(overflow)".into(), human_bytes),
                pass.map_or("(overflow)".into(), human_bytes)
            ),
            origin: budget.origin.to_string(),
        })
    }

    fn with_params(config: Config, layout: ParamLayout, params: Vec<f32>) -> Trainer {
        let n = layout.len;
        Trainer { config, layout, params, grads: vec![0.0; n], m: vec![0.0; n], v: vec![0.0; n], steps: 0, acts: None }
    }

    /// The model's `config.json` in Hugging Face GPT-2's form (plus gptlens's
    /// `position_embedding_type` for sinusoidal positions, which transformers does not know).
    pub fn config_json(&self) -> String {
        let c = &self.config;
        let mut json = serde_json::json!({
            "_name_or_path": "trained by gptlens",
            "model_type": "gpt2",
            "architectures": ["GPT2LMHeadModel"],
            "n_layer": c.n_layer,
            "n_head": c.n_head,
            "n_embd": c.d_model,
            "n_inner": c.d_ff,
            "n_positions": c.n_ctx,
            "n_ctx": c.n_ctx,
            "vocab_size": c.vocab_size,
            "layer_norm_epsilon": c.norm_eps,
            "activation_function": "gelu_new",
            "tie_word_embeddings": true,
            "resid_pdrop": 0.0,
            "embd_pdrop": 0.0,
            "attn_pdrop": 0.0,
            "bos_token_id": null,
            "eos_token_id": null,
            "torch_dtype": "float32",
        });
        if c.variant.positions == crate::model::Positions::Sinusoidal {
            json["position_embedding_type"] = "sinusoidal".into();
        }
        serde_json::to_string_pretty(&json).unwrap_or_default()
    }

    /// AdamW's moments and step count, for resuming (`optimizer.safetensors`).
    pub fn optimizer_state(&self) -> Result<Vec<u8>> {
        use safetensors::tensor::{Dtype, TensorView};
        let bytes = |x: &[f32]| -> Vec<u8> { x.iter().flat_map(|v| v.to_le_bytes()).collect() };
        let (m, v) = (bytes(&self.m), bytes(&self.v));
        let view =
            |b| TensorView::new(Dtype::F32, vec![self.layout.len], b).map_err(|e| Error::Safetensors(e.to_string()));
        let metadata = [("steps".to_string(), self.steps.to_string())].into_iter().collect();
        safetensors::serialize([("m", view(&m)?), ("v", view(&v)?)], Some(metadata))
            .map_err(|e| Error::Safetensors(e.to_string()))
    }

    /// Restores [`Trainer::optimizer_state`]; refuses one made for another layout.
    pub fn restore_optimizer(&mut self, bytes: &[u8]) -> Result<()> {
        let file = safetensors::SafeTensors::deserialize(bytes).map_err(|e| Error::Safetensors(e.to_string()))?;
        let (_, metadata) =
            safetensors::SafeTensors::read_metadata(bytes).map_err(|e| Error::Safetensors(e.to_string()))?;
        let steps = metadata
            .metadata()
            .as_ref()
            .and_then(|m| m.get("steps"))
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| Error::Safetensors("optimizer state without its step count".into()))?;
        let read = |name: &str| -> Result<Vec<f32>> {
            let t = file.tensor(name).map_err(|e| Error::Safetensors(format!("{name}: {e}")))?;
            if t.dtype() != safetensors::Dtype::F32 || t.shape() != [self.layout.len] {
                return Err(Error::Safetensors(format!(
                    "optimizer state `{name}` is not {} f32 values: it was made for another model",
                    self.layout.len
                )));
            }
            Ok(t.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
        };
        let (m, v) = (read("m")?, read("v")?);
        (self.m, self.v, self.steps) = (m, v, steps);
        Ok(())
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn layout(&self) -> &ParamLayout {
        &self.layout
    }

    /// Checks a batch: `batch` rows of `t` ids each (and as many targets), `t` within the context.
    fn check_batch(&self, inputs: &[u32], targets: Option<&[u32]>, batch: usize) -> Result<usize> {
        let c = &self.config;
        if batch == 0 || inputs.is_empty() || !inputs.len().is_multiple_of(batch) {
            return Err(Error::InvalidArgument(format!(
                "{} ids do not make {batch} rows of equal length",
                inputs.len()
            )));
        }
        let t = inputs.len() / batch;
        if t > c.n_ctx {
            return Err(Error::ContextOverflow { len: t, n_ctx: c.n_ctx });
        }
        if !self.acts.as_ref().is_some_and(|a| a.fits(batch, t)) {
            Trainer::check_memory(c, self.layout.len, batch, t)?;
        }
        if targets.is_some_and(|targets| targets.len() != inputs.len()) {
            return Err(Error::InvalidArgument("targets must be as many as the inputs".into()));
        }
        if let Some(&id) = inputs.iter().chain(targets.unwrap_or_default()).find(|&&id| id as usize >= c.vocab_size) {
            return Err(Error::TokenOutOfRange { id, vocab: c.vocab_size });
        }
        Ok(t)
    }

    /// The activation buffers for a `[batch, t]` batch: the last ones when they fit, else new.
    fn activations(&mut self, batch: usize, t: usize) -> pass::Activations {
        match self.acts.take() {
            Some(acts) if acts.fits(batch, t) => acts,
            _ => pass::Activations::new(&self.config, batch, t),
        }
    }

    /// The mean cross-entropy of predicting `targets` from `inputs` (`[batch, t]` each), and its
    /// gradient with respect to every parameter (replacing the previous gradient).
    pub fn loss_and_grads(&mut self, inputs: &[u32], targets: &[u32], batch: usize) -> Result<f32> {
        self.loss_and_grads_with_dropout(inputs, targets, batch, 0.0, 0)
    }

    /// [`Trainer::loss_and_grads`] with dropout `p` (masks drawn from `seed`) at nanoGPT's places:
    /// the embeddings, the attention probabilities, and what attention and the MLP add to the
    /// residual stream.
    pub fn loss_and_grads_with_dropout(
        &mut self,
        inputs: &[u32],
        targets: &[u32],
        batch: usize,
        p: f32,
        seed: u64,
    ) -> Result<f32> {
        if !(0.0..1.0).contains(&p) {
            return Err(Error::InvalidArgument(format!("dropout {p} must be in [0, 1)")));
        }
        let t = self.check_batch(inputs, Some(targets), batch)?;
        let (c, layout) = (self.config.clone(), self.layout.clone());
        let mut acts = self.activations(batch, t);
        let dropout = Some(pass::Dropout { p, seed });
        let loss = pass::forward(&c, &layout, &self.params, &mut acts, inputs, Some(targets), dropout);
        self.grads.fill(0.0);
        pass::backward(&c, &layout, &self.params, &mut self.grads, &mut acts, inputs, targets);
        self.acts = Some(acts);
        Ok(loss)
    }

    /// The mean cross-entropy without gradients (evaluation).
    pub fn loss(&mut self, inputs: &[u32], targets: &[u32], batch: usize) -> Result<f32> {
        let t = self.check_batch(inputs, Some(targets), batch)?;
        let (c, layout) = (self.config.clone(), self.layout.clone());
        let mut acts = self.activations(batch, t);
        let loss = pass::forward(&c, &layout, &self.params, &mut acts, inputs, Some(targets), None);
        self.acts = Some(acts);
        Ok(loss)
    }

    /// Scales the gradient so that its global L2 norm is at most `max_norm` (PyTorch's
    /// `clip_grad_norm_`: the norm of the per-tensor norms, coefficient `max / (norm + 1e-6)`
    /// capped at 1); returns the norm before clipping.
    pub fn clip_grad_norm(&mut self, max_norm: f32) -> f32 {
        let norms: Vec<f32> = self
            .layout
            .tensors
            .iter()
            .map(|t| crate::kernels::dot(&self.grads[t.range.clone()], &self.grads[t.range.clone()]).sqrt())
            .collect();
        let total = crate::kernels::dot(&norms, &norms).sqrt();
        let coefficient = (max_norm / (total + 1e-6)).min(1.0);
        self.grads.iter_mut().for_each(|g| *g *= coefficient);
        total
    }

    /// One AdamW step at learning rate `lr` (PyTorch's single-tensor AdamW, step by step).
    pub fn adamw_step(&mut self, hp: &AdamW, lr: f32) {
        self.steps += 1;
        let step = self.steps as i32;
        let bias1 = 1.0 - f64::from(hp.beta1).powi(step);
        let bias2_sqrt = (1.0 - f64::from(hp.beta2).powi(step)).sqrt();
        let step_size = (f64::from(lr) / bias1) as f32;
        let bias2_sqrt = bias2_sqrt as f32;
        for t in &self.layout.tensors {
            let decay = if t.decays { 1.0 - lr * hp.weight_decay } else { 1.0 };
            let r = t.range.clone();
            let (p, g, m, v) =
                (&mut self.params[r.clone()], &self.grads[r.clone()], &mut self.m[r.clone()], &mut self.v[r]);
            for i in 0..p.len() {
                p[i] *= decay;
                m[i] += (g[i] - m[i]) * (1.0 - hp.beta1);
                v[i] = v[i] * hp.beta2 + (1.0 - hp.beta2) * g[i] * g[i];
                let denom = v[i].sqrt() / bias2_sqrt + hp.eps;
                p[i] -= step_size * (m[i] / denom);
            }
        }
    }

    /// A parameter as a Hugging Face GPT-2 checkpoint stores it (`transformer.h.0.attn.c_attn.weight`
    /// is `[in, out]`).
    pub fn param(&self, name: &str) -> Option<Vec<f32>> {
        self.layout.find(name).map(|t| params::stored(t, &self.params))
    }

    /// Adds `delta` to element `i` of a parameter as the checkpoint stores it (finite-difference
    /// checks); does nothing for a name or index it does not have.
    pub fn nudge(&mut self, name: &str, i: usize, delta: f32) {
        let Some(t) = self.layout.find(name) else { return };
        let i = if t.conv1d { (i % t.shape[0]) * t.shape[1] + i / t.shape[0] } else { i };
        if let Some(p) = self.params.get_mut(t.range.start + i).filter(|_| i < t.range.len()) {
            *p += delta;
        }
    }

    /// The gradient of a parameter, laid out as the checkpoint stores the parameter.
    pub fn grad(&self, name: &str) -> Option<Vec<f32>> {
        self.layout.find(name).map(|t| params::stored(t, &self.grads))
    }

    /// The model as a Hugging Face GPT-2 `model.safetensors` (f32), loadable by gptlens and by
    /// `transformers` beside the [`Trainer::config_json`].
    pub fn to_safetensors(&self) -> Result<Vec<u8>> {
        use safetensors::tensor::{Dtype, TensorView};
        let tensors: Vec<(String, Vec<usize>, Vec<u8>)> = self
            .layout
            .tensors
            .iter()
            .map(|t| {
                let bytes = params::stored(t, &self.params).iter().flat_map(|x| x.to_le_bytes()).collect();
                (t.name.clone(), params::stored_shape(t), bytes)
            })
            .collect();
        let views = tensors
            .iter()
            .map(|(name, shape, bytes)| {
                TensorView::new(Dtype::F32, shape.clone(), bytes)
                    .map(|view| (name.clone(), view))
                    .map_err(|e| Error::Safetensors(e.to_string()))
            })
            .collect::<Result<Vec<_>>>()?;
        let metadata = [("format".to_string(), "pt".to_string())].into_iter().collect();
        safetensors::serialize(views, Some(metadata)).map_err(|e| Error::Safetensors(e.to_string()))
    }

    /// The model as it is now, for inference (a session, a trace) — through the same loader a
    /// saved checkpoint goes through.
    pub fn to_model(&self) -> Result<Arc<Model>> {
        let bytes = self.to_safetensors()?;
        let file = crate::formats::safetensors::SafetensorsFile::parse(&bytes)?;
        let budget = crate::formats::limits::Budget::resolve(None, bytes.len() as u64)?;
        let (weights, positions) = crate::model::Weights::from_safetensors(&self.config, &file, &budget)?;
        // The positions the budget holds: the whole context, or fewer (`Budget::fit`).
        let config = Config { n_ctx: positions, ..self.config.clone() };
        Ok(Arc::new(Model { config, weights }))
    }
}
