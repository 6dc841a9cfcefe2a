//! GGUF metadata (`{arch}.block_count`, …) → [`Config`].

use crate::error::{Error, Result};
use crate::formats::gguf::GgufFile;
use crate::model::{Arch, Config, Rope, RopePairing};

pub fn parse(file: &GgufFile) -> Result<Config> {
    let arch_name = file.get_str("general.architecture")?;
    let arch = match arch_name {
        "llama" => Arch::Llama,
        "gpt2" => Arch::Gpt2,
        other => {
            return Err(Error::Config(format!(
                "GGUF architecture \"{other}\" is not supported (gptlens runs \"llama\" and \"gpt2\")"
            )))
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
    let (norm_eps, rope) = match arch {
        Arch::Llama => {
            let theta = file.metadata(&key("rope.freq_base")).and_then(|v| v.as_f32()).unwrap_or(10_000.0);
            // llama.cpp's converter stores q and k permuted for adjacent-pair rotation.
            (
                file.get_f32(&key("attention.layer_norm_rms_epsilon"))?,
                Some(Rope { theta, pairing: RopePairing::Adjacent }),
            )
        }
        Arch::Gpt2 => (file.get_f32(&key("attention.layer_norm_epsilon"))?, None),
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
        d_ff: get("feed_forward_length")?,
        vocab_size,
        n_ctx: get("context_length")?,
        norm_eps,
        rope,
        bos_token_id: token("bos_token_id"),
        eos_token_id: token("eos_token_id"),
        tied_head: file.tensor("output.weight").is_err(),
    };
    config.check_limits(|field| {
        let k = match field {
            "n_layer" => "block_count",
            "n_head" => "attention.head_count",
            "n_kv_head" => "attention.head_count_kv",
            "d_model" => "embedding_length",
            "d_ff" => "feed_forward_length",
            "vocab_size" => return "the vocabulary (token_embd.weight's second dimension)".to_string(),
            _ => "context_length",
        };
        format!("GGUF metadata `{}`", key(k))
    })?;
    // After the caps, so that an absurd head count is named as such rather than as a mismatch.
    if config.rope.is_some()
        && optional_u32("rope.dimension_count").is_some_and(|r| n_head == 0 || r as usize != d_model / n_head)
    {
        return Err(Error::Config("rotary embeddings over part of a head are not supported".into()));
    }
    config.validate().map_err(Error::Config)?;
    Ok(config)
}
