//! A session: one model, its KV cache and the captured values of every position it has run.
//!
//! Running a sequence that shares a prefix with the previous one recomputes only the new suffix:
//! the prefix's keys, values and captured tensors (attention rows, LayerNorm statistics, …) are
//! causal, so they cannot change. That is what makes "update on every keystroke" cheap.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::formats::limits::CAPTURE_BUDGET;
#[cfg(feature = "gpu")]
use crate::gpu::{GpuPass, GPU_CHUNK};
use crate::instruments::{Ablation, Replacements};
use crate::kernels::attention::{attend, HeadCache};
use crate::kernels::largest;
use crate::kernels::pool::{self, run_pass};
use crate::model::forward::{
    every_row_logits, forward_chunk, grow_by_steps, Activations, ChunkInput, Edits, KvCache, Recorder,
};
use crate::model::{Config, Model};
use crate::sample::Sampler;
use crate::trace::{pooled_bin, CaptureSpec, Hook, Layout, Tensor, Trace, POOLED_CELLS};

pub struct Session {
    model: Arc<Model>,
    engine: Engine,
    /// Tokens whose keys and values are in the cache, in order.
    tokens: Vec<u32>,
    captures: Captures,
    /// `[V]`: logits after the last token of `tokens`.
    last_logits: Vec<f32>,
    /// Most bytes a run's capture may take ([`CAPTURE_BUDGET`] unless set).
    capture_budget: u64,
    /// Heads and MLPs ablated in every run ([`Session::set_ablation`]), and the values they take:
    /// zeros, or their means over `tokens` (recomputed when the prompt changes).
    ablation: Ablation,
    replacements: Replacements,
    /// The padding mask of the cached sequence (`run_padded`), `None` when every token is read.
    attended: Option<Vec<bool>>,
}

/// Where the forward pass runs, with the state it keeps between runs.
enum Engine {
    Cpu {
        acts: Box<Activations>,
        kv: KvCache,
    },
    /// Buffers, KV cache and planned dispatches on a device (`crate::gpu`).
    #[cfg(feature = "gpu")]
    Gpu(Box<GpuPass>),
}

impl Session {
    /// A session on the CPU.
    pub fn new(model: Arc<Model>) -> Session {
        let c = &model.config;
        Session {
            engine: Engine::Cpu { acts: Box::new(Activations::new(c)), kv: KvCache::new(c) },
            tokens: Vec::new(),
            captures: Captures::new(&CaptureSpec::none()),
            last_logits: vec![0.0; if c.has_head() { c.vocab_size } else { 0 }],
            capture_budget: CAPTURE_BUDGET,
            ablation: Ablation::none(),
            replacements: Replacements::default(),
            attended: None,
            model,
        }
    }

    /// Sets the most bytes a run's capture may take; a run (or step) whose capture would need
    /// more is refused with [`Error::CaptureOverBudget`] before anything changes.
    pub fn set_capture_budget(&mut self, bytes: u64) {
        self.capture_budget = bytes;
    }

    /// A session on `backend`: the CPU, or a model already on a GPU (its buffers are made here,
    /// once; later runs reuse them).
    pub fn with_backend(model: Arc<Model>, backend: &Backend) -> Result<Session> {
        match backend {
            Backend::Cpu => Ok(Session::new(model)),
            #[cfg(feature = "gpu")]
            Backend::Gpu(on_gpu) => {
                if !Arc::ptr_eq(&on_gpu.model, &model) {
                    return Err(Error::InvalidArgument("the GPU holds another model than the one given".into()));
                }
                let mut session = Session::new(model);
                session.engine = Engine::Gpu(Box::new(GpuPass::new(Arc::clone(on_gpu))?));
                Ok(session)
            }
        }
    }

    /// `"cpu"` or `"gpu"`: where this session's passes run.
    pub fn backend_name(&self) -> &'static str {
        match self.engine {
            Engine::Cpu { .. } => "cpu",
            #[cfg(feature = "gpu")]
            Engine::Gpu(_) => "gpu",
        }
    }

    /// The GPU state of a GPU session (to profile its kernels), `None` on the CPU.
    #[cfg(feature = "gpu")]
    pub fn gpu_pass_mut(&mut self) -> Option<&mut GpuPass> {
        match &mut self.engine {
            Engine::Gpu(pass) => Some(pass),
            Engine::Cpu { .. } => None,
        }
    }

    pub fn model(&self) -> &Model {
        &self.model
    }

    pub fn config(&self) -> &Config {
        &self.model.config
    }

    /// Ablates `ablation`'s heads and MLPs in every run from now on ([`crate::instruments`]). A
    /// change empties the cache, so the next run computes every position with the new setting
    /// (the same as a fresh session with it). The GPU pass zero-ablates heads below 32 of each
    /// layer (a bit mask); MLPs, other heads and mean-ablation are refused there.
    pub fn set_ablation(&mut self, ablation: Ablation) -> Result<()> {
        // An ablation made for another model could name heads this one lacks.
        let with = ablation.with();
        let ablation = Ablation::new(ablation.heads_iter(), ablation.mlps_iter(), self.config())?.replaced_by(with);
        #[cfg(feature = "gpu")]
        if let Engine::Gpu(_) = &self.engine {
            if let Some((layer, head)) = ablation.heads_iter().find(|&(_, h)| h >= crate::gpu::MAX_GPU_ABLATED_HEAD) {
                return Err(Error::InvalidArgument(format!(
                    "head {layer}.{head} cannot be ablated on the GPU (heads below {} can); use the CPU backend",
                    crate::gpu::MAX_GPU_ABLATED_HEAD
                )));
            }
            if let Some(layer) = ablation.mlps_iter().next() {
                return Err(Error::InvalidArgument(format!(
                    "MLP {layer}.mlp cannot be ablated on the GPU (heads can); use the CPU backend"
                )));
            }
            if ablation.needs_means() {
                return Err(Error::InvalidArgument(
                    "mean-ablation runs on the CPU backend (the GPU zero-ablates heads)".into(),
                ));
            }
        }
        if ablation != self.ablation {
            self.reset();
            // Means are made by the next run, from its prompt.
            self.replacements = Replacements::zeros(&ablation, self.config());
            self.ablation = ablation;
        }
        Ok(())
    }

    /// The heads this session zero-ablates.
    pub fn ablation(&self) -> &Ablation {
        &self.ablation
    }

    /// Forgets every cached token and captured value; buffers stay allocated.
    pub fn reset(&mut self) {
        self.truncate(0);
        self.last_logits.fill(0.0);
    }

    /// Keeps every layer's queries from the next run on (or stops), so that [`Session::head_pattern`]
    /// can remake any head's whole map after a run that captured only pooled ones. They cost
    /// `n_layer · T · H · d_head` floats, counted in the capture budget. Turning them on empties
    /// the cache (the cached positions' queries were not kept). On the CPU backend.
    pub fn keep_queries(&mut self, keep: bool) -> Result<()> {
        if keep && self.backend_name() != "cpu" {
            return Err(Error::InvalidArgument("queries are kept on the CPU backend only".into()));
        }
        if keep != self.captures.keep_queries {
            self.truncate(0);
            self.captures.set_keep_queries(keep, self.model.config.n_layer);
        }
        Ok(())
    }

    /// Head `head` of layer `layer`'s attention probabilities over the cached tokens, `[T, T]`
    /// (row = query), remade from the kept queries and the KV cache by the forward pass's own
    /// kernel: the same bits as that head's rows of `hook_pattern`, for one head's memory.
    pub fn head_pattern(&self, layer: usize, head: usize) -> Result<Tensor> {
        let c = self.config();
        if layer >= c.n_layer || head >= c.n_head {
            return Err(Error::InvalidArgument(format!(
                "head {layer}.{head} is not in this model ({} layers of {} heads)",
                c.n_layer, c.n_head
            )));
        }
        let (t, hd, q_dim, kv_dim) = (self.tokens.len(), c.head_dim(), c.q_dim(), c.kv_dim());
        let queries = match self.captures.queries.get(layer) {
            Some(queries) if queries.len() == t * q_dim => queries,
            _ => {
                return Err(Error::InvalidArgument(
                    "a head's pattern is remade from kept queries: call keep_queries(true) before the run".into(),
                ))
            }
        };
        #[allow(irrefutable_let_patterns)] // without the `gpu` feature the CPU is the only engine
        let Engine::Cpu { kv, .. } = &self.engine
        else {
            return Err(Error::InvalidArgument("queries are kept on the CPU backend only".into()));
        };
        let need = (t as u64).saturating_mul(t as u64).saturating_mul(4);
        if need > self.capture_budget {
            let budget = self.capture_budget;
            return Err(Error::CaptureOverBudget { tokens: t, hooks: 1, need, patterns: need, budget });
        }
        let kv_col = head / (c.n_head / c.n_kv_head) * hd;
        let cache = HeadCache { keys: &kv.k[layer][kv_col..], values: &kv.v[layer][kv_col..], stride: kv_dim };
        let (divisor, attended) = (c.score_divisor(), self.attended.as_deref());
        let (mut data, mut weighted) = (vec![0.0; t * t], vec![0.0; t * hd]);
        pool::for_each_chunk_pair(t, (&mut data, t), (&mut weighted, hd), |p, probs, out| {
            let q = &queries[p * q_dim + head * hd..][..hd];
            attend(q, &cache, c.visible_keys(layer, p, t), attended, divisor, probs, out);
        });
        Ok(Tensor { shape: vec![t, t], data })
    }

    /// Tokens currently in the cache.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// Logits after the last cached token (`[V]`); empty-session value is all zeros.
    pub fn last_logits(&self) -> &[f32] {
        &self.last_logits
    }

    /// Runs `tokens`, reusing the longest prefix shared with what the session ran before, and
    /// returns the trace of the whole sequence with the hooks in `spec`. Invalid input is rejected
    /// before the session changes, so an error loses nothing. On a GPU this waits for the device
    /// (natively); in the browser a GPU session runs only through [`Session::run_async`].
    pub fn run(&mut self, tokens: &[u32], spec: &CaptureSpec) -> Result<Trace> {
        self.check_blocking()?;
        let keep = self.begin_run(tokens, spec)?;
        self.extend_blocking(&tokens[keep..])?;
        Ok(self.trace(tokens.len() - keep))
    }

    /// Runs a padded sequence: keys where `attended` is false are read by no query (padding in a
    /// batch), and a query with nothing to read gets zeros. Always a full run on the CPU.
    pub fn run_padded(&mut self, tokens: &[u32], attended: &[bool], spec: &CaptureSpec) -> Result<Trace> {
        if attended.len() != tokens.len() {
            return Err(Error::InvalidArgument(format!(
                "the padding mask has {} flags for {} tokens",
                attended.len(),
                tokens.len()
            )));
        }
        if self.backend_name() != "cpu" {
            return Err(Error::InvalidArgument("padded runs are made on the CPU backend".into()));
        }
        self.check_tokens(tokens, 0, spec)?;
        self.truncate(0);
        self.captures.narrow_to(spec);
        self.attended = Some(attended.to_vec());
        self.extend_cpu(tokens);
        Ok(self.trace(tokens.len()))
    }

    /// [`Session::run`] for callers that must not block: on a GPU it awaits the readback.
    pub async fn run_async(&mut self, tokens: &[u32], spec: &CaptureSpec) -> Result<Trace> {
        let keep = self.begin_run(tokens, spec)?;
        self.extend(&tokens[keep..]).await?;
        Ok(self.trace(tokens.len() - keep))
    }

    /// Validates a run and drops what it will not reuse; returns how many cached tokens it keeps.
    fn begin_run(&mut self, tokens: &[u32], spec: &CaptureSpec) -> Result<usize> {
        self.check_tokens(tokens, 0, spec)?;
        let mut keep = common_prefix(&self.tokens, tokens);
        if self.ablation.needs_means() && !(keep == tokens.len() && keep == self.tokens.len()) {
            // Means over a new prompt change every position: measured on it without ablation
            // (before anything here changes, so an error loses nothing), then all recomputed.
            let names: Vec<String> = self.ablation.mean_hooks().iter().map(Hook::to_string).collect();
            let unablated =
                Session::new(Arc::clone(&self.model)).run(tokens, &CaptureSpec::from_names(&names, self.config())?)?;
            self.replacements = Replacements::means(&self.ablation, &unablated, self.config());
            keep = 0;
        }
        if !spec.is_subset(&self.captures.spec) {
            // Hooks the cached prefix did not record: only a full recompute can fill them.
            keep = 0;
        }
        if self.config().bidirectional() && !(keep == tokens.len() && keep == self.tokens.len()) {
            // Every position reads every other: any change recomputes the whole sequence.
            keep = 0;
        }
        // The last token always runs unless the sequence is exactly what is cached: its logits
        // (the next-token prediction) are kept only for the end of the cached sequence.
        if !(keep == tokens.len() && keep == self.tokens.len()) {
            keep = keep.min(tokens.len() - 1);
        }
        // A padded run's cache holds states computed with its mask: nothing of it is reused.
        if self.attended.take().is_some() {
            keep = 0;
        }
        keep = self.captures.reusable(spec, keep, self.tokens.len(), tokens.len());
        self.truncate(keep);
        self.captures.narrow_to(spec);
        Ok(keep)
    }

    /// Appends one token (one decode step) and returns the logits that predict the next one.
    /// Hooks being captured in this session keep being recorded.
    pub fn step(&mut self, token: u32) -> Result<&[f32]> {
        self.check_blocking()?;
        if self.ablation.needs_means() || self.config().bidirectional() {
            // A new token moves the means: the whole sequence again.
            let (tokens, spec) = ([self.tokens.as_slice(), &[token]].concat(), self.captures.spec.clone());
            self.run(&tokens, &spec)?;
            return Ok(&self.last_logits);
        }
        self.check_tokens(&[token], self.tokens.len(), &self.captures.spec)?;
        self.extend_blocking(&[token])?;
        Ok(&self.last_logits)
    }

    /// [`Session::step`] without blocking.
    pub async fn step_async(&mut self, token: u32) -> Result<&[f32]> {
        if self.ablation.needs_means() || self.config().bidirectional() {
            let (tokens, spec) = ([self.tokens.as_slice(), &[token]].concat(), self.captures.spec.clone());
            self.run_async(&tokens, &spec).await?;
            return Ok(&self.last_logits);
        }
        self.check_tokens(&[token], self.tokens.len(), &self.captures.spec)?;
        self.extend(&[token]).await?;
        Ok(&self.last_logits)
    }

    /// Samples the token that follows the cached ones from their last logits and appends it: one
    /// step of generation.
    pub fn sample_next(&mut self, sampler: &mut Sampler) -> Result<u32> {
        self.check_generates()?;
        if self.tokens.is_empty() {
            return Err(Error::InvalidArgument("nothing to continue: run a prompt before sampling".into()));
        }
        let token = sampler.sample(&self.last_logits)?;
        self.step(token)?;
        Ok(token)
    }

    /// [`Session::sample_next`] without blocking.
    pub async fn sample_next_async(&mut self, sampler: &mut Sampler) -> Result<u32> {
        self.check_generates()?;
        if self.tokens.is_empty() {
            return Err(Error::InvalidArgument("nothing to continue: run a prompt before sampling".into()));
        }
        let token = sampler.sample(&self.last_logits)?;
        self.step_async(token).await?;
        Ok(token)
    }

    /// Generates up to `max_new` tokens after `prompt`, stopping early after `stop` (e.g. EOS).
    /// `on_token` sees each token as it is chosen (for streaming) and may return false to stop.
    pub fn generate(
        &mut self,
        prompt: &[u32],
        max_new: usize,
        sampler: &mut Sampler,
        stop: Option<u32>,
        mut on_token: impl FnMut(u32) -> bool,
    ) -> Result<Vec<u32>> {
        self.check_generates()?;
        let n_ctx = self.model.config.n_ctx;
        match prompt.len().checked_add(max_new) {
            Some(len) if len <= n_ctx => {}
            len => return Err(Error::ContextOverflow { len: len.unwrap_or(usize::MAX), n_ctx }),
        }
        self.run(prompt, &CaptureSpec::none())?;
        let mut out = Vec::with_capacity(max_new);
        for i in 0..max_new {
            let token = sampler.sample(&self.last_logits)?;
            out.push(token);
            if !on_token(token) || Some(token) == stop {
                break;
            }
            if i + 1 < max_new {
                self.step(token)?;
            }
        }
        Ok(out)
    }

    /// Checks `tokens` as a continuation of the first `after` cached tokens.
    /// Text comes only from a causal model with an LM head.
    fn check_generates(&self) -> Result<()> {
        let c = self.config();
        if !c.has_head() || c.bidirectional() {
            return Err(Error::InvalidArgument(format!(
                "this {} model is an encoder: it gives hidden states and embeddings, not next tokens",
                c.arch.name()
            )));
        }
        Ok(())
    }

    fn check_tokens(&self, tokens: &[u32], after: usize, spec: &CaptureSpec) -> Result<()> {
        let c = &self.model.config;
        if tokens.is_empty() {
            return Err(Error::EmptyInput);
        }
        if after + tokens.len() > c.n_ctx {
            return Err(Error::ContextOverflow { len: after + tokens.len(), n_ctx: c.n_ctx });
        }
        if let Some(&id) = tokens.iter().find(|&&id| id as usize >= c.vocab_size) {
            return Err(Error::TokenOutOfRange { id, vocab: c.vocab_size });
        }
        #[cfg(feature = "gpu")]
        if let Engine::Gpu(_) = &self.engine {
            let standard = CaptureSpec::standard(c);
            let on_gpu = |hook| standard.contains(hook) || matches!(hook, Hook::AttnPatternPooled(_));
            if let Some(hook) = spec.hooks().find(|&hook| !on_gpu(hook)) {
                return Err(Error::InvalidArgument(format!(
                    "`{hook}` is recorded on the CPU backend only (the GPU records the standard hooks and pooled patterns)"
                )));
            }
        }
        let queries = if self.captures.keep_queries { c.n_layer.saturating_mul(c.q_dim()) } else { 0 };
        check_capture(spec, queries, c, after + tokens.len(), self.capture_budget)
    }

    /// Forgets everything after the first `n` tokens.
    fn truncate(&mut self, n: usize) {
        self.tokens.truncate(n);
        self.captures.truncate(&self.model.config, n);
    }

    /// A GPU session in the browser cannot wait for the device without returning to the event
    /// loop: it must be driven through the `_async` methods.
    fn check_blocking(&self) -> Result<()> {
        #[cfg(all(feature = "gpu", target_arch = "wasm32"))]
        if matches!(self.engine, Engine::Gpu(_)) {
            return Err(Error::InvalidArgument(
                "a WebGPU session runs asynchronously: use runAsync / stepAsync / sampleNextAsync".into(),
            ));
        }
        Ok(())
    }

    /// [`Session::extend`], waiting for the GPU if there is one (natively only).
    fn extend_blocking(&mut self, new: &[u32]) -> Result<()> {
        #[cfg(all(feature = "gpu", not(target_arch = "wasm32")))]
        if matches!(self.engine, Engine::Gpu(_)) {
            return pollster::block_on(self.extend(new));
        }
        self.extend_cpu(new);
        Ok(())
    }

    /// Runs `new` after the cached tokens. The caller has validated the tokens.
    async fn extend(&mut self, new: &[u32]) -> Result<()> {
        #[cfg(feature = "gpu")]
        if let Engine::Gpu(pass) = &mut self.engine {
            self.captures.grow_to(self.tokens.len() + new.len());
            let c = &self.model.config;
            // A GPU pass takes up to GPU_CHUNK tokens in one command encoder.
            for chunk in new.chunks(GPU_CHUNK) {
                let (spec, pos0) = (&self.captures.spec, self.tokens.len());
                // Pooled maps are pooled here, from the rows the GPU reads back.
                let wants = |hook| spec.contains(hook) || matches!(hook, Hook::AttnPattern(l) if spec.reads_pattern(l));
                let out = pass.forward(chunk, pos0, &wants, &self.ablation).await?;
                for (hook, values) in out.hooks {
                    match hook {
                        Hook::AttnPattern(l) => {
                            record_pattern_rows(&mut self.captures, c, l, pos0, chunk.len(), &values)
                        }
                        _ => self.captures.record(hook, 0, &values),
                    }
                }
                self.tokens.extend_from_slice(chunk);
                self.last_logits = out.last_logits;
            }
            return Ok(());
        }
        self.extend_cpu(new);
        Ok(())
    }

    /// Runs `new` on the CPU, chunk by chunk.
    fn extend_cpu(&mut self, new: &[u32]) {
        self.captures.grow_to(self.tokens.len() + new.len());
        let model = Arc::clone(&self.model);
        #[allow(irrefutable_let_patterns)] // without the `gpu` feature the CPU is the only engine
        let Engine::Cpu { acts, kv } = &mut self.engine
        else {
            return;
        };
        let (tokens, captures, ablated) = (&mut self.tokens, &mut self.captures, &self.replacements);
        let attended = self.attended.as_deref();
        let mut last_chunk = 0;
        // On the thread pool, its workers spinning as one team for the pass's loops, unless the pass
        // is too small to repay waking them (`kernels::pool`).
        run_pass(new.len().saturating_mul(model.weights.n_params()), || {
            for chunk in new.chunks(model.config.chunk_len()) {
                let pos0 = tokens.len();
                let edits = Edits { ablated, patch_z: None, attended };
                forward_chunk(&model, acts, kv, ChunkInput::Tokens(chunk), pos0, captures, edits);
                tokens.extend_from_slice(chunk);
                last_chunk = chunk.len();
            }
        });
        if last_chunk == 0 || !model.config.has_head() {
            return;
        }
        // With `logits` captured the last chunk left every row's logits; else just the last row's.
        let v = model.config.vocab_size;
        let spec = &self.captures.spec;
        let last_row = if every_row_logits(&|hook| spec.contains(hook)) { (last_chunk - 1) * v } else { 0 };
        self.last_logits.copy_from_slice(&acts.logits[last_row..last_row + v]);
    }

    fn trace(&self, computed: usize) -> Trace {
        let c = &self.model.config;
        let t = self.tokens.len();
        let tensors =
            self.captures.spec.hooks().map(|hook| (hook.to_string(), self.captures.tensor(hook, c, t))).collect();
        Trace { tokens: self.tokens.clone(), last_logits: self.last_logits.clone(), computed, tensors }
    }
}

/// Records a GPU pass's attention rows of layer `layer` (position by position, every head each,
/// as the CPU hands them over) for `n` positions from `pos0`.
#[cfg(feature = "gpu")]
fn record_pattern_rows(captures: &mut Captures, c: &Config, layer: usize, pos0: usize, n: usize, rows: &[f32]) {
    let mut at = 0;
    for position in pos0..pos0 + n {
        let seen = c.visible_keys(layer, position, pos0 + n).end;
        for head in 0..c.n_head {
            let Some(row) = rows.get(at..at + seen) else { return };
            captures.record_pattern(layer, position, head, row);
            at += seen;
        }
    }
}

/// Refuses a capture whose tensors for `t` tokens would exceed `budget` bytes: attention
/// patterns grow with the square of the sequence, so a long prompt with every head captured would
/// otherwise exhaust memory (in wasm: trap) part-way through the run. Counted: the session's
/// per-position copy (a triangle for patterns) and the trace it hands out, in 64-bit arithmetic.
fn check_capture(spec: &CaptureSpec, queries: usize, config: &Config, t: usize, budget: u64) -> Result<()> {
    let t = t as u64;
    let mut floats = (queries as u64).saturating_mul(t);
    let mut patterns = 0u64;
    for hook in spec.hooks() {
        let full = hook.shape(config, t as usize).iter().try_fold(1u64, |n, &d| n.checked_mul(d as u64));
        let stored = hook.stored_len(config, t as usize).map(|n| n as u64);
        let both = full.zip(stored).and_then(|(a, b)| a.checked_add(b)).unwrap_or(u64::MAX);
        floats = floats.saturating_add(both);
        if matches!(hook, Hook::AttnPattern(_)) {
            patterns = patterns.saturating_add(both);
        }
    }
    let need = floats.saturating_mul(4);
    if need <= budget {
        return Ok(());
    }
    Err(Error::CaptureOverBudget {
        tokens: t as usize,
        hooks: spec.hooks().count(),
        need,
        patterns: patterns.saturating_mul(4),
        budget,
    })
}

/// Captured values of every cached position, per hook and part, in the hook's per-position
/// layout ([`crate::trace::Layout`]): it grows by appending and shrinks by truncating.
#[derive(Default)]
pub(crate) struct Captures {
    pub(crate) spec: CaptureSpec,
    values: BTreeMap<Hook, Vec<Vec<f32>>>,
    /// Positions per bin of the pooled maps (each head a part: `[query bin, POOLED_CELLS]`).
    bin: usize,
    /// Each layer's queries (`[T, H · d_head]`) when kept ([`Session::keep_queries`]).
    keep_queries: bool,
    queries: Vec<Vec<f32>>,
}

impl Captures {
    pub(crate) fn new(spec: &CaptureSpec) -> Captures {
        let mut captures = Captures { bin: 1, ..Captures::default() };
        captures.narrow_to(spec);
        captures
    }

    fn truncate(&mut self, c: &Config, positions: usize) {
        for (&hook, parts) in self.values.iter_mut() {
            let kept = match hook.layout(c) {
                // Callers cut pooled maps at a bin boundary (or not at all): see `reusable`.
                Layout::Pooled { .. } => positions.div_ceil(self.bin) * POOLED_CELLS,
                layout => layout.part_len(positions).unwrap_or(usize::MAX),
            };
            parts.iter_mut().for_each(|part| part.truncate(kept));
        }
        self.queries.iter_mut().for_each(|layer| layer.truncate(positions * c.q_dim()));
        if positions == 0 {
            self.bin = 1;
        }
    }

    /// How much of the `keep` positions a run of `t` positions shares with the `cached` ones it
    /// can keep: a pooled bin mixes its positions, so a changed position costs its whole bin
    /// (and bins never split again: a run shorter than the bins allow starts over).
    fn reusable(&self, spec: &CaptureSpec, keep: usize, cached: usize, t: usize) -> usize {
        if !spec.hooks().any(|hook| matches!(hook, Hook::AttnPatternPooled(_))) {
            return keep;
        }
        let bin = pooled_bin(t);
        if bin < self.bin {
            0
        } else if keep == cached {
            keep
        } else {
            keep - keep % bin
        }
    }

    /// Ready to record up to `t` positions: the pooled maps' bins widened (merged pairwise, which
    /// is exact for a maximum) when `t` needs wider ones.
    fn grow_to(&mut self, t: usize) {
        let bin = pooled_bin(t);
        if bin <= self.bin {
            return;
        }
        let merge = bin / self.bin;
        for (hook, parts) in self.values.iter_mut() {
            if matches!(hook, Hook::AttnPatternPooled(_)) {
                parts.iter_mut().for_each(|part| *part = coarsen(part, merge));
            }
        }
        self.bin = bin;
    }

    /// Records exactly `spec` from now on, dropping other hooks. Callers keep a cached prefix only
    /// when `spec` is a subset of what was recorded, so every kept hook covers that prefix.
    fn narrow_to(&mut self, spec: &CaptureSpec) {
        self.values.retain(|h, _| spec.contains(*h));
        for hook in spec.hooks() {
            self.values.entry(hook).or_default();
        }
        self.spec = spec.clone();
    }

    /// Keeps (or stops keeping) every layer's queries from the next run on.
    fn set_keep_queries(&mut self, keep: bool, n_layer: usize) {
        self.keep_queries = keep;
        self.queries = if keep { vec![Vec::new(); n_layer] } else { Vec::new() };
    }

    /// The tensor of `hook` for `t` positions: parts stacked, attention rows unpacked.
    pub(crate) fn tensor(&self, hook: Hook, c: &Config, t: usize) -> Tensor {
        let parts = self.values.get(&hook).map_or(&[][..], Vec::as_slice);
        let data = match hook.layout(c) {
            Layout::Triangle { heads } => unpack_triangle(parts.first().map_or(&[][..], Vec::as_slice), heads, t),
            Layout::Full { heads } => unpack_full(parts.first().map_or(&[][..], Vec::as_slice), heads, t),
            Layout::Pooled { heads } => unpack_pooled(parts, heads, t.div_ceil(self.bin)),
            Layout::Rows { .. } => parts.concat(),
        };
        Tensor { shape: hook.shape(c, t), data }
    }
}

impl Recorder for Captures {
    fn wants(&self, hook: Hook) -> bool {
        self.spec.contains(hook)
    }

    fn record(&mut self, hook: Hook, part: usize, values: &[f32]) {
        let Some(parts) = self.values.get_mut(&hook) else { return };
        if parts.len() <= part {
            parts.resize(part + 1, Vec::new());
        }
        parts[part].extend_from_slice(values);
    }

    fn reads_pattern(&self, layer: usize) -> bool {
        self.spec.reads_pattern(layer)
    }

    fn record_pattern(&mut self, layer: usize, position: usize, head: usize, row: &[f32]) {
        self.record(Hook::AttnPattern(layer), 0, row);
        let Some(parts) = self.values.get_mut(&Hook::AttnPatternPooled(layer)) else { return };
        if parts.len() <= head {
            parts.resize(head + 1, Vec::new());
        }
        let (bin, grid) = (self.bin, &mut parts[head]);
        let at = position / bin * POOLED_CELLS;
        if grid.len() < at + POOLED_CELLS {
            grid.resize(at + POOLED_CELLS, 0.0);
        }
        for (cells, cell) in row.chunks(bin).zip(&mut grid[at..at + POOLED_CELLS]) {
            *cell = largest(cells).max(*cell);
        }
    }

    fn keeps_queries(&self) -> bool {
        self.keep_queries
    }

    fn record_queries(&mut self, layer: usize, row: &[f32]) {
        if let Some(kept) = self.queries.get_mut(layer) {
            grow_by_steps(kept, kept.len() + row.len(), row.len());
            kept.extend_from_slice(row);
        }
    }
}

/// A pooled map with bins `merge` times wider: each new cell the largest of the `merge × merge`
/// cells it covers (`[query bin, POOLED_CELLS]` in, the same layout out).
fn coarsen(grid: &[f32], merge: usize) -> Vec<f32> {
    let rows = grid.len() / POOLED_CELLS;
    let mut wider = vec![0.0f32; rows.div_ceil(merge) * POOLED_CELLS];
    for (q, row) in grid.chunks_exact(POOLED_CELLS).enumerate() {
        let out = &mut wider[q / merge * POOLED_CELLS..][..POOLED_CELLS];
        for (cells, cell) in row.chunks(merge).zip(out.iter_mut()) {
            *cell = largest(cells).max(*cell);
        }
    }
    wider
}

/// Per-head pooled grids (`[query bin, POOLED_CELLS]` each) as a dense `[H, P, P]` tensor.
fn unpack_pooled(parts: &[Vec<f32>], n_head: usize, cells: usize) -> Vec<f32> {
    let mut dense = vec![0.0; n_head * cells * cells];
    for (head, grid) in parts.iter().enumerate().take(n_head) {
        for (q, row) in grid.chunks_exact(POOLED_CELLS).enumerate().take(cells) {
            dense[(head * cells + q) * cells..][..cells].copy_from_slice(&row[..cells]);
        }
    }
    dense
}

/// Expands position-major attention rows into a dense `[H, T, T]` tensor, zero above the diagonal.
fn unpack_triangle(stored: &[f32], n_head: usize, t: usize) -> Vec<f32> {
    let mut dense = vec![0.0; n_head * t * t];
    let mut at = 0;
    for p in 0..t {
        for h in 0..n_head {
            let row = &stored[at..at + p + 1];
            dense[(h * t + p) * t..(h * t + p) * t + p + 1].copy_from_slice(row);
            at += p + 1;
        }
    }
    dense
}

/// Reorders position-major bidirectional rows (`[T, H, T]`) into `[H, T, T]`.
fn unpack_full(stored: &[f32], n_head: usize, t: usize) -> Vec<f32> {
    let mut dense = vec![0.0; n_head * t * t];
    for (i, row) in stored.chunks_exact(t.max(1)).enumerate().take(n_head * t) {
        let (p, h) = (i / n_head, i % n_head);
        dense[(h * t + p) * t..(h * t + p + 1) * t].copy_from_slice(row);
    }
    dense
}

fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}
