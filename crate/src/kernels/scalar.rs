//! The innermost loops in portable Rust: the definition of their lane order, what every target
//! without an explicit SIMD version runs, and the oracle those versions are tested against. The lane
//! arrays are plain `[f32; LANES]` so that the compiler may vectorise them (SSE, AVX2, SIMD128)
//! without changing a rounding.

use super::{fold_lanes, LANES};

/// [`super::dot_block`] without its length checks: product `i` of every pair goes to partial sum
/// `i % LANES`.
#[inline(always)]
pub fn dot_block<const W: usize, const R: usize>(ws: [&[f32]; W], xs: [&[f32]; R]) -> [[f32; R]; W] {
    let n = ws.first().map_or(0, |w| w.len());
    let mut acc = [[[0.0f32; LANES]; R]; W];
    let full = n - n % LANES;
    let mut i = 0;
    while i < full {
        for (w, acc) in ws.iter().zip(&mut acc) {
            let wl = &w[i..i + LANES];
            for r in 0..R {
                let xl = &xs[r][i..i + LANES];
                for l in 0..LANES {
                    acc[r][l] += wl[l] * xl[l];
                }
            }
        }
        i += LANES;
    }
    for j in full..n {
        for (w, acc) in ws.iter().zip(&mut acc) {
            for r in 0..R {
                acc[r][j - full] += w[j] * xs[r][j];
            }
        }
    }
    acc.map(|rows| rows.map(fold_lanes))
}

/// [`super::sum`]: element `i` goes to partial sum `i % LANES`.
#[inline(always)]
pub fn sum(x: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let full = x.len() - x.len() % LANES;
    for chunk in x[..full].chunks_exact(LANES) {
        for l in 0..LANES {
            acc[l] += chunk[l];
        }
    }
    for (l, v) in x[full..].iter().enumerate() {
        acc[l] += v;
    }
    fold_lanes(acc)
}

/// [`super::add_scaled`].
#[inline(always)]
pub fn add_scaled(out: &mut [f32], p: f32, v: &[f32]) {
    for (o, v) in out.iter_mut().zip(v) {
        *o += p * v;
    }
}

/// `x[i] = e^x[i]`, by `libm`'s `expf`: the definition every platform's result equals.
pub fn exp_in_place(x: &mut [f32]) {
    for v in x {
        *v = libm::expf(*v);
    }
}
