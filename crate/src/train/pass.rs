//! One training pass of a GPT-2-style model over a batch: the forward pass with every activation
//! the backward pass needs kept, the mean cross-entropy of the next-token predictions, and the
//! gradient of that loss with respect to every parameter (llm.c's `gpt2_forward` /
//! `gpt2_backward`, read top to bottom). The matmuls run on the engine's kernels (SIMD128 in wasm,
//! the thread pool where there is one); the backward matmuls use transposed copies so that every
//! product is the same row-times-row kernel.

use crate::kernels::matmul::{matmul, WeightRows};
use crate::kernels::{dot, pool, positions, sum};
use crate::model::{Config, Positions};

use super::params::ParamLayout;

const GELU_SCALE: f32 = 0.797_884_6; // √(2/π), as the inference kernel

/// The activations of a batch, kept for the backward pass. `N` = batch × positions.
pub(super) struct Activations {
    batch: usize,
    t: usize,
    /// Per layer: the residual entering the block, norm outputs and statistics, q|k|v, attention
    /// probabilities, the heads' output, the residual after attention, the MLP's hidden layer
    /// before and after the GELU.
    resid: Vec<Vec<f32>>, // [L + 1][N, d]  (index L: the output of the last block)
    ln1: Vec<Vec<f32>>, // [L][N, d]
    ln1_stats: Vec<(Vec<f32>, Vec<f32>)>,
    qkv: Vec<Vec<f32>>,  // [L][N, 3d]
    att: Vec<Vec<f32>>,  // [L][B, H, T, T]
    atty: Vec<Vec<f32>>, // [L][N, d]
    mid: Vec<Vec<f32>>,  // [L][N, d]
    ln2: Vec<Vec<f32>>,
    ln2_stats: Vec<(Vec<f32>, Vec<f32>)>,
    fc: Vec<Vec<f32>>, // [L][N, F]  before GELU
    /// `tanh(√(2/π)(x + 0.044715x³))` of each `fc` value: GELU's and its derivative's (the tanh
    /// was a fifth of a step's time when computed twice).
    fc_tanh: Vec<Vec<f32>>, // [L][N, F]
    fc_gelu: Vec<Vec<f32>>, // [L][N, F]
    lnf: Vec<f32>,
    lnf_stats: (Vec<f32>, Vec<f32>),
    /// Dropout masks (0, or 1/(1 − p) for a kept value) of the last training pass: on the
    /// embeddings, each layer's attention probabilities, and what attention and the MLP add to
    /// the residual — nanoGPT's places. Empty when the pass had no dropout.
    drop_embed: Vec<f32>,
    drop_att: Vec<Vec<f32>>,
    drop_attn_out: Vec<Vec<f32>>,
    drop_mlp_out: Vec<Vec<f32>>,
    /// Softmax of the logits, `[N, V]`.
    probs: Vec<f32>,
    room: Vec<f32>,
}

/// The bytes a training pass over a `[batch, t]` batch holds at most: the kept activations (with
/// dropout masks), the logits' softmax, and the backward pass's largest temporaries (one layer's,
/// and the logits' gradient). `None` on overflow.
pub(super) fn pass_bytes(c: &Config, batch: usize, t: usize) -> Option<u64> {
    use crate::formats::limits::product;
    let [b, t, d, f, v, h, l] = [batch, t, c.d_model, c.d_ff, c.vocab_size, c.n_head, c.n_layer].map(|x| x as u64);
    let n = b.checked_mul(t)?;
    // Per layer: resid, ln1, qkv (3), atty, mid, ln2, two dropout masks (d-wide); fc, tanh, gelu
    // (f-wide); four statistics; attention probabilities and their dropout mask.
    let per_layer = [product(&[n, 10, d])?, product(&[n, 3, f])?, product(&[n, 4])?, product(&[2, b, h, t, t])?]
        .iter()
        .try_fold(0u64, |acc, &x| acc.checked_add(x))?;
    let kept = [product(&[l, per_layer])?, product(&[n, 3, d])?, product(&[n, v])?]
        .iter()
        .try_fold(0u64, |acc, &x| acc.checked_add(x))?;
    // Backward: the logits' gradient, and one layer's gradients and transposed copies.
    let temporaries = [product(&[n, v])?, product(&[n, 12, d])?, product(&[n, 4, f])?, product(&[b, h, t, t])?]
        .iter()
        .try_fold(0u64, |acc, &x| acc.checked_add(x))?;
    kept.checked_add(temporaries)?.checked_mul(4)
}

impl Activations {
    pub(super) fn new(c: &Config, batch: usize, t: usize) -> Activations {
        let (n, d, f, l) = (batch * t, c.d_model, c.d_ff, c.n_layer);
        let stats = || (vec![0f32; n], vec![0f32; n]);
        Activations {
            batch,
            t,
            resid: vec![vec![0f32; n * d]; l + 1],
            ln1: vec![vec![0f32; n * d]; l],
            ln1_stats: (0..l).map(|_| stats()).collect(),
            qkv: vec![vec![0f32; n * 3 * d]; l],
            att: vec![vec![0f32; batch * c.n_head * t * t]; l],
            atty: vec![vec![0f32; n * d]; l],
            mid: vec![vec![0f32; n * d]; l],
            ln2: vec![vec![0f32; n * d]; l],
            ln2_stats: (0..l).map(|_| stats()).collect(),
            fc: vec![vec![0f32; n * f]; l],
            fc_tanh: vec![vec![0f32; n * f]; l],
            fc_gelu: vec![vec![0f32; n * f]; l],
            lnf: vec![0f32; n * d],
            lnf_stats: stats(),
            drop_embed: Vec::new(),
            drop_att: Vec::new(),
            drop_attn_out: Vec::new(),
            drop_mlp_out: Vec::new(),
            probs: vec![0f32; n * c.vocab_size],
            room: Vec::new(),
        }
    }

    pub(super) fn fits(&self, batch: usize, t: usize) -> bool {
        self.batch == batch && self.t == t
    }
}

/// `out[n, o] = x[n, ·] · w[o, ·] + b[o]`.
fn linear(out: &mut [f32], x: &[f32], w: &[f32], b: Option<&[f32]>, n: usize, n_in: usize, room: &mut Vec<f32>) {
    let n_out = w.len() / n_in;
    matmul(out, n_out, x, WeightRows::F32(w), b, n, n_in, n_out, room);
}

/// `x` (`[rows, cols]`) as `[cols, rows]`, in 32 × 32 blocks so that both sides of a block stay
/// in the L1 cache (row by row, every write of a long row missed it).
pub(super) fn transpose(x: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    const BLOCK: usize = 32;
    let mut out = vec![0f32; x.len()];
    for r0 in (0..rows).step_by(BLOCK) {
        for c0 in (0..cols).step_by(BLOCK) {
            for r in r0..(r0 + BLOCK).min(rows) {
                for c in c0..(c0 + BLOCK).min(cols) {
                    out[c * rows + r] = x[r * cols + c];
                }
            }
        }
    }
    out
}

/// The backward pass of `out = x · wᵀ + b` (`x` `[n, n_in]`, `w` `[n_out, n_in]`): adds
/// `dout · w` to `dx`, `doutᵀ · x` to `dw` and the column sums of `dout` to `db`.
#[allow(clippy::too_many_arguments)]
fn linear_backward(
    dx: &mut [f32],
    dw: &mut [f32],
    db: Option<&mut [f32]>,
    dout: &[f32],
    x: &[f32],
    w: &[f32],
    n: usize,
    n_in: usize,
    room: &mut Vec<f32>,
) {
    let n_out = w.len() / n_in;
    let mut product = vec![0f32; n * n_in];
    linear(&mut product, dout, &transpose(w, n_out, n_in), None, n, n_out, room);
    add_into(dx, &product);
    let (dout_t, x_t) = (transpose(dout, n, n_out), transpose(x, n, n_in));
    let mut weight_grad = vec![0f32; n_out * n_in];
    matmul(&mut weight_grad, n_in, &dout_t, WeightRows::F32(&x_t), None, n_out, n, n_in, room);
    add_into(dw, &weight_grad);
    if let Some(db) = db {
        for row in dout.chunks_exact(n_out) {
            add_into(db, row);
        }
    }
}

fn add_into(x: &mut [f32], y: &[f32]) {
    x.iter_mut().zip(y).for_each(|(a, b)| *a += b);
}

fn layernorm(out: &mut [f32], x: &[f32], w: &[f32], b: &[f32], eps: f32, stats: &mut (Vec<f32>, Vec<f32>)) {
    crate::kernels::norm::layernorm(out, x, w, b, eps, &mut stats.0, &mut stats.1);
}

/// LayerNorm's backward: `dx += (dn − mean(dn) − n·mean(dn·n)) / σ`, with `n` the normalised
/// input and `dn = dout ⊙ w`; `dw += dout ⊙ n`, `db += dout`.
#[allow(clippy::too_many_arguments)]
fn layernorm_backward(
    dx: &mut [f32],
    dw: &mut [f32],
    db: &mut [f32],
    dout: &[f32],
    x: &[f32],
    w: &[f32],
    stats: &(Vec<f32>, Vec<f32>),
) {
    let d = w.len();
    let mut dnorm = vec![0f32; d];
    let mut norm = vec![0f32; d];
    for (i, (dx_row, (dout_row, x_row))) in
        dx.chunks_exact_mut(d).zip(dout.chunks_exact(d).zip(x.chunks_exact(d))).enumerate()
    {
        let (mean, sigma) = (stats.0[i], stats.1[i]);
        for j in 0..d {
            norm[j] = (x_row[j] - mean) / sigma;
            dnorm[j] = dout_row[j] * w[j];
            dw[j] += dout_row[j] * norm[j];
            db[j] += dout_row[j];
        }
        let dnorm_mean = sum(&dnorm) / d as f32;
        let dnorm_norm_mean = dot(&dnorm, &norm) / d as f32;
        for j in 0..d {
            dx_row[j] += (dnorm[j] - dnorm_mean - norm[j] * dnorm_norm_mean) / sigma;
        }
    }
}

/// GELU's tanh term, `tanh(√(2/π)(x + 0.044715x³))`, as `1 − 2/(e^{2u} + 1)` with [`exp`]: within
/// 3e-7 of libm's `tanhf` (absolute, which is all that GELU's `½x(1 + tanh)` and its derivative
/// see) in plain f32 arithmetic with no call and no branch, so the compiler vectorises the loop —
/// libm's scalar `tanhf` was a fifth of a training step — and every platform gets the same bits.
/// (Inference keeps libm's `tanhf`; the two GELUs differ by rounding.)
fn gelu_tanh(x: f32) -> f32 {
    let u = GELU_SCALE * (x + 0.044715 * x * x * x);
    // e^{2u} would overflow past 2u ≈ 88; in f32, tanh is ±1 long before |2u| = 80.
    1.0 - 2.0 / (exp((2.0 * u).clamp(-80.0, 80.0)) + 1.0)
}

/// `e^y` for |y| ≤ 80: `y = n·ln 2 + r` with `n` rounded to the nearest integer and |r| ≤ ln 2 / 2
/// (ln 2 split in two, Cody and Waite's way, so that `n·LN2_HI` is exact), `e^r` by its Taylor
/// series to `r⁷` (truncation below 6e-9 relative), times `2ⁿ` made from its exponent bits.
fn exp(y: f32) -> f32 {
    // Adding and subtracting 1.5·2²³ rounds a float below 2²² to the nearest integer.
    const ROUND: f32 = 12_582_912.0;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    let n = (y * std::f32::consts::LOG2_E + ROUND) - ROUND;
    let r = (y - n * LN2_HI) - n * LN2_LO;
    let taylor = 1.0
        + r * (1.0
            + r * (1.0 / 2.0
                + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r * (1.0 / 5040.0)))))));
    // n ∈ [−116, 116]: 2ⁿ is a normal float.
    taylor * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

/// d GELU(x) / dx, given its tanh term.
fn gelu_grad(x: f32, tanh: f32) -> f32 {
    let sech2 = 1.0 - tanh * tanh;
    0.5 * (1.0 + tanh) + 0.5 * x * sech2 * GELU_SCALE * (1.0 + 3.0 * 0.044715 * x * x)
}

/// Dropout of a training pass: probability `p`, masks drawn from `seed`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Dropout {
    pub p: f32,
    pub seed: u64,
}

/// `len` mask values: 0 with probability `p`, else 1/(1 − p) (inverted dropout, as PyTorch's).
fn dropout_mask(len: usize, p: f32, rng: &mut crate::sample::Rng) -> Vec<f32> {
    let keep = 1.0 / (1.0 - p);
    (0..len).map(|_| if rng.next_f32() < p { 0.0 } else { keep }).collect()
}

fn apply(x: &mut [f32], mask: &[f32]) {
    if !mask.is_empty() {
        x.iter_mut().zip(mask).for_each(|(v, m)| *v *= m);
    }
}

/// Runs `inputs` (`[batch, t]`) forward; returns the mean cross-entropy against `targets` (same
/// shape) when given, and leaves every activation in `acts`. With `dropout`, values are dropped
/// at nanoGPT's places and the masks kept for the backward pass.
pub(super) fn forward(
    c: &Config,
    layout: &ParamLayout,
    p: &[f32],
    acts: &mut Activations,
    inputs: &[u32],
    targets: Option<&[u32]>,
    dropout: Option<Dropout>,
) -> f32 {
    let (b_size, t, d, h) = (acts.batch, acts.t, c.d_model, c.n_head);
    let (n, hd, f, v) = (b_size * t, d / h, c.d_ff, c.vocab_size);
    let dropout = dropout.filter(|dr| dr.p > 0.0);
    let mut rng = crate::sample::Rng::new(dropout.map_or(0, |dr| dr.seed));
    let mut mask = |len: usize| dropout.map_or(Vec::new(), |dr| dropout_mask(len, dr.p, &mut rng));
    acts.drop_embed = mask(n * d);
    acts.drop_att = (0..c.n_layer).map(|_| mask(b_size * h * t * t)).collect();
    acts.drop_attn_out = (0..c.n_layer).map(|_| mask(n * d)).collect();
    acts.drop_mlp_out = (0..c.n_layer).map(|_| mask(n * d)).collect();
    let room = &mut acts.room;
    // Embeddings: the token's row plus the position's (learned or sinusoidal).
    let wte = &p[layout.wte.clone()];
    let mut position = vec![0f32; d];
    for (i, &tok) in inputs.iter().enumerate() {
        let x = &mut acts.resid[0][i * d..(i + 1) * d];
        x.copy_from_slice(&wte[tok as usize * d..(tok as usize + 1) * d]);
        match (&layout.wpe, c.variant.positions) {
            (Some(wpe), _) => add_into(x, &p[wpe.clone()][(i % t) * d..(i % t + 1) * d]),
            (None, Positions::Sinusoidal) => {
                positions::sinusoidal(i % t, &mut position);
                add_into(x, &position);
            }
            _ => {}
        }
    }
    apply(&mut acts.resid[0], &acts.drop_embed);
    let divisor = (hd as f32).sqrt();
    for (l, r) in layout.layers.iter().enumerate() {
        let (before, after) = acts.resid.split_at_mut(l + 1);
        let x = &before[l];
        layernorm(&mut acts.ln1[l], x, &p[r.ln1_w.clone()], &p[r.ln1_b.clone()], c.norm_eps, &mut acts.ln1_stats[l]);
        linear(&mut acts.qkv[l], &acts.ln1[l], &p[r.qkv_w.clone()], Some(&p[r.qkv_b.clone()]), n, d, room);
        // Causal attention per sequence and head (one task each, on the pool); probabilities
        // kept as [B, H, T, T], each head's output gathered in `heads` ([B, H, T, hd]) first.
        let (qkv, att, att_mask) = (&acts.qkv[l], &mut acts.att[l], &acts.drop_att[l]);
        let mut heads = vec![0f32; n * d];
        pool::for_each_chunk_pair(b_size * h, (att, t * t), (&mut heads, t * hd), |bh, att, out| {
            let (b, head) = (bh / h, bh % h);
            for i in 0..t {
                let q = &qkv[(b * t + i) * 3 * d + head * hd..][..hd];
                let row = &mut att[i * t..(i + 1) * t];
                for j in 0..=i {
                    row[j] = dot(q, &qkv[(b * t + j) * 3 * d + d + head * hd..][..hd]) / divisor;
                }
                row[i + 1..].fill(0.0);
                crate::kernels::attention::softmax(&mut row[..=i]);
                let out = &mut out[i * hd..(i + 1) * hd];
                out.fill(0.0);
                let kept = |j: usize| att_mask.get((bh * t + i) * t + j).copied().unwrap_or(1.0);
                for j in 0..=i {
                    let weight = row[j] * kept(j);
                    crate::kernels::add_scaled(out, weight, &qkv[(b * t + j) * 3 * d + 2 * d + head * hd..][..hd]);
                }
            }
        });
        let atty = &mut acts.atty[l];
        for (bh, out) in heads.chunks_exact(t * hd).enumerate() {
            let (b, head) = (bh / h, bh % h);
            for i in 0..t {
                atty[(b * t + i) * d + head * hd..][..hd].copy_from_slice(&out[i * hd..(i + 1) * hd]);
            }
        }
        let mid = &mut acts.mid[l];
        linear(mid, &acts.atty[l], &p[r.proj_w.clone()], Some(&p[r.proj_b.clone()]), n, d, room);
        apply(mid, &acts.drop_attn_out[l]);
        add_into(mid, x);
        layernorm(&mut acts.ln2[l], mid, &p[r.ln2_w.clone()], &p[r.ln2_b.clone()], c.norm_eps, &mut acts.ln2_stats[l]);
        linear(&mut acts.fc[l], &acts.ln2[l], &p[r.fc_w.clone()], Some(&p[r.fc_b.clone()]), n, d, room);
        let (fc, tanh) = (&acts.fc[l], &mut acts.fc_tanh[l]);
        pool::for_each_chunk_pair(n, (tanh, f), (&mut acts.fc_gelu[l], f), |row, th, g| {
            for ((t, g), &x) in th.iter_mut().zip(g.iter_mut()).zip(&fc[row * f..(row + 1) * f]) {
                *t = gelu_tanh(x);
                *g = 0.5 * x * (1.0 + *t);
            }
        });
        let out = &mut after[0];
        linear(out, &acts.fc_gelu[l], &p[r.fc_proj_w.clone()], Some(&p[r.fc_proj_b.clone()]), n, f, room);
        apply(out, &acts.drop_mlp_out[l]);
        add_into(out, mid);
    }
    let last = &acts.resid[c.n_layer];
    layernorm(&mut acts.lnf, last, &p[layout.lnf_w.clone()], &p[layout.lnf_b.clone()], c.norm_eps, &mut acts.lnf_stats);
    // Tied head: logits = lnf · wteᵀ, then softmax in place.
    linear(&mut acts.probs, &acts.lnf, wte, None, n, d, room);
    let mut loss = 0f64;
    for (i, row) in acts.probs.chunks_exact_mut(v).enumerate() {
        crate::kernels::attention::softmax(row);
        if let Some(targets) = targets {
            loss -= f64::from(row[targets[i] as usize].ln());
        }
    }
    (loss / n as f64) as f32
}

/// The gradient of the mean cross-entropy of the last [`forward`] (with `targets`) with respect to
/// every parameter, added to `grads` (laid out like the parameters).
pub(super) fn backward(
    c: &Config,
    layout: &ParamLayout,
    p: &[f32],
    grads: &mut [f32],
    acts: &mut Activations,
    inputs: &[u32],
    targets: &[u32],
) {
    let (b_size, t, d, h) = (acts.batch, acts.t, c.d_model, c.n_head);
    let (n, hd, f, v) = (b_size * t, d / h, c.d_ff, c.vocab_size);
    let mut room = std::mem::take(&mut acts.room);
    // d loss / d logits = (softmax − one-hot) / N.
    let mut dlogits = acts.probs.clone();
    for (i, row) in dlogits.chunks_exact_mut(v).enumerate() {
        row[targets[i] as usize] -= 1.0;
        row.iter_mut().for_each(|g| *g /= n as f32);
    }
    let wte = &p[layout.wte.clone()];
    let mut dlnf = vec![0f32; n * d];
    {
        let dwte = &mut grads[layout.wte.clone()];
        linear_backward(&mut dlnf, dwte, None, &dlogits, &acts.lnf, wte, n, d, &mut room);
    }
    drop(dlogits);
    let mut dresid = vec![0f32; n * d];
    {
        let (lnf_w, lnf_b) = (layout.lnf_w.clone(), layout.lnf_b.clone());
        let (dw, db) = two(grads, lnf_w.clone(), lnf_b);
        let last = &acts.resid[c.n_layer];
        layernorm_backward(&mut dresid, dw, db, &dlnf, last, &p[lnf_w], &acts.lnf_stats);
    }
    let divisor = (hd as f32).sqrt();
    for (l, r) in layout.layers.iter().enumerate().rev() {
        // MLP: out = mid + c_proj(gelu(c_fc(ln2(mid)))).
        let mut dfc_gelu = vec![0f32; n * f];
        {
            let mut dproj = dresid.clone();
            apply(&mut dproj, &acts.drop_mlp_out[l]);
            let (dw, db) = two(grads, r.fc_proj_w.clone(), r.fc_proj_b.clone());
            linear_backward(
                &mut dfc_gelu,
                dw,
                Some(db),
                &dproj,
                &acts.fc_gelu[l],
                &p[r.fc_proj_w.clone()],
                n,
                f,
                &mut room,
            );
        }
        for ((g, &x), &tanh) in dfc_gelu.iter_mut().zip(&acts.fc[l]).zip(&acts.fc_tanh[l]) {
            *g *= gelu_grad(x, tanh);
        }
        let mut dln2 = vec![0f32; n * d];
        {
            let (dw, db) = two(grads, r.fc_w.clone(), r.fc_b.clone());
            linear_backward(&mut dln2, dw, Some(db), &dfc_gelu, &acts.ln2[l], &p[r.fc_w.clone()], n, d, &mut room);
        }
        // dmid = dresid (the residual path) + the norm's backward.
        let mut dmid = dresid;
        {
            let (dw, db) = two(grads, r.ln2_w.clone(), r.ln2_b.clone());
            layernorm_backward(&mut dmid, dw, db, &dln2, &acts.mid[l], &p[r.ln2_w.clone()], &acts.ln2_stats[l]);
        }
        // Attention: mid = x + c_proj(attend(c_attn(ln1(x)))).
        let mut datty = vec![0f32; n * d];
        {
            let (dw, db) = two(grads, r.proj_w.clone(), r.proj_b.clone());
            let mut dproj = dmid.clone();
            apply(&mut dproj, &acts.drop_attn_out[l]);
            linear_backward(&mut datty, dw, Some(db), &dproj, &acts.atty[l], &p[r.proj_w.clone()], n, d, &mut room);
        }
        // Per sequence and head (one task each): the head's dq | dk | dv, `[3, T, hd]`, then
        // scattered into dqkv's columns.
        let (qkv, att, att_mask) = (&acts.qkv[l], &acts.att[l], &acts.drop_att[l]);
        let mut per_head = vec![0f32; b_size * h * 3 * t * hd];
        pool::for_each_chunk(b_size * h, (&mut per_head, 3 * t * hd), |bh, grads| {
            let (b, head) = (bh / h, bh % h);
            let (dq, rest) = grads.split_at_mut(t * hd);
            let (dk, dv) = rest.split_at_mut(t * hd);
            let mut datt = vec![0f32; t];
            let at = |j: usize, part: usize| (b * t + j) * 3 * d + part * d + head * hd;
            for i in 0..t {
                let row = &att[(bh * t + i) * t..][..t];
                let dout = &datty[(b * t + i) * d + head * hd..][..hd];
                // Through the weighted sum of values: d prob_j = dout · v_j, d v_j += prob_j · dout.
                let kept = |j: usize| att_mask.get((bh * t + i) * t + j).copied().unwrap_or(1.0);
                for j in 0..=i {
                    datt[j] = dot(dout, &qkv[at(j, 2)..at(j, 2) + hd]) * kept(j);
                    crate::kernels::add_scaled(&mut dv[j * hd..(j + 1) * hd], row[j] * kept(j), dout);
                }
                // Through the softmax: d score_j = p_j (d p_j − Σ p_k d p_k).
                let weighted: f32 = (0..=i).map(|k| row[k] * datt[k]).sum();
                let q = &qkv[at(i, 0)..at(i, 0) + hd];
                for j in 0..=i {
                    let dscore = row[j] * (datt[j] - weighted) / divisor;
                    crate::kernels::add_scaled(&mut dq[i * hd..(i + 1) * hd], dscore, &qkv[at(j, 1)..at(j, 1) + hd]);
                    crate::kernels::add_scaled(&mut dk[j * hd..(j + 1) * hd], dscore, q);
                }
            }
        });
        let mut dqkv = vec![0f32; n * 3 * d];
        for (bh, grads) in per_head.chunks_exact(3 * t * hd).enumerate() {
            let (b, head) = (bh / h, bh % h);
            for (part, g) in grads.chunks_exact(t * hd).enumerate() {
                for i in 0..t {
                    dqkv[(b * t + i) * 3 * d + part * d + head * hd..][..hd].copy_from_slice(&g[i * hd..(i + 1) * hd]);
                }
            }
        }
        let mut dln1 = vec![0f32; n * d];
        {
            let (dw, db) = two(grads, r.qkv_w.clone(), r.qkv_b.clone());
            linear_backward(&mut dln1, dw, Some(db), &dqkv, &acts.ln1[l], &p[r.qkv_w.clone()], n, d, &mut room);
        }
        let mut dx = dmid;
        {
            let (dw, db) = two(grads, r.ln1_w.clone(), r.ln1_b.clone());
            layernorm_backward(&mut dx, dw, db, &dln1, &acts.resid[l], &p[r.ln1_w.clone()], &acts.ln1_stats[l]);
        }
        dresid = dx;
    }
    apply(&mut dresid, &acts.drop_embed);
    // Embeddings: each token's row and each position's row receive their positions' gradient.
    for (i, &tok) in inputs.iter().enumerate() {
        let g = &dresid[i * d..(i + 1) * d];
        add_into(&mut grads[layout.wte.start + tok as usize * d..][..d], g);
        if let Some(wpe) = &layout.wpe {
            add_into(&mut grads[wpe.start + (i % t) * d..][..d], g);
        }
    }
    acts.room = room;
}

/// Two disjoint ranges of `grads`, mutably (`first` before `second`).
fn two(grads: &mut [f32], first: std::ops::Range<usize>, second: std::ops::Range<usize>) -> (&mut [f32], &mut [f32]) {
    debug_assert!(first.end <= second.start);
    let (a, b) = grads.split_at_mut(second.start);
    (&mut a[first], &mut b[..second.len()])
}

#[cfg(test)]
mod tests {
    /// The vectorisable tanh against libm's, over GELU's whole useful range and past it.
    #[test]
    fn gelu_tanh_is_libms_within_3e_7() {
        let mut worst = 0f32;
        for i in -200_000..=200_000 {
            let x = i as f32 * 1e-4;
            let want = libm::tanhf(super::GELU_SCALE * (x + 0.044715 * x * x * x));
            worst = worst.max((super::gelu_tanh(x) - want).abs());
        }
        for x in [-1e30, -100.0, 100.0, 1e30, 0.0, -0.0] {
            assert_eq!(super::gelu_tanh(x), libm::tanhf(super::GELU_SCALE * (x + 0.044715 * x * x * x)), "x = {x}");
        }
        assert!(worst <= 3e-7, "largest difference {worst}");
    }
}
