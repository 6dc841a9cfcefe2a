//! `config.json` of a Hugging Face checkpoint (GPT-2, LLaMA, Qwen2, Gemma 3) → [`Config`].

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::formats::limits::{MAX_HEADS, MAX_WIDTH};
use crate::model::{Arch, Attention, Config, Mlp, NormPlacement, Positions, Rope, RopePairing, SlidingWindow, Variant};

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
    // gptlens's variant keys (README "Transformer variants"); absent means GPT-2's own.
    /// `"learned"` (GPT-2's `wpe`) | `"sinusoidal"` | `"rope"` (with `rope_theta`) | `"none"`.
    position_embedding_type: Option<String>,
    rope_theta: Option<f32>,
    /// `"pre"` | `"post"`.
    norm_placement: Option<String>,
    /// `"causal"` | `"bidirectional"`.
    attention: Option<String>,
    /// Multiply token embeddings by √n_embd.
    scale_embeddings: Option<bool>,
}

/// The fields gptlens reads from a BERT config (`transformers.BertConfig`).
#[derive(Deserialize)]
struct HfBertConfig {
    hidden_size: usize,
    intermediate_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    vocab_size: usize,
    max_position_embeddings: usize,
    type_vocab_size: Option<usize>,
    layer_norm_eps: Option<f32>,
    hidden_act: Option<String>,
    position_embedding_type: Option<String>,
    is_decoder: Option<bool>,
}

/// The fields gptlens reads from a LLaMA config (`transformers.LlamaConfig`), and from the configs
/// of its descendants Qwen2 (`Qwen2Config`) and Gemma 3 (`Gemma3TextConfig`).
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
    /// transformers ≥ 5 writes RoPE settings here: `{rope_theta, rope_type}`, or for Gemma 3 one
    /// such record per layer type (`full_attention`, `sliding_attention`).
    rope_parameters: Option<serde_json::Value>,
    hidden_act: Option<String>,
    /// Gemma's name for `hidden_act`.
    hidden_activation: Option<String>,
    query_pre_attn_scalar: Option<f32>,
    sliding_window: Option<usize>,
    /// Gemma 3: `"sliding_attention"` or `"full_attention"` per layer (transformers ≥ 4.53).
    layer_types: Option<Vec<String>>,
    sliding_window_pattern: Option<usize>,
    rope_local_base_freq: Option<f32>,
    final_logit_softcapping: Option<f32>,
    attn_logit_softcapping: Option<f32>,
    /// Qwen2's optional sliding window (off in every released Qwen2).
    use_sliding_window: Option<bool>,
    /// Gemma 3 as an encoder (EmbeddingGemma).
    use_bidirectional_attention: Option<bool>,
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
        Some("bert") => bert(serde_json::from_slice(bytes).map_err(json)?)?,
        Some(name @ ("llama" | "qwen2" | "gemma3_text")) => {
            let arch = match name {
                "llama" => Arch::Llama,
                "qwen2" => Arch::Qwen2,
                _ => Arch::Gemma3,
            };
            llama_family(arch, serde_json::from_slice(bytes).map_err(json)?)?
        }
        Some(other) => {
            return Err(Error::Config(format!(
            "model_type is \"{other}\"; gptlens reads \"gpt2\", \"bert\", \"llama\", \"qwen2\" and \"gemma3_text\" checkpoints"
        )))
        }
    };
    let gpt2 = config.arch == Arch::Gpt2;
    let bert = config.arch == Arch::Bert;
    config.check_limits(|field| {
        let name = match (field, gpt2) {
            ("n_kv_head", false) if bert => "num_attention_heads",
            ("head_dim", false) if bert => "hidden_size",
            ("n_layer", true) => "n_layer",
            ("n_layer", false) => "num_hidden_layers",
            ("n_head", true) | ("n_kv_head", true) => "n_head",
            ("n_head", false) => "num_attention_heads",
            ("n_kv_head", false) => "num_key_value_heads",
            ("d_model", true) => "n_embd",
            ("d_model", false) => "hidden_size",
            ("head_dim", true) => "n_embd",
            ("head_dim", false) => "head_dim",
            ("d_ff", true) => "n_inner",
            ("d_ff", false) => "intermediate_size",
            ("vocab_size", _) => "vocab_size",
            ("token_types", _) => "type_vocab_size",
            (_, true) => "n_positions",
            (_, false) => "max_position_embeddings",
        };
        format!("config.json `{name}`")
    })?;
    config.validate().map_err(Error::Config)?;
    Ok(config)
}

fn gpt2(hf: HfGpt2Config) -> Result<Config> {
    let one_of = |key: &str, value: &Option<String>, default: &'static str, allowed: &[&'static str]| {
        let value = value.as_deref().unwrap_or(default);
        allowed.iter().find(|&&a| a == value).copied().ok_or_else(|| {
            Error::Config(format!("{key} \"{value}\" is not supported (gptlens reads {})", allowed.join(", ")))
        })
    };
    let mlp = match one_of(
        "activation_function",
        &hf.activation_function,
        "gelu_new",
        &["gelu_new", "gelu_pytorch_tanh", "gelu", "relu"],
    )? {
        "gelu" => Mlp::GeluErf,
        "relu" => Mlp::Relu,
        _ => Mlp::Gelu,
    };
    let position_type = one_of(
        "position_embedding_type",
        &hf.position_embedding_type,
        "learned",
        &["learned", "sinusoidal", "rope", "none"],
    )?;
    let positions = match position_type {
        "learned" => Positions::Learned,
        "sinusoidal" => Positions::Sinusoidal,
        _ => Positions::None,
    };
    let rope = (position_type == "rope")
        .then(|| Rope { theta: hf.rope_theta.unwrap_or(10_000.0), pairing: RopePairing::HalfSplit });
    let norm = match one_of("norm_placement", &hf.norm_placement, "pre", &["pre", "post"])? {
        "post" => NormPlacement::Post,
        _ => NormPlacement::Pre,
    };
    let attention = match one_of("attention", &hf.attention, "causal", &["causal", "bidirectional"])? {
        "bidirectional" => Attention::Bidirectional,
        _ => Attention::Causal,
    };
    let variant = Variant { positions, norm, attention, mlp, scale_embeddings: hf.scale_embeddings.unwrap_or(false) };
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
        head_dim: hf.n_embd.checked_div(hf.n_head).unwrap_or(0),
        d_ff: hf.n_inner.unwrap_or(hf.n_embd.saturating_mul(4)),
        vocab_size: hf.vocab_size,
        n_ctx: hf.n_positions,
        norm_eps: hf.layer_norm_epsilon.unwrap_or(1e-5),
        rope,
        query_pre_attn_scalar: None,
        sliding_window: None,
        bos_token_id: token_id(&hf.bos_token_id, hf.vocab_size),
        eos_token_id: token_id(&hf.eos_token_id, hf.vocab_size),
        tied_head: hf.tie_word_embeddings.unwrap_or(true),
        variant,
        token_types: 0,
    })
}

/// BERT as all-MiniLM-L6-v2 and its kin build it: absolute positions, GELU (erf), an encoder.
fn bert(hf: HfBertConfig) -> Result<Config> {
    let unsupported = |what: String| Err(Error::Config(format!("{what} is not supported")));
    if let Some(act) = hf.hidden_act.as_deref().filter(|&a| a != "gelu") {
        return unsupported(format!("hidden_act \"{act}\" (gptlens runs BERT with \"gelu\", the exact GELU)"));
    }
    if let Some(p) = hf.position_embedding_type.as_deref().filter(|&p| p != "absolute") {
        return unsupported(format!("position_embedding_type \"{p}\" (BERT's \"absolute\" is)"));
    }
    if hf.is_decoder == Some(true) {
        return unsupported("is_decoder (a BERT decoder)".into());
    }
    if hf.type_vocab_size == Some(0) {
        return unsupported("type_vocab_size 0 (token type 0 is added to every token)".into());
    }
    Ok(Config {
        arch: Arch::Bert,
        n_layer: hf.num_hidden_layers,
        n_head: hf.num_attention_heads,
        n_kv_head: hf.num_attention_heads,
        d_model: hf.hidden_size,
        head_dim: hf.hidden_size.checked_div(hf.num_attention_heads).unwrap_or(0),
        d_ff: hf.intermediate_size,
        vocab_size: hf.vocab_size,
        n_ctx: hf.max_position_embeddings,
        norm_eps: hf.layer_norm_eps.unwrap_or(1e-12),
        rope: None,
        query_pre_attn_scalar: None,
        sliding_window: None,
        bos_token_id: None,
        eos_token_id: None,
        tied_head: false,
        variant: Variant::of(Arch::Bert),
        token_types: hf.type_vocab_size.unwrap_or(2),
    })
}

fn llama_family(arch: Arch, hf: HfLlamaConfig) -> Result<Config> {
    let unsupported = |what: &str| Err(Error::Config(format!("{what} is not supported")));
    let gemma = arch == Arch::Gemma3;
    let (activation, expected) = match gemma {
        true => (hf.hidden_activation.as_deref().or(hf.hidden_act.as_deref()), "gelu_pytorch_tanh"),
        false => (hf.hidden_act.as_deref(), "silu"),
    };
    if activation.is_some_and(|a| a != expected) {
        return unsupported(&format!(
            "the activation {activation:?} (a {} model here uses \"{expected}\")",
            arch.name()
        ));
    }
    if hf.rope_scaling.as_ref().is_some_and(|v| !v.is_null()) {
        return unsupported("rope_scaling");
    }
    // Qwen2's q/k/v biases are part of its architecture; any other bias is not.
    if (arch != Arch::Qwen2 && hf.attention_bias == Some(true)) || hf.mlp_bias == Some(true) {
        return unsupported("attention_bias / mlp_bias");
    }
    if hf.final_logit_softcapping.is_some() || hf.attn_logit_softcapping.is_some() {
        return unsupported("logit soft-capping");
    }
    if hf.use_sliding_window == Some(true) || hf.use_bidirectional_attention == Some(true) {
        return unsupported("use_sliding_window / use_bidirectional_attention");
    }
    let n_head = hf.num_attention_heads;
    // Sizes over gptlens's caps are left to `Config::check_limits`, which names them as such.
    let capped = n_head <= MAX_HEADS && hf.hidden_size <= MAX_WIDTH;
    let head_dim = hf.head_dim.unwrap_or(hf.hidden_size.checked_div(n_head).unwrap_or(0));
    if !gemma && capped && head_dim.checked_mul(n_head) != Some(hf.hidden_size) {
        return unsupported("a head_dim other than hidden_size / num_attention_heads");
    }
    let (theta, local_theta) = rope_thetas(&hf)?;
    let sliding_window = match (gemma, hf.sliding_window) {
        (true, Some(size)) => Some(SlidingWindow { size, global_every: global_every(&hf)?, local_theta }),
        _ => None,
    };
    Ok(Config {
        arch,
        n_layer: hf.num_hidden_layers,
        n_head,
        n_kv_head: hf.num_key_value_heads.unwrap_or(n_head),
        d_model: hf.hidden_size,
        head_dim,
        d_ff: hf.intermediate_size,
        vocab_size: hf.vocab_size,
        n_ctx: hf.max_position_embeddings,
        norm_eps: hf.rms_norm_eps.unwrap_or(1e-6),
        rope: Some(Rope { theta, pairing: RopePairing::HalfSplit }),
        query_pre_attn_scalar: if gemma { hf.query_pre_attn_scalar } else { None },
        sliding_window,
        bos_token_id: token_id(&hf.bos_token_id, hf.vocab_size),
        eos_token_id: token_id(&hf.eos_token_id, hf.vocab_size),
        // Gemma ties its head by default; LLaMA and Qwen2 say so when they do.
        tied_head: hf.tie_word_embeddings.unwrap_or(gemma),
        variant: Variant::of(arch),
        token_types: 0,
    })
}

/// The RoPE bases of global and of local (sliding-window) layers, from `rope_theta` /
/// `rope_local_base_freq` (transformers 4) or `rope_parameters` (transformers 5).
fn rope_thetas(hf: &HfLlamaConfig) -> Result<(f32, f32)> {
    let theta_of = |record: &serde_json::Value| -> Result<Option<f32>> {
        if record.get("rope_type").and_then(|t| t.as_str()).is_some_and(|t| t != "default") {
            return Err(Error::Config(format!("rope_parameters {record} (scaled RoPE) is not supported")));
        }
        Ok(record.get("rope_theta").and_then(|t| t.as_f64()).map(|t| t as f32))
    };
    let params = hf.rope_parameters.as_ref().filter(|p| !p.is_null());
    let (mut global, mut local) = (hf.rope_theta, hf.rope_local_base_freq);
    if let Some(p) = params {
        match (p.get("full_attention"), p.get("sliding_attention")) {
            (None, None) => global = theta_of(p)?.or(global),
            (full, sliding) => {
                if let Some(f) = full {
                    global = theta_of(f)?.or(global);
                }
                if let Some(s) = sliding {
                    local = theta_of(s)?.or(local);
                }
            }
        }
    }
    Ok((global.unwrap_or(10_000.0), local.unwrap_or(10_000.0)))
}

/// Gemma 3's layers are five local then one global, repeated: read from `layer_types` when the
/// config lists them (which must follow that period), else `sliding_window_pattern`.
fn global_every(hf: &HfLlamaConfig) -> Result<usize> {
    let Some(types) = &hf.layer_types else { return Ok(hf.sliding_window_pattern.unwrap_or(6)) };
    let period = types.iter().position(|t| t == "full_attention").map_or(types.len().max(1), |i| i + 1);
    let follows = types.iter().enumerate().all(|(l, t)| {
        let global = (l + 1) % period == 0;
        t == if global { "full_attention" } else { "sliding_attention" }
    });
    if !follows {
        return Err(Error::Config(
            "layer_types that are not a repeating run of local layers then one global \
             layer are not supported"
                .into(),
        ));
    }
    Ok(period)
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
            (&GPT2_SMALL.replace("\"gpt2\"", "\"t5\""), "model_type"),
            (&GPT2_SMALL.replace("gelu_new", "swish"), "activation_function"),
            (&GPT2_SMALL.replace("\"n_layer\"", "\"norm_placement\":\"sandwich\",\"n_layer\""), "norm_placement"),
            (&GPT2_SMALL.replace("\"n_layer\"", "\"attention\":\"sliding\",\"n_layer\""), "attention"),
            (
                &GPT2_SMALL.replace("\"n_layer\"", "\"position_embedding_type\":\"alibi\",\"n_layer\""),
                "position_embedding_type",
            ),
            (&GPT2_SMALL.replace("\"n_head\":12", "\"n_head\":7"), "multiple"),
            (&GPT2_SMALL.replace("\"n_layer\":12", "\"n_layer\":0"), "n_layer"),
            (&GPT2_SMALL.replace("1024", "99999999999"), "n_positions"),
            (&GPT2_SMALL.replace("\"n_layer\"", "\"scale_attn_weights\":false,\"n_layer\""), "scale_attn_weights"),
        ] {
            let err = parse(json.as_bytes()).unwrap_err().to_string();
            assert!(err.contains(needle), "{json} → {err}");
        }
    }

    #[test]
    fn reads_the_variant_keys() {
        let original = GPT2_SMALL.replace(
            "\"n_layer\"",
            r#""position_embedding_type":"sinusoidal","norm_placement":"post","attention":"bidirectional",
               "activation_function":"relu","scale_embeddings":true,"n_layer""#,
        );
        let original = original.replace("\"activation_function\":\"gelu_new\",", "");
        let v = parse(original.as_bytes()).unwrap().variant;
        assert_eq!(
            (v.positions, v.norm, v.attention, v.mlp),
            (Positions::Sinusoidal, NormPlacement::Post, Attention::Bidirectional, Mlp::Relu)
        );
        assert!(v.scale_embeddings);
        let rope =
            GPT2_SMALL.replace("\"n_layer\"", "\"position_embedding_type\":\"rope\",\"rope_theta\":500.0,\"n_layer\"");
        let c = parse(rope.as_bytes()).unwrap();
        assert_eq!((c.variant.positions, c.rope.map(|r| r.theta)), (Positions::None, Some(500.0)));
        assert_eq!(parse(GPT2_SMALL.as_bytes()).unwrap().variant, Variant::of(Arch::Gpt2));
    }

    #[test]
    fn reads_a_bert_config() {
        let minilm = r#"{"model_type":"bert","hidden_size":384,"intermediate_size":1536,"num_hidden_layers":6,
            "num_attention_heads":12,"vocab_size":30522,"max_position_embeddings":512,"type_vocab_size":2,
            "layer_norm_eps":1e-12,"hidden_act":"gelu","position_embedding_type":"absolute"}"#;
        let c = parse(minilm.as_bytes()).unwrap();
        assert_eq!(
            (c.arch, c.head_dim, c.norm_eps, c.has_head(), c.has_final_norm()),
            (Arch::Bert, 32, 1e-12, false, false)
        );
        assert!(c.bidirectional() && c.chunk_len() == 512);
        for (change, needle) in [
            (("\"gelu\"", "\"relu\""), "hidden_act"),
            (("\"absolute\"", "\"relative_key\""), "position_embedding_type"),
            (("\"num_attention_heads\":12", "\"num_attention_heads\":7"), "multiple"),
        ] {
            let err = parse(minilm.replace(change.0, change.1).as_bytes()).unwrap_err().to_string();
            assert!(err.contains(needle), "{change:?} → {err}");
        }
    }

    const GEMMA3: &str = r#"{"model_type":"gemma3_text","hidden_size":640,"intermediate_size":2048,
        "num_hidden_layers":7,"num_attention_heads":4,"num_key_value_heads":1,"head_dim":256,
        "vocab_size":262144,"max_position_embeddings":32768,"query_pre_attn_scalar":256,
        "sliding_window":512,"hidden_activation":"gelu_pytorch_tanh","layer_types":["sliding_attention",
        "sliding_attention","sliding_attention","sliding_attention","sliding_attention","full_attention",
        "sliding_attention"],"rope_parameters":{"full_attention":{"rope_theta":1000000.0,"rope_type":"default"},
        "sliding_attention":{"rope_theta":10000.0,"rope_type":"default"}}}"#;

    #[test]
    fn reads_a_gemma3_config() {
        let c = parse(GEMMA3.as_bytes()).unwrap();
        assert_eq!((c.arch, c.head_dim, c.q_dim(), c.score_divisor()), (Arch::Gemma3, 256, 1024, 16.0));
        let w = c.sliding_window.unwrap();
        assert_eq!((w.size, w.global_every, w.local_theta, c.rope.unwrap().theta), (512, 6, 10000.0, 1e6));
        assert!(c.tied_head && !c.is_global_layer(4) && c.is_global_layer(5) && !c.is_global_layer(6));
        assert_eq!((c.first_key(0, 600), c.first_key(5, 600), c.first_key(0, 10)), (89, 0, 0));
        assert_eq!((c.rope_for(0).unwrap().theta, c.rope_for(5).unwrap().theta), (10000.0, 1e6));
        for (change, needle) in [
            (("\"full_attention\",", "\"sliding_attention\","), "layer_types"),
            (("\"sliding_window\":512,", "\"sliding_window\":512,\"final_logit_softcapping\":30.0,"), "soft-capping"),
            (("\"rope_type\":\"default\"}}}", "\"rope_type\":\"linear\"}}}"), "scaled RoPE"),
            (("gelu_pytorch_tanh", "silu"), "activation"),
        ] {
            let err = parse(GEMMA3.replace(change.0, change.1).as_bytes()).unwrap_err().to_string();
            assert!(err.contains(needle), "{change:?} → {err}");
        }
    }
}
