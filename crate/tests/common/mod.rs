//! Shared by the integration tests: fixture paths and reference loading (from disk natively, from
//! embedded bytes in the wasm tests).
#![allow(dead_code)]

use std::collections::BTreeMap;

#[cfg(not(target_arch = "wasm32"))]
pub fn fixture(path: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures")).join(path)
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

/// Runs a fixture's reference tokens through `session` capturing every hook, and checks every hook
/// against PyTorch with the stated tolerances: logits ≤ 1e-4 absolute, attention probabilities
/// ≤ 1e-5 absolute, LayerNorm scales and residual norms ≤ 1e-5 relative, LayerNorm means ≤ 1e-5
/// relative to max(1, |value|).
#[cfg(not(target_arch = "wasm32"))]
pub fn check_against_pytorch(model: &str, session: &mut gptlens::Session) {
    let reference = reference(model);
    let tokens = ids(&reference["tokens"]);
    let spec = gptlens::CaptureSpec::all(&session.config().clone());
    let trace = session.run(&tokens, &spec).unwrap();

    let expected_names: Vec<&str> =
        reference.keys().map(String::as_str).filter(|n| !matches!(*n, "tokens" | "greedy")).collect();
    let traced_names: Vec<&str> = trace.names().collect();
    assert_eq!(traced_names, expected_names, "the trace must offer exactly the reference hooks");

    for name in expected_names {
        let (got, want) = (&trace.get(name).unwrap(), &reference[name]);
        assert_eq!(got.shape, want.shape, "{model} {name}");
        assert!(got.data.iter().all(|x| x.is_finite()), "{model} {name} has a NaN or infinity");
        let worst = if name == "logits" || name.ends_with("hook_pattern") {
            max_abs_diff(&got.data, &want.data)
        } else {
            let floor = if name.ends_with("hook_mean") { 1.0 } else { 0.0 };
            got.data.iter().zip(&want.data).map(|(a, b)| (a - b).abs() / b.abs().max(floor)).fold(0.0, f32::max)
        };
        let tolerance = if name == "logits" { 1e-4 } else { 1e-5 };
        assert!(worst <= tolerance, "{model} {name} on {}: off by {worst:e} (tolerance {tolerance:e})", session.backend_name());
    }
    // The last position's logits are also what every run returns without capture.
    let v = session.config().vocab_size;
    let all = &reference["logits"].data;
    assert!(max_abs_diff(&trace.last_logits, &all[all.len() - v..]) <= 1e-4);
}
