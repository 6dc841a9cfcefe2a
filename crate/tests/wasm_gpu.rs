//! The wgpu backend on the browser's WebGPU (headless Chromium's SwiftShader adapter here):
//! the PyTorch parity fixtures through `select(BackendChoice::Gpu)` + `Session::with_backend` +
//! `run_async`, with the CPU's tolerances, and GPU sessions (prefix reuse, one-token steps)
//! against a full recompute on the same GPU.
//!
//! Run with `WASM_BINDGEN_USE_BROWSER=1 cargo test --target wasm32-unknown-unknown --test wasm_gpu`
//! (crate/webdriver.json passes Chromium `--enable-unsafe-webgpu`). wasm has no environment at run
//! time, so `REQUIRE_GPU=1` is read when the tests are *built* (`option_env!`): with it, a browser
//! that offers no adapter fails every test. Node (no WebGPU) always skips them with a message;
//! scripts/test.sh runs them in Chromium with REQUIRE_GPU=1.
#![cfg(all(target_arch = "wasm32", feature = "gpu"))]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{assert_traces_agree, check_trace_against_pytorch, ids, max_abs_diff, reference_from_bytes};
use gptlens::backend::{select, BackendChoice};
use gptlens::{Backend, CaptureSpec, Checkpoint, Model, Session};
use wasm_bindgen::JsValue;
use wasm_bindgen_test::{console_log, wasm_bindgen_test};

/// `REQUIRE_GPU=1` when this test binary was compiled.
fn required() -> bool {
    option_env!("REQUIRE_GPU") == Some("1")
}

macro_rules! fixture {
    ($path:literal) => {
        include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/", $path)).as_slice()
    };
}

/// A fixture model: its files by name, and its PyTorch reference.
struct Fixture {
    name: &'static str,
    files: &'static [(&'static str, &'static [u8])],
    reference: &'static [u8],
}

const GPT2_F32: Fixture = Fixture {
    name: "gpt2-tiny-f32",
    files: &[
        ("config.json", fixture!("gpt2-tiny-f32/config.json")),
        ("model.safetensors", fixture!("gpt2-tiny-f32/model.safetensors")),
    ],
    reference: fixture!("gpt2-tiny-f32/reference.safetensors"),
};
const GPT2_F16: Fixture = Fixture {
    name: "gpt2-tiny-f16",
    files: &[
        ("config.json", fixture!("gpt2-tiny-f16/config.json")),
        ("model.safetensors", fixture!("gpt2-tiny-f16/model.safetensors")),
    ],
    reference: fixture!("gpt2-tiny-f16/reference.safetensors"),
};
const LLAMA: Fixture = Fixture {
    name: "llama-tiny",
    files: &[
        ("config.json", fixture!("llama-tiny/config.json")),
        ("model.safetensors", fixture!("llama-tiny/model.safetensors")),
    ],
    reference: fixture!("llama-tiny/reference.safetensors"),
};
const LLAMA_Q: Fixture = Fixture {
    name: "llama-tiny-q",
    files: &[("model.gguf", fixture!("llama-tiny-q/model.gguf"))],
    reference: fixture!("llama-tiny-q/reference.safetensors"),
};
const GPT2_GGUF: Fixture = Fixture {
    name: "gpt2-tiny-gguf",
    files: &[("model.gguf", fixture!("gpt2-tiny-gguf/model.gguf"))],
    reference: fixture!("gpt2-tiny-gguf/reference.safetensors"),
};

fn load(fixture: &Fixture) -> Arc<Model> {
    let files: BTreeMap<String, &[u8]> = fixture.files.iter().map(|&(name, bytes)| (name.to_string(), bytes)).collect();
    Checkpoint::from_files(&files).unwrap_or_else(|e| panic!("loading {}: {e}", fixture.name)).model
}

/// `Some("Node …")` when this JS engine is Node, which has no WebGPU at all.
fn node_version() -> Option<String> {
    let get =
        |object: &JsValue, key: &str| js_sys::Reflect::get(object, &key.into()).ok().filter(|v| !v.is_undefined());
    let versions = get(&js_sys::global().into(), "process").and_then(|process| get(&process, "versions"))?;
    get(&versions, "node")?.as_string()
}

/// The model on the browser's GPU; `None` (said on the console) in Node, or when no adapter is
/// offered and the tests were built without `REQUIRE_GPU=1`.
async fn on_gpu(fixture: &Fixture, model: &Arc<Model>) -> Option<Backend> {
    if let Some(version) = node_version() {
        console_log!("SKIPPED {}: Node {version} has no WebGPU (run with WASM_BINDGEN_USE_BROWSER=1)", fixture.name);
        return None;
    }
    let started = js_sys::Date::now();
    match select(BackendChoice::Gpu, model).await {
        Ok(selected) => {
            let ms = js_sys::Date::now() - started;
            console_log!("{}: {} (set up in {ms} ms) {:?}", fixture.name, selected.reason, selected.adapter);
            Some(selected.backend)
        }
        Err(e) if required() => panic!("{}: REQUIRE_GPU=1 was set when these tests were built, but {e}", fixture.name),
        Err(e) => {
            console_log!("SKIPPED {}: {e} (build the tests with REQUIRE_GPU=1 to make this a failure)", fixture.name);
            None
        }
    }
}

async fn gpu_session(fixture: &Fixture) -> Option<(Arc<Model>, Backend, Session)> {
    let model = load(fixture);
    let backend = on_gpu(fixture, &model).await?;
    let session = Session::with_backend(model.clone(), &backend).unwrap();
    assert_eq!(session.backend_name(), "gpu");
    Some((model, backend, session))
}

/// The reference tokens, every hook captured, on the GPU, against PyTorch.
async fn check_model(fixture: &Fixture) {
    let Some((model, _, mut session)) = gpu_session(fixture).await else { return };
    let reference = reference_from_bytes(fixture.reference);
    let tokens = ids(&reference["tokens"]);
    let started = js_sys::Date::now();
    let trace = session.run_async(&tokens, &CaptureSpec::standard(&model.config)).await.unwrap();
    console_log!("{}: {} tokens, every hook, in {} ms", fixture.name, tokens.len(), js_sys::Date::now() - started);
    assert_eq!((trace.computed, trace.last_logits.len()), (tokens.len(), model.config.vocab_size));
    check_trace_against_pytorch(&format!("{} on the browser's GPU", fixture.name), &trace, &reference);
}

#[wasm_bindgen_test]
async fn gpt2_f32_matches_pytorch_on_webgpu() {
    check_model(&GPT2_F32).await;
}

#[wasm_bindgen_test]
async fn gpt2_f16_matches_pytorch_on_webgpu() {
    check_model(&GPT2_F16).await;
}

#[wasm_bindgen_test]
async fn llama_safetensors_matches_pytorch_on_webgpu() {
    check_model(&LLAMA).await;
}

#[wasm_bindgen_test]
async fn llama_gguf_quantized_matches_pytorch_on_webgpu() {
    check_model(&LLAMA_Q).await;
}

#[wasm_bindgen_test]
async fn gpt2_gguf_matches_pytorch_on_webgpu() {
    check_model(&GPT2_GGUF).await;
}

fn prompt(n: usize, vocab: usize) -> Vec<u32> {
    (0..n).map(|i| ((i * 37 + 106) % vocab) as u32).collect()
}

/// A full recompute of `tokens` in a fresh session on the same GPU.
async fn fresh_run(model: &Arc<Model>, backend: &Backend, tokens: &[u32], spec: &CaptureSpec) -> gptlens::Trace {
    let mut session = Session::with_backend(model.clone(), backend).unwrap();
    let trace = session.run_async(tokens, spec).await.unwrap();
    assert_eq!(trace.computed, tokens.len());
    trace
}

/// What `crate/tests/session.rs` asks of the CPU, on the GPU: prefix reuse (typing on, editing
/// in the middle, deleting back) and one-token steps agree with a full recompute within 1e-5.
async fn check_sessions(fixture: &Fixture) {
    let Some((model, backend, mut session)) = gpu_session(fixture).await else { return };
    let started = js_sys::Date::now();
    let spec = CaptureSpec::standard(&model.config);
    let what = |case: &str| format!("{} on the browser's GPU, {case}", fixture.name);
    let first = prompt(20, model.config.vocab_size);
    assert_eq!(session.run_async(&first, &spec).await.unwrap().computed, 20);

    // Typing on: only the 3 new tokens run.
    let mut longer = first.clone();
    longer.extend([7, 8, 9]);
    let reused = session.run_async(&longer, &spec).await.unwrap();
    assert_eq!(reused.computed, 3);
    let full = fresh_run(&model, &backend, &longer, &spec).await;
    assert_traces_agree(&what("prefix reuse"), &reused, &full, 1e-5);

    // Editing in the middle: everything from the edit on runs again.
    let mut edited = longer.clone();
    edited[12] = 42;
    let after_edit = session.run_async(&edited, &spec).await.unwrap();
    assert_eq!(after_edit.computed, edited.len() - 12);
    assert_traces_agree(&what("after an edit"), &after_edit, &fresh_run(&model, &backend, &edited, &spec).await, 1e-5);

    // Deleting back to a prefix: the last token reruns to predict the next one.
    let back = session.run_async(&edited[..10], &spec).await.unwrap();
    assert_eq!(back.computed, 1);
    assert_traces_agree(&what("deleting back"), &back, &fresh_run(&model, &backend, &edited[..10], &spec).await, 1e-5);
    assert_eq!(session.run_async(&edited[..10], &spec).await.unwrap().computed, 0);

    // One token at a time (the last 8; SwiftShader is slow): each step's logits are the full run's
    // row for that position, and the hooks recorded along the way are the full run's.
    let mut stepped = Session::with_backend(model.clone(), &backend).unwrap();
    let start = longer.len() - 8;
    stepped.run_async(&longer[..start], &spec).await.unwrap();
    let v = model.config.vocab_size;
    let rows = &full.get("logits").unwrap().data;
    for (pos, &token) in longer.iter().enumerate().skip(start) {
        let logits = stepped.step_async(token).await.unwrap();
        let d = max_abs_diff(logits, &rows[pos * v..(pos + 1) * v]);
        assert!(d <= 1e-5, "{}: logits differ by {d:e}", what(&format!("step to position {pos}")));
    }
    let incremental = stepped.run_async(&longer, &spec).await.unwrap();
    assert_eq!(incremental.computed, 0);
    assert_traces_agree(&what("token by token"), &incremental, &full, 1e-5);
    console_log!("{}: sessions checked in {} ms", fixture.name, js_sys::Date::now() - started);
}

#[wasm_bindgen_test]
async fn gpt2_sessions_on_webgpu_agree_with_a_full_recompute() {
    check_sessions(&GPT2_F32).await;
}

/// RoPE and grouped-query attention over the cached keys (the f32 model: the weight format does
/// not touch the cache, and SwiftShader compiles the quantized kernels slowly).
#[wasm_bindgen_test]
async fn llama_sessions_on_webgpu_agree_with_a_full_recompute() {
    check_sessions(&LLAMA).await;
}
