//! `Trainer`: a byte-level GPT-2-style model trained in the page or in Node (`crate::train`),
//! a step batch at a time so that the caller (a Worker) can report, pause and show the model
//! between batches.

use std::collections::BTreeMap;

use serde::Deserialize;
use wasm_bindgen::prelude::*;

use super::{to_js, Model};
use crate::train::recipe::{self, Corpus, Recipe, RunState, Shape};
use crate::Checkpoint;

#[wasm_bindgen]
pub struct Trainer {
    trainer: crate::train::Trainer,
    shape: Shape,
    recipe: Recipe,
    corpus: Option<Corpus>,
    state: RunState,
}

/// `new Trainer(shape, recipe?)`'s arguments.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ShapeArg {
    n_layer: usize,
    n_head: usize,
    d_model: usize,
    n_ctx: usize,
    #[serde(default)]
    sinusoidal: bool,
}

fn from_js<T: serde::de::DeserializeOwned>(value: JsValue, what: &str) -> Result<T, JsError> {
    serde_wasm_bindgen::from_value(value).map_err(|e| {
        let message =
            JsValue::from(e).dyn_into::<js_sys::Error>().map(|e| String::from(e.message())).unwrap_or_default();
        JsError::new(&format!("{what}: {message}"))
    })
}

#[wasm_bindgen]
impl Trainer {
    /// A new model of `shape` (`{ nLayer, nHead, dModel, nCtx, sinusoidal? }`), initialised as
    /// GPT-2 is from `recipe.seed`; `recipe` (any of `{ steps, batch, lr, minLr, warmup, adamw,
    /// clip, evalEvery, evalBatches, seed }`) defaults to nanoGPT's character-level Shakespeare.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "TrainShape")] shape: JsValue,
        #[wasm_bindgen(unchecked_param_type = "Partial<TrainRecipe> | undefined")] recipe: JsValue,
    ) -> Result<Trainer, JsError> {
        let s: ShapeArg = from_js(shape, "the shape must look like { nLayer, nHead, dModel, nCtx, sinusoidal? }")?;
        let shape = Shape {
            n_layer: s.n_layer,
            n_head: s.n_head,
            d_model: s.d_model,
            n_ctx: s.n_ctx,
            sinusoidal: s.sinusoidal,
        };
        let recipe: Recipe =
            if recipe.is_undefined() || recipe.is_null() { Recipe::default() } else { from_js(recipe, "the recipe")? };
        let trainer = crate::train::Trainer::new_random(&shape.config()?, recipe.seed)?;
        Ok(Trainer { trainer, shape, recipe, corpus: None, state: RunState::default() })
    }

    /// The text to learn, as bytes; the last `valFraction` is held out for validation.
    #[wasm_bindgen(js_name = setText)]
    pub fn set_text(
        &mut self,
        bytes: &[u8],
        #[wasm_bindgen(js_name = valFraction)] val_fraction: f32,
    ) -> Result<(), JsError> {
        self.corpus = Some(Corpus::from_bytes(bytes, val_fraction, self.shape.n_ctx)?);
        Ok(())
    }

    /// Runs up to `steps` more steps (never past `recipe.steps`) and returns each step's progress
    /// (`TrainProgress[]`; `valLoss` on the steps that evaluate).
    #[wasm_bindgen(unchecked_return_type = "TrainProgress[]")]
    pub fn train(&mut self, steps: u32) -> Result<JsValue, JsError> {
        let corpus = self.corpus.as_ref().ok_or_else(|| JsError::new("no text to learn: call setText first"))?;
        let until = self.state.step.saturating_add(steps as usize);
        let mut seen = Vec::new();
        let mut on_step = |p: &recipe::Progress| {
            seen.push(*p);
            p.step < until
        };
        let now = || js_sys::Date::now() / 1000.0;
        recipe::run(&mut self.trainer, corpus, &self.recipe, &mut self.state, &now, &mut on_step)?;
        to_js(&seen)
    }

    /// Steps done, every training loss and the validation losses (`[step, loss]` pairs).
    #[wasm_bindgen(unchecked_return_type = "TrainState")]
    pub fn state(&self) -> Result<JsValue, JsError> {
        // The batch generator's 64-bit state stays here (JS numbers hold 53 bits).
        #[derive(serde::Serialize)]
        #[serde(rename_all = "camelCase")]
        struct View<'a> {
            step: usize,
            losses: &'a [f32],
            val_losses: &'a [(usize, f32)],
        }
        let s = &self.state;
        to_js(&View { step: s.step, losses: &s.losses, val_losses: &s.val_losses })
    }

    #[wasm_bindgen(unchecked_return_type = "TrainRecipe")]
    pub fn recipe(&self) -> Result<JsValue, JsError> {
        to_js(&self.recipe)
    }

    /// The model as it is now, for every view (its byte tokenizer included).
    pub fn model(&self) -> Result<Model, JsError> {
        let model = self.trainer.to_model()?;
        let checkpoint = Checkpoint {
            model,
            tokenizer: Some(crate::tokenizer::Tokenizer::Bytes),
            tokenizer_problem: None,
            name: Some("trained in the page".into()),
            context_cut: None,
        };
        Ok(Model::from_checkpoint(checkpoint))
    }

    /// The model as a Hugging Face GPT-2 folder: `{ 'config.json', 'model.safetensors' }`, which
    /// `Model.load`, the CLI and `transformers` read.
    #[wasm_bindgen(unchecked_return_type = "Record<string, Uint8Array>")]
    pub fn files(&self) -> Result<JsValue, JsError> {
        let files: BTreeMap<&str, Vec<u8>> = [
            ("config.json", self.trainer.config_json().into_bytes()),
            ("model.safetensors", self.trainer.to_safetensors()?),
        ]
        .into_iter()
        .collect();
        let object = js_sys::Object::new();
        for (name, bytes) in files {
            js_sys::Reflect::set(&object, &name.into(), &js_sys::Uint8Array::from(bytes.as_slice()))
                .map_err(|_| JsError::new("cannot build the files object"))?;
        }
        Ok(object.into())
    }

    /// Parameters of the model.
    #[wasm_bindgen(js_name = paramCount)]
    pub fn param_count(&self) -> usize {
        self.trainer.layout().len
    }
}
