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
