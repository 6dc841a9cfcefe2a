//! Shared by the integration tests: fixture paths and reference loading (from disk natively, from
//! embedded bytes in the wasm tests).
#![allow(dead_code)]

use std::collections::BTreeMap;

#[cfg(not(target_arch = "wasm32"))]
pub fn fixture(path: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures")).join(path)
}

/// Overwrites the u32 value of GGUF metadata `key` (found by its length-prefixed name).
pub fn set_u32(gguf: &mut [u8], key: &str, value: u32) {
    let mut needle = (key.len() as u64).to_le_bytes().to_vec();
    needle.extend_from_slice(key.as_bytes());
    needle.extend_from_slice(&4u32.to_le_bytes()); // value type u32
    let at = gguf.windows(needle.len()).position(|w| w == needle).unwrap_or_else(|| panic!("no u32 `{key}`"));
    let at = at + needle.len();
    gguf[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

#[cfg(not(target_arch = "wasm32"))]
pub fn load(model: &str) -> gptlens::Checkpoint {
    gptlens::Checkpoint::open(&fixture(model)).unwrap_or_else(|e| panic!("loading {model}: {e}"))
}

/// A reference tensor from the PyTorch fixtures: shape and values as f32 (i64 ids converted).
pub struct RefTensor {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

/// The reference tensors of a fixture model, by name.
#[cfg(not(target_arch = "wasm32"))]
pub fn reference(model: &str) -> BTreeMap<String, RefTensor> {
    reference_from_bytes(&std::fs::read(fixture(&format!("{model}/reference.safetensors"))).unwrap())
}

/// The tensors of a reference safetensors file, by name.
pub fn reference_from_bytes(bytes: &[u8]) -> BTreeMap<String, RefTensor> {
    let st = safetensors::SafeTensors::deserialize(bytes).unwrap();
    st.tensors()
        .into_iter()
        .map(|(name, view)| {
            let data = match view.dtype() {
                safetensors::Dtype::F32 => {
                    view.data().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
                }
                safetensors::Dtype::I32 => {
                    view.data().chunks_exact(4).map(|b| i32::from_le_bytes(b.try_into().unwrap()) as f32).collect()
                }
                safetensors::Dtype::I64 => {
                    view.data().chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap()) as f32).collect()
                }
                other => panic!("unexpected dtype {other:?} for {name}"),
            };
            (name, RefTensor { shape: view.shape().to_vec(), data })
        })
        .collect()
}

pub fn ids(t: &RefTensor) -> Vec<u32> {
    t.data.iter().map(|&x| x as u32).collect()
}

/// Largest |a − b| over two equally long slices.
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// The hooks a reference file holds (every name but `tokens` and `greedy`), in name order.
pub fn reference_hooks(reference: &BTreeMap<String, RefTensor>) -> Vec<&str> {
    reference.keys().map(String::as_str).filter(|n| !matches!(*n, "tokens" | "greedy")).collect()
}

/// Checks one captured hook against PyTorch with the stated tolerances: logits (and the logit
/// lens) ≤ 1e-4 absolute, attention probabilities ≤ 1e-5 absolute, LayerNorm scales and residual
/// norms ≤ 1e-5 relative, LayerNorm means ≤ 1e-5 relative to max(1, |value|), other activations
/// (residuals, z, head results, MLP outputs) ≤ 1e-5 × (1 + the tensor's largest |value|).
/// `what` names the run in failure messages.
pub fn check_hook(what: &str, name: &str, shape: &[usize], got: &[f32], want: &RefTensor) {
    assert_eq!(shape, want.shape.as_slice(), "{what} {name}");
    assert!(got.iter().all(|x| x.is_finite()), "{what} {name} has a NaN or infinity");
    let logits = name.ends_with("logits");
    let (worst, tolerance) = if logits || name.ends_with("hook_pattern") {
        (max_abs_diff(got, &want.data), if logits { 1e-4 } else { 1e-5 })
    } else if name.ends_with("hook_scale") || name.ends_with("hook_mean") || name.ends_with(".norm") {
        let floor = if name.ends_with("hook_mean") { 1.0 } else { 0.0 };
        (got.iter().zip(&want.data).map(|(a, b)| (a - b).abs() / b.abs().max(floor)).fold(0.0, f32::max), 1e-5)
    } else {
        let largest = want.data.iter().fold(0f32, |m, x| m.max(x.abs()));
        (max_abs_diff(got, &want.data), 1e-5 * (1.0 + largest))
    };
    assert!(worst <= tolerance, "{what} {name}: off by {worst:e} (tolerance {tolerance:e})");
}

/// The hooks a tests/fixtures/instruments/hooks-*.safetensors reference holds (all but `tokens`
/// and the ablated runs' `ablated.logits` and `mean_ablated.logits`), in name order.
pub fn activation_hooks(reference: &BTreeMap<String, RefTensor>) -> Vec<&str> {
    reference
        .keys()
        .map(String::as_str)
        .filter(|n| !matches!(*n, "tokens" | "ablated.logits" | "mean_ablated.logits"))
        .collect()
}

/// What `ablated.logits` in a hooks reference ablated, in `--ablate` syntax.
pub fn reference_ablation(bytes: &[u8]) -> String {
    let (_, metadata) = safetensors::SafeTensors::read_metadata(bytes).unwrap();
    metadata.metadata().as_ref().and_then(|m| m.get("ablate")).cloned().unwrap()
}

/// Checks a trace of a fixture's reference tokens, captured with every hook, against PyTorch:
/// exactly the reference hooks, each within [`check_hook`]'s tolerances, and the last position's
/// logits (what every run returns, captured or not) within 1e-4. Native and wasm tests share it.
pub fn check_trace_against_pytorch(what: &str, trace: &gptlens::Trace, reference: &BTreeMap<String, RefTensor>) {
    assert_eq!(trace.tokens, ids(&reference["tokens"]), "{what}: the trace is not of the reference tokens");
    let expected_names = reference_hooks(reference);
    let traced_names: Vec<&str> = trace.names().collect();
    assert_eq!(traced_names, expected_names, "{what}: the trace must offer exactly the reference hooks");
    for name in expected_names {
        let got = trace.get(name).unwrap();
        check_hook(what, name, &got.shape, &got.data, &reference[name]);
    }
    let all = &reference["logits"].data;
    let v = trace.last_logits.len();
    assert!(max_abs_diff(&trace.last_logits, &all[all.len() - v..]) <= 1e-4, "{what}: last_logits");
}

/// Runs a fixture's reference tokens through `session` capturing every hook, and checks the trace
/// against PyTorch ([`check_trace_against_pytorch`]).
#[cfg(not(target_arch = "wasm32"))]
pub fn check_against_pytorch(model: &str, session: &mut gptlens::Session) {
    let reference = reference(model);
    let tokens = ids(&reference["tokens"]);
    let spec = gptlens::CaptureSpec::standard(&session.config().clone());
    let trace = session.run(&tokens, &spec).unwrap();
    assert_eq!(trace.last_logits.len(), session.config().vocab_size);
    check_trace_against_pytorch(&format!("{model} on {}", session.backend_name()), &trace, &reference);
}

/// Two traces of the same tokens agree: the same hooks, shapes, and every value (and the last
/// logits) within `tolerance` absolute.
pub fn assert_traces_agree(what: &str, a: &gptlens::Trace, b: &gptlens::Trace, tolerance: f32) {
    assert_eq!(a.tokens, b.tokens, "{what}");
    assert_eq!(a.names().collect::<Vec<_>>(), b.names().collect::<Vec<_>>(), "{what}");
    for name in a.names() {
        let (x, y) = (a.get(name).unwrap(), b.get(name).unwrap());
        assert_eq!(x.shape, y.shape, "{what} {name}");
        let d = max_abs_diff(&x.data, &y.data);
        assert!(d <= tolerance, "{what} {name} differs by {d:e} (tolerance {tolerance:e})");
    }
    let d = max_abs_diff(&a.last_logits, &b.last_logits);
    assert!(d <= tolerance, "{what} last_logits differ by {d:e} (tolerance {tolerance:e})");
}

/// Asserts that loading fails with `Error::Tokenizer` whose message mentions `needle`.
pub fn assert_tokenizer_error(result: gptlens::Result<gptlens::tokenizer::Tokenizer>, needle: &str) {
    match result {
        Err(gptlens::Error::Tokenizer(message)) => {
            assert!(message.contains(needle), "expected the error to mention `{needle}`, got: {message}")
        }
        Err(other) => panic!("expected Error::Tokenizer mentioning `{needle}`, got {other:?}"),
        Ok(_) => panic!("expected Error::Tokenizer mentioning `{needle}`, but it loaded"),
    }
}

/// A small LLaMA with grouped keys (4 query heads on 2 key/value heads), rotary positions and
/// SwiGLU: the most kernels in the fewest weights, for tests that need a context of their choosing.
pub fn tiny_llama_config(vocab_size: usize, n_ctx: usize) -> gptlens::model::Config {
    use gptlens::model::{Arch, Config, Rope, RopePairing, Variant};
    Config {
        arch: Arch::Llama,
        n_layer: 2,
        n_head: 4,
        n_kv_head: 2,
        d_model: 32,
        head_dim: 8,
        d_ff: 40,
        vocab_size,
        n_ctx,
        norm_eps: 1e-5,
        rope: Some(Rope { theta: 10000.0, pairing: RopePairing::HalfSplit }),
        query_pre_attn_scalar: None,
        sliding_window: None,
        bos_token_id: None,
        eos_token_id: None,
        tied_head: false,
        variant: Variant::of(Arch::Llama),
        token_types: 0,
    }
}
