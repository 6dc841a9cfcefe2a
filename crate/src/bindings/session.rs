//! `Session`: a KV cache with prefix reuse, one-token steps and step-wise sampling, on the CPU
//! (sync or async methods) or on WebGPU (async methods only: the browser hands back GPU results
//! only through the event loop).
//!
//! wasm-bindgen cannot export an `async fn(&mut self)`: the state sits in an `Rc<RefCell<…>>` that
//! each async call clones into its future and borrows for the whole call. That borrow is the
//! session's lock: any call made while an async one is running gets a "busy" Error, not a panic.

use std::cell::{RefCell, RefMut};
use std::future::Future;
use std::rc::Rc;

use js_sys::Promise;
use wasm_bindgen::prelude::*;

use super::ablation;
use super::trace::tensor_to_js;
use super::{capture_spec, sampling_params, Trace};
use crate::sample::{Sampler, SamplingParams};

#[wasm_bindgen]
pub struct Session {
    state: Rc<RefCell<State>>,
}

struct State {
    session: crate::Session,
    /// Created by the first `sampleNext`; its random stream then runs on across calls until a
    /// call passes a new seed or the session is reset.
    sampler: Option<Sampler>,
}

/// The seed a session samples with until told otherwise, so unseeded runs are reproducible too.
const DEFAULT_SEED: u64 = 0;

impl Session {
    pub(super) fn new(session: crate::Session) -> Session {
        Session { state: Rc::new(RefCell::new(State { session, sampler: None })) }
    }
}

/// The session's state, unless an async call holds it.
fn lock(state: &RefCell<State>) -> Result<RefMut<'_, State>, JsError> {
    state.try_borrow_mut().map_err(|_| {
        JsError::new("this session is busy with an earlier runAsync / stepAsync / sampleNextAsync: await it before the next call")
    })
}

impl State {
    /// The sampler for this call: the running one with `params`, or a new one when `seed` is given
    /// or none exists yet.
    fn sampler(
        sampler: &mut Option<Sampler>,
        params: SamplingParams,
        seed: Option<f64>,
    ) -> Result<&mut Sampler, JsError> {
        Ok(match (sampler, seed) {
            (Some(sampler), None) => {
                sampler.set_params(params)?;
                sampler
            }
            (slot, seed) => {
                slot.insert(Sampler::new(params, seed.map_or(Ok(DEFAULT_SEED), |s| whole_number(s, "seed"))?)?)
            }
        })
    }
}

#[wasm_bindgen]
impl Session {
    /// Runs `tokens`, recomputing only what differs from the previous run's tokens. `capture` as
    /// in `Model.run`. CPU sessions only: a WebGPU session runs through `runAsync`.
    pub fn run(&self, tokens: &[u32], capture: Option<Vec<String>>) -> Result<Trace, JsError> {
        let mut state = lock(&self.state)?;
        let spec = capture_spec(capture, state.session.config())?;
        Ok(state.session.run(tokens, &spec)?.into())
    }

    /// `run` on either backend; resolves once the results are read back.
    #[allow(clippy::await_holding_refcell_ref)] // the borrow is the session's lock
    #[wasm_bindgen(js_name = runAsync, unchecked_return_type = "Promise<Trace>")]
    pub fn run_async(&self, tokens: Vec<u32>, capture: Option<Vec<String>>) -> Promise {
        let state = Rc::clone(&self.state);
        promise(async move {
            let mut state = lock(&state)?;
            let spec = capture_spec(capture, state.session.config())?;
            let trace: Trace = state.session.run_async(&tokens, &spec).await?.into();
            Ok(trace.into())
        })
    }

    /// Appends one token, recording the hooks of the last run. CPU sessions only.
    pub fn step(&self, token: u32) -> Result<(), JsError> {
        lock(&self.state)?.session.step(token)?;
        Ok(())
    }

    /// `step` on either backend.
    #[allow(clippy::await_holding_refcell_ref)] // the borrow is the session's lock
    #[wasm_bindgen(js_name = stepAsync, unchecked_return_type = "Promise<void>")]
    pub fn step_async(&self, token: u32) -> Promise {
        let state = Rc::clone(&self.state);
        promise(async move {
            let mut state = lock(&state)?;
            state.session.step_async(token).await?;
            Ok(JsValue::UNDEFINED)
        })
    }

    /// Draws the next token from the last logits, appends it and returns it. The random stream
    /// continues from the previous call; `seed` restarts it (a fresh session starts at seed 0).
    /// CPU sessions only.
    #[wasm_bindgen(js_name = sampleNext)]
    pub fn sample_next(
        &self,
        #[wasm_bindgen(unchecked_param_type = "SamplingParams")] params: JsValue,
        seed: Option<f64>,
    ) -> Result<u32, JsError> {
        let params = sampling_params(params)?;
        let mut state = lock(&self.state)?;
        let State { session, sampler } = &mut *state;
        let sampler = State::sampler(sampler, params, seed)?;
        Ok(session.sample_next(sampler)?)
    }

    /// `sampleNext` on either backend.
    #[allow(clippy::await_holding_refcell_ref)] // the borrow is the session's lock
    #[wasm_bindgen(js_name = sampleNextAsync, unchecked_return_type = "Promise<number>")]
    pub fn sample_next_async(
        &self,
        #[wasm_bindgen(unchecked_param_type = "SamplingParams")] params: JsValue,
        seed: Option<f64>,
    ) -> Promise {
        let state = Rc::clone(&self.state);
        // Read the parameters now: the JS object may change before the call runs.
        let params = sampling_params(params);
        promise(async move {
            let params = params?;
            let mut state = lock(&state)?;
            let State { session, sampler } = &mut *state;
            let sampler = State::sampler(sampler, params, seed)?;
            Ok(session.sample_next_async(sampler).await?.into())
        })
    }

    /// Keeps every layer's queries from the next run on (`true`; the cache empties), so that
    /// `headPattern` can remake any head's whole map after runs that captured pooled maps only.
    /// CPU sessions only.
    #[wasm_bindgen(js_name = keepQueries)]
    pub fn keep_queries(&self, keep: bool) -> Result<(), JsError> {
        lock(&self.state)?.session.keep_queries(keep)?;
        Ok(())
    }

    /// One head's attention map over the cached tokens as `{ shape: [T, T], data }`, remade
    /// exactly (the bits of its `hook_pattern` rows) from the queries kept since `keepQueries(true)`.
    #[wasm_bindgen(js_name = headPattern, unchecked_return_type = "TensorData")]
    pub fn head_pattern(&self, layer: usize, head: usize) -> Result<JsValue, JsError> {
        let tensor = lock(&self.state)?.session.head_pattern(layer, head)?;
        tensor_to_js(&tensor)
    }

    /// Every token in the cache, in order.
    pub fn tokens(&self) -> Result<Vec<u32>, JsError> {
        Ok(lock(&self.state)?.session.tokens().to_vec())
    }

    /// Ablates these heads and MLPs (`"layer.head"`, `"layer.mlp"`) in every run from now on,
    /// replacing their output by zero or (`mean`) by its mean over the prompt's positions; `[]`
    /// for none. A change empties the cache. On WebGPU, zero-ablation of heads below 32 of a layer.
    #[wasm_bindgen(js_name = setAblation)]
    pub fn set_ablation(&self, heads: Vec<String>, mean: Option<bool>) -> Result<(), JsError> {
        let mut state = lock(&self.state)?;
        let ablation = ablation(&heads, mean, state.session.config())?;
        state.session.set_ablation(ablation)?;
        Ok(())
    }

    /// Back to the state of a new session: no tokens, sampling from seed 0.
    pub fn reset(&self) -> Result<(), JsError> {
        let mut state = lock(&self.state)?;
        state.session.reset();
        state.sampler = None;
        Ok(())
    }

    /// Logits predicting the token after the last one (`[vocabSize]`; zeros before any run).
    #[wasm_bindgen(js_name = lastLogits)]
    pub fn last_logits(&self) -> Result<Vec<f32>, JsError> {
        Ok(lock(&self.state)?.session.last_logits().to_vec())
    }

    /// The sentence embedding of `tokens` (`Model.embed`), reusing this session's buffers; the
    /// session then holds `tokens`. On the CPU.
    pub fn embed(&self, tokens: &[u32]) -> Result<Vec<f32>, JsError> {
        Ok(lock(&self.state)?.session.embed(tokens)?)
    }

    /// Where this session runs: `"cpu"` or `"webgpu"`.
    #[wasm_bindgen(unchecked_return_type = "'cpu' | 'webgpu'")]
    pub fn backend(&self) -> Result<String, JsError> {
        Ok(match lock(&self.state)?.session.backend_name() {
            "gpu" => "webgpu".into(),
            other => other.into(),
        })
    }
}

/// A Promise of `work`'s value, rejected with its Error.
fn promise(work: impl Future<Output = Result<JsValue, JsError>> + 'static) -> Promise {
    #[cfg(feature = "gpu")]
    {
        wasm_bindgen_futures::future_to_promise(async move { work.await.map_err(JsValue::from) })
    }
    // Without the GPU backend nothing awaits: the work is done after its first poll.
    #[cfg(not(feature = "gpu"))]
    {
        use std::task::{Context, Poll, Waker};
        let mut work = std::pin::pin!(work);
        match work.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(Ok(value)) => Promise::resolve(&value),
            Poll::Ready(Err(error)) => Promise::reject(&error.into()),
            Poll::Pending => Promise::reject(&JsError::new("a CPU session's async call did not finish at once").into()),
        }
    }
}

/// A JS number that must be an integer JS can represent exactly (0 ..= 2^53 − 1).
pub(super) fn whole_number(value: f64, what: &str) -> Result<u64, JsError> {
    const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;
    if value.fract() == 0.0 && (0.0..=MAX_SAFE_INTEGER).contains(&value) {
        Ok(value as u64)
    } else {
        Err(JsError::new(&format!("{what} {value} must be a whole number from 0 to 2^53 − 1")))
    }
}
