//! GGUF metadata (`{arch}.block_count`, …) → [`Config`].

use crate::error::{Error, Result};
use crate::formats::gguf::GgufFile;
use crate::model::{Arch, Config, Rope, RopePairing, SlidingWindow, Variant};

/// The GGUF architectures gptlens runs, for messages.
pub const RUNS: &str = "\"llama\", \"qwen2\", \"gemma3\" and \"gpt2\"";

/// Whether gptlens runs GGUF architecture `name`.
pub fn runs(name: &str) -> bool {
    matches!(name, "llama" | "qwen2" | "gemma3" | "gpt2")
}

pub fn parse(file: &GgufFile) -> Result<Config> {
    let arch_name = file.get_str("general.architecture")?;
    let arch = match arch_name {
        "llama" => Arch::Llama,
        "gpt2" => Arch::Gpt2,
        "qwen2" => Arch::Qwen2,
        "gemma3" => Arch::Gemma3,
        other => {
            return Err(Error::Config(format!("GGUF architecture \"{other}\" is not supported (gptlens runs {RUNS})")))
        }
    };
    let key = |k: &str| format!("{arch_name}.{k}");
    let get = |k: &str| file.get_u32(&key(k)).map(|v| v as usize);
    let optional_u32 = |k: &str| file.metadata(&key(k)).and_then(|v| v.as_u32());
    let token_embd = file.tensor("token_embd.weight")?;
    // ggml lists dimensions innermost first: the embedding is [d_model, vocab].
    let vocab_size = token_embd.shape().get(1).copied().unwrap_or(0);
    let n_head = get("attention.head_count")?;
    let d_model = get("embedding_length")?;
    let optional_f32 = |k: &str| file.metadata(&key(k)).and_then(|v| v.as_f32());
    let (norm_eps, rope) = match arch {
        Arch::Gpt2 => (file.get_f32(&key("attention.layer_norm_epsilon"))?, None),
        Arch::Bert => return Err(Error::Config("BERT GGUF files are not read (load the Hugging Face folder)".into())),
        Arch::Llama | Arch::Qwen2 | Arch::Gemma3 => {
            let theta = optional_f32("rope.freq_base").unwrap_or(10_000.0);
            // llama.cpp's converter permutes LLaMA's q and k rows for adjacent-pair rotation;
            // Qwen2 and Gemma keep Hugging Face's order (llama.cpp's "NEOX" rope type).
            let pairing = if arch == Arch::Llama { RopePairing::Adjacent } else { RopePairing::HalfSplit };
            (file.get_f32(&key("attention.layer_norm_rms_epsilon"))?, Some(Rope { theta, pairing }))
        }
    };
    if optional_f32("rope.scaling.factor").is_some_and(|f| f != 1.0) {
        return Err(Error::Config(format!("`{}` (scaled RoPE) is not supported", key("rope.scaling.factor"))));
    }
    // Gemma 3 as llama.cpp runs it: every sixth layer global unless the file says another period
    // (`attention.sliding_window_pattern`), local layers with RoPE base 10000, scores over
    // √(head size) (`query_pre_attn_scalar` is not in the file; it equals the head size for
    // every Gemma 3 but the 27B).
    let sliding_window = match (arch, optional_u32("attention.sliding_window")) {
        (Arch::Gemma3, Some(size)) => {
            let pattern = key("attention.sliding_window_pattern");
            let global_every = match file.metadata(&pattern) {
                None => 6,
                Some(v) => v.as_u32().ok_or_else(|| {
                    Error::Config(format!("`{pattern}` other than one period (a u32) is not supported"))
                })? as usize,
            };
            Some(SlidingWindow { size: size as usize, global_every, local_theta: 10_000.0 })
        }
        _ => None,
    };
    let token = |k: &str| {
        file.metadata(&format!("tokenizer.ggml.{k}")).and_then(|v| v.as_u32()).filter(|&id| (id as usize) < vocab_size)
    };
    let config = Config {
        arch,
        n_layer: get("block_count")?,
        n_head,
        n_kv_head: optional_u32("attention.head_count_kv").map_or(n_head, |v| v as usize),
        d_model,
        head_dim: optional_u32("attention.key_length").map_or(d_model.checked_div(n_head).unwrap_or(0), |v| v as usize),
        d_ff: get("feed_forward_length")?,
        vocab_size,
        n_ctx: get("context_length")?,
        norm_eps,
        rope,
        query_pre_attn_scalar: None,
        sliding_window,
        bos_token_id: token("bos_token_id"),
        eos_token_id: token("eos_token_id"),
        tied_head: file.tensor("output.weight").is_err(),
        variant: Variant::of(arch),
        token_types: 0,
    };
    config.check_limits(|field| {
        let k = match field {
            "n_layer" => "block_count",
            "n_head" => "attention.head_count",
            "n_kv_head" => "attention.head_count_kv",
            "d_model" => "embedding_length",
            "head_dim" => "attention.key_length",
            "d_ff" => "feed_forward_length",
            "vocab_size" => return "the vocabulary (token_embd.weight's second dimension)".to_string(),
            _ => "context_length",
        };
        format!("GGUF metadata `{}`", key(k))
    })?;
    // After the caps, so that an absurd head count is named as such rather than as a mismatch.
    if config.rope.is_some() && optional_u32("rope.dimension_count").is_some_and(|r| r as usize != config.head_dim) {
        return Err(Error::Config("rotary embeddings over part of a head are not supported".into()));
    }
    if optional_u32("attention.value_length").is_some_and(|v| v as usize != config.head_dim) {
        return Err(Error::Config("values of another width than keys are not supported".into()));
    }
    config.validate().map_err(Error::Config)?;
    Ok(config)
}
