//! The parameters of a trainable GPT-2-style model in one flat f32 buffer (llm.c's
//! `ParameterTensors`), with the same row layout as inference (`[out, in]` matrices), and their
//! names in a Hugging Face GPT-2 checkpoint (whose Conv1D matrices are stored `[in, out]`).

use std::ops::Range;

use crate::error::{Error, Result};
use crate::model::{Arch, Attention, Config, Matrix, Mlp, Model, NormPlacement, Positions, Rows, Weights};

/// One tensor of the buffer.
#[derive(Clone, Debug)]
pub struct ParamTensor {
    /// Its name in a Hugging Face GPT-2 checkpoint (`transformer.h.0.attn.c_attn.weight`).
    pub name: String,
    /// `[rows, cols]` as the kernels read it, or `[len]`.
    pub shape: Vec<usize>,
    pub range: Range<usize>,
    /// Stored transposed (`[in, out]`) in the checkpoint: GPT-2's Conv1D weights.
    pub conv1d: bool,
    /// AdamW decays it: the matrices of linear layers, not norms, biases or embeddings.
    pub decays: bool,
}

/// Where each parameter of one block lives in the buffer.
#[derive(Clone, Debug)]
pub(super) struct LayerRanges {
    pub ln1_w: Range<usize>,
    pub ln1_b: Range<usize>,
    pub qkv_w: Range<usize>,
    pub qkv_b: Range<usize>,
    pub proj_w: Range<usize>,
    pub proj_b: Range<usize>,
    pub ln2_w: Range<usize>,
    pub ln2_b: Range<usize>,
    pub fc_w: Range<usize>,
    pub fc_b: Range<usize>,
    pub fc_proj_w: Range<usize>,
    pub fc_proj_b: Range<usize>,
}

/// The parameters' layout: every tensor in order, and the ranges the passes index by.
#[derive(Clone, Debug)]
pub struct ParamLayout {
    pub tensors: Vec<ParamTensor>,
    pub len: usize,
    pub(super) wte: Range<usize>,
    pub(super) wpe: Option<Range<usize>>,
    pub(super) layers: Vec<LayerRanges>,
    pub(super) lnf_w: Range<usize>,
    pub(super) lnf_b: Range<usize>,
}

impl ParamLayout {
    /// The layout of a GPT-2-style model: pre-LN, causal, tanh GELU, learned or sinusoidal
    /// positions, tied head — what training implements.
    pub fn new(c: &Config) -> Result<ParamLayout> {
        check_trainable(c)?;
        let (d, f, v) = (c.d_model, c.d_ff, c.vocab_size);
        let mut layout = ParamLayout {
            tensors: Vec::new(),
            len: 0,
            wte: 0..0,
            wpe: None,
            layers: Vec::new(),
            lnf_w: 0..0,
            lnf_b: 0..0,
        };
        layout.wte = layout.push("transformer.wte.weight", &[v, d], false, false)?;
        if c.variant.positions == Positions::Learned {
            layout.wpe = Some(layout.push("transformer.wpe.weight", &[c.n_ctx, d], false, false)?);
        }
        for l in 0..c.n_layer {
            let name = |part: &str| format!("transformer.h.{l}.{part}");
            let mut push = |part: &str, shape: &[usize], conv1d: bool| layout.push(&name(part), shape, conv1d, conv1d);
            let ranges = LayerRanges {
                ln1_w: push("ln_1.weight", &[d], false)?,
                ln1_b: push("ln_1.bias", &[d], false)?,
                qkv_w: push("attn.c_attn.weight", &[3 * d, d], true)?,
                qkv_b: push("attn.c_attn.bias", &[3 * d], false)?,
                proj_w: push("attn.c_proj.weight", &[d, d], true)?,
                proj_b: push("attn.c_proj.bias", &[d], false)?,
                ln2_w: push("ln_2.weight", &[d], false)?,
                ln2_b: push("ln_2.bias", &[d], false)?,
                fc_w: push("mlp.c_fc.weight", &[f, d], true)?,
                fc_b: push("mlp.c_fc.bias", &[f], false)?,
                fc_proj_w: push("mlp.c_proj.weight", &[d, f], true)?,
                fc_proj_b: push("mlp.c_proj.bias", &[d], false)?,
            };
            layout.layers.push(ranges);
        }
        layout.lnf_w = layout.push("transformer.ln_f.weight", &[d], false, false)?;
        layout.lnf_b = layout.push("transformer.ln_f.bias", &[d], false, false)?;
        Ok(layout)
    }

    fn push(&mut self, name: &str, shape: &[usize], conv1d: bool, decays: bool) -> Result<Range<usize>> {
        let n = shape.iter().try_fold(1usize, |n, &s| n.checked_mul(s));
        let end = n.and_then(|n| self.len.checked_add(n)).ok_or_else(|| Error::Config(format!("{name} overflows")))?;
        let range = self.len..end;
        self.tensors.push(ParamTensor {
            name: name.into(),
            shape: shape.to_vec(),
            range: range.clone(),
            conv1d,
            decays,
        });
        self.len = end;
        Ok(range)
    }

    pub fn find(&self, name: &str) -> Option<&ParamTensor> {
        self.tensors.iter().find(|t| t.name == name)
    }
}

/// Training implements GPT-2's block (pre-LN, causal, tanh GELU, biases, tied head), with learned
/// or sinusoidal positions; anything else is refused by name.
pub fn check_trainable(c: &Config) -> Result<()> {
    let v = &c.variant;
    let refuse = |what: &str| Err(Error::InvalidArgument(format!("training supports GPT-2-style models; {what}")));
    if c.arch != Arch::Gpt2 {
        return refuse(&format!("this is a {} model", c.arch.name()));
    }
    if v.norm != NormPlacement::Pre || v.attention != Attention::Causal || v.mlp != Mlp::Gelu {
        return refuse("only pre-LN, causal attention and the tanh GELU (`gelu_new`) are trained");
    }
    if v.scale_embeddings || c.rope.is_some() || v.positions == Positions::None {
        return refuse("positions must be learned or sinusoidal, unscaled");
    }
    if !c.tied_head {
        return refuse("the head must be tied to the token embedding");
    }
    Ok(())
}

/// The f32 values of a matrix the loader kept as f32.
fn values<'w>(w: &'w Weights, m: &Matrix, name: &str) -> Result<&'w [f32]> {
    match m.data {
        Rows::F32(view) => Ok(w.get(view)),
        _ => Err(Error::InvalidArgument(format!("{name} is quantized: training needs f32 weights"))),
    }
}

/// The model's parameters in `layout`'s buffer.
pub fn params_of(model: &Model, layout: &ParamLayout) -> Result<Vec<f32>> {
    let w = &model.weights;
    let mut p = vec![0f32; layout.len];
    let mut put = |range: &Range<usize>, values: &[f32]| p[range.clone()].copy_from_slice(values);
    put(&layout.wte, values(w, &w.token_embd, "wte")?);
    if let (Some(range), Some(wpe)) = (&layout.wpe, &w.position_embd) {
        put(range, values(w, wpe, "wpe")?);
    }
    for (r, lw) in layout.layers.iter().zip(&w.layers) {
        let bias = |b: Option<crate::model::View>| b.map(|v| w.get(v)).unwrap_or_default();
        put(&r.ln1_w, w.get(lw.attn_norm.weight));
        put(&r.ln1_b, bias(lw.attn_norm.bias));
        let qkv = lw.attn_qkv.first().ok_or_else(|| Error::InvalidArgument("no fused qkv".into()))?;
        put(&r.qkv_w, values(w, &qkv.weight, "c_attn")?);
        put(&r.qkv_b, bias(qkv.bias));
        put(&r.proj_w, values(w, &lw.attn_output.weight, "attn.c_proj")?);
        put(&r.proj_b, bias(lw.attn_output.bias));
        put(&r.ln2_w, w.get(lw.ffn_norm.weight));
        put(&r.ln2_b, bias(lw.ffn_norm.bias));
        put(&r.fc_w, values(w, &lw.ffn_up.weight, "c_fc")?);
        put(&r.fc_b, bias(lw.ffn_up.bias));
        put(&r.fc_proj_w, values(w, &lw.ffn_down.weight, "mlp.c_proj")?);
        put(&r.fc_proj_b, bias(lw.ffn_down.bias));
    }
    let lnf = w.output_norm.ok_or_else(|| Error::InvalidArgument("no final norm".into()))?;
    put(&layout.lnf_w, w.get(lnf.weight));
    put(&layout.lnf_b, lnf.bias.map(|b| w.get(b)).unwrap_or_default());
    Ok(p)
}

/// A tensor of the buffer as the checkpoint stores it (Conv1D weights transposed to `[in, out]`).
pub fn stored(t: &ParamTensor, buffer: &[f32]) -> Vec<f32> {
    let values = &buffer[t.range.clone()];
    if t.conv1d {
        super::pass::transpose(values, t.shape[0], t.shape[1])
    } else {
        values.to_vec()
    }
}

/// The stored shape of a tensor (`[in, out]` for Conv1D weights).
pub fn stored_shape(t: &ParamTensor) -> Vec<usize> {
    if t.conv1d {
        vec![t.shape[1], t.shape[0]]
    } else {
        t.shape.clone()
    }
}
