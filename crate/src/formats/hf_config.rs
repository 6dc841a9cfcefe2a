//! `config.json` of a Hugging Face GPT-2 checkpoint → [`Config`].

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::model::Config;

/// The fields gptlens reads; names and defaults follow `transformers.GPT2Config`.
#[derive(Deserialize)]
struct HfGpt2Config {
    model_type: Option<String>,
    n_layer: usize,
    n_head: usize,
    n_embd: usize,
    n_inner: Option<usize>,
    vocab_size: usize,
    n_positions: usize,
    layer_norm_epsilon: Option<f64>,
    activation_function: Option<String>,
    eos_token_id: Option<serde_json::Value>,
    tie_word_embeddings: Option<bool>,
    scale_attn_weights: Option<bool>,
    scale_attn_by_inverse_layer_idx: Option<bool>,
    reorder_and_upcast_attn: Option<bool>,
}

/// Every dimension must be at most this; larger values are either a corrupt file or a model far
/// beyond what a browser can hold, and rejecting them early keeps size arithmetic from overflowing.
const MAX_DIM: usize = 1 << 24;

pub fn parse(bytes: &[u8]) -> Result<Config> {
    let hf: HfGpt2Config =
        serde_json::from_slice(bytes).map_err(|e| Error::Config(e.to_string()))?;
    if let Some(t) = hf.model_type.as_deref() {
        if t != "gpt2" {
            return Err(Error::Config(format!(
                "model_type is \"{t}\"; this loader reads GPT-2 checkpoints (model_type \"gpt2\")"
            )));
        }
    }
    let activation = hf.activation_function.as_deref().unwrap_or("gelu_new");
    if !matches!(activation, "gelu_new" | "gelu_pytorch_tanh") {
        return Err(Error::Config(format!(
            "activation_function \"{activation}\" is not supported (gptlens implements GPT-2's tanh GELU, \"gelu_new\")"
        )));
    }
    // Variants of GPT-2 attention this engine does not implement: refuse rather than run them wrong.
    for (flag, value, supported) in [
        ("scale_attn_weights", hf.scale_attn_weights, true),
        ("scale_attn_by_inverse_layer_idx", hf.scale_attn_by_inverse_layer_idx, false),
        ("reorder_and_upcast_attn", hf.reorder_and_upcast_attn, false),
    ] {
        if value.is_some_and(|v| v != supported) {
            return Err(Error::Config(format!("{flag} = {} is not supported", !supported)));
        }
    }
    let d_ff = hf.n_inner.unwrap_or(4 * hf.n_embd);
    for (name, value) in [
        ("n_layer", hf.n_layer),
        ("n_head", hf.n_head),
        ("n_embd", hf.n_embd),
        ("n_inner", d_ff),
        ("vocab_size", hf.vocab_size),
        ("n_positions", hf.n_positions),
    ] {
        if value == 0 || value > MAX_DIM {
            return Err(Error::Config(format!("{name} = {value} is outside 1..={MAX_DIM}")));
        }
    }
    if hf.n_embd % hf.n_head != 0 {
        return Err(Error::Config(format!(
            "n_embd = {} is not a multiple of n_head = {}",
            hf.n_embd, hf.n_head
        )));
    }
    let norm_eps = hf.layer_norm_epsilon.unwrap_or(1e-5);
    if !(norm_eps.is_finite() && norm_eps > 0.0) {
        return Err(Error::Config(format!("layer_norm_epsilon = {norm_eps} must be a positive number")));
    }
    // transformers allows a single id or a list; the first of a list is the one generation stops on.
    let eos_token_id = match &hf.eos_token_id {
        Some(serde_json::Value::Array(ids)) => ids.first().and_then(|v| v.as_u64()),
        Some(v) => v.as_u64(),
        None => None,
    }
    .and_then(|id| u32::try_from(id).ok())
    .filter(|&id| (id as usize) < hf.vocab_size);
    Ok(Config {
        n_layer: hf.n_layer,
        n_head: hf.n_head,
        d_model: hf.n_embd,
        d_ff,
        vocab_size: hf.vocab_size,
        n_ctx: hf.n_positions,
        norm_eps: norm_eps as f32,
        eos_token_id,
        tied_head: hf.tie_word_embeddings.unwrap_or(true),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GPT2_SMALL: &str = r#"{"model_type":"gpt2","n_layer":12,"n_head":12,"n_embd":768,
        "vocab_size":50257,"n_positions":1024,"layer_norm_epsilon":1e-5,
        "activation_function":"gelu_new","eos_token_id":50256}"#;

    #[test]
    fn reads_gpt2_small() {
        let c = parse(GPT2_SMALL.as_bytes()).unwrap();
        assert_eq!((c.n_layer, c.n_head, c.d_model, c.d_ff), (12, 12, 768, 3072));
        assert_eq!((c.vocab_size, c.n_ctx, c.eos_token_id), (50257, 1024, Some(50256)));
        assert_eq!(c.n_params(), 124_439_808);
    }

    #[test]
    fn rejects_what_it_cannot_run() {
        for (json, needle) in [
            (r#"{"n_layer":1}"#, "missing field"),
            (r#"not json"#, "expected"),
            (&GPT2_SMALL.replace("\"gpt2\"", "\"llama\""), "model_type"),
            (&GPT2_SMALL.replace("gelu_new", "relu"), "activation_function"),
            (&GPT2_SMALL.replace("\"n_head\":12", "\"n_head\":7"), "multiple"),
            (&GPT2_SMALL.replace("\"n_layer\":12", "\"n_layer\":0"), "n_layer"),
            (&GPT2_SMALL.replace("1024", "99999999999"), "n_positions"),
            (&GPT2_SMALL.replace("\"n_layer\"", "\"scale_attn_weights\":false,\"n_layer\""), "scale_attn_weights"),
        ] {
            let err = parse(json.as_bytes()).unwrap_err().to_string();
            assert!(err.contains(needle), "{json} → {err}");
        }
    }
}
