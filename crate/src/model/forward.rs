//! The GPT-2 forward pass over a chunk of tokens, read top to bottom.
//!
//! Prompts run in chunks of at most [`CHUNK`] tokens so that activation buffers have a fixed size
//! whatever the prompt length; the KV cache carries everything earlier chunks computed.

use rayon::prelude::*;

use crate::kernels::{activation::gelu_new, attention::attend, matmul::matmul, norm};
use crate::model::{Config, Weights};
use crate::trace::{Hook, NormSite};

/// Tokens per forward chunk.
pub const CHUNK: usize = 64;

/// A model: hyperparameters and weights. Immutable once loaded; sessions share it.
#[derive(Clone, Debug)]
pub struct Model {
    pub config: Config,
    pub weights: Weights,
}

/// Keys and values of every position seen so far.
pub(crate) struct KvCache {
    pub(crate) k: Vec<Vec<f32>>, // [L][n_ctx, d]
    pub(crate) v: Vec<Vec<f32>>, // [L][n_ctx, d]
}

impl KvCache {
    pub(crate) fn new(c: &Config) -> Self {
        Self { k: vec![vec![0.0; c.n_ctx * c.d_model]; c.n_layer], v: vec![vec![0.0; c.n_ctx * c.d_model]; c.n_layer] }
    }
}

/// Activations of one chunk: preallocated, reused by every chunk. `C` is the chunk length.
pub(crate) struct Activations {
    x: Vec<f32>,          // [C, d]     residual stream
    xn: Vec<f32>,         // [C, d]     LayerNorm output (input of the next sublayer)
    qkv: Vec<f32>,        // [C, 3d]    q | k | v of each token
    heads: Vec<f32>,      // [H, C, hd] attention output per head, before concatenation
    att_out: Vec<f32>,    // [C, d]     heads concatenated
    proj: Vec<f32>,       // [C, d]     c_proj output, about to join the residual
    fc: Vec<f32>,         // [C, d_ff]  MLP hidden layer
    /// `[H, C, n_ctx]`: row (h, t) holds the attention probabilities of query t over keys
    /// `0..=pos`: what `hook_pattern` shows.
    pub(crate) att: Vec<f32>,
    pub(crate) norm_mean: Vec<f32>,  // [C]  mean of the last LayerNorm's input
    pub(crate) norm_scale: Vec<f32>, // [C]  sqrt(var + eps) of the same
    pub(crate) resid_norm: Vec<f32>, // [C]  L2 norm of the residual after a block
    /// `[V]` for the last token, or `[C, V]` when every position's logits are wanted.
    pub(crate) logits: Vec<f32>,
}

impl Activations {
    pub(crate) fn new(c: &Config) -> Self {
        let (d, n) = (c.d_model, CHUNK);
        Self {
            x: vec![0.0; n * d],
            xn: vec![0.0; n * d],
            qkv: vec![0.0; n * 3 * d],
            heads: vec![0.0; n * d],
            att_out: vec![0.0; n * d],
            proj: vec![0.0; n * d],
            fc: vec![0.0; n * c.d_ff],
            att: vec![0.0; c.n_head * n * c.n_ctx],
            norm_mean: vec![0.0; n],
            norm_scale: vec![0.0; n],
            resid_norm: vec![0.0; n],
            logits: vec![0.0; c.vocab_size],
        }
    }
}

/// Where a chunk's captured values go. The forward pass asks before doing capture-only work
/// (residual norms, LayerNorm-final and logits of every row) and hands over what it computed.
pub(crate) trait Recorder {
    fn wants(&self, hook: Hook) -> bool;
    /// Takes the hook's values for the chunk's `n` positions `pos0..` from `acts`.
    fn record(&mut self, hook: Hook, c: &Config, acts: &Activations, pos0: usize, n: usize);
}

/// Runs `tokens` at positions `pos0..`, extending the KV cache. Afterwards `acts.logits` holds
/// the logits of every row (`[C, V]`) if the recorder wants `logits`, else of the last row only.
pub(crate) fn forward_chunk(
    model: &Model,
    acts: &mut Activations,
    kv: &mut KvCache,
    tokens: &[u32],
    pos0: usize,
    rec: &mut dyn Recorder,
) {
    let Model { config: c, weights: w } = model;
    let (n, d, h, hd, n_ctx) = (tokens.len(), c.d_model, c.n_head, c.head_dim(), c.n_ctx);
    debug_assert!(n <= CHUNK && pos0 + n <= n_ctx);

    // Embedding: token + learned position.
    let (wte, wpe) = (w.get(w.wte), w.get(w.wpe));
    for (i, &tok) in tokens.iter().enumerate() {
        let (tok, pos) = (tok as usize, pos0 + i);
        let x = &mut acts.x[i * d..(i + 1) * d];
        for ((x, e), p) in x.iter_mut().zip(&wte[tok * d..(tok + 1) * d]).zip(&wpe[pos * d..(pos + 1) * d]) {
            *x = e + p;
        }
    }

    for (l, lw) in w.layers.iter().enumerate() {
        // Attention sublayer: x += c_proj(attend(c_attn(ln_1(x)))).
        layernorm(acts, n, w.get(lw.ln_1_weight), w.get(lw.ln_1_bias), c.norm_eps);
        record_norm(rec, c, acts, NormSite::Ln1(l), pos0, n);
        matmul(&mut acts.qkv, &acts.xn, w.get(lw.attn_c_attn_weight), Some(w.get(lw.attn_c_attn_bias)), n, d, 3 * d);
        for i in 0..n {
            let row = &acts.qkv[i * 3 * d..(i + 1) * 3 * d];
            let at = (pos0 + i) * d;
            kv.k[l][at..at + d].copy_from_slice(&row[d..2 * d]);
            kv.v[l][at..at + d].copy_from_slice(&row[2 * d..3 * d]);
        }
        let (keys, values, qkv) = (&kv.k[l], &kv.v[l], &acts.qkv);
        acts.heads[..h * n * hd]
            .par_chunks_mut(n * hd)
            .zip(acts.att.par_chunks_mut(CHUNK * n_ctx))
            .enumerate()
            .for_each(|(head, (out, probs))| {
                for i in 0..n {
                    let q = &qkv[i * 3 * d + head * hd..i * 3 * d + (head + 1) * hd];
                    attend(
                        q,
                        &keys[head * hd..],
                        &values[head * hd..],
                        d,
                        pos0 + i + 1,
                        &mut probs[i * n_ctx..(i + 1) * n_ctx],
                        &mut out[i * hd..(i + 1) * hd],
                    );
                }
            });
        for head in 0..h {
            for i in 0..n {
                acts.att_out[i * d + head * hd..i * d + (head + 1) * hd]
                    .copy_from_slice(&acts.heads[(head * n + i) * hd..(head * n + i + 1) * hd]);
            }
        }
        if rec.wants(Hook::AttnPattern(l)) {
            rec.record(Hook::AttnPattern(l), c, acts, pos0, n);
        }
        matmul(&mut acts.proj, &acts.att_out, w.get(lw.attn_c_proj_weight), Some(w.get(lw.attn_c_proj_bias)), n, d, d);
        add_into(&mut acts.x[..n * d], &acts.proj[..n * d]);

        // MLP sublayer: x += c_proj(gelu(c_fc(ln_2(x)))).
        layernorm(acts, n, w.get(lw.ln_2_weight), w.get(lw.ln_2_bias), c.norm_eps);
        record_norm(rec, c, acts, NormSite::Ln2(l), pos0, n);
        matmul(&mut acts.fc, &acts.xn, w.get(lw.mlp_c_fc_weight), Some(w.get(lw.mlp_c_fc_bias)), n, d, c.d_ff);
        acts.fc[..n * c.d_ff].par_chunks_mut(c.d_ff).for_each(gelu_new);
        matmul(&mut acts.proj, &acts.fc, w.get(lw.mlp_c_proj_weight), Some(w.get(lw.mlp_c_proj_bias)), n, c.d_ff, d);
        add_into(&mut acts.x[..n * d], &acts.proj[..n * d]);

        if rec.wants(Hook::ResidPostNorm(l)) {
            norm::row_norms(&acts.x[..n * d], d, &mut acts.resid_norm);
            rec.record(Hook::ResidPostNorm(l), c, acts, pos0, n);
        }
    }

    // Final LayerNorm and unembedding: for every row when logits (or ln_final statistics) are
    // captured, else only for the last row, the one that predicts the next token.
    let all_logits = rec.wants(Hook::Logits);
    let all_rows = all_logits || rec.wants(Hook::NormScale(NormSite::Final)) || rec.wants(Hook::NormMean(NormSite::Final));
    let first = if all_rows { 0 } else { n - 1 };
    let rows = n - first;
    acts.x.copy_within(first * d..n * d, 0);
    layernorm(acts, rows, w.get(w.ln_f_weight), w.get(w.ln_f_bias), c.norm_eps);
    record_norm(rec, c, acts, NormSite::Final, pos0, n);
    let v = c.vocab_size;
    if all_logits {
        if acts.logits.len() < n * v {
            acts.logits.resize(n * v, 0.0);
        }
        matmul(&mut acts.logits, &acts.xn, w.get(w.lm_head), None, n, d, v);
        rec.record(Hook::Logits, c, acts, pos0, n);
    } else {
        matmul(&mut acts.logits, &acts.xn[(rows - 1) * d..rows * d], w.get(w.lm_head), None, 1, d, v);
    }
}

/// `acts.xn[..n] = LayerNorm(acts.x[..n])`, statistics into `acts.norm_mean` / `norm_scale`.
fn layernorm(acts: &mut Activations, n: usize, weight: &[f32], bias: &[f32], eps: f32) {
    let d = weight.len();
    norm::layernorm(&mut acts.xn[..n * d], &acts.x[..n * d], weight, bias, eps, &mut acts.norm_mean, &mut acts.norm_scale);
}

fn record_norm(rec: &mut dyn Recorder, c: &Config, acts: &Activations, site: NormSite, pos0: usize, n: usize) {
    for hook in [Hook::NormMean(site), Hook::NormScale(site)] {
        if rec.wants(hook) {
            rec.record(hook, c, acts, pos0, n);
        }
    }
}

fn add_into(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}
