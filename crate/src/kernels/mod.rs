//! Hot loops. Each kernel has a naive twin in its tests that serves as the oracle.
//!
//! Determinism across platforms: every reduction accumulates into [`LANES`] independent partial
//! sums in a fixed order, then folds them in a fixed tree ([`fold_lanes`]). The compiler maps the
//! lane array onto whatever vector width the target has (SSE, AVX2, wasm SIMD128, or scalar
//! registers) without changing a single rounding, so native, wasm-with-SIMD and wasm-without-SIMD
//! produce bit-identical logits, and seeded sampling gives the same text everywhere. For the same
//! reason `exp` and `tanh` come from the pure-Rust `libm` crate rather than the platform's C library.
//!
//! The innermost loops ([`dot_block`], [`sum`], [`add_scaled`], [`exp_in_place`]) are written twice: portably in
//! [`scalar`], the definition of the lane order and the fallback everywhere, and with explicit
//! wasm SIMD128 instructions in `simd128`, used in wasm builds with SIMD enabled (LLVM's own
//! vectorisation of the portable code is up to 3× slower there) and tested bit for bit against
//! the portable twin. Natively, [`dot_block`] and [`exp_in_place`] take their AVX / AVX2 twins in
//! `x86` where the CPU has them (checked at run time), tested bit for bit the same way. The same
//! goes for the dot products of Q4_0, Q4_1, Q8_0 and Q5_1 matrices: portable in [`packed`], with
//! AVX2 and AVX-512 (`x86`) and SIMD128 twins that [`matmul`] chooses.

pub mod activation;
pub mod attention;
pub mod matmul;
pub mod norm;
pub mod packed;
pub mod pool;
pub mod positions;
pub mod quant;
pub mod rope;
pub mod scalar;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod simd128;
#[cfg(target_arch = "x86_64")]
pub mod x86;

#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
use scalar as arch;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
use simd128 as arch;

/// Width of the partial-sum array in every reduction.
pub const LANES: usize = 8;

/// Folds partial sums in a fixed pairwise tree.
#[inline(always)]
pub fn fold_lanes(a: [f32; LANES]) -> f32 {
    ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]))
}

/// Dot products of one weight row with `R` input rows at once, so the row is loaded once for all
/// of them. Each of the `R` results has the same summation order as `dot(w, x)` alone.
#[inline(always)]
pub fn dot_rows<const R: usize>(w: &[f32], xs: [&[f32]; R]) -> [f32; R] {
    let [row] = dot_block([w], xs);
    row
}

/// Dot products of `W` weight rows with `R` input rows (`[w][r]`): each row is loaded once per
/// group of lanes for all its partners, and the `W·R` independent sums keep the vector units busy.
/// Every result has the summation order of `dot(w, x)` alone.
#[inline(always)]
pub fn dot_block<const W: usize, const R: usize>(ws: [&[f32]; W], xs: [&[f32]; R]) -> [[f32; R]; W] {
    let n = ws.first().map_or(0, |w| w.len());
    for row in ws.iter().chain(&xs) {
        assert_eq!(row.len(), n, "dot product of rows with different lengths");
    }
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx") {
            // SAFETY: AVX was detected; the rows' lengths are checked above.
            return unsafe { x86::dot_block(ws, xs) };
        }
    }
    arch::dot_block(ws, xs)
}

#[inline(always)]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    dot_rows::<1>(a, [b])[0]
}

/// The largest value of `x`, NaN skipped (as a fold of `f32::max` skips it); −∞ when there is
/// none. By comparison rather than `f32::max`: wasm has no instruction with `f32::max`'s NaN rule,
/// so there each `f32::max` is a call to libm's `fmaxf`: ranking SmolLM2's 49,152 logits (the
/// 1,000 survivors) took 0.66 ms in Node with it, 0.50 without. Where the largest value is zero,
/// either sign of zero may be returned (as with `f32::max`): the softmaxes subtract it, and
/// `x − (±0)` is `x` but for a zero `x`, whose `exp` is 1 either way.
#[inline(always)]
pub fn largest(x: &[f32]) -> f32 {
    x.iter().fold(f32::NEG_INFINITY, |top, &v| if v > top { v } else { top })
}

/// Sum of a row, element `i` going to partial sum `i % LANES` as in every other reduction.
#[inline(always)]
pub fn sum(x: &[f32]) -> f32 {
    arch::sum(x)
}

/// `out[i] += p · v[i]`: one value row's share of an attention output.
#[inline(always)]
pub fn add_scaled(out: &mut [f32], p: f32, v: &[f32]) {
    assert_eq!(out.len(), v.len(), "adding rows of different lengths");
    arch::add_scaled(out, p, v)
}

/// `x[i] = e^x[i]`, bit for bit `libm::expf` (the softmaxes and SiLU: a 49,152-token vocabulary
/// is 49,152 of them a keystroke, and scalar `expf` took ~0.6 ms of that in wasm).
#[inline(always)]
pub fn exp_in_place(x: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 was detected.
            return unsafe { x86::exp_in_place(x) };
        }
    }
    arch::exp_in_place(x)
}

/// What the vector twins of `libm::expf` (FreeBSD's `e_expf.c`) — SIMD128's `exp4`, AVX2's `exp8` —
/// take from it: its constants, in its order of use, and the bits of |x| where its branches turn.
pub(crate) mod expf {
    pub const LN2_HI: f32 = 6.931_457_5e-1;
    pub const LN2_LO: f32 = 1.428_606_8e-6;
    pub const INV_LN2: f32 = 1.442_695_1;
    pub const P1: f32 = 1.666_662_5e-1;
    pub const P2: f32 = -2.766_733_3e-3;
    /// |x| ≥ 87.33655 (and NaN): `expf` leaves its main path; the twins hand such a group to it.
    pub const LIMIT: u32 = 0x42ae_ac50;
    /// |x| > 1.5 ln 2: `k` = round(x / ln 2).
    pub const FAR: u32 = 0x3f85_1592;
    /// |x| > 0.5 ln 2 (and not far): `k` = ±1; below, 0.
    pub const NEAR: u32 = 0x3eb1_7218;
    /// |x| ≤ 2^−14: `1 + x`.
    pub const TINY: u32 = 0x3900_0000;
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Every 97th f32 bit pattern (44 million, both signs: all magnitudes, NaNs, infinities,
    /// subnormals) and every pattern around each of `expf`'s branch points, through `exp` and
    /// through `libm::expf`: the same bits. Neighbours side by side, so a vector group mixes the
    /// fast path and the fallback near the limits.
    pub(crate) fn assert_exp_matches_libm(exp: impl Fn(&mut [f32])) {
        let edges = [expf::TINY, expf::NEAR, expf::FAR, expf::LIMIT, 0x42b1_7218, 0x7f80_0000];
        let around = edges.iter().flat_map(|&e| (e - 4096..e + 4096).flat_map(|b| [b, b | 0x8000_0000]));
        let values: Vec<u32> = (0..=u32::MAX / 97).map(|i| i * 97).chain(around).collect();
        for chunk in values.chunks(1 << 16) {
            let mut x: Vec<f32> = chunk.iter().map(|&b| f32::from_bits(b)).collect();
            let want: Vec<u32> = x.iter().map(|&v| libm::expf(v).to_bits()).collect();
            exp(&mut x);
            for ((got, want), bits) in x.iter().zip(&want).zip(chunk) {
                let (got, want) = (got.to_bits(), *want);
                // NaN in, NaN out: any NaN will do (libm returns its input).
                let same = got == want || (f32::from_bits(got).is_nan() && f32::from_bits(want).is_nan());
                assert!(same, "exp({}) [{bits:#010x}]: {got:#010x}, libm {want:#010x}", f32::from_bits(*bits));
            }
        }
    }

    /// Values spanning twelve orders of magnitude with both signs, so that any change in which
    /// partial sum a product joins, or in the folding order, changes the rounded result.
    pub(crate) fn wild(n: usize, seed: u32) -> Vec<f32> {
        (0..n as u32)
            .map(|i| {
                let h = (i.wrapping_mul(2_654_435_761) ^ seed.wrapping_mul(40_503)).rotate_left(13);
                let mantissa = (h % 10_000) as f32 / 10_000.0 - 0.5;
                mantissa * 10f32.powi((h >> 20) as i32 % 13 - 6)
            })
            .collect()
    }

    #[test]
    fn largest_is_a_fold_of_f32_max_nan_skipped() {
        for n in 0..100 {
            let x = wild(n, 5);
            assert_eq!(largest(&x).to_bits(), x.iter().copied().fold(f32::NEG_INFINITY, f32::max).to_bits(), "n = {n}");
        }
        assert_eq!(largest(&[]), f32::NEG_INFINITY);
        assert_eq!(largest(&[f32::NAN]), f32::NEG_INFINITY);
        assert_eq!(largest(&[f32::NAN, 2.0, f32::NAN, -1.0, 1.5]), 2.0);
        assert_eq!(largest(&[-3.0, f32::NEG_INFINITY, f32::INFINITY, 7.0]), f32::INFINITY);
    }

    #[test]
    fn dot_matches_a_plain_sum_for_every_tail_length() {
        for n in 0..40 {
            let a: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
            let naive: f64 = a.iter().zip(&b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum();
            assert!((f64::from(dot(&a, &b)) - naive).abs() < 1e-5, "n = {n}");
        }
    }

    #[test]
    fn blocked_rows_round_exactly_like_single_rows() {
        let w: Vec<f32> = (0..77).map(|i| (i as f32 * 0.3).sin() * 3.0).collect();
        let xs: Vec<Vec<f32>> = (0..4).map(|r| (0..77).map(|i| ((i * (r + 2)) as f32 * 0.7).cos()).collect()).collect();
        let four = dot_rows::<4>(&w, [&xs[0], &xs[1], &xs[2], &xs[3]]);
        for r in 0..4 {
            assert_eq!(four[r].to_bits(), dot(&w, &xs[r]).to_bits());
        }
        let w2: Vec<f32> = w.iter().map(|v| v * -1.7 + 0.3).collect();
        let block = dot_block::<2, 4>([&w, &w2], [&xs[0], &xs[1], &xs[2], &xs[3]]);
        for r in 0..4 {
            assert_eq!(block[0][r].to_bits(), dot(&w, &xs[r]).to_bits());
            assert_eq!(block[1][r].to_bits(), dot(&w2, &xs[r]).to_bits());
        }
    }
}
