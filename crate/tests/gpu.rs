#![cfg(all(feature = "gpu", not(target_arch = "wasm32")))]
//! The wgpu backend against PyTorch and against the CPU path, natively (Mesa's lavapipe here).
//!
//! With `REQUIRE_GPU=1` (set by scripts/test.sh when the setup installed a Vulkan driver) a
//! missing adapter fails every test; without it they say they skipped.

mod common;

use std::sync::Arc;

use common::{check_against_pytorch, ids, load, reference};
use gptlens::backend::{select, BackendChoice};
use gptlens::sample::{Sampler, SamplingParams};
use gptlens::{Backend, Model, Session};

/// The model on the GPU, or `None` (with the reason printed) when there is no adapter and none is
/// required.
fn on_gpu(model: &Arc<Model>) -> Option<Backend> {
    match pollster::block_on(select(BackendChoice::Gpu, model)) {
        Ok(selected) => Some(selected.backend),
        Err(e) if std::env::var("REQUIRE_GPU").is_ok_and(|v| v == "1") => panic!("REQUIRE_GPU=1 but {e}"),
        Err(e) => {
            eprintln!("SKIPPED: {e} (set REQUIRE_GPU=1 to make this a failure)");
            None
        }
    }
}

fn gpu_session(model: &str) -> Option<(gptlens::Checkpoint, Session)> {
    let ckpt = load(model);
    let backend = on_gpu(&ckpt.model)?;
    let session = Session::with_backend(ckpt.model.clone(), &backend).unwrap();
    assert_eq!(session.backend_name(), "gpu");
    Some((ckpt, session))
}

fn check_model(model: &str) {
    if let Some((_, mut session)) = gpu_session(model) {
        check_against_pytorch(model, &mut session);
    }
}

#[test]
fn gpt2_f32_matches_pytorch_on_gpu() {
    check_model("gpt2-tiny-f32");
}

#[test]
fn gpt2_f16_matches_pytorch_on_gpu() {
    check_model("gpt2-tiny-f16");
}

#[test]
fn llama_safetensors_matches_pytorch_on_gpu() {
    check_model("llama-tiny");
}

#[test]
fn llama_gguf_quantized_matches_pytorch_on_gpu() {
    check_model("llama-tiny-q");
}

#[test]
fn gpt2_gguf_matches_pytorch_on_gpu() {
    check_model("gpt2-tiny-gguf");
}

#[test]
fn greedy_generation_on_gpu_matches_transformers_generate() {
    for model in ["gpt2-tiny-f32", "llama-tiny-q"] {
        let Some((_, mut session)) = gpu_session(model) else { return };
        let reference = reference(model);
        let expected = ids(&reference["greedy"]);
        let mut sampler = Sampler::new(SamplingParams::greedy(), 0).unwrap();
        let got = session.generate(&ids(&reference["tokens"]), expected.len(), &mut sampler, None, |_| true).unwrap();
        assert_eq!(got, expected, "{model}");
    }
}
