//! `Model`: a loaded checkpoint, its tokenizer, where its sessions run, and one-shot runs.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;

use js_sys::{Array, Object, Uint8Array};
use serde::Serialize;
use wasm_bindgen::prelude::*;

use super::session::whole_number;
#[cfg(feature = "gpu")]
use super::Gpu;
use super::{ablation, capture_spec, to_js, Session, Trace};
use crate::checkpoint::snapshot::GgufHeader;
use crate::checkpoint::{GgufStream, LoadOptions};
use crate::error::Error;
use crate::instruments::attribution::{Attribution, LogitLens};
use crate::instruments::patching::{patch, PatchRequest};
use crate::instruments::{repeated_random_tokens, HeadScores};
use crate::tokenizer::{PieceMemo, Tokenizer};
use crate::{Backend, Checkpoint, Hook};

#[wasm_bindgen]
pub struct Model {
    pub(super) checkpoint: Checkpoint,
    /// Where new sessions (and `run`s) run: the CPU, or a copy of the weights on a GPU.
    backend: Backend,
    /// The merges of the pieces `encode` met lately: a prompt being typed is encoded again on
    /// every keystroke, and only the pieces an edit touched need merging.
    pieces: RefCell<PieceMemo>,
    /// The header of the GGUF the model was streamed from, when a snapshot of its weights is to
    /// be written ([`GgufLoader::new`]'s `forSnapshot`).
    pub(super) gguf_header: Option<GgufHeader>,
}

/// What `info()` returns.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ModelInfo {
    /// The model's own name, when its files give one (GGUF `general.name`, config.json's
    /// `_name_or_path`); serialised as `undefined` otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    architecture: &'static str,
    n_layer: usize,
    n_head: usize,
    n_kv_head: usize,
    d_model: usize,
    d_ff: usize,
    vocab_size: usize,
    context_length: usize,
    /// Why the context is shorter than the file's, when the memory budget cut it.
    #[serde(skip_serializing_if = "Option::is_none")]
    context_cut: Option<String>,
    n_params: usize,
    /// Bytes the weights occupy in memory (quantized blocks stay quantized).
    memory_bytes: usize,
    has_tokenizer: bool,
    /// Why a GGUF's vocabulary could not be read, when it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    tokenizer_problem: Option<String>,
    /// Whether [`Model::chat_prompt`] can wrap text in the model's chat template.
    has_chat_template: bool,
    /// The token that ends a sequence (generation stops there), and the one that starts it.
    eos_token_id: Option<u32>,
    bos_token_id: Option<u32>,
    hooks: Vec<String>,
    standard_hooks: Vec<String>,
    attention: &'static str,
    norm_placement: &'static str,
    positions: &'static str,
    has_head: bool,
}

impl Model {
    /// A model on the CPU: loaded, streamed in, or made by a trainer.
    pub(super) fn from_checkpoint(checkpoint: Checkpoint) -> Model {
        Model { checkpoint, backend: Backend::Cpu, pieces: RefCell::default(), gguf_header: None }
    }
}

#[wasm_bindgen]
impl Model {
    /// Parses and checks a checkpoint from its files' bytes by name: one `*.gguf`, or
    /// `config.json`, one `*.safetensors`, and optionally `tokenizer.json` or `vocab.json` +
    /// `merges.txt`.
    pub fn load(
        #[wasm_bindgen(unchecked_param_type = "Record<string, Uint8Array>")] files: &JsValue,
    ) -> Result<Model, JsError> {
        let not_files = || JsError::new("Model.load takes an object mapping file names to Uint8Arrays");
        // Any non-null object will do (not only `instanceof Object`: prototype-less or other realms').
        if !files.is_object() {
            return Err(not_files());
        }
        let mut owned = BTreeMap::new();
        for entry in Object::entries(files.unchecked_ref()).iter() {
            // Object.entries yields [key, value] pairs with string keys.
            let pair = Array::from(&entry);
            let name = pair.get(0).as_string().ok_or_else(not_files)?;
            let bytes = pair
                .get(1)
                .dyn_into::<Uint8Array>()
                .map_err(|_| JsError::new(&format!("file `{name}` must be a Uint8Array of its bytes")))?;
            owned.insert(name, bytes.to_vec());
        }
        let files = owned.iter().map(|(name, bytes)| (name.clone(), bytes.as_slice())).collect();
        Ok(Model::from_checkpoint(Checkpoint::from_files(&files)?))
    }

    /// Hyperparameters, parameter count, whether text can be encoded, and every hook name.
    #[wasm_bindgen(unchecked_return_type = "ModelInfo")]
    pub fn info(&self) -> Result<JsValue, JsError> {
        let model = &self.checkpoint.model;
        let c = &model.config;
        to_js(&ModelInfo {
            name: self.checkpoint.name.clone(),
            architecture: c.arch.name(),
            n_layer: c.n_layer,
            n_head: c.n_head,
            n_kv_head: c.n_kv_head,
            d_model: c.d_model,
            d_ff: c.d_ff,
            vocab_size: c.vocab_size,
            context_length: c.n_ctx,
            context_cut: self.checkpoint.context_cut.clone(),
            n_params: model.weights.n_params(),
            memory_bytes: model.weights.memory_bytes(),
            has_tokenizer: self.checkpoint.tokenizer.is_some(),
            tokenizer_problem: self.checkpoint.tokenizer_problem.clone(),
            has_chat_template: self.checkpoint.tokenizer.as_ref().is_some_and(|t| t.chat_template().is_some()),
            eos_token_id: c.eos_token_id,
            bos_token_id: c.bos_token_id,
            hooks: Hook::offered(c).iter().map(Hook::to_string).collect(),
            standard_hooks: Hook::standard(c).iter().map(Hook::to_string).collect(),
            attention: if c.bidirectional() { "bidirectional" } else { "causal" },
            norm_placement: match c.variant.norm {
                crate::model::NormPlacement::Pre => "pre",
                crate::model::NormPlacement::Post => "post",
            },
            positions: match c.variant.positions {
                crate::model::Positions::Learned => "learned",
                crate::model::Positions::Sinusoidal => "sinusoidal",
                crate::model::Positions::None => "none",
            },
            has_head: c.has_head(),
        })
    }

    /// `userText` wrapped as one user turn of the model's chat template (ChatML for SmolLM2,
    /// default system prompt included), ready to encode; an error when the model has none.
    #[wasm_bindgen(js_name = chatPrompt)]
    pub fn chat_prompt(&self, user_text: &str) -> Result<String, JsError> {
        Ok(self.tokenizer()?.chatml(user_text)?)
    }

    /// Token ids of `text`; an error when the checkpoint has no tokenizer. Pieces of earlier
    /// texts are not merged again ([`Tokenizer::encode_remembering`]; the same ids).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, JsError> {
        let mut pieces = self.pieces.try_borrow_mut().map_err(|_| JsError::new("Model.encode called re-entrantly"))?;
        Ok(self.tokenizer()?.encode_remembering(text, &mut pieces)?)
    }

    /// The text of `ids`, with U+FFFD where bytes do not form whole UTF-8 characters.
    pub fn decode(&self, ids: &[u32]) -> Result<String, JsError> {
        Ok(self.tokenizer()?.decode(ids)?)
    }

    /// One display label per token (control characters and split UTF-8 bytes escaped).
    #[wasm_bindgen(js_name = tokenStrings)]
    pub fn token_strings(&self, ids: &[u32]) -> Result<Vec<String>, JsError> {
        let tokenizer = self.tokenizer()?;
        Ok(ids.iter().map(|&id| tokenizer.token_string(id)).collect::<crate::Result<_>>()?)
    }

    /// A forward pass on a fresh session. `capture`: hook names to record; every hook when
    /// `undefined`, none for `[]`. On the CPU only: a WebGPU model runs through `runAsync`.
    pub fn run(&self, tokens: &[u32], capture: Option<Vec<String>>) -> Result<Trace, JsError> {
        let model = &self.checkpoint.model;
        let spec = capture_spec(capture, &model.config)?;
        Ok(crate::Session::with_backend(Arc::clone(model), &self.backend)?.run(tokens, &spec)?.into())
    }

    /// `run` on either backend: resolves once the GPU's results are read back.
    #[wasm_bindgen(js_name = runAsync, unchecked_return_type = "Promise<Trace>")]
    pub fn run_async(&self, tokens: Vec<u32>, capture: Option<Vec<String>>) -> Result<js_sys::Promise, JsError> {
        Ok(self.session()?.run_async(tokens, capture))
    }

    /// The sentence embedding of `tokens` (`[dModel]`): the final hidden states averaged over the
    /// tokens and scaled to length 1, as sentence-transformers pools all-MiniLM-L6-v2. On the CPU.
    pub fn embed(&self, tokens: &[u32]) -> Result<Vec<f32>, JsError> {
        Ok(crate::Session::new(Arc::clone(&self.checkpoint.model)).embed(tokens)?)
    }

    /// A session on the model's current backend: runs that share a prefix with the previous one
    /// compute only the rest.
    pub fn session(&self) -> Result<Session, JsError> {
        let session = crate::Session::with_backend(Arc::clone(&self.checkpoint.model), &self.backend)?;
        Ok(Session::new(session))
    }

    /// Puts the weights on `gpu`'s device; sessions made from now on run there (existing ones
    /// stay where they are). An error, and the backend unchanged, when the model does not fit.
    #[cfg(feature = "gpu")]
    #[allow(clippy::arc_with_non_send_sync)] // single-thread build only (see bindings/gpu.rs)
    #[wasm_bindgen(js_name = useGpu)]
    pub fn use_gpu(&mut self, gpu: &Gpu) -> Result<(), JsError> {
        let on_gpu = crate::gpu::GpuModel::new(gpu.shared(), Arc::clone(&self.checkpoint.model))?;
        self.backend = Backend::Gpu(Arc::new(on_gpu));
        Ok(())
    }

    /// Each head's previous-token, first-token, duplicate-token and induction score on `trace`'s
    /// tokens (definitions: `crate::instruments`); `trace` must have captured every layer's
    /// `hook_pattern`.
    #[wasm_bindgen(js_name = headScores, unchecked_return_type = "HeadScores")]
    pub fn head_scores(&self, trace: &Trace) -> Result<JsValue, JsError> {
        let s = HeadScores::from_trace(trace.inner(), &self.checkpoint.model.config)?;
        to_js(&HeadScoresJs {
            previous_token: &s.previous_token,
            first_token: &s.first_token,
            duplicate_token: &s.duplicate_token,
            induction: &s.induction,
        })
    }

    /// The head detectors' default sequence: min(50, context / 2) ids drawn with the engine's
    /// seeded generator, then the same ids again.
    #[wasm_bindgen(js_name = repeatedRandomTokens)]
    pub fn repeated_random_tokens(&self, seed: f64) -> Result<Vec<u32>, JsError> {
        Ok(repeated_random_tokens(&self.checkpoint.model.config, whole_number(seed, "seed")?))
    }

    /// Activation patching on the CPU (definitions: `crate::instruments::patching`): the clean
    /// and corrupted prompts (same length), the answer and wrong token; `onProgress(done, total)`
    /// is called after each of its runs, and returning `false` from it stops the sweep (an error
    /// saying "cancelled").
    #[wasm_bindgen(unchecked_return_type = "PatchScores")]
    pub fn patch(
        &self,
        clean: &[u32],
        corrupt: &[u32],
        answer: f64,
        wrong: f64,
        #[wasm_bindgen(js_name = onProgress)] on_progress: Option<js_sys::Function>,
    ) -> Result<JsValue, JsError> {
        let (answer, wrong) = (token_id(answer, "answer")?, token_id(wrong, "wrong")?);
        let request = PatchRequest { clean, corrupt, answer, wrong };
        let s = patch(&self.checkpoint.model, &request, &mut progress(on_progress))?;
        to_js(&PatchScoresJs {
            clean_diff: s.clean_diff,
            corrupt_diff: s.corrupt_diff,
            resid_pre: &s.resid_pre,
            heads: &s.heads,
        })
    }

    /// The logit lens on the CPU at positions `first..` of `tokens` (`k` tokens per layer and
    /// position), following `target` too when given; `ablate` and `ablateMean` as
    /// `Session.setAblation`; `onProgress` as `patch`'s (its steps: the run, then each layer).
    #[wasm_bindgen(js_name = logitLens, unchecked_return_type = "LogitLens")]
    #[allow(clippy::too_many_arguments)] // the JS call's optional arguments, each named
    pub fn logit_lens(
        &self,
        tokens: &[u32],
        first: f64,
        k: f64,
        target: Option<f64>,
        ablate: Option<Vec<String>>,
        #[wasm_bindgen(js_name = ablateMean)] ablate_mean: Option<bool>,
        #[wasm_bindgen(js_name = onProgress)] on_progress: Option<js_sys::Function>,
    ) -> Result<JsValue, JsError> {
        let model = &self.checkpoint.model;
        let ablation = ablation(&ablate.unwrap_or_default(), ablate_mean, &model.config)?;
        let first = usize::try_from(whole_number(first, "first")?).unwrap_or(usize::MAX);
        let k = usize::try_from(whole_number(k, "k")?).unwrap_or(usize::MAX);
        let target = target.map(|t| token_id(t, "target")).transpose()?;
        let lens = LogitLens::compute(model, &ablation, tokens, first, k, target, &mut progress(on_progress))?;
        let pairs = |rows: &[(u32, f32)]| rows.iter().map(|&(id, prob)| TokenProbJs { id, prob }).collect();
        to_js(&LogitLensJs {
            first: lens.first,
            top: lens.top.iter().map(|layer| layer.iter().map(|best| pairs(best)).collect()).collect(),
            final_top: &lens.final_top,
            final_top_prob: &lens.final_top_prob,
            target: lens.target,
            target_prob: lens.target_prob.as_deref(),
        })
    }

    /// Direct logit attribution on the CPU at `position` (default: the last) for
    /// `logit[answer] − logit[wrong]` (default: the model's first and second choice there).
    #[wasm_bindgen(unchecked_return_type = "Attribution")]
    pub fn attribution(
        &self,
        tokens: &[u32],
        position: Option<f64>,
        answer: Option<f64>,
        wrong: Option<f64>,
        ablate: Option<Vec<String>>,
        #[wasm_bindgen(js_name = ablateMean)] ablate_mean: Option<bool>,
    ) -> Result<JsValue, JsError> {
        let model = &self.checkpoint.model;
        let ablation = ablation(&ablate.unwrap_or_default(), ablate_mean, &model.config)?;
        let position = position
            .map(|p| whole_number(p, "position").map(|p| usize::try_from(p).unwrap_or(usize::MAX)))
            .transpose()?;
        let answer = answer.map(|t| token_id(t, "answer")).transpose()?;
        let wrong = wrong.map(|t| token_id(t, "wrong")).transpose()?;
        let a = Attribution::compute(model, &ablation, tokens, position, answer, wrong)?;
        to_js(&AttributionJs {
            position: a.position,
            answer: a.answer,
            wrong: a.wrong,
            logit_diff: a.logit_diff,
            embed: a.embed,
            pos_embed: a.pos_embed,
            heads: &a.heads,
            attn_bias: &a.attn_bias,
            mlps: &a.mlps,
            final_bias: a.final_bias,
            total: a.total,
        })
    }

    /// Sessions made from now on run on the CPU (the GPU's copy is freed with its last session).
    #[wasm_bindgen(js_name = useCpu)]
    pub fn use_cpu(&mut self) {
        self.backend = Backend::Cpu;
    }

    /// Where new sessions run: `"cpu"` or `"webgpu"`.
    #[wasm_bindgen(unchecked_return_type = "'cpu' | 'webgpu'")]
    pub fn backend(&self) -> String {
        match self.backend {
            Backend::Cpu => "cpu".into(),
            #[cfg(feature = "gpu")]
            Backend::Gpu(_) => "webgpu".into(),
        }
    }
}

/// What `headScores()` returns: `[layer][head]` per detector.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct HeadScoresJs<'a> {
    previous_token: &'a [Vec<f32>],
    first_token: &'a [Vec<f32>],
    duplicate_token: &'a [Vec<f32>],
    induction: &'a [Vec<f32>],
}

/// What `patch()` returns.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PatchScoresJs<'a> {
    clean_diff: f32,
    corrupt_diff: f32,
    resid_pre: &'a [Vec<f32>],
    heads: &'a [Vec<f32>],
}

#[derive(Serialize)]
struct TokenProbJs {
    id: u32,
    prob: f32,
}

/// What `logitLens()` returns.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LogitLensJs<'a> {
    first: usize,
    top: Vec<Vec<Vec<TokenProbJs>>>,
    final_top: &'a [u32],
    final_top_prob: &'a [Vec<f32>],
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    target_prob: Option<&'a [Vec<f32>]>,
}

/// What `attribution()` returns.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AttributionJs<'a> {
    position: usize,
    answer: u32,
    wrong: u32,
    logit_diff: f32,
    embed: f32,
    pos_embed: f32,
    heads: &'a [Vec<f32>],
    attn_bias: &'a [f32],
    mlps: &'a [f32],
    final_bias: f32,
    total: f32,
}

/// A JS `onProgress(done, total)` as the engine's progress callback: only an explicit `false`
/// stops; a callback that throws does not stop a computation half-way.
fn progress(on_progress: Option<js_sys::Function>) -> impl FnMut(usize, usize) -> bool {
    move |done, total| match &on_progress {
        Some(f) => {
            f.call2(&JsValue::NULL, &(done as f64).into(), &(total as f64).into()).map_or(true, |r| r != JsValue::FALSE)
        }
        None => true,
    }
}

/// A token id from JS: a whole number below 2^32 (the model checks its vocabulary).
fn token_id(value: f64, what: &str) -> Result<u32, JsError> {
    u32::try_from(whole_number(value, what)?).map_err(|_| JsError::new(&format!("{what} {value} is not a token id")))
}

impl Model {
    fn tokenizer(&self) -> Result<&Tokenizer, Error> {
        self.checkpoint.tokenizer()
    }
}

/// A `.gguf` model loaded from its bytes as they arrive (a download's body, `File.stream()`):
/// each piece goes into the weights and is let go, so the model is in memory once rather than
/// once as a file and again as weights. `push` the pieces in order, then `finish`.
#[wasm_bindgen]
pub struct GgufLoader {
    /// `None` once `finish` has taken it.
    stream: Option<GgufStream>,
}

#[wasm_bindgen]
impl GgufLoader {
    /// For a file of `fileBytes` bytes (its Content-Length or `File.size`). `forSnapshot` keeps
    /// the file's header (a few MB) so that the model can write a snapshot of its weights
    /// (`Model.snapshotStart`).
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(js_name = fileBytes)] file_bytes: f64,
        #[wasm_bindgen(js_name = forSnapshot)] for_snapshot: bool,
    ) -> Result<GgufLoader, JsError> {
        let file_bytes = whole_number(file_bytes, "fileBytes")?;
        let stream = GgufStream::new(file_bytes, &LoadOptions::default())?;
        Ok(GgufLoader { stream: Some(if for_snapshot { stream.keep_header() } else { stream }) })
    }

    /// The file's next bytes. After an error (not GGUF, a bad header, too large, more bytes than
    /// announced) the loader takes no more.
    pub fn push(&mut self, piece: &[u8]) -> Result<(), JsError> {
        Ok(self.stream.as_mut().ok_or_else(finished)?.push(piece)?)
    }

    /// The model, once all the file's bytes have come; it runs on the CPU.
    pub fn finish(&mut self) -> Result<Model, JsError> {
        let (checkpoint, gguf_header) = self.stream.take().ok_or_else(finished)?.finish_keeping_header()?;
        Ok(Model { gguf_header, ..Model::from_checkpoint(checkpoint) })
    }
}

fn finished() -> JsError {
    JsError::new("this GgufLoader has finished; make a new one")
}
