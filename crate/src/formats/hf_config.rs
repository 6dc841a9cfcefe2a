//! `config.json` of a Hugging Face GPT-2 checkpoint → [`Config`].

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::formats::limits::{MAX_HEADS, MAX_WIDTH};
use crate::model::{Arch, Config, Rope, RopePairing};

/// The fields gptlens reads from a GPT-2 config; names and defaults follow `transformers.GPT2Config`.
#[derive(Deserialize)]
struct HfGpt2Config {
    n_layer: usize,
    n_head: usize,
    n_embd: usize,
    n_inner: Option<usize>,
    vocab_size: usize,
    n_positions: usize,
    layer_norm_epsilon: Option<f32>,
    activation_function: Option<String>,
    bos_token_id: Option<serde_json::Value>,
    eos_token_id: Option<serde_json::Value>,
    tie_word_embeddings: Option<bool>,
    scale_attn_weights: Option<bool>,
    scale_attn_by_inverse_layer_idx: Option<bool>,
    reorder_and_upcast_attn: Option<bool>,
}

/// The fields gptlens reads from a LLaMA config (`transformers.LlamaConfig`).
#[derive(Deserialize)]
struct HfLlamaConfig {
    hidden_size: usize,
    intermediate_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    num_key_value_heads: Option<usize>,
    head_dim: Option<usize>,
    vocab_size: usize,
    max_position_embeddings: usize,
    rms_norm_eps: Option<f32>,
    rope_theta: Option<f32>,
    rope_scaling: Option<serde_json::Value>,
    hidden_act: Option<String>,
    attention_bias: Option<bool>,
    mlp_bias: Option<bool>,
    bos_token_id: Option<serde_json::Value>,
    eos_token_id: Option<serde_json::Value>,
    tie_word_embeddings: Option<bool>,
}

#[derive(Deserialize)]
struct ModelType {
    model_type: Option<String>,
}

pub fn parse(bytes: &[u8]) -> Result<Config> {
    let json = |e: serde_json::Error| Error::Config(e.to_string());
    let model_type = serde_json::from_slice::<ModelType>(bytes).map_err(json)?.model_type;
    let config = match model_type.as_deref() {
        Some("gpt2") | None => gpt2(serde_json::from_slice(bytes).map_err(json)?)?,
        Some("llama") => llama(serde_json::from_slice(bytes).map_err(json)?)?,
        Some(other) => {
            return Err(Error::Config(format!(
                "model_type is \"{other}\"; gptlens reads \"gpt2\" and \"llama\" checkpoints"
            )))
        }
    };
    let gpt2 = config.arch == Arch::Gpt2;
    config.check_limits(|field| {
        let name = match (field, gpt2) {
            ("n_layer", true) => "n_layer",
            ("n_layer", false) => "num_hidden_layers",
            ("n_head", true) | ("n_kv_head", true) => "n_head",
            ("n_head", false) => "num_attention_heads",
            ("n_kv_head", false) => "num_key_value_heads",
            ("d_model", true) => "n_embd",
            ("d_model", false) => "hidden_size",
            ("d_ff", true) => "n_inner",
            ("d_ff", false) => "intermediate_size",
            ("vocab_size", _) => "vocab_size",
            (_, true) => "n_positions",
            (_, false) => "max_position_embeddings",
        };
        format!("config.json `{name}`")
    })?;
    config.validate().map_err(Error::Config)?;
    Ok(config)
}

fn gpt2(hf: HfGpt2Config) -> Result<Config> {
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
    Ok(Config {
        arch: Arch::Gpt2,
        n_layer: hf.n_layer,
        n_head: hf.n_head,
        n_kv_head: hf.n_head,
        d_model: hf.n_embd,
        d_ff: hf.n_inner.unwrap_or(hf.n_embd.saturating_mul(4)),
        vocab_size: hf.vocab_size,
        n_ctx: hf.n_positions,
        norm_eps: hf.layer_norm_epsilon.unwrap_or(1e-5),
        rope: None,
        bos_token_id: token_id(&hf.bos_token_id, hf.vocab_size),
        eos_token_id: token_id(&hf.eos_token_id, hf.vocab_size),
        tied_head: hf.tie_word_embeddings.unwrap_or(true),
    })
}

fn llama(hf: HfLlamaConfig) -> Result<Config> {
    let unsupported = |what: &str| Err(Error::Config(format!("{what} is not supported")));
    if hf.hidden_act.as_deref().is_some_and(|a| a != "silu") {
        return unsupported("a hidden_act other than \"silu\"");
    }
    if hf.rope_scaling.as_ref().is_some_and(|v| !v.is_null()) {
        return unsupported("rope_scaling");
    }
    if hf.attention_bias == Some(true) || hf.mlp_bias == Some(true) {
        return unsupported("attention_bias / mlp_bias");
    }
    let n_head = hf.num_attention_heads;
    // Sizes over gptlens's caps are left to `Config::check_limits`, which names them as such.
    let capped = n_head <= MAX_HEADS && hf.hidden_size <= MAX_WIDTH;
    if hf.head_dim.is_some_and(|hd| capped && hd.checked_mul(n_head) != Some(hf.hidden_size)) {
        return unsupported("a head_dim other than hidden_size / num_attention_heads");
    }
    Ok(Config {
        arch: Arch::Llama,
        n_layer: hf.num_hidden_layers,
        n_head,
        n_kv_head: hf.num_key_value_heads.unwrap_or(n_head),
        d_model: hf.hidden_size,
        d_ff: hf.intermediate_size,
        vocab_size: hf.vocab_size,
        n_ctx: hf.max_position_embeddings,
        norm_eps: hf.rms_norm_eps.unwrap_or(1e-6),
        rope: Some(Rope { theta: hf.rope_theta.unwrap_or(10_000.0), pairing: RopePairing::HalfSplit }),
        bos_token_id: token_id(&hf.bos_token_id, hf.vocab_size),
        eos_token_id: token_id(&hf.eos_token_id, hf.vocab_size),
        tied_head: hf.tie_word_embeddings.unwrap_or(false),
    })
}

/// transformers allows a single id or a list; the first of a list is the one generation stops on.
fn token_id(value: &Option<serde_json::Value>, vocab_size: usize) -> Option<u32> {
    match value {
        Some(serde_json::Value::Array(ids)) => ids.first().and_then(|v| v.as_u64()),
        Some(v) => v.as_u64(),
        None => None,
    }
    .and_then(|id| u32::try_from(id).ok())
    .filter(|&id| (id as usize) < vocab_size)
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
        assert_eq!((c.vocab_size, c.n_ctx, c.eos_token_id, c.arch), (50257, 1024, Some(50256), Arch::Gpt2));
    }

    const SMOLLM2: &str = r#"{"model_type":"llama","hidden_size":576,"intermediate_size":1536,
        "num_hidden_layers":30,"num_attention_heads":9,"num_key_value_heads":3,"vocab_size":49152,
        "max_position_embeddings":8192,"rms_norm_eps":1e-5,"rope_theta":100000.0,"hidden_act":"silu",
        "tie_word_embeddings":true,"bos_token_id":1,"eos_token_id":2}"#;

    #[test]
    fn reads_a_llama_config() {
        let c = parse(SMOLLM2.as_bytes()).unwrap();
        assert_eq!((c.arch, c.n_layer, c.n_head, c.n_kv_head, c.head_dim()), (Arch::Llama, 30, 9, 3, 64));
        assert_eq!(c.rope, Some(Rope { theta: 100000.0, pairing: RopePairing::HalfSplit }));
        assert!(c.tied_head);
        let bad = SMOLLM2.replace("\"num_key_value_heads\":3", "\"num_key_value_heads\":4");
        assert!(parse(bad.as_bytes()).unwrap_err().to_string().contains("n_kv_head"));
        let scaled = SMOLLM2.replace("\"hidden_act\"", "\"rope_scaling\":{\"type\":\"linear\"},\"hidden_act\"");
        assert!(parse(scaled.as_bytes()).unwrap_err().to_string().contains("rope_scaling"));
    }

    #[test]
    fn rejects_what_it_cannot_run() {
        for (json, needle) in [
            (r#"{"n_layer":1}"#, "missing field"),
            (r#"not json"#, "expected"),
            (&GPT2_SMALL.replace("\"gpt2\"", "\"bert\""), "model_type"),
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
