//! `Session`: a KV cache with prefix reuse, one-token steps and step-wise sampling.

use std::sync::Arc;

use wasm_bindgen::prelude::*;

use super::{capture_spec, sampling_params, Trace};
use crate::sample::Sampler;

#[wasm_bindgen]
pub struct Session {
    session: crate::Session,
    /// Created by the first `sampleNext`; its random stream then runs on across calls until a
    /// call passes a new seed or the session is reset.
    sampler: Option<Sampler>,
}

/// The seed a session samples with until told otherwise, so unseeded runs are reproducible too.
const DEFAULT_SEED: u64 = 0;

impl Session {
    pub(super) fn new(model: Arc<crate::Model>) -> Session {
        Session { session: crate::Session::new(model), sampler: None }
    }
}

#[wasm_bindgen]
impl Session {
    /// Runs `tokens`, recomputing only what differs from the previous run's tokens. `capture` as
    /// in `Model.run`.
    pub fn run(&mut self, tokens: &[u32], capture: Option<Vec<String>>) -> Result<Trace, JsError> {
        let spec = capture_spec(capture, self.session.config())?;
        Ok(self.session.run(tokens, &spec)?.into())
    }

    /// Appends one token, recording the hooks of the last run.
    pub fn step(&mut self, token: u32) -> Result<(), JsError> {
        self.session.step(token)?;
        Ok(())
    }

    /// Draws the next token from the last logits, appends it and returns it. The random stream
    /// continues from the previous call; `seed` restarts it (a fresh session starts at seed 0).
    #[wasm_bindgen(js_name = sampleNext)]
    pub fn sample_next(
        &mut self,
        #[wasm_bindgen(unchecked_param_type = "SamplingParams")] params: JsValue,
        seed: Option<f64>,
    ) -> Result<u32, JsError> {
        let params = sampling_params(params)?;
        let sampler = match (&mut self.sampler, seed) {
            (Some(sampler), None) => {
                sampler.set_params(params)?;
                sampler
            }
            (slot, seed) => slot.insert(Sampler::new(params, seed.map_or(Ok(DEFAULT_SEED), whole_number)?)?),
        };
        Ok(self.session.sample_next(sampler)?)
    }

    /// Every token in the cache, in order.
    pub fn tokens(&self) -> Vec<u32> {
        self.session.tokens().to_vec()
    }

    /// Back to the state of a new session: no tokens, sampling from seed 0.
    pub fn reset(&mut self) {
        self.session.reset();
        self.sampler = None;
    }

    /// Logits predicting the token after the last one (`[vocabSize]`; zeros before any run).
    #[wasm_bindgen(js_name = lastLogits)]
    pub fn last_logits(&self) -> Vec<f32> {
        self.session.last_logits().to_vec()
    }
}

/// A JS number that must be an integer JS can represent exactly (0 ..= 2^53 − 1).
fn whole_number(seed: f64) -> Result<u64, JsError> {
    const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;
    if seed.fract() == 0.0 && (0.0..=MAX_SAFE_INTEGER).contains(&seed) {
        Ok(seed as u64)
    } else {
        Err(JsError::new(&format!("seed {seed} must be a whole number from 0 to 2^53 − 1")))
    }
}
