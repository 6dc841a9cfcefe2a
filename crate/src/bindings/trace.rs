//! `Trace`: the captured tensors of one run and the next-token distribution after it.

use js_sys::Float32Array;
use serde::Serialize;
use wasm_bindgen::prelude::*;

use super::{sampling_params, to_js};
use crate::sample::most_probable_under;

#[wasm_bindgen]
pub struct Trace {
    trace: crate::Trace,
}

impl Trace {
    pub(super) fn inner(&self) -> &crate::Trace {
        &self.trace
    }
}

impl From<crate::Trace> for Trace {
    fn from(trace: crate::Trace) -> Trace {
        Trace { trace }
    }
}

/// What `tensor()` returns.
#[derive(Serialize)]
struct TensorData<'a> {
    shape: &'a [usize],
    #[serde(with = "serde_wasm_bindgen::preserve")]
    data: Float32Array,
}

/// A tensor as JS sees it: `{ shape, data }`, `data` a new row-major Float32Array.
pub(super) fn tensor_to_js(tensor: &crate::trace::Tensor) -> Result<JsValue, JsError> {
    to_js(&TensorData { shape: &tensor.shape, data: Float32Array::from(tensor.data.as_slice()) })
}

#[wasm_bindgen]
impl Trace {
    /// The captured hooks' names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.trace.names().map(str::to_owned).collect()
    }

    /// A captured tensor as `{ shape, data }`, `data` a new row-major Float32Array.
    #[wasm_bindgen(unchecked_return_type = "TensorData")]
    pub fn tensor(&self, name: &str) -> Result<JsValue, JsError> {
        let tensor = self.trace.get(name).ok_or_else(|| {
            JsError::new(&format!(
                "this trace has no tensor `{name}`: pass it to run() to capture it (names() lists what was)"
            ))
        })?;
        tensor_to_js(tensor)
    }

    /// A captured tensor as `{ shape, data }`, `data` a view of the engine's memory, not a copy:
    /// internal to the package's Worker, which copies it into the answer it sends before the
    /// engine runs again (a new array per tensor cost a 106-token prompt's answer 0.4 ms, as much
    /// as its pass). The view is good until the trace is freed or the engine's memory grows, which
    /// empties it in the single-thread build (passing the next name in may grow it: the Worker
    /// checks every view's length once it has them all, and copies instead).
    #[wasm_bindgen(js_name = tensorView, unchecked_return_type = "TensorData")]
    pub fn tensor_view(&self, name: &str) -> Result<JsValue, JsError> {
        let tensor = self.trace.get(name).ok_or_else(|| JsError::new(&format!("this trace has no tensor `{name}`")))?;
        // SAFETY: the view borrows `tensor.data`, which lives, unmoved, as long as this trace; the
        // Worker reads it before freeing the trace or running the engine again, and checks that
        // no growth of the memory emptied it meanwhile (see above).
        let data = unsafe { Float32Array::view(tensor.data.as_slice()) };
        to_js(&TensorData { shape: &tensor.shape, data })
    }

    /// Every token of the sequence, reused prefix included.
    pub fn tokens(&self) -> Vec<u32> {
        self.trace.tokens.clone()
    }

    /// Positions this run computed; the others came from the session's cache.
    #[wasm_bindgen(getter)]
    pub fn computed(&self) -> usize {
        self.trace.computed
    }

    /// Next-token probabilities after position `pos` at `temperature`; positions before the last
    /// need the `logits` hook captured.
    pub fn probs(&self, pos: usize, temperature: f32) -> Result<Vec<f32>, JsError> {
        Ok(self.trace.probs(pos, temperature)?)
    }

    /// The (at most) `k` most probable next tokens after the last position, under the filters
    /// of `params` (default: temperature 1, no filter), most probable first and ties by id, as
    /// `[id, prob, id, prob, …]` (the package makes them `TokenProb`s: a flat array crosses into
    /// JS in one copy, where 1,000 objects made here took half a millisecond). Tokens the filters
    /// remove are not listed.
    #[wasm_bindgen(js_name = topKFlat)]
    pub fn top_k_flat(
        &self,
        k: usize,
        #[wasm_bindgen(unchecked_optional_param_type = "SamplingParams")] params: JsValue,
    ) -> Result<Vec<f64>, JsError> {
        let top = most_probable_under(&self.trace.last_logits, &sampling_params(params)?, k)?;
        Ok(top.into_iter().flat_map(|(id, prob)| [id as f64, f64::from(prob)]).collect())
    }

    /// Every captured tensor (f32) plus `tokens` (i64) as a safetensors file.
    #[wasm_bindgen(js_name = toSafetensors)]
    pub fn to_safetensors(&self) -> Result<Vec<u8>, JsError> {
        Ok(self.trace.to_safetensors()?)
    }
}
