//! The JavaScript API: `Model`, `Session` and `Trace` classes over the engine types of the same
//! names, for wasm-bindgen.
//!
//! Only conversion happens here. Token ids and tensors cross as typed arrays (copies: JS may keep
//! or transfer them), records (`info()`, `topK()`, tensors) as plain objects, and every engine
//! error becomes a JS `Error` carrying the engine's message. Values from JS are checked, never
//! trusted: a wrong type is an error, not a panic, so the module stays usable after any failure.

#[cfg(feature = "gpu")]
mod gpu;
mod model;
mod session;
mod snapshot;
mod trace;
mod train;

#[cfg(feature = "gpu")]
pub use gpu::{request_gpu, Gpu};
pub use model::{GgufLoader, Model};
pub use session::Session;
pub use snapshot::{SnapshotBuffers, SnapshotRestore};
pub use trace::Trace;
pub use train::Trainer;

/// The threaded build's `initThreadPool(n)`: starts rayon on `n` Web Workers (see crate/js).
#[cfg(feature = "threads")]
pub use wasm_bindgen_rayon::init_thread_pool;

use serde::Serialize;
use std::sync::atomic::{AtomicI32, Ordering};

use wasm_bindgen::prelude::*;

use crate::instruments::{AblateWith, Ablation};
use crate::model::Config;
use crate::sample::SamplingParams;
use crate::CaptureSpec;

/// Shapes of the plain objects the classes take and return, for the generated `.d.ts`. This is
/// the one place they are declared: crate/js/src/types.ts re-exports them (narrowing hook names).
#[wasm_bindgen(typescript_custom_section)]
const TYPES: &str = r#"
/** `temperature: 0` is greedy; `topK` / `topP` keep only the most probable tokens. */
export interface SamplingParams { temperature: number; topK?: number; topP?: number; }
/** Row-major f32 values with their shape. */
export interface TensorData { shape: number[]; data: Float32Array; }
export interface TokenProb { id: number; prob: number; }
/** Each detector's score for every head, `[layer][head]` (definitions in the README's head detectors). */
export interface HeadScores { previousToken: number[][]; firstToken: number[][]; duplicateToken: number[][]; induction: number[][]; }
/** `new Trainer(shape, recipe?)`: a byte-level (256-token) GPT-2-style model. */
export interface TrainShape { nLayer: number; nHead: number; dModel: number; nCtx: number; sinusoidal?: boolean; }
/** AdamW as PyTorch defines it. */
export interface TrainAdamW { beta1: number; beta2: number; eps: number; weightDecay: number; }
/** How to train (nanoGPT's character-level Shakespeare recipe by default). */
export interface TrainRecipe { steps: number; batch: number; lr: number; minLr: number; warmup: number; adamw: TrainAdamW; clip: number | null; dropout: number; evalEvery: number; evalBatches: number; seed: number; }
/** One step of `Trainer.train`. */
export interface TrainProgress { step: number; steps: number; loss: number; valLoss: number | null; lr: number; tokensPerSecond: number; seconds: number; }
export interface TrainState { step: number; losses: number[]; valLosses: [number, number][]; }
export interface ModelInfo {
  /** The model's own name, when its files give one (GGUF `general.name`, config.json's `_name_or_path`). */
  name?: string;
  architecture: string;
  nLayer: number;
  nHead: number;
  /** Key/value heads: fewer than `nHead` under grouped-query attention (LLaMA). */
  nKvHead: number;
  dModel: number;
  dFf: number;
  vocabSize: number;
  /** Longest token sequence the model accepts (`n_positions`): the file's context, or fewer when that is all the memory budget holds (`contextCut` says so). */
  contextLength: number;
  /** Why `contextLength` is shorter than the file's context: a session at the whole context does not fit beside the weights in the memory budget (in wasm32, what 4 GiB leaves). */
  contextCut?: string;
  nParams: number;
  /** Bytes the weights occupy in memory (quantized weights stay quantized). */
  memoryBytes: number;
  /** False when the checkpoint had no tokenizer files, or one gptlens cannot read: use token ids then. */
  hasTokenizer: boolean;
  /** Why the model's vocabulary could not be read as a tokenizer, when it could not. */
  tokenizerProblem?: string;
  /** True when `chatPrompt` can wrap text in the model's chat template (e.g. ChatML). */
  hasChatTemplate: boolean;
  /** The token that ends a sequence: generation should stop there. */
  eosTokenId?: number;
  bosTokenId?: number;
  /** Every hook this model can capture: the standard set, then the activations recorded only when named. */
  hooks: string[];
  /** The hooks a run records when none are named (attention patterns, norm statistics, residual norms, logits). */
  standardHooks: string[];
  /** `'bidirectional'` for an encoder (BERT): every position reads every other, patterns are full `[H, T, T]`. */
  attention: 'causal' | 'bidirectional';
  /** `'post'`: each block normalises after its sublayers (BERT, the original transformer); `'pre'`: before. */
  normPlacement: 'pre' | 'post';
  /** What is added to the token embeddings for position (`'none'` for rotary models and models without positions). */
  positions: 'learned' | 'sinusoidal' | 'none';
  /** False for an encoder: no next-token logits; `embed` gives its sentence embedding. */
  hasHead: boolean;
}
/** Activation patching (`Model.patch`): each score is (diff(patched) − diff(corrupt)) / (diff(clean) − diff(corrupt)),
 * diff = logit[answer] − logit[wrong] at the last position. */
export interface PatchScores {
  cleanDiff: number;
  corruptDiff: number;
  /** `[layer][position]`: the clean `hook_resid_pre` at one position patched in. */
  residPre: number[][];
  /** `[layer][head]`: the clean `hook_z` of one head at every position patched in. */
  heads: number[][];
}
/** The logit lens (`Model.logitLens`) at positions `first..`: rows `0..nLayer` read each layer's `hook_resid_pre`,
 * row `nLayer` is the model's output. */
export interface LogitLens {
  first: number;
  /** `[layer][position − first][k]`, most probable first. */
  top: TokenProb[][][];
  /** The model's own top token at each position. */
  finalTop: number[];
  /** `[layer][position − first]`: each layer's probability of `finalTop`. */
  finalTopProb: number[][];
  target?: number;
  targetProb?: number[][];
}
/** Direct logit attribution (`Model.attribution`): each part's contribution to logit[answer] − logit[wrong]
 * at `position`, the final norm's scale frozen; the parts sum to `total` ≈ `logitDiff`. */
export interface Attribution {
  position: number;
  answer: number;
  wrong: number;
  logitDiff: number;
  embed: number;
  posEmbed: number;
  /** `[layer][head]`. */
  heads: number[][];
  attnBias: number[];
  mlps: number[];
  finalBias: number;
  total: number;
}
/** A GPU adapter as the engine sees it (`Gpu.info()`). In a browser WebGPU tells little: `name` is
 * its description (often empty) and `vendor` "unknown"; the package adds the browser's own words. */
export interface AdapterInfo {
  name: string;
  vendor: string;
  /** The graphics API under wgpu: "BrowserWebGpu" in a browser. */
  backend: string;
  /** "Cpu" for a fallback (software) adapter in a browser. */
  deviceType: string;
  driver: string;
  /** A CPU implementation (SwiftShader, lavapipe, WARP): correct, never fast. */
  isSoftware: boolean;
  /** Largest buffer one binding may cover, in bytes: the largest weight matrix must fit. */
  maxStorageBufferBindingSize: number;
  maxBufferSize: number;
  maxComputeWorkgroupStorageSize: number;
  maxComputeInvocationsPerWorkgroup: number;
}
"#;

/// Threads the kernels run on: the size of rayon's pool (1 in the single-thread build, `n` after
/// `initThreadPool(n)`), so the page reports what actually runs rather than what it asked for.
#[wasm_bindgen(js_name = threadCount)]
pub fn thread_count() -> usize {
    rayon::current_num_threads()
}

/// Set by the panic hook on whichever thread panics. A panic on a thread of the pool (threaded
/// build) kills that Web Worker alone, and the engine's own thread then waits for it forever,
/// deaf to every message: the package's client reads this flag in the shared memory instead
/// ([`crash_flag`]) and treats it as the engine's crash.
static CRASHED: AtomicI32 = AtomicI32::new(0);

/// The address of the crash flag in the engine's memory (an `i32`, 1 once anything panicked).
#[wasm_bindgen(js_name = crashFlag)]
pub fn crash_flag() -> usize {
    std::ptr::addr_of!(CRASHED) as usize
}

/// Aborts the engine on purpose, as a bug would: a Rust panic, which in wasm is an `unreachable`
/// trap that leaves the instance unusable. Only tests call it, to show that a crashed engine is
/// reported as such and that the page recovers. `how`: `"now"`; `"microtask"` — the panic happens
/// in a microtask and the returned Promise never settles, as when an async run traps while
/// wasm-bindgen-futures drives it (the trap then escapes every caller's `catch`); `"pool thread"` —
/// a task of a parallel loop panics on a thread of the pool, and this call never returns (the
/// engine's thread waits for that task), as when a kernel panics in the threaded build.
#[wasm_bindgen(js_name = abortForTesting)]
pub fn abort_for_testing(how: &str) -> Result<js_sys::Promise, JsValue> {
    const WHY: &str = "abortForTesting: the engine was aborted on purpose";
    match how {
        "microtask" => {
            let abort = Closure::<dyn FnMut()>::once(|| panic!("{WHY}"));
            let global = js_sys::global();
            let queue: js_sys::Function = js_sys::Reflect::get(&global, &"queueMicrotask".into())?.dyn_into()?;
            queue.call1(&global, abort.as_ref())?;
            abort.forget();
            Ok(js_sys::Promise::new(&mut |_, _| {}))
        }
        "pool thread" => {
            // Every task panics but the first to start, which waits until one has: whichever
            // threads take them, a pool thread dies while the loop is unfinished.
            let started = std::sync::atomic::AtomicBool::new(false);
            crate::kernels::pool::run_as_team(|| {
                crate::kernels::pool::for_each(rayon::current_num_threads(), |_| {
                    if started.swap(true, Ordering::SeqCst) || rayon::current_num_threads() < 2 {
                        panic!("{WHY}");
                    }
                    while CRASHED.load(Ordering::SeqCst) == 0 {
                        std::hint::spin_loop();
                    }
                })
            });
            Ok(js_sys::Promise::resolve(&JsValue::UNDEFINED))
        }
        _ => panic!("{WHY}"),
    }
}

/// Runs when the module is instantiated: panics then raise the crash flag and reach the console
/// with their message instead of an opaque `unreachable` trap.
#[wasm_bindgen(start)]
fn start() {
    std::panic::set_hook(Box::new(|info| {
        CRASHED.store(1, Ordering::SeqCst);
        console_error_panic_hook::hook(info);
    }));
}

/// Hooks to capture: `None` (JS `undefined`) means the standard set; an empty list means none.
fn capture_spec(names: Option<Vec<String>>, config: &Config) -> crate::Result<CaptureSpec> {
    match names {
        None => Ok(CaptureSpec::standard(config)),
        Some(names) => CaptureSpec::from_names(&names, config),
    }
}

/// An ablation from the package: units spelled `layer.head` / `layer.mlp`, replaced by their mean
/// when `mean` is true, else by zero.
fn ablation(units: &[String], mean: Option<bool>, config: &Config) -> crate::Result<Ablation> {
    let with = if mean == Some(true) { AblateWith::Mean } else { AblateWith::Zero };
    Ok(Ablation::parse(&units.join(","), config)?.replaced_by(with))
}

/// `{ temperature, topK?, topP? }`, or the defaults (temperature 1, no filter) for `undefined`/`null`.
fn sampling_params(value: JsValue) -> Result<SamplingParams, JsError> {
    if value.is_undefined() || value.is_null() {
        return Ok(SamplingParams::default());
    }
    serde_wasm_bindgen::from_value(value).map_err(|e| {
        let message =
            JsValue::from(e).dyn_into::<js_sys::Error>().map(|e| String::from(e.message())).unwrap_or_default();
        JsError::new(&format!("sampling parameters must look like {{ temperature, topK?, topP? }}: {message}"))
    })
}

/// A plain JS object from a record.
fn to_js(record: &impl Serialize) -> Result<JsValue, JsError> {
    Ok(serde_wasm_bindgen::to_value(record)?)
}
