//! The forward pass over a chunk of tokens, read top to bottom. GPT-2, LLaMA, Qwen2, Gemma 3 and
//! BERT share it; the config picks the norm (LayerNorm / RMSNorm) and where it goes (pre / post),
//! the positions (learned / sinusoidal / rotary), the mask (causal / bidirectional), the MLP
//! (GELU / exact GELU / ReLU / SwiGLU / GeGLU), and Gemma's extra norms and sliding windows.
//!
//! Prompts run in chunks of at most [`CHUNK`] tokens so that activation buffers have a fixed size
//! whatever the prompt length; the KV cache carries everything earlier chunks computed. A
//! bidirectional model's chunk is its whole context ([`Config::chunk_len`]): every query reads
//! every key.

use crate::instruments::Replacements;
use crate::kernels::activation::{gelu_erf, gelu_mul, gelu_new, relu, silu_mul};
use crate::kernels::attention::{attend, HeadCache};
use crate::kernels::matmul::{matmuls, Part, WeightRows};
use crate::kernels::{norm, pool, positions, rope};
use crate::model::weights::{Linear, Matrix, Norm, Rows};
use crate::model::{Config, Mlp, NormPlacement, Positions, Weights};
use crate::trace::{Hook, NormSite};

/// Tokens per forward chunk.
pub const CHUNK: usize = 64;

/// The bytes a CPU session of `positions` positions holds at its largest, a chunk of every hook
/// captured aside: its KV cache, and its scratch (activations, the attention probabilities of a
/// chunk over every position, a chunk's logits, the last logits). `None` when a product
/// overflows u64. The loaders fit the context to the budget with this (see
/// [`crate::formats::limits::Budget::fit`]), so a session never runs out of memory by growing up
/// to the context.
pub(crate) fn session_bytes(c: &Config, positions: usize) -> Option<(u64, u64)> {
    use crate::formats::limits::product;
    let [n, d, ff, v, ctx, heads] =
        [c.chunk_len().min(positions), c.d_model, c.d_ff, c.vocab_size, positions, c.n_head].map(|x| x as u64);
    let (q, kv, layers) = (c.q_dim() as u64, c.kv_dim() as u64, c.n_layer as u64);
    let kv_cache = product(&[2, layers, ctx, kv, 4])?;
    let gates = if c.variant.mlp.gated() { 2 } else { 1 };
    // Per token of a chunk: x, xn, proj, the packed matmul input (at most the widest input),
    // q|k|v, heads and att_out, the MLP, RoPE's angles (two tables with sliding windows), three
    // norm statistics, and one row of per-head norms.
    let per_token = [3 * d, d.max(ff).max(q), q + 2 * kv, 2 * q, gates * ff, 2 * d, 3 + q + heads]
        .iter()
        .try_fold(0u64, |acc, &x| acc.checked_add(x))?;
    let floats = [product(&[n, per_token])?, product(&[heads, n, ctx])?, product(&[n, v])?, product(&[3, v])?]
        .iter()
        .try_fold(0u64, |acc, &x| acc.checked_add(x))?;
    Some((kv_cache, floats.checked_mul(4)?))
}

/// `n` floats, for buffers whose sizes the loader checked against the budget
/// ([`session_bytes`]).
///
/// # Panics
/// If the size overflows: only a hand-made [`Config`] that skipped `Config::check_limits` can.
fn zeros(dims: &[usize]) -> Vec<f32> {
    let n = dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
    vec![
        0.0;
        n.unwrap_or_else(|| panic!("activation sizes {dims:?} overflow: the config skipped Config::check_limits"))
    ]
}

/// A model: hyperparameters and weights. Immutable once loaded; sessions share it.
#[derive(Clone, Debug)]
pub struct Model {
    pub config: Config,
    pub weights: Weights,
}

/// Keys and values of every position seen so far, grown a chunk at a time (a LLaMA context of
/// 8192 positions would otherwise claim hundreds of megabytes up front).
pub(crate) struct KvCache {
    pub(crate) k: Vec<Vec<f32>>, // [L][positions, kv_dim]
    pub(crate) v: Vec<Vec<f32>>, // [L][positions, kv_dim]
}

impl KvCache {
    pub(crate) fn new(c: &Config) -> Self {
        Self { k: vec![Vec::new(); c.n_layer], v: vec![Vec::new(); c.n_layer] }
    }

    fn reserve(&mut self, positions: usize, kv_dim: usize) {
        for cache in self.k.iter_mut().chain(self.v.iter_mut()) {
            if cache.len() < positions * kv_dim {
                grow_by_steps(cache, positions * kv_dim, kv_dim);
                cache.resize(positions * kv_dim, 0.0);
            }
        }
    }
}

/// Positions a per-position buffer (KV cache, kept queries) grows by at a time.
pub(crate) const GROWTH_STEP: usize = 256;

/// Makes room for `len` values of `width` per position, in whole steps of [`GROWTH_STEP`]
/// positions rather than by doubling: one more token after 4,096 would otherwise double a long
/// prompt's cache (SmolLM2: +190 MB of keys and values, +280 MB of kept queries), and in wasm
/// that memory is never given back.
pub(crate) fn grow_by_steps(buffer: &mut Vec<f32>, len: usize, width: usize) {
    if buffer.capacity() < len {
        let step = GROWTH_STEP.saturating_mul(width.max(1));
        buffer.reserve_exact(len.next_multiple_of(step).saturating_sub(buffer.len()));
    }
}

/// Activations of one chunk: preallocated, reused by every chunk. `C` is [`Config::chunk_len`].
pub(crate) struct Activations {
    x: Vec<f32>,       // [C, d]         residual stream
    xn: Vec<f32>,      // [C, d]         norm output (input of the next sublayer)
    qkv: Vec<f32>,     // [C, q+2kv]     q | k | v of each token
    heads: Vec<f32>,   // [H, C, hd]     attention output per head, before concatenation
    att_out: Vec<f32>, // [C, q]         heads concatenated
    proj: Vec<f32>,    // [C, d]         output projection, about to join the residual
    /// `[C, d_ff]` the MLP's hidden layer, then (SwiGLU / GeGLU) `[C, d_ff]` its gate: one buffer,
    /// so that both are one matmul loop.
    mlp: Vec<f32>,
    /// Rotation of each position in the chunk (`[C, hd/2]` cos and sin) with the model's RoPE
    /// base, and with the local layers' base for a sliding-window model (else empty).
    rope_global: RopeTable,
    rope_local: RopeTable,
    /// One token's q or k heads after Gemma's per-head RMSNorm (`[max(q, kv)]`), and the
    /// heads' scales (`[H]`, not a hook).
    head_normed: Vec<f32>,
    head_scale: Vec<f32>,
    /// The input of a packed matmul as its kernels read it (see `kernels::packed`): grows once.
    packed_input: Vec<f32>,
    /// For `hook_result` only (empty until it is captured): one head's slice of `att_out` with
    /// the other heads zeroed (`[C, q]`), and every head's output (`[C, H, d]`).
    one_head: Vec<f32>,
    result: Vec<f32>,
    /// Row (h, t) holds the attention probabilities of query t over keys `0..=pos`: what
    /// `hook_pattern` shows.
    pub(crate) att: Pattern,
    pub(crate) norm_mean: Vec<f32>,  // [C]  mean of the last norm's input (LayerNorm only)
    pub(crate) norm_scale: Vec<f32>, // [C]  sqrt(var + eps), or sqrt(mean(x²) + eps) for RMSNorm
    pub(crate) resid_norm: Vec<f32>, // [C]  L2 norm of the residual after a block
    /// `[V]` for the last token, or `[C, V]` when every position's logits are wanted.
    pub(crate) logits: Vec<f32>,
}

impl Activations {
    pub(crate) fn new(c: &Config) -> Self {
        let (d, n) = (c.d_model, c.chunk_len());
        let half = if c.rope.is_some() { c.head_dim() / 2 } else { 0 };
        let local_half = if c.sliding_window.is_some() { half } else { 0 };
        let qkv = c.q_dim().saturating_add(c.kv_dim().saturating_mul(2));
        let gemma = c.arch.gemma_norms();
        Self {
            x: zeros(&[n, d]),
            xn: zeros(&[n, d]),
            qkv: zeros(&[n, qkv]),
            heads: zeros(&[n, c.q_dim()]),
            att_out: zeros(&[n, c.q_dim()]),
            proj: zeros(&[n, d]),
            mlp: zeros(&[if c.variant.mlp.gated() { 2 } else { 1 }, n, c.d_ff]),
            rope_global: RopeTable { cos: zeros(&[n, half]), sin: zeros(&[n, half]) },
            rope_local: RopeTable { cos: zeros(&[n, local_half]), sin: zeros(&[n, local_half]) },
            head_normed: if gemma { zeros(&[c.q_dim().max(c.kv_dim())]) } else { Vec::new() },
            head_scale: if gemma { zeros(&[c.n_head]) } else { Vec::new() },
            packed_input: Vec::new(),
            one_head: Vec::new(),
            result: Vec::new(),
            att: Pattern { data: Vec::new(), n_ctx: c.n_ctx, width: 0 },
            norm_mean: zeros(&[n]),
            norm_scale: zeros(&[n]),
            resid_norm: zeros(&[n]),
            logits: zeros(&[c.vocab_size]),
        }
    }
}

/// `cos` and `sin` of RoPE's angles for the positions of a chunk, `[C, hd/2]` each.
struct RopeTable {
    cos: Vec<f32>,
    sin: Vec<f32>,
}

impl RopeTable {
    fn fill(&mut self, pos0: usize, n: usize, head_dim: usize, theta: f32) {
        let half = head_dim / 2;
        for i in 0..n {
            let at = i * half..(i + 1) * half;
            rope::angles(pos0 + i, head_dim, theta, &mut self.cos[at.clone()], &mut self.sin[at]);
        }
    }

    /// Token `i`'s angles.
    fn row(&self, i: usize, half: usize) -> (&[f32], &[f32]) {
        (&self.cos[i * half..(i + 1) * half], &self.sin[i * half..(i + 1) * half])
    }
}

/// The attention probabilities of one chunk, `[H, C, ·]` (`C` = [`Config::chunk_len`]). Readers
/// index it as `[H, C, n_ctx]`
/// (row (h, t) starts at `(h·C + t)·n_ctx`, the layout `Captures::record` reads), but rows are
/// stored `width` long, the positions run so far: a model advertising a context of a million
/// positions costs nothing here until they are used. (Sizing it `[H, C, n_ctx]` up front cost
/// a gigabyte per session for a 1 MB model with a 2^20 context.)
pub(crate) struct Pattern {
    data: Vec<f32>,
    n_ctx: usize,
    /// Stored length of each row: at least the positions of the last chunk, at most `n_ctx`.
    width: usize,
}

impl Pattern {
    /// Makes rows hold `positions` keys. Contents are not kept: every chunk writes the rows it
    /// reads. Widths double (in whole chunks) so that a token-by-token decode regrows rarely.
    fn grow(&mut self, rows: usize, positions: usize) {
        if positions <= self.width {
            return;
        }
        self.width = positions.max(self.width.saturating_mul(2)).next_multiple_of(CHUNK).min(self.n_ctx).max(positions);
        self.data.clear();
        self.data.resize(
            rows.checked_mul(self.width).unwrap_or_else(|| panic!("{rows} attention rows of {} overflow", self.width)),
            0.0,
        );
    }
}

impl std::ops::Index<std::ops::Range<usize>> for Pattern {
    type Output = [f32];

    /// `range` in `[H, C, n_ctx]` coordinates; it must lie inside one row's stored part.
    fn index(&self, range: std::ops::Range<usize>) -> &[f32] {
        let (row, col) = (range.start / self.n_ctx, range.start % self.n_ctx);
        let len = range.end.saturating_sub(range.start);
        assert!(col + len <= self.width, "attention row read past the {} positions run", self.width);
        &self.data[row * self.width + col..][..len]
    }
}

/// Where a chunk's captured values go. The forward pass asks before doing capture-only work
/// (residual norms, head results, the logit lens, every row's logits) and hands over what it
/// computed, in the hook's per-position layout ([`crate::trace::Layout`]).
pub(crate) trait Recorder {
    fn wants(&self, hook: Hook) -> bool;
    /// Appends values of the chunk's positions to part `part` of the hook (0 unless the hook has
    /// several, as `lens.logits` has one per layer).
    fn record(&mut self, hook: Hook, part: usize, values: &[f32]);
    /// True when layer `layer`'s attention probabilities are wanted (whole or pooled).
    fn reads_pattern(&self, layer: usize) -> bool;
    /// The probabilities query `position` of `head` gives keys `0..row.len()`, called position
    /// by position, every head each.
    fn record_pattern(&mut self, layer: usize, position: usize, head: usize, row: &[f32]);
    /// True when the queries are kept (so a head's pattern can be remade later, exactly).
    fn keeps_queries(&self) -> bool;
    /// The queries of one position at layer `layer` (`[H · d_head]`), as the scores used them.
    fn record_queries(&mut self, layer: usize, row: &[f32]);
}

/// Records `values` if the recorder wants `hook`.
fn capture(rec: &mut dyn Recorder, hook: Hook, values: &[f32]) {
    if rec.wants(hook) {
        rec.record(hook, 0, values);
    }
}

/// What a chunk starts from: token ids (embedded here), or the residual stream entering a later
/// layer — activation patching re-runs only the layers after the one it patches.
#[derive(Clone, Copy)]
pub(crate) enum ChunkInput<'a> {
    Tokens(&'a [u32]),
    /// `[n, d_model]` rows entering block `layer`.
    Residual {
        layer: usize,
        rows: &'a [f32],
    },
}

/// Changes to the computation: heads and MLPs ablated (a session setting: their outputs replaced
/// by fixed values), one head's `z` replaced by given values (activation patching), and keys
/// hidden from every query (padding).
#[derive(Clone, Copy)]
pub(crate) struct Edits<'a> {
    pub ablated: &'a Replacements,
    /// `(layer, head, rows)`: the head's `z` at the chunk's positions becomes `rows`, `[n, d_head]`.
    pub patch_z: Option<(usize, usize, &'a [f32])>,
    /// The padding mask, one flag per position of the sequence (`true`: a token to attend to);
    /// `None` attends to every position the mask of the model allows.
    pub attended: Option<&'a [bool]>,
}

/// Runs a chunk at positions `pos0..`, extending the KV cache. Afterwards `acts.logits` holds
/// the logits of every row (`[C, V]`) if the recorder wants `logits` or `lens.logits`, else of
/// the last row only.
pub(crate) fn forward_chunk(
    model: &Model,
    acts: &mut Activations,
    kv: &mut KvCache,
    input: ChunkInput,
    pos0: usize,
    rec: &mut dyn Recorder,
    edits: Edits,
) {
    let Model { config: c, weights: w } = model;
    let (d, hd) = (c.d_model, c.head_dim());
    let (q_dim, kv_dim) = (c.q_dim(), c.kv_dim());
    let qkv_dim = q_dim + 2 * kv_dim;
    let chunk = c.chunk_len();
    let (n, first_layer) = match input {
        ChunkInput::Tokens(tokens) => (tokens.len(), 0),
        ChunkInput::Residual { layer, rows } => (rows.len() / d, layer),
    };
    debug_assert!(n <= chunk && pos0 + n <= c.n_ctx);
    kv.reserve(pos0 + n, kv_dim);

    match input {
        ChunkInput::Tokens(tokens) => embed(model, acts, tokens, pos0),
        ChunkInput::Residual { rows, .. } => acts.x[..n * d].copy_from_slice(rows),
    }
    if let Some(r) = c.rope {
        acts.rope_global.fill(pos0, n, hd, r.theta);
    }
    if let (Some(_), Some(window)) = (c.rope, c.sliding_window) {
        acts.rope_local.fill(pos0, n, hd, window.local_theta);
    }

    let lens = rec.wants(Hook::LensLogits);
    for (l, lw) in w.layers.iter().enumerate().skip(first_layer) {
        capture(rec, Hook::ResidPre(l), &acts.x[..n * d]);
        if lens {
            normalize(acts, c, w, w.output_norm.as_ref(), n);
            unembed(acts, c, w, n);
            rec.record(Hook::LensLogits, l, &acts.logits[..n * c.vocab_size]);
        }
        // Attention sublayer: x += W_o · attend(q, k, v), with q | k | v = W_qkv · norm(x) (pre-LN),
        // or x = norm(x + W_o · attend(q, k, v)) with q | k | v = W_qkv · x (post-LN).
        let post = c.variant.norm == NormPlacement::Post;
        if post {
            acts.xn[..n * d].copy_from_slice(&acts.x[..n * d]);
        } else {
            normalize(acts, c, w, Some(&lw.attn_norm), n);
            record_norm(rec, acts, NormSite::Ln1(l), n);
        }
        let (qkv, room) = (&mut acts.qkv, &mut acts.packed_input);
        match lw.attn_qkv.as_slice() {
            [fused] => linear(qkv, qkv_dim, &acts.xn, w, fused, n, room),
            [q, k, v] => {
                let (k_at, v_at) = (q.weight.rows, q.weight.rows + k.weight.rows);
                linears(qkv, qkv_dim, &acts.xn, w, [(q, 0), (k, k_at), (v, v_at)], n, room)
            }
            other => unreachable!("{} attention input matrices: the loader makes one (fused) or three", other.len()),
        }
        let table = if c.is_global_layer(l) { &acts.rope_global } else { &acts.rope_local };
        for i in 0..n {
            let row = &mut acts.qkv[i * qkv_dim..(i + 1) * qkv_dim];
            if let (Some(qn), Some(kn)) = (&lw.attn_q_norm, &lw.attn_k_norm) {
                let (q, k) = row[..q_dim + kv_dim].split_at_mut(q_dim);
                for (heads, nw) in [(q, qn), (k, kn)] {
                    let normed = &mut acts.head_normed[..heads.len()];
                    norm::rmsnorm(normed, heads, w.get(nw.weight), c.norm_eps, &mut acts.head_scale);
                    heads.copy_from_slice(normed);
                }
            }
            if let Some(r) = c.rope {
                let (cos, sin) = table.row(i, hd / 2);
                rope::rotate(&mut row[..q_dim + kv_dim], hd, r.pairing, cos, sin);
            }
            let at = (pos0 + i) * kv_dim;
            kv.k[l][at..at + kv_dim].copy_from_slice(&row[q_dim..q_dim + kv_dim]);
            kv.v[l][at..at + kv_dim].copy_from_slice(&row[q_dim + kv_dim..]);
        }
        // Grouped-query attention: query head h reads key/value head h / (n_head / n_kv_head).
        let group = c.n_head / c.n_kv_head;
        acts.att.grow(c.n_head * chunk, pos0 + n);
        let (keys, values, qkv, width) = (&kv.k[l], &kv.v[l], &acts.qkv, acts.att.width);
        let divisor = c.score_divisor();
        let attended = edits.attended;
        pool::for_each_chunk_pair(
            c.n_head,
            (&mut acts.heads, n * hd),
            (&mut acts.att.data, chunk * width),
            |head, out, probs| {
                let kv_col = (head / group) * hd;
                for i in 0..n {
                    let q = &qkv[i * qkv_dim + head * hd..i * qkv_dim + (head + 1) * hd];
                    let cache = HeadCache { keys: &keys[kv_col..], values: &values[kv_col..], stride: kv_dim };
                    attend(
                        q,
                        &cache,
                        c.visible_keys(l, pos0 + i, pos0 + n),
                        attended,
                        divisor,
                        &mut probs[i * width..(i + 1) * width],
                        &mut out[i * hd..(i + 1) * hd],
                    );
                }
            },
        );
        for head in 0..c.n_head {
            for i in 0..n {
                acts.att_out[i * q_dim + head * hd..i * q_dim + (head + 1) * hd]
                    .copy_from_slice(&acts.heads[(head * n + i) * hd..(head * n + i + 1) * hd]);
            }
        }
        // An ablated head contributes its replacement (zero or its mean) to the output projection
        // (its pattern stays); a patched head contributes the values it is given.
        for (head, value) in edits.ablated.heads_in_layer(l) {
            for i in 0..n {
                acts.att_out[i * q_dim + head * hd..i * q_dim + (head + 1) * hd].copy_from_slice(value);
            }
        }
        if let Some((_, head, rows)) = edits.patch_z.filter(|&(layer, _, _)| layer == l) {
            for i in 0..n {
                acts.att_out[i * q_dim + head * hd..i * q_dim + (head + 1) * hd]
                    .copy_from_slice(&rows[i * hd..(i + 1) * hd]);
            }
        }
        if rec.reads_pattern(l) {
            // `acts.att` is [H, chunk, n_ctx]; kept position by position, every head each.
            for i in 0..n {
                let seen = c.visible_keys(l, pos0 + i, pos0 + n).end;
                for h in 0..c.n_head {
                    let row = (h * chunk + i) * c.n_ctx;
                    rec.record_pattern(l, pos0 + i, h, &acts.att[row..row + seen]);
                }
            }
        }
        if rec.keeps_queries() {
            for i in 0..n {
                rec.record_queries(l, &qkv[i * qkv_dim..i * qkv_dim + q_dim]);
            }
        }
        capture(rec, Hook::AttnZ(l), &acts.att_out[..n * q_dim]);
        if rec.wants(Hook::AttnResult(l)) {
            head_results(acts, c, w, &lw.attn_output, n);
            rec.record(Hook::AttnResult(l), 0, &acts.result[..n * c.n_head * d]);
        }
        linear(&mut acts.proj, d, &acts.att_out, w, &lw.attn_output, n, &mut acts.packed_input);
        add_sublayer(acts, c, w, lw.attn_post_norm.as_ref(), n);
        if post {
            normalize_in_place(rec, acts, c, w, &lw.attn_norm, NormSite::Ln1(l), n);
        }
        capture(rec, Hook::ResidMid(l), &acts.x[..n * d]);

        // MLP sublayer: x += W_down · act(W_up · norm(x)), act = GELU, or SwiGLU with W_gate;
        // post-LN: x = norm(x + W_down · act(W_up · x)).
        if post {
            acts.xn[..n * d].copy_from_slice(&acts.x[..n * d]);
        } else {
            normalize(acts, c, w, Some(&lw.ffn_norm), n);
            record_norm(rec, acts, NormSite::Ln2(l), n);
        }
        let gate_at = chunk * c.d_ff;
        match &lw.ffn_gate {
            Some(gate) => linears(
                &mut acts.mlp,
                c.d_ff,
                &acts.xn,
                w,
                [(&lw.ffn_up, 0), (gate, gate_at)],
                n,
                &mut acts.packed_input,
            ),
            None => linear(&mut acts.mlp, c.d_ff, &acts.xn, w, &lw.ffn_up, n, &mut acts.packed_input),
        }
        let (up, gate) = acts.mlp.split_at_mut(gate_at);
        let up = &mut up[..n * c.d_ff];
        match (&lw.ffn_gate, c.variant.mlp) {
            (Some(_), mlp) => {
                let activate = if mlp == Mlp::GeGlu { gelu_mul } else { silu_mul };
                pool::for_each_chunk_pair(n, (up, c.d_ff), (gate, c.d_ff), |_, u, g| activate(g, u));
            }
            (None, mlp) => {
                let activate = match mlp {
                    Mlp::GeluErf => gelu_erf,
                    Mlp::Relu => relu,
                    _ => gelu_new,
                };
                pool::for_each_chunk(n, (up, c.d_ff), |_, u| activate(u))
            }
        }
        linear(&mut acts.proj, d, &acts.mlp, w, &lw.ffn_down, n, &mut acts.packed_input);
        // What joins the residual: the projection (normed first by Gemma's post-norm), or an
        // ablated MLP's replacement as it is.
        let added = match edits.ablated.mlp(l) {
            Some(value) => {
                acts.proj[..n * d].chunks_exact_mut(d).for_each(|row| row.copy_from_slice(value));
                add_into(&mut acts.x[..n * d], &acts.proj[..n * d]);
                &acts.proj
            }
            None => {
                add_sublayer(acts, c, w, lw.ffn_post_norm.as_ref(), n);
                if lw.ffn_post_norm.is_some() {
                    &acts.xn
                } else {
                    &acts.proj
                }
            }
        };
        capture(rec, Hook::MlpOut(l), &added[..n * d]);
        if post {
            normalize_in_place(rec, acts, c, w, &lw.ffn_norm, NormSite::Ln2(l), n);
        }
        capture(rec, Hook::ResidPost(l), &acts.x[..n * d]);

        if rec.wants(Hook::ResidPostNorm(l)) {
            norm::row_norms(&acts.x[..n * d], d, &mut acts.resid_norm);
            rec.record(Hook::ResidPostNorm(l), 0, &acts.resid_norm[..n]);
        }
    }

    // An encoder ends here: its output is the hidden states.
    if !c.has_head() {
        return;
    }
    // Final norm and unembedding: for every row when logits (or final-norm statistics, or the
    // lens) are captured, else only for the last row, the one that predicts the next token.
    let all_logits = every_row_logits(&|hook| rec.wants(hook));
    let all_rows =
        all_logits || rec.wants(Hook::NormScale(NormSite::Final)) || rec.wants(Hook::NormMean(NormSite::Final));
    let first = if all_rows { 0 } else { n - 1 };
    let rows = n - first;
    acts.x.copy_within(first * d..n * d, 0);
    normalize(acts, c, w, w.output_norm.as_ref(), rows);
    record_norm(rec, acts, NormSite::Final, rows);
    let v = c.vocab_size;
    if all_logits {
        unembed(acts, c, w, n);
        capture(rec, Hook::Logits, &acts.logits[..n * v]);
        if lens {
            rec.record(Hook::LensLogits, c.n_layer, &acts.logits[..n * v]);
        }
    } else {
        let last = &acts.xn[(rows - 1) * d..rows * d];
        linear(&mut acts.logits, v, last, w, &unembedding(w), 1, &mut acts.packed_input);
    }
}

/// Embeds `tokens` into `acts.x`: the token's row (times √d for Gemma and where the config
/// asks), plus BERT's token type 0, plus the position's row (learned or sinusoidal; RoPE models
/// rotate q and k instead), then BERT's LayerNorm — in transformers' order of additions.
fn embed(model: &Model, acts: &mut Activations, tokens: &[u32], pos0: usize) {
    let Model { config: c, weights: w } = model;
    let d = c.d_model;
    let embedding_scale = c.embedding_scale();
    for (i, &tok) in tokens.iter().enumerate() {
        let x = &mut acts.x[i * d..(i + 1) * d];
        w.row(&w.token_embd, tok as usize, x);
        if let Some(scale) = embedding_scale {
            x.iter_mut().for_each(|v| *v *= scale);
        }
        let added = &mut acts.proj[..d];
        if let Some(types) = &w.token_type_embd {
            w.row(types, 0, added);
            add_into(x, added);
        }
        match (c.variant.positions, &w.position_embd) {
            (Positions::Learned, Some(wpe)) => w.row(wpe, pos0 + i, added),
            (Positions::Sinusoidal, _) => positions::sinusoidal(pos0 + i, added),
            _ => continue,
        }
        add_into(x, added);
    }
    if let Some(nw) = &w.embd_norm {
        normalize(acts, c, w, Some(nw), tokens.len());
        acts.x[..tokens.len() * d].copy_from_slice(&acts.xn[..tokens.len() * d]);
    }
}

/// The LM head; only models with one ([`Config::has_head`]) reach the unembedding.
fn unembedding(w: &Weights) -> Linear {
    Linear { weight: w.output.unwrap_or(w.token_embd), bias: None }
}

/// The logit lens of residual rows (`[n, d]`, any number): the final norm — each row's own
/// statistics — and the unembedding, as `lens.logits` records them; `[n, V]`.
pub(crate) fn lens_logits(model: &Model, acts: &mut Activations, rows: &[f32]) -> Vec<f32> {
    let Model { config: c, weights: w } = model;
    let (d, v) = (c.d_model, c.vocab_size);
    let mut out = Vec::with_capacity(rows.len() / d * v);
    for chunk in rows.chunks(CHUNK * d) {
        let n = chunk.len() / d;
        acts.x[..n * d].copy_from_slice(chunk);
        normalize(acts, c, w, w.output_norm.as_ref(), n);
        unembed(acts, c, w, n);
        out.extend_from_slice(&acts.logits[..n * v]);
    }
    out
}

/// Residual rows (`[n, d]`, any number) through the final norm, each by its own statistics: a
/// model's output; rows as they are for a model without a final norm.
pub(crate) fn final_hidden(model: &Model, acts: &mut Activations, rows: &[f32]) -> Vec<f32> {
    let Model { config: c, weights: w } = model;
    let d = c.d_model;
    let mut out = Vec::with_capacity(rows.len());
    for chunk in rows.chunks(c.chunk_len() * d) {
        let n = chunk.len() / d;
        acts.x[..n * d].copy_from_slice(chunk);
        normalize(acts, c, w, w.output_norm.as_ref(), n);
        out.extend_from_slice(&acts.xn[..n * d]);
    }
    out
}

/// Whether a chunk leaves the logits of every row (not only the last) for hooks `wants` asks for.
pub(crate) fn every_row_logits(wants: &dyn Fn(Hook) -> bool) -> bool {
    wants(Hook::Logits) || wants(Hook::LensLogits)
}

/// `acts.logits[..n·V]` = the unembedding of the first `n` rows of `acts.xn` (final-normed).
fn unembed(acts: &mut Activations, c: &Config, w: &Weights, n: usize) {
    let v = c.vocab_size;
    if acts.logits.len() < n * v {
        acts.logits.resize(n * v, 0.0);
    }
    linear(&mut acts.logits, v, &acts.xn, w, &unembedding(w), n, &mut acts.packed_input);
}

/// `acts.result[..n·H·d]`: each head's output through its columns of the output projection,
/// without the bias (`hook_result`), by projecting `att_out` with all other heads zeroed.
fn head_results(acts: &mut Activations, c: &Config, w: &Weights, w_o: &Linear, n: usize) {
    let (d, hd, q, heads) = (c.d_model, c.head_dim(), c.q_dim(), c.n_head);
    acts.one_head.resize(n * q, 0.0);
    acts.result.resize(n * heads * d, 0.0);
    let no_bias = Linear { weight: w_o.weight, bias: None };
    for h in 0..heads {
        acts.one_head.fill(0.0);
        for i in 0..n {
            let cols = i * q + h * hd..i * q + (h + 1) * hd;
            acts.one_head[cols.clone()].copy_from_slice(&acts.att_out[cols]);
        }
        linear(&mut acts.xn, d, &acts.one_head, w, &no_bias, n, &mut acts.packed_input);
        for i in 0..n {
            acts.result[(i * heads + h) * d..(i * heads + h + 1) * d].copy_from_slice(&acts.xn[i * d..(i + 1) * d]);
        }
    }
}

/// `out[t·ld ..][..rows] = W x_t + b` for the first `n` rows of `x`.
fn linear(out: &mut [f32], ld: usize, x: &[f32], w: &Weights, lin: &Linear, n: usize, room: &mut Vec<f32>) {
    linears(out, ld, x, w, [(lin, 0)], n, room);
}

/// [`linear`] of several matrices of the same input in one parallel loop ([`matmuls`]): matrix
/// `(lin, at)` writes `out[at + t·ld ..][..rows]`. An array, so that every matmul of a pass does
/// without an allocation.
fn linears<const N: usize>(
    out: &mut [f32],
    ld: usize,
    x: &[f32],
    w: &Weights,
    lins: [(&Linear, usize); N],
    n: usize,
    room: &mut Vec<f32>,
) {
    let part = |(lin, at): (&Linear, usize)| {
        let m: &Matrix = &lin.weight;
        let rows = match m.data {
            Rows::F32(view) => WeightRows::F32(w.get(view)),
            Rows::Packed { ty, offset, len } => WeightRows::Packed(ty, w.blocks(offset, len)),
            Rows::Blocks { ty, offset, len } => WeightRows::Blocks(ty, w.blocks(offset, len)),
        };
        Part { w: rows, bias: lin.bias.map(|b| w.get(b)), n_out: m.rows, at }
    };
    let n_in = lins.first().map_or(0, |(lin, _)| lin.weight.cols);
    assert!(lins.iter().all(|(lin, _)| lin.weight.cols == n_in), "matrices of one input with different widths");
    matmuls(out, ld, x, &lins.map(part), n, n_in, room);
}

/// `acts.xn[..n] = norm(acts.x[..n])`, statistics into `acts.norm_mean` / `norm_scale`; a copy
/// where there is no norm (the final norm of a post-LN model).
fn normalize(acts: &mut Activations, c: &Config, w: &Weights, nw: Option<&Norm>, n: usize) {
    let d = c.d_model;
    let Some(nw) = nw else {
        acts.xn[..n * d].copy_from_slice(&acts.x[..n * d]);
        return;
    };
    let (out, x, weight) = (&mut acts.xn[..n * d], &acts.x[..n * d], w.get(nw.weight));
    // A norm with a bias is a LayerNorm (GPT-2); without, an RMSNorm (LLaMA).
    match nw.bias {
        Some(bias) => {
            norm::layernorm(out, x, weight, w.get(bias), c.norm_eps, &mut acts.norm_mean, &mut acts.norm_scale)
        }
        None => norm::rmsnorm(out, x, weight, c.norm_eps, &mut acts.norm_scale),
    }
}

/// `x += proj`, or with Gemma's post-norm `x += norm(proj)`, for the chunk's `n` rows. The
/// post-norm's statistics are not a hook; they pass through the norm scratch, whose `ln1`/`ln2`
/// values were recorded before.
fn add_sublayer(acts: &mut Activations, c: &Config, w: &Weights, post_norm: Option<&Norm>, n: usize) {
    let d = c.d_model;
    match post_norm {
        Some(nw) => {
            norm::rmsnorm(
                &mut acts.xn[..n * d],
                &acts.proj[..n * d],
                w.get(nw.weight),
                c.norm_eps,
                &mut acts.norm_scale,
            );
            add_into(&mut acts.x[..n * d], &acts.xn[..n * d]);
        }
        None => add_into(&mut acts.x[..n * d], &acts.proj[..n * d]),
    }
}

/// A post-LN block's norm: `x = norm(x)`, its statistics recorded at `site`.
fn normalize_in_place(
    rec: &mut dyn Recorder,
    acts: &mut Activations,
    c: &Config,
    w: &Weights,
    nw: &Norm,
    site: NormSite,
    n: usize,
) {
    let d = c.d_model;
    normalize(acts, c, w, Some(nw), n);
    record_norm(rec, acts, site, n);
    acts.x[..n * d].copy_from_slice(&acts.xn[..n * d]);
}

fn record_norm(rec: &mut dyn Recorder, acts: &Activations, site: NormSite, n: usize) {
    capture(rec, Hook::NormMean(site), &acts.norm_mean[..n]);
    capture(rec, Hook::NormScale(site), &acts.norm_scale[..n]);
}

fn add_into(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}
