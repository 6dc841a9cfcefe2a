#![cfg(not(target_arch = "wasm32"))]
//! The engine against PyTorch: every hook of `tests/fixtures/*/reference.safetensors` (computed by
//! `transformers` in float32, eager attention; see tests/fixtures/make_fixtures.py).
//!
//! Tolerances: logits ≤ 1e-4 absolute, attention probabilities ≤ 1e-5 absolute, LayerNorm scales
//! and residual norms ≤ 1e-5 relative, LayerNorm means ≤ 1e-5 relative to max(1, |value|).

mod common;

use common::{check_against_pytorch, ids, load, reference};
use gptlens::sample::{Sampler, SamplingParams};
use gptlens::Session;

fn check_model(model: &str) {
    let ckpt = load(model);
    check_against_pytorch(model, &mut Session::new(ckpt.model.clone()));
}

#[test]
fn gpt2_f32_matches_pytorch() {
    check_model("gpt2-tiny-f32");
}

/// The f16 checkpoint also exercises the `transformer.` prefix, an explicit `lm_head.weight`,
/// `n_inner` ≠ 4·d and a non-default epsilon.
#[test]
fn gpt2_f16_matches_pytorch() {
    check_model("gpt2-tiny-f16");
}

/// LLaMA from Hugging Face safetensors: RoPE (rotate-half), RMSNorm, SwiGLU, 4 query heads over
/// 2 key/value heads, untied head.
#[test]
fn llama_safetensors_matches_pytorch() {
    check_model("llama-tiny");
}

/// LLaMA from GGUF with every block type in one file (Q8_0, Q4_0, Q4_1, Q5_K, Q4_K, Q6_K, F16):
/// q/k rows permuted for adjacent-pair RoPE; reference from transformers' dequantized load.
#[test]
fn llama_gguf_quantized_matches_pytorch() {
    check_model("llama-tiny-q");
}

/// LLaMA from GGUF with every matrix (embedding and head too) in Q5_0 or Q5_1 (Q5_0 packed as
/// Q8_0, Q5_1 in its own packed layout).
#[test]
fn llama_gguf_q5_matches_pytorch() {
    check_model("llama-tiny-q5");
}

/// GPT-2 from GGUF (architecture `gpt2`), one layer in Q8_0.
#[test]
fn gpt2_gguf_matches_pytorch() {
    check_model("gpt2-tiny-gguf");
}

/// Qwen2 from safetensors and from GGUF (block 1's MLP in Q8_0): LLaMA plus q/k/v biases, RoPE
/// base 1e6, rows in Hugging Face order in both files.
#[test]
fn qwen2_matches_pytorch() {
    check_model("qwen2-tiny");
    check_model("qwen2-tiny-gguf");
}

/// Gemma 3 from safetensors (norms as w, applied as 1 + w) and from GGUF (stored as 1 + w):
/// embeddings × √d, q/k RMSNorm per head, post-attention and post-MLP norms, GeGLU, head size 16
/// with a residual stream of 32, scores over √query_pre_attn_scalar, two local layers whose
/// 4-key sliding window shows in the patterns (12 tokens) with RoPE base 1e4, one global layer
/// with base 1e6, tied head.
#[test]
fn gemma3_matches_pytorch() {
    check_model("gemma3-tiny");
    check_model("gemma3-tiny-gguf");
}

const ALL_FIXTURES: [&str; 10] = [
    "gpt2-tiny-f32",
    "gpt2-tiny-f16",
    "llama-tiny",
    "llama-tiny-q",
    "llama-tiny-q5",
    "gpt2-tiny-gguf",
    "qwen2-tiny",
    "qwen2-tiny-gguf",
    "gemma3-tiny",
    "gemma3-tiny-gguf",
];

#[test]
fn greedy_generation_matches_transformers_generate() {
    for model in ALL_FIXTURES {
        let ckpt = load(model);
        let reference = reference(model);
        let expected = ids(&reference["greedy"]);
        let mut session = Session::new(ckpt.model.clone());
        let mut sampler = Sampler::new(SamplingParams::greedy(), 0).unwrap();
        let got = session.generate(&ids(&reference["tokens"]), expected.len(), &mut sampler, None, |_| true).unwrap();
        assert_eq!(got, expected, "{model}");
    }
}
