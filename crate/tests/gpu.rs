#![cfg(all(feature = "gpu", not(target_arch = "wasm32")))]
//! The wgpu backend against PyTorch and against the CPU path, natively (Mesa's lavapipe here).
//!
//! With `REQUIRE_GPU=1` (set by scripts/test.sh when the setup installed a Vulkan driver) a
//! missing adapter fails every test; without it they say they skipped.

mod common;

use std::sync::Arc;

use common::{assert_traces_agree, check_against_pytorch, ids, load, max_abs_diff, reference};
use gptlens::backend::{select, BackendChoice};
use gptlens::gpu::GPU_CHUNK;
use gptlens::model::{Arch, Config, SlidingWindow, Variant, Weights};
use gptlens::sample::{Sampler, SamplingParams};
use gptlens::{Backend, CaptureSpec, Model, Session};

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

/// Every matrix Q5_0 (as packed Q8_0) or Q5_1 (`formats/q5_1.wgsl`), decoded inside the matmul.
#[test]
fn llama_gguf_q5_matches_pytorch_on_gpu() {
    check_model("llama-tiny-q5");
}

#[test]
fn gpt2_gguf_matches_pytorch_on_gpu() {
    check_model("gpt2-tiny-gguf");
}

/// Gemma 3 on the GPU: per-head q/k norms, post-norms added into the residual stream, GeGLU, √d
/// embeddings, and sliding windows with their own RoPE tables.
#[test]
fn gemma3_matches_pytorch_on_gpu() {
    check_model("gemma3-tiny");
    check_model("gemma3-tiny-gguf");
}

/// Qwen2's q/k/v biases go through the matmul kernel's bias path.
#[test]
fn qwen2_matches_pytorch_on_gpu() {
    check_model("qwen2-tiny");
    check_model("qwen2-tiny-gguf");
}

#[test]
fn greedy_generation_on_gpu_matches_transformers_generate() {
    for model in ["gpt2-tiny-f32", "llama-tiny-q", "qwen2-tiny-gguf", "gemma3-tiny-gguf"] {
        let Some((_, mut session)) = gpu_session(model) else { return };
        let reference = reference(model);
        let expected = ids(&reference["greedy"]);
        let mut sampler = Sampler::new(SamplingParams::greedy(), 0).unwrap();
        let got = session.generate(&ids(&reference["tokens"]), expected.len(), &mut sampler, None, |_| true).unwrap();
        assert_eq!(got, expected, "{model}");
    }
}

fn assert_close(what: &str, a: &[f32], b: &[f32], tolerance: f32) {
    let d = max_abs_diff(a, b);
    assert!(d <= tolerance, "{what} differs by {d:e} (tolerance {tolerance:e})");
}

/// A model whose context is longer than a GPU pass, so that a prompt runs as several passes; LLaMA
/// style (RoPE, grouped KV heads, SwiGLU) to cover the most kernels.
fn long_context_model() -> Arc<Model> {
    Arc::new(Model { weights: Weights::random(&llama_long_context(), 3), config: llama_long_context() })
}

/// The same as Gemma 3: heads wider than d/n_head, a sliding window of 70 keys (wider than the
/// attention kernel's 64-key tiles) on every other layer with its own RoPE base.
fn gemma_long_context_model() -> Arc<Model> {
    let config = Config {
        arch: Arch::Gemma3,
        n_layer: 4,
        head_dim: 16,
        query_pre_attn_scalar: Some(32.0),
        sliding_window: Some(SlidingWindow { size: 70, global_every: 2, local_theta: 100.0 }),
        variant: Variant::of(Arch::Gemma3),
        ..llama_long_context()
    };
    Arc::new(Model { weights: Weights::random(&config, 4), config })
}

fn llama_long_context() -> Config {
    common::tiny_llama_config(61, GPU_CHUNK + 100)
}

/// Prefix reuse, one-token steps and a prompt longer than one GPU pass all give what a fresh
/// full run gives, on the GPU and on the CPU alike.
#[test]
fn gpu_sessions_reuse_prefixes_step_and_chunk_like_a_full_recompute() {
    check_sessions(long_context_model());
}

#[test]
fn gemma_sessions_with_sliding_windows_agree_on_gpu_and_cpu() {
    check_sessions(gemma_long_context_model());
}

fn check_sessions(model: Arc<Model>) {
    let Some(backend) = on_gpu(&model) else { return };
    let spec = CaptureSpec::standard(&model.config);
    let tokens: Vec<u32> = (0..GPU_CHUNK as u32 + 40).map(|i| (i * 7 + 3) % 61).collect();
    let cpu_whole = Session::new(model.clone()).run(&tokens, &spec).unwrap();
    let mut gpu = Session::with_backend(model.clone(), &backend).unwrap();

    // A prompt of more than one pass.
    let whole = gpu.run(&tokens, &spec).unwrap();
    assert_eq!(whole.computed, tokens.len());
    assert_traces_agree("a multi-pass prompt, GPU vs CPU", &whole, &cpu_whole, 1e-4);

    // Pooled maps of a multi-pass prompt (bins of 2+), pooled from the rows each pass reads back.
    let names: Vec<String> =
        (0..model.config.n_layer).map(|l| format!("blocks.{l}.attn.hook_pattern.pooled")).collect();
    let pooled = CaptureSpec::from_names(&names, &model.config).unwrap();
    let gpu_pooled = Session::with_backend(model.clone(), &backend).unwrap().run(&tokens, &pooled).unwrap();
    let cpu_pooled = Session::new(model.clone()).run(&tokens, &pooled).unwrap();
    assert_traces_agree("pooled maps, GPU vs CPU", &gpu_pooled, &cpu_pooled, 1e-5);

    // Editing near the end recomputes only the suffix and agrees with a fresh run.
    let mut edited = tokens.clone();
    edited[tokens.len() - 5] = 11;
    let reused = gpu.run(&edited, &spec).unwrap();
    assert_eq!(reused.computed, 5);
    let fresh = Session::with_backend(model.clone(), &backend).unwrap().run(&edited, &spec).unwrap();
    assert_traces_agree("prefix reuse", &reused, &fresh, 1e-5);

    // Token by token from a short prompt: the same as running everything at once.
    let short = &tokens[..30];
    let mut stepped = Session::with_backend(model.clone(), &backend).unwrap();
    stepped.run(&short[..1], &spec).unwrap();
    for &t in &short[1..] {
        stepped.step(t).unwrap();
    }
    let stepped_trace = stepped.run(short, &spec).unwrap();
    assert_eq!(stepped_trace.computed, 0, "the stepped tokens are all cached");
    let at_once = Session::with_backend(model.clone(), &backend).unwrap().run(short, &spec).unwrap();
    assert_traces_agree("steps", &stepped_trace, &at_once, 1e-5);

    // Capture off: only the last logits come back, and they are the same.
    let mut bare = Session::with_backend(model.clone(), &backend).unwrap();
    let no_hooks = bare.run(&tokens, &CaptureSpec::none()).unwrap();
    assert!(no_hooks.tensors.is_empty());
    assert_close("capture-off logits", &no_hooks.last_logits, &cpu_whole.last_logits, 1e-4);
}

/// `gptlens trace --backend wgpu` writes what PyTorch computes.
#[test]
fn cli_trace_on_wgpu_matches_pytorch() {
    let Some(_) = gpu_session("llama-tiny-q") else { return };
    for model in ["llama-tiny-q", "gpt2-tiny-f32"] {
        let reference = reference(model);
        let tokens: Vec<String> = ids(&reference["tokens"]).iter().map(u32::to_string).collect();
        let out = std::env::temp_dir().join(format!("gptlens-gpu-trace-{model}-{}.safetensors", std::process::id()));
        let path = common::fixture(model).display().to_string();
        let status = std::process::Command::new(env!("CARGO_BIN_EXE_gptlens"))
            .args(["--backend", "wgpu", "trace", "--model", &path, "--tokens", &tokens.join(","), "--out"])
            .arg(&out)
            .output()
            .unwrap();
        assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
        assert!(String::from_utf8_lossy(&status.stderr).contains("backend: gpu"));
        let written = common::reference_from_bytes(&std::fs::read(&out).unwrap());
        let _ = std::fs::remove_file(&out);
        for (name, want) in reference.iter().filter(|(n, _)| !matches!(n.as_str(), "tokens" | "greedy")) {
            let got = &written[name];
            assert_eq!(got.shape, want.shape, "{model} {name}");
            // The tolerances of `check_against_pytorch`.
            let tolerance = if name == "logits" { 1e-4 } else { 1e-5 };
            let worst = if name == "logits" || name.ends_with("hook_pattern") {
                max_abs_diff(&got.data, &want.data)
            } else {
                let floor = if name.ends_with("hook_mean") { 1.0 } else { 0.0 };
                got.data.iter().zip(&want.data).map(|(a, b)| (a - b).abs() / b.abs().max(floor)).fold(0.0, f32::max)
            };
            assert!(worst <= tolerance, "{model} {name}: off by {worst:e}");
        }
    }
}

/// SmolLM2-135M (Q4_1 blocks and a Q8_0 head on the GPU): the same top-5 and logits within 1e-3 of
/// the CPU on the three SmolLM2 test prompts.
#[test]
fn smollm2_on_gpu_matches_the_cpu() {
    let path = std::path::PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../assets/models/SmolLM2-135M-Instruct.Q4_1.gguf"
    ));
    if !path.exists() {
        eprintln!("SKIPPED: {} is absent (scripts/fetch-smollm.sh fetches it)", path.display());
        return;
    }
    let ckpt = gptlens::Checkpoint::open(&path).unwrap();
    let Some(backend) = on_gpu(&ckpt.model) else { return };
    let reference = reference("smollm2");
    let spec =
        CaptureSpec::from_names(&["logits", "blocks.15.attn.hook_pattern", "ln_final.hook_scale"], &ckpt.model.config)
            .unwrap();
    let top5 = |logits: &[f32]| {
        let mut order: Vec<usize> = (0..logits.len()).collect();
        order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
        order[..5].to_vec()
    };
    for p in 0..3 {
        let tokens = ids(&reference[&format!("p{p}.tokens")]);
        let cpu = Session::new(ckpt.model.clone()).run(&tokens, &spec).unwrap();
        let gpu = Session::with_backend(ckpt.model.clone(), &backend).unwrap().run(&tokens, &spec).unwrap();
        assert_eq!(top5(&gpu.last_logits), top5(&cpu.last_logits), "prompt {p}: top-5");
        assert_close(
            &format!("prompt {p} logits"),
            &gpu.get("logits").unwrap().data,
            &cpu.get("logits").unwrap().data,
            1e-3,
        );
        let pattern = "blocks.15.attn.hook_pattern";
        assert_close(
            &format!("prompt {p} {pattern}"),
            &gpu.get(pattern).unwrap().data,
            &cpu.get(pattern).unwrap().data,
            1e-5,
        );
    }
}

/// A device whose storage bindings are too small for the head: every matrix larger than the limit
/// is split into pieces of whole rows, and the results do not change.
#[test]
fn matrices_larger_than_a_binding_are_split() {
    let ckpt = load("llama-tiny-q");
    let Some(Backend::Gpu(full)) = on_gpu(&ckpt.model) else { return };
    let mut limits = full.gpu.limits.clone();
    // 4 KiB binds a few dozen rows of the head (a row per vocabulary entry) and of the MLP.
    limits.max_storage_buffer_binding_size = 4096;
    let model = gptlens::gpu::GpuModel::new(Arc::new(full.gpu.with_limits(limits)), ckpt.model.clone()).unwrap();
    assert!(model.largest_piece_count() > 1, "the test must split a matrix");
    let backend = Backend::Gpu(Arc::new(model));
    let reference = reference("llama-tiny-q");
    let tokens = ids(&reference["tokens"]);
    // (Capturing every row's logits would need a binding larger than this pretend limit: the pass
    // refuses that with an error rather than binding past it.)
    let all = CaptureSpec::from_names(&["logits"], &ckpt.model.config).unwrap();
    let mut session = Session::with_backend(ckpt.model.clone(), &backend).unwrap();
    assert!(matches!(session.run(&tokens, &all), Err(gptlens::Error::Gpu(_))));
    let split = session.run(&tokens, &CaptureSpec::none()).unwrap();
    let v = ckpt.model.config.vocab_size;
    let want = &reference["logits"].data;
    assert_close("last logits with split matrices", &split.last_logits, &want[want.len() - v..], 1e-4);
}

/// Zero-ablation on the GPU: transformers' logits with the heads zeroed (the same file as the
/// CPU test), and every hook as the CPU's ablated run; a head past the kernel's mask is refused.
#[test]
fn ablated_heads_on_gpu_match_pytorch_and_the_cpu() {
    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(common::fixture("instruments/ablation.json")).unwrap()).unwrap();
    for model in ["gpt2-tiny-f32", "llama-tiny", "gemma3-tiny"] {
        let Some((checkpoint, mut gpu)) = gpu_session(model) else { return };
        let config = &checkpoint.model.config;
        let want = &expected[model];
        let tokens: Vec<u32> = serde_json::from_value(want["tokens"].clone()).unwrap();
        let heads: Vec<(usize, usize)> = serde_json::from_value(want["ablated"].clone()).unwrap();
        let ablation = gptlens::instruments::Ablation::heads(heads, config).unwrap();
        gpu.set_ablation(ablation.clone()).unwrap();
        let all = gptlens::CaptureSpec::standard(config);
        let on_gpu = gpu.run(&tokens, &all).unwrap();
        let logits: Vec<f32> = serde_json::from_value(want["ablated_last_logits"].clone()).unwrap();
        let d = max_abs_diff(&on_gpu.last_logits, &logits);
        assert!(d <= 1e-4, "{model}: GPU ablated logits off PyTorch's by {d:e}");
        let mut cpu = Session::new(checkpoint.model.clone());
        cpu.set_ablation(ablation).unwrap();
        assert_traces_agree(&format!("{model} ablated, GPU vs CPU"), &on_gpu, &cpu.run(&tokens, &all).unwrap(), 1e-4);
    }
    // A model with more heads than the kernel's 32-bit mask: heads 32 and up stay on the CPU.
    let config = Config { n_head: 40, n_kv_head: 40, d_model: 80, head_dim: 2, ..llama_long_context() };
    let wide = Arc::new(Model { weights: Weights::random(&config, 5), config: config.clone() });
    let Some(backend) = on_gpu(&wide) else { return };
    let mut gpu = Session::with_backend(wide.clone(), &backend).unwrap();
    gpu.set_ablation(gptlens::instruments::Ablation::heads([(1, 31)], &config).unwrap()).unwrap();
    let e =
        gpu.set_ablation(gptlens::instruments::Ablation::heads([(1, 32)], &config).unwrap()).unwrap_err().to_string();
    assert!(e.contains("head 1.32 cannot be ablated on the GPU"), "{e}");
}

/// The activation hooks and MLP ablation are CPU features: a GPU session refuses them by name,
/// before anything changes, and goes on running.
#[test]
fn a_gpu_session_refuses_cpu_only_hooks_and_mlp_ablation_by_name() {
    let Some((checkpoint, mut gpu)) = gpu_session("gpt2-tiny-f32") else { return };
    let config = &checkpoint.model.config;
    let spec = gptlens::CaptureSpec::from_names(&["blocks.0.hook_resid_pre"], config).unwrap();
    let e = gpu.run(&[1, 2, 3], &spec).unwrap_err().to_string();
    assert!(e.contains("`blocks.0.hook_resid_pre` is recorded on the CPU backend only"), "{e}");
    let mlp = gptlens::instruments::Ablation::parse("0.mlp", config).unwrap();
    let e = gpu.set_ablation(mlp).unwrap_err().to_string();
    assert!(e.contains("MLP 0.mlp cannot be ablated on the GPU"), "{e}");
    let mean = gptlens::instruments::Ablation::parse("0.1", config)
        .unwrap()
        .replaced_by(gptlens::instruments::AblateWith::Mean);
    let e = gpu.set_ablation(mean).unwrap_err().to_string();
    assert!(e.contains("mean-ablation runs on the CPU backend"), "{e}");
    assert_eq!(gpu.run(&[1, 2, 3], &gptlens::CaptureSpec::none()).unwrap().computed, 3);
}
