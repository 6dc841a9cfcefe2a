//! The JavaScript API: `Model`, `Session` and `Trace` classes over the engine types of the same
//! names, for wasm-bindgen.
//!
//! Only conversion happens here. Token ids and tensors cross as typed arrays (copies: JS may keep
//! or transfer them), records (`info()`, `topK()`, tensors) as plain objects, and every engine
//! error becomes a JS `Error` carrying the engine's message. Values from JS are checked, never
//! trusted: a wrong type is an error, not a panic, so the module stays usable after any failure.

mod model;
mod session;
mod trace;

pub use model::Model;
pub use session::Session;
pub use trace::Trace;

/// The threaded build's `initThreadPool(n)`: starts rayon on `n` Web Workers (see crate/js).
#[cfg(feature = "threads")]
pub use wasm_bindgen_rayon::init_thread_pool;

use serde::Serialize;
use wasm_bindgen::prelude::*;

use crate::model::Config;
use crate::sample::SamplingParams;
use crate::CaptureSpec;

/// Shapes of the plain objects the classes take and return, for the generated `.d.ts`.
#[wasm_bindgen(typescript_custom_section)]
const TYPES: &str = r#"
/** `temperature: 0` is greedy; `topK` / `topP` keep only the most probable tokens. */
export interface SamplingParams { temperature: number; topK?: number; topP?: number; }
/** Row-major f32 values with their shape. */
export interface TensorData { shape: number[]; data: Float32Array; }
export interface TokenProb { id: number; prob: number; }
export interface ModelInfo {
  architecture: string; nLayer: number; nHead: number; nKvHead: number; dModel: number; dFf: number;
  vocabSize: number; contextLength: number; nParams: number; memoryBytes: number;
  hasTokenizer: boolean; hasChatTemplate: boolean; eosTokenId?: number; bosTokenId?: number;
  hooks: string[];
}
"#;

/// Threads the kernels run on: the size of rayon's pool (1 in the single-thread build, `n` after
/// `initThreadPool(n)`), so the page reports what actually runs rather than what it asked for.
#[wasm_bindgen(js_name = threadCount)]
pub fn thread_count() -> usize {
    rayon::current_num_threads()
}

/// Runs when the module is instantiated: panics then reach the console with their message
/// instead of an opaque `unreachable` trap.
#[wasm_bindgen(start)]
fn start() {
    console_error_panic_hook::set_once();
}

/// Hooks to capture: `None` (JS `undefined`) means every hook, like TransformerLens's
/// `run_with_cache`; an empty list means none.
fn capture_spec(names: Option<Vec<String>>, config: &Config) -> crate::Result<CaptureSpec> {
    match names {
        None => Ok(CaptureSpec::all(config)),
        Some(names) => CaptureSpec::from_names(&names, config),
    }
}

/// `{ temperature, topK?, topP? }`, or the defaults (temperature 1, no filter) for `undefined`/`null`.
fn sampling_params(value: JsValue) -> Result<SamplingParams, JsError> {
    if value.is_undefined() || value.is_null() {
        return Ok(SamplingParams::default());
    }
    serde_wasm_bindgen::from_value(value).map_err(|e| {
        let message = JsValue::from(e).dyn_into::<js_sys::Error>().map(|e| String::from(e.message())).unwrap_or_default();
        JsError::new(&format!("sampling parameters must look like {{ temperature, topK?, topP? }}: {message}"))
    })
}

/// A plain JS object from a record.
fn to_js(record: &impl Serialize) -> Result<JsValue, JsError> {
    Ok(serde_wasm_bindgen::to_value(record)?)
}
