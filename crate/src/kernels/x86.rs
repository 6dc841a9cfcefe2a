//! Explicit AVX versions of [`super::dot_rows`] for x86-64, chosen at run time.
//!
//! Lane `l` of the 256-bit accumulator is partial sum `l` of the portable code, the tail goes to
//! the same lanes, and the fold is [`super::fold_lanes`]: results are bit-identical to the
//! portable twin. Multiply and add stay separate instructions (no FMA) for the same reason.

use std::arch::x86_64::*;

use super::{fold_lanes, LANES};

/// Dot products of one weight row with `R` input rows. Callers must have checked that the CPU
/// supports AVX and that every row has `w.len()` values.
#[target_feature(enable = "avx")]
pub unsafe fn dot_rows<const R: usize>(w: &[f32], xs: [&[f32]; R]) -> [f32; R] {
    let n = w.len();
    let full = n - n % LANES;
    let mut acc = [_mm256_setzero_ps(); R];
    let mut i = 0;
    while i < full {
        // SAFETY: i + LANES ≤ full ≤ n, the length of w and of every x.
        let wv = _mm256_loadu_ps(w.as_ptr().add(i));
        for r in 0..R {
            let xv = _mm256_loadu_ps(xs[r].as_ptr().add(i));
            acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(wv, xv));
        }
        i += LANES;
    }
    let mut out = [0.0; R];
    for r in 0..R {
        let mut lanes = [0.0f32; LANES];
        _mm256_storeu_ps(lanes.as_mut_ptr(), acc[r]);
        for j in full..n {
            lanes[j - full] += w[j] * xs[r][j];
        }
        out[r] = fold_lanes(lanes);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn bit_identical_to_the_portable_twin() {
        if !std::arch::is_x86_feature_detected!("avx") {
            return eprintln!("no AVX on this CPU: nothing to compare");
        }
        for n in [1, 7, 8, 9, 64, 77, 768] {
            let w: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin() * 5.0).collect();
            let xs: Vec<Vec<f32>> = (0..4).map(|r| (0..n).map(|i| ((i + r) as f32 * 0.11).cos()).collect()).collect();
            let rows = [&xs[0][..], &xs[1], &xs[2], &xs[3]];
            // SAFETY: AVX checked above; all rows have n values.
            let fast = unsafe { super::dot_rows::<4>(&w, rows) };
            assert_eq!(fast.map(f32::to_bits), super::super::dot_rows::<4>(&w, rows).map(f32::to_bits), "n = {n}");
        }
    }
}
