//! `out[t, o] = bias[o] + Σ_i x[t, i] · w[o, i]` — every linear layer of the model.
//!
//! Weights are `[out, in]`, so each output is a dot product of two contiguous rows. Work is split
//! across threads by tiles of output rows; within a tile, each weight row is loaded once and
//! multiplied with four tokens at a time (prefill), or one (decode: then it is a matvec, bound by
//! memory bandwidth, and the tiles keep both cores streaming weights).

use rayon::prelude::*;

use super::dot_rows;

/// Output rows per parallel task: enough work to amortise scheduling, small enough to balance.
const TILE: usize = 16;

/// Raw output pointer shared by the tile tasks. Each task writes only the columns of its own tile
/// (`o0..o1` in every token row), so writes never overlap.
#[derive(Clone, Copy)]
struct Out(*mut f32);
unsafe impl Send for Out {}
unsafe impl Sync for Out {}

/// `x: [n_tok, n_in]`, `w: [n_out, n_in]`, `bias: [n_out]`, `out: [n_tok, n_out]`.
pub fn matmul(out: &mut [f32], x: &[f32], w: &[f32], bias: Option<&[f32]>, n_tok: usize, n_in: usize, n_out: usize) {
    assert!(out.len() >= n_tok * n_out && x.len() >= n_tok * n_in && w.len() == n_out * n_in);
    if let Some(b) = bias {
        assert_eq!(b.len(), n_out);
    }
    let ptr = Out(out.as_mut_ptr());
    let n_tiles = n_out.div_ceil(TILE);
    (0..n_tiles).into_par_iter().for_each(|tile| {
        let o0 = tile * TILE;
        let o1 = (o0 + TILE).min(n_out);
        // SAFETY: `out` holds n_tok·n_out values (asserted above) and this task writes only
        // positions t·n_out + o with o in its own tile o0..o1, disjoint from every other task's.
        unsafe { matmul_tile(ptr, x, w, bias, n_tok, n_in, n_out, o0, o1) }
    });
}

/// One tile, compiled for the best vector unit available: with AVX2 where the CPU has it, else for
/// the target's baseline (SSE2 natively, SIMD128 in wasm). The lane order in [`dot_rows`] makes
/// both give the same bits.
#[allow(clippy::too_many_arguments)]
unsafe fn matmul_tile(out: Out, x: &[f32], w: &[f32], bias: Option<&[f32]>, n_tok: usize, n_in: usize, n_out: usize, o0: usize, o1: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            return tile_avx2(out, x, w, bias, n_tok, n_in, n_out, o0, o1);
        }
    }
    tile(out, x, w, bias, n_tok, n_in, n_out, o0, o1)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(clippy::too_many_arguments)]
unsafe fn tile_avx2(out: Out, x: &[f32], w: &[f32], bias: Option<&[f32]>, n_tok: usize, n_in: usize, n_out: usize, o0: usize, o1: usize) {
    tile(out, x, w, bias, n_tok, n_in, n_out, o0, o1)
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn tile(out: Out, x: &[f32], w: &[f32], bias: Option<&[f32]>, n_tok: usize, n_in: usize, n_out: usize, o0: usize, o1: usize) {
    let row = |t: usize| &x[t * n_in..(t + 1) * n_in];
    for o in o0..o1 {
        let wo = &w[o * n_in..(o + 1) * n_in];
        let b = bias.map_or(0.0, |b| b[o]);
        let mut t = 0;
        while t + 4 <= n_tok {
            let d = dot_rows::<4>(wo, [row(t), row(t + 1), row(t + 2), row(t + 3)]);
            for (r, v) in d.iter().enumerate() {
                *out.0.add((t + r) * n_out + o) = v + b;
            }
            t += 4;
        }
        while t < n_tok {
            *out.0.add(t * n_out + o) = dot_rows::<1>(wo, [row(t)])[0] + b;
            t += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The oracle: three nested loops, sums in f64.
    fn matmul_naive(x: &[f32], w: &[f32], bias: &[f32], n_tok: usize, n_in: usize, n_out: usize) -> Vec<f32> {
        let mut out = vec![0.0; n_tok * n_out];
        for t in 0..n_tok {
            for o in 0..n_out {
                let s: f64 = (0..n_in).map(|i| f64::from(x[t * n_in + i]) * f64::from(w[o * n_in + i])).sum();
                out[t * n_out + o] = (s + f64::from(bias[o])) as f32;
            }
        }
        out
    }

    /// ```text
    /// x = [1 2]   w = [1 0]   bias = [0.5 0 -1]   out = [1.5 2 2]
    ///     [3 4]       [0 1]                             [3.5 4 6]
    ///                 [1 1]
    /// ```
    #[test]
    fn tiny_example() {
        let mut out = [0.0; 6];
        matmul(&mut out, &[1., 2., 3., 4.], &[1., 0., 0., 1., 1., 1.], Some(&[0.5, 0., -1.]), 2, 2, 3);
        assert_eq!(out, [1.5, 2., 2., 3.5, 4., 6.]);
    }

    #[test]
    fn matches_naive_for_ragged_shapes() {
        for (n_tok, n_in, n_out) in [(1, 1, 1), (3, 13, 17), (4, 64, 48), (9, 70, 33), (1, 768, 40)] {
            let x: Vec<f32> = (0..n_tok * n_in).map(|i| (i as f32 * 0.13).sin()).collect();
            let w: Vec<f32> = (0..n_out * n_in).map(|i| (i as f32 * 0.07).cos()).collect();
            let bias: Vec<f32> = (0..n_out).map(|i| i as f32 * 0.01).collect();
            let mut out = vec![0.0; n_tok * n_out];
            matmul(&mut out, &x, &w, Some(&bias), n_tok, n_in, n_out);
            let expected = matmul_naive(&x, &w, &bias, n_tok, n_in, n_out);
            for (a, b) in out.iter().zip(&expected) {
                assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "{n_tok}x{n_in}x{n_out}: {a} vs {b}");
            }
        }
    }

    #[test]
    fn a_token_gets_the_same_bits_alone_or_in_a_batch() {
        let (n_in, n_out) = (37, 21);
        let x: Vec<f32> = (0..6 * n_in).map(|i| (i as f32 * 0.29).sin()).collect();
        let w: Vec<f32> = (0..n_out * n_in).map(|i| (i as f32 * 0.05).cos()).collect();
        let mut batch = vec![0.0; 6 * n_out];
        matmul(&mut batch, &x, &w, None, 6, n_in, n_out);
        for t in 0..6 {
            let mut single = vec![0.0; n_out];
            matmul(&mut single, &x[t * n_in..(t + 1) * n_in], &w, None, 1, n_in, n_out);
            assert_eq!(single, batch[t * n_out..(t + 1) * n_out]);
        }
    }
}
