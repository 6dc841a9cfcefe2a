//! The loops of [`super::scalar`] as explicit wasm SIMD128 code, bit for bit the same.
//!
//! In the reductions the eight partial sums live in two vectors, lanes 0–3 in `lo` and 4–7 in
//! `hi`, and every product or element lands in the lane the portable code gives it. The tail
//! (fewer than [`LANES`] elements) and the final [`fold_lanes`] run on the unpacked lanes, exactly
//! as in the portable code. [`add_scaled`] has no order to keep: it does each element's multiply
//! and add, four elements at a time.
//!
//! Products are separate `f32x4_mul` and `f32x4_add` instructions: relaxed SIMD's fused
//! multiply-add would round once instead of twice and break the equality with every other platform.

use core::arch::wasm32::{f32x4_add, f32x4_extract_lane, f32x4_mul, f32x4_splat, v128, v128_load, v128_store};

use super::{fold_lanes, LANES};

/// Lanes 0–3 and 4–7 of one group of [`LANES`] values.
#[inline(always)]
fn load(group: &[f32; LANES]) -> (v128, v128) {
    let at = group.as_ptr();
    // SAFETY: `group` holds LANES = 8 readable f32s, the two 4-lane loads cover exactly those, and
    // wasm loads need no alignment.
    unsafe { (v128_load(at.cast()), v128_load(at.add(4).cast())) }
}

#[inline(always)]
fn unpack(lo: v128, hi: v128) -> [f32; LANES] {
    [
        f32x4_extract_lane::<0>(lo),
        f32x4_extract_lane::<1>(lo),
        f32x4_extract_lane::<2>(lo),
        f32x4_extract_lane::<3>(lo),
        f32x4_extract_lane::<0>(hi),
        f32x4_extract_lane::<1>(hi),
        f32x4_extract_lane::<2>(hi),
        f32x4_extract_lane::<3>(hi),
    ]
}

/// [`super::scalar::dot_rows`].
#[inline(always)]
pub fn dot_rows<const R: usize>(w: &[f32], xs: [&[f32]; R]) -> [f32; R] {
    let (w_groups, w_tail) = w.as_chunks::<LANES>();
    let x_groups = xs.map(|x| x.as_chunks::<LANES>().0);
    let mut lo = [f32x4_splat(0.0); R];
    let mut hi = [f32x4_splat(0.0); R];
    for (g, w_group) in w_groups.iter().enumerate() {
        let (w_lo, w_hi) = load(w_group);
        for r in 0..R {
            let (x_lo, x_hi) = load(&x_groups[r][g]);
            lo[r] = f32x4_add(lo[r], f32x4_mul(w_lo, x_lo));
            hi[r] = f32x4_add(hi[r], f32x4_mul(w_hi, x_hi));
        }
    }
    let full = w.len() - w_tail.len();
    let mut out = [0.0; R];
    for r in 0..R {
        let mut acc = unpack(lo[r], hi[r]);
        for (l, (w, x)) in w_tail.iter().zip(&xs[r][full..]).enumerate() {
            acc[l] += w * x;
        }
        out[r] = fold_lanes(acc);
    }
    out
}

/// [`super::scalar::sum`].
#[inline(always)]
pub fn sum(x: &[f32]) -> f32 {
    let (groups, tail) = x.as_chunks::<LANES>();
    let (mut lo, mut hi) = (f32x4_splat(0.0), f32x4_splat(0.0));
    for group in groups {
        let (g_lo, g_hi) = load(group);
        lo = f32x4_add(lo, g_lo);
        hi = f32x4_add(hi, g_hi);
    }
    let mut acc = unpack(lo, hi);
    for (l, v) in tail.iter().enumerate() {
        acc[l] += v;
    }
    fold_lanes(acc)
}

/// [`super::scalar::add_scaled`].
#[inline(always)]
pub fn add_scaled(out: &mut [f32], p: f32, v: &[f32]) {
    let (out_groups, out_tail) = out.as_chunks_mut::<4>();
    let (v_groups, v_tail) = v.as_chunks::<4>();
    let p4 = f32x4_splat(p);
    for (o, v) in out_groups.iter_mut().zip(v_groups) {
        // SAFETY: `o` and `v` are 4 f32s each, exactly one v128; wasm loads and stores need no
        // alignment.
        unsafe {
            let sum = f32x4_add(v128_load(o.as_ptr().cast()), f32x4_mul(p4, v128_load(v.as_ptr().cast())));
            v128_store(o.as_mut_ptr().cast(), sum);
        }
    }
    for (o, v) in out_tail.iter_mut().zip(v_tail) {
        *o += p * v;
    }
}

#[cfg(test)]
mod tests {
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::super::scalar;

    /// Values spanning twelve orders of magnitude with both signs, so that any change in which
    /// partial sum a product joins, or in the folding order, changes the rounded result.
    fn wild(n: usize, seed: u32) -> Vec<f32> {
        (0..n as u32)
            .map(|i| {
                let h = (i.wrapping_mul(2_654_435_761) ^ seed.wrapping_mul(40_503)).rotate_left(13);
                let mantissa = (h % 10_000) as f32 / 10_000.0 - 0.5;
                mantissa * 10f32.powi((h >> 20) as i32 % 13 - 6)
            })
            .collect()
    }

    #[wasm_bindgen_test]
    fn dot_rows_of_every_ragged_length_match_the_portable_code_bit_for_bit() {
        for n in 0..100 {
            let w = wild(n, 1);
            let xs: Vec<Vec<f32>> = (2..6).map(|seed| wild(n, seed)).collect();
            let four = [xs[0].as_slice(), &xs[1], &xs[2], &xs[3]];
            assert_eq!(
                super::dot_rows::<4>(&w, four).map(f32::to_bits),
                scalar::dot_rows::<4>(&w, four).map(f32::to_bits),
                "n = {n}"
            );
            assert_eq!(
                super::dot_rows::<1>(&w, [&xs[0]])[0].to_bits(),
                scalar::dot_rows::<1>(&w, [&xs[0]])[0].to_bits(),
                "n = {n}"
            );
        }
    }

    #[wasm_bindgen_test]
    fn sums_of_every_ragged_length_match_the_portable_code_bit_for_bit() {
        for n in 0..100 {
            let x = wild(n, 7);
            assert_eq!(super::sum(&x).to_bits(), scalar::sum(&x).to_bits(), "n = {n}");
        }
    }

    #[wasm_bindgen_test]
    fn scaled_adds_of_every_ragged_length_match_the_portable_code_bit_for_bit() {
        for n in 0..40 {
            let (v, start) = (wild(n, 11), wild(n, 12));
            let (mut simd, mut portable) = (start.clone(), start);
            super::add_scaled(&mut simd, 0.3, &v);
            scalar::add_scaled(&mut portable, 0.3, &v);
            assert_eq!(simd.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), portable.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
        }
    }

    /// The test data must be able to tell orders apart, or the two tests above prove nothing.
    #[wasm_bindgen_test]
    fn the_test_data_is_sensitive_to_summation_order() {
        let x = wild(64, 7);
        let in_order = x.iter().fold(0.0f32, |a, b| a + b);
        assert_ne!(in_order.to_bits(), scalar::sum(&x).to_bits());
    }
}
