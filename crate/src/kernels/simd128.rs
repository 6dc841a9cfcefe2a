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
//!
//! Packed Q4_0, Q4_1, Q8_0 and Q5_1 matrices have their own kernel, [`dot_packed`], the twin of
//! [`super::packed::dot`] (and of the AVX2 `x86::dot_packed`).

use core::arch::wasm32::{
    f32x4, f32x4_abs, f32x4_add, f32x4_convert_i32x4, f32x4_div, f32x4_extract_lane, f32x4_gt, f32x4_le, f32x4_lt,
    f32x4_mul, f32x4_splat, f32x4_sub, f32x4_trunc, i32x4_add, i32x4_all_true, i32x4_lt, i32x4_shl, i32x4_shr,
    i32x4_splat, i32x4_sub, u32x4_shr, v128, v128_bitselect, v128_load, v128_store,
};

use super::packed::{Input, PackedType, BLOCK};
use super::{expf, fold_lanes, LANES};

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

/// [`super::scalar::dot_block`].
#[inline(always)]
pub fn dot_block<const W: usize, const R: usize>(ws: [&[f32]; W], xs: [&[f32]; R]) -> [[f32; R]; W] {
    let n = ws.first().map_or(0, |w| w.len());
    let w_groups = ws.map(|w| w.as_chunks::<LANES>().0);
    let x_groups = xs.map(|x| x.as_chunks::<LANES>().0);
    let mut lo = [[f32x4_splat(0.0); R]; W];
    let mut hi = [[f32x4_splat(0.0); R]; W];
    for g in 0..n / LANES {
        for w in 0..W {
            let (w_lo, w_hi) = load(&w_groups[w][g]);
            for r in 0..R {
                let (x_lo, x_hi) = load(&x_groups[r][g]);
                lo[w][r] = f32x4_add(lo[w][r], f32x4_mul(w_lo, x_lo));
                hi[w][r] = f32x4_add(hi[w][r], f32x4_mul(w_hi, x_hi));
            }
        }
    }
    let full = n - n % LANES;
    let mut out = [[0.0; R]; W];
    for w in 0..W {
        for r in 0..R {
            let mut acc = unpack(lo[w][r], hi[w][r]);
            for (l, (a, b)) in ws[w][full..].iter().zip(&xs[r][full..]).enumerate() {
                acc[l] += a * b;
            }
            out[w][r] = fold_lanes(acc);
        }
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

/// [`super::scalar::exp_in_place`]: four lanes at a time by [`exp4`], bit for bit `libm::expf`;
/// a group with a lane outside `exp4`'s range (|x| ≥ 87.33655: overflow, underflow, NaN) and the
/// tail go through `libm::expf` itself.
#[inline(always)]
pub fn exp_in_place(x: &mut [f32]) {
    let (groups, tail) = x.as_chunks_mut::<4>();
    for group in groups {
        // SAFETY: `group` holds 4 f32s, exactly one v128; wasm loads and stores need no alignment.
        let v = unsafe { v128_load(group.as_ptr().cast()) };
        // `lt` is false for NaN: a NaN lane goes to `expf` too.
        if !i32x4_all_true(f32x4_lt(f32x4_abs(v), bound(expf::LIMIT))) {
            group.iter_mut().for_each(|e| *e = libm::expf(*e));
        } else {
            // SAFETY: as the load.
            unsafe { v128_store(group.as_mut_ptr().cast(), exp4(v)) };
        }
    }
    tail.iter_mut().for_each(|e| *e = libm::expf(*e));
}

/// `libm::expf` (FreeBSD's `e_expf.c`) on four lanes with |x| < 87.33655, operation for operation:
/// the same argument reduction — `k` = round(x / ln 2) for |x| > 1.5 ln 2, ±1 for
/// 0.5 ln 2 < |x| ≤ 1.5 ln 2, 0 below (where `x − 0·ln2` is `x`, as `expf`'s own k = 0 branch has
/// it) — the same rational approximation in the same order, and the scaling by 2^k (k in
/// [−126, 126] here: one exact multiply, as `scalbn` does). For |x| ≤ 2^−14 it is `1 + x`.
///
/// Written for what V8 makes of it on x86 (SSE4.1, 128-bit), with the same values as `expf`'s
/// integer route, so the same bits. `expf` compares |x|'s bits with its bounds; here |x| itself is
/// compared with the bounds as floats (positive floats order as their bits do), one instruction
/// each, where V8 spends three or four on an unsigned integer comparison (and LLVM turns a signed
/// one on |x|'s bits back into unsigned). `k` stays a float: `expf`'s conversion to an integer
/// truncates, and so does `f32x4_trunc` (one `roundps`, where the saturating conversion is seven
/// instructions). 2^k's exponent is made from it by adding 1.5·2^23, which leaves `k` in the low
/// bits of the sum's word, then shifting `k + 127` up by 23, which drops the sum's high bits.
/// SmolLM2's 49,152 logits: 0.193 → 0.167 ms in Node, both builds alternating.
#[inline(always)]
fn exp4(x: v128) -> v128 {
    use super::expf::{FAR, INV_LN2, LN2_HI, LN2_LO, NEAR, P1, P2, TINY};
    let ax = f32x4_abs(x);
    let negative = i32x4_lt(x, i32x4_splat(0));
    let half = v128_bitselect(f32x4_splat(-0.5), f32x4_splat(0.5), negative);
    let k_far = f32x4_trunc(f32x4_add(f32x4_mul(f32x4_splat(INV_LN2), x), half));
    let k_near = v128_bitselect(f32x4_splat(-1.0), f32x4_splat(1.0), negative);
    let kf = v128_bitselect(
        k_far,
        v128_bitselect(k_near, f32x4_splat(0.0), f32x4_gt(ax, bound(NEAR))),
        f32x4_gt(ax, bound(FAR)),
    );
    let hi = f32x4_sub(x, f32x4_mul(kf, f32x4_splat(LN2_HI)));
    let lo = f32x4_mul(kf, f32x4_splat(LN2_LO));
    let r = f32x4_sub(hi, lo);
    let rr = f32x4_mul(r, r);
    let c = f32x4_sub(r, f32x4_mul(rr, f32x4_add(f32x4_splat(P1), f32x4_mul(rr, f32x4_splat(P2)))));
    let q = f32x4_div(f32x4_mul(r, c), f32x4_sub(f32x4_splat(2.0), c));
    let y = f32x4_add(f32x4_splat(1.0), f32x4_add(f32x4_sub(q, lo), hi));
    let k_low_bits = f32x4_add(kf, f32x4_splat(MAGIC));
    let scaled = f32x4_mul(y, i32x4_shl(i32x4_add(k_low_bits, i32x4_splat(127)), 23));
    v128_bitselect(f32x4_add(f32x4_splat(1.0), x), scaled, f32x4_le(ax, bound(TINY)))
}

/// 1.5·2^23: a float in [2^23, 2^24) has unit steps, so adding a small integer `k` to this leaves
/// `k` (two's complement) in the low bits of its word.
const MAGIC: f32 = 12_582_912.0;

/// A bound on |x| given by its bits, as a float: positive floats order as their bits do.
#[inline(always)]
fn bound(bits: u32) -> v128 {
    f32x4_splat(f32::from_bits(bits))
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

/// [`packed::dot`] of one packed row against four inputs (prefill), bit for bit.
#[inline(never)]
pub fn dot_packed_inputs4(ty: PackedType, row: &[u8], xs: [Input; 4]) -> [f32; 4] {
    for x in &xs {
        x.check(ty, xs[0].x.len());
    }
    match ty {
        PackedType::Q4_0 => inputs4::<Q4_0, 20>(row, xs),
        PackedType::Q4_1 => inputs4::<Q4_1, 24>(row, xs),
        PackedType::Q5_1 => inputs4::<Q5_1, 40>(row, xs),
        PackedType::Q8_0 => inputs4::<Q8_0, 36>(row, xs),
    }
}

/// [`packed::dot`] of one packed row against one input (decode), bit for bit.
// Out of line: merged into matmul's (large) tile function, the kernels ran 10–15% slower in V8.
// wasm-opt would merge it back (it inlines every function with one caller): crate/Cargo.toml stops it.
#[inline(never)]
pub fn dot_packed(ty: PackedType, row: &[u8], x: Input) -> f32 {
    x.check(ty, x.x.len());
    match ty {
        PackedType::Q4_0 => inputs1::<Q4_0, 20>(row, x),
        PackedType::Q4_1 => inputs1::<Q4_1, 24>(row, x),
        PackedType::Q5_1 => inputs1::<Q5_1, 40>(row, x),
        PackedType::Q8_0 => inputs1::<Q8_0, 36>(row, x),
    }
}

/// A row's blocks, checked to match an input of `n` values.
#[inline(always)]
fn blocks<const BYTES: usize>(row: &[u8], n: usize) -> &[[u8; BYTES]] {
    let (blocks, tail) = row.as_chunks::<BYTES>();
    assert!(tail.is_empty() && blocks.len() * BLOCK == n, "packed rows of whole blocks for {n} weights");
    blocks
}

/// An input's blocks and (Q4_1) block sums.
#[inline(always)]
fn input_blocks<'a>(x: &Input<'a>) -> (&'a [[f32; BLOCK]], &'a [[f32; LANES]]) {
    (x.x.as_chunks::<BLOCK>().0, x.sums.as_chunks::<LANES>().0)
}

#[inline(always)]
fn inputs4<F: Lanes<BYTES>, const BYTES: usize>(row: &[u8], xs: [Input; 4]) -> [f32; 4] {
    let n = xs[0].x.len();
    let row = blocks::<BYTES>(row, n);
    let ((x0, s0), (x1, s1), (x2, s2), (x3, s3)) =
        (input_blocks(&xs[0]), input_blocks(&xs[1]), input_blocks(&xs[2]), input_blocks(&xs[3]));
    let (mut a0, mut a1, mut a2, mut a3) = (ZERO, ZERO, ZERO, ZERO);
    for b in 0..row.len() {
        let block = F::lanes(&row[b]);
        accumulate(&mut a0, block, &x0[b], s0.get(b));
        accumulate(&mut a1, block, &x1[b], s1.get(b));
        accumulate(&mut a2, block, &x2[b], s2.get(b));
        accumulate(&mut a3, block, &x3[b], s3.get(b));
    }
    [a0, a1, a2, a3].map(fold)
}

#[inline(always)]
fn inputs1<F: Lanes<BYTES>, const BYTES: usize>(row: &[u8], x: Input) -> f32 {
    let row = blocks::<BYTES>(row, x.x.len());
    let (xb, sums) = input_blocks(&x);
    let mut acc = ZERO;
    for (b, block) in row.iter().enumerate() {
        accumulate(&mut acc, F::lanes(block), &xb[b], sums.get(b));
    }
    fold(acc)
}

/// Partial sums 0–3 and 4–7.
type Acc = (v128, v128);

const ZERO: Acc = (f32x4(0.0, 0.0, 0.0, 0.0), f32x4(0.0, 0.0, 0.0, 0.0));

fn fold((lo, hi): Acc) -> f32 {
    fold_lanes(unpack(lo, hi))
}

/// One block's share: `acc += d·P (+ m·S)` in the order of the definition.
#[inline(always)]
fn accumulate(acc: &mut Acc, (d, m, v): Lanes4, x: &[f32; BLOCK], sums: Option<&[f32; LANES]>) {
    let x = x.as_chunks::<4>().0;
    let x = |g: usize| {
        // SAFETY: `x[g]` is 4 readable f32s, exactly one v128; wasm loads need no alignment.
        unsafe { v128_load(x[g].as_ptr().cast()) }
    };
    let mut p_lo = f32x4_mul(v[0], x(0));
    let mut p_hi = f32x4_mul(v[1], x(1));
    for c in 1..4 {
        p_lo = f32x4_add(p_lo, f32x4_mul(v[2 * c], x(2 * c)));
        p_hi = f32x4_add(p_hi, f32x4_mul(v[2 * c + 1], x(2 * c + 1)));
    }
    acc.0 = f32x4_add(acc.0, f32x4_mul(d, p_lo));
    acc.1 = f32x4_add(acc.1, f32x4_mul(d, p_hi));
    if let (Some(m), Some(s)) = (m, sums) {
        let (s_lo, s_hi) = load(s);
        acc.0 = f32x4_add(acc.0, f32x4_mul(m, s_lo));
        acc.1 = f32x4_add(acc.1, f32x4_mul(m, s_hi));
    }
}

/// A block's scale `d`, min `m` (Q4_1) and its eight vectors of lane integers as f32.
type Lanes4 = (v128, Option<v128>, [v128; 8]);

/// How a packed block becomes its [`Lanes4`]. One zero-sized type per format, so that each kernel
/// has it inlined.
trait Lanes<const BYTES: usize> {
    fn lanes(b: &[u8; BYTES]) -> Lanes4;
}

struct Q4_0;
struct Q4_1;
struct Q8_0;
struct Q5_1;

#[inline(always)]
fn f32_at(b: &[u8], i: usize) -> v128 {
    f32x4_splat(f32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]))
}

/// The four words at byte `AT` of a block.
#[inline(always)]
fn words<const AT: usize, const BYTES: usize>(b: &[u8; BYTES]) -> v128 {
    const { assert!(AT + 16 <= BYTES) };
    // SAFETY: bytes AT..AT + 16 are inside the block (checked at compile time); wasm loads need no
    // alignment.
    unsafe { v128_load(b.as_ptr().add(AT).cast()) }
}

/// Nibble `g` of each word, as an integer: shifted to the top, then down.
#[inline(always)]
fn nibbles(w: v128) -> [v128; 8] {
    let nibble = |g: u32| u32x4_shr(i32x4_shl(w, 28 - 4 * g), 28);
    [nibble(0), nibble(1), nibble(2), nibble(3), nibble(4), nibble(5), nibble(6), u32x4_shr(w, 28)]
}

impl Lanes<20> for Q4_0 {
    #[inline(always)]
    fn lanes(b: &[u8; 20]) -> Lanes4 {
        let eight = i32x4_splat(8);
        (f32_at(b, 0), None, nibbles(words::<4, 20>(b)).map(|q| f32x4_convert_i32x4(i32x4_sub(q, eight))))
    }
}

impl Lanes<24> for Q4_1 {
    #[inline(always)]
    fn lanes(b: &[u8; 24]) -> Lanes4 {
        (f32_at(b, 0), Some(f32_at(b, 4)), nibbles(words::<8, 24>(b)).map(|q| f32x4_convert_i32x4(q)))
    }
}

/// Byte `p` of each of the eight words, sign-extended: shifted to the top, then arithmetically
/// down (Q8_0's and Q5_1's lane integers).
#[inline(always)]
fn bytes(w0: v128, w1: v128) -> [v128; 8] {
    let byte = |w: v128, p: u32| f32x4_convert_i32x4(i32x4_shr(i32x4_shl(w, 24 - 8 * p), 24));
    [byte(w0, 0), byte(w0, 1), byte(w0, 2), byte(w0, 3), byte(w1, 0), byte(w1, 1), byte(w1, 2), byte(w1, 3)]
}

impl Lanes<36> for Q8_0 {
    #[inline(always)]
    fn lanes(b: &[u8; 36]) -> Lanes4 {
        (f32_at(b, 0), None, bytes(words::<4, 36>(b), words::<20, 36>(b)))
    }
}

/// Q5_1: Q8_0's bytes (5-bit, so never negative) after a scale and a min.
impl Lanes<40> for Q5_1 {
    #[inline(always)]
    fn lanes(b: &[u8; 40]) -> Lanes4 {
        (f32_at(b, 0), Some(f32_at(b, 4)), bytes(words::<8, 40>(b), words::<24, 40>(b)))
    }
}

#[cfg(test)]
mod tests {
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::super::packed::{self, PackedType};
    use super::super::scalar;
    use super::super::tests::wild;

    const PACKED_TYPES: [PackedType; 4] = [PackedType::Q4_0, PackedType::Q4_1, PackedType::Q8_0, PackedType::Q5_1];

    #[wasm_bindgen_test]
    fn dot_blocks_of_every_ragged_length_match_the_portable_code_bit_for_bit() {
        for n in 0..100 {
            let ws: Vec<Vec<f32>> = (10..13).map(|seed| wild(n, seed)).collect();
            let xs: Vec<Vec<f32>> = (2..6).map(|seed| wild(n, seed)).collect();
            let three = [ws[0].as_slice(), &ws[1], &ws[2]];
            let four = [xs[0].as_slice(), &xs[1], &xs[2], &xs[3]];
            let bits = |b: [[f32; 4]; 3]| b.map(|row| row.map(f32::to_bits));
            assert_eq!(bits(super::dot_block(three, four)), bits(scalar::dot_block(three, four)), "n = {n}");
            assert_eq!(
                super::dot_block([&ws[0]], [&xs[0]])[0][0].to_bits(),
                scalar::dot_block([&ws[0]], [&xs[0]])[0][0].to_bits(),
                "n = {n}"
            );
        }
    }

    #[wasm_bindgen_test]
    fn exp_matches_libm_bit_for_bit() {
        crate::kernels::tests::assert_exp_matches_libm(super::exp_in_place);
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
            assert_eq!(
                simd.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                portable.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
            );
        }
    }

    /// The test data must be able to tell orders apart, or the two tests above prove nothing.
    #[wasm_bindgen_test]
    fn the_test_data_is_sensitive_to_summation_order() {
        let x = wild(64, 7);
        let in_order = x.iter().fold(0.0f32, |a, b| a + b);
        assert_ne!(in_order.to_bits(), scalar::sum(&x).to_bits());
    }

    /// Every packed type, for both shapes the matmul uses (1 row × 4 inputs when prefilling, 1 × 1
    /// when decoding and for the rest), on rows whose scales span normal and subnormal f16 values
    /// and inputs spanning twelve orders of magnitude.
    #[wasm_bindgen_test]
    fn packed_dots_are_bit_identical_to_the_portable_code() {
        for ty in PACKED_TYPES {
            for n in [32, 64, 96, 576] {
                let bytes = packed::sample_rows(ty, n, 4);
                let rows: Vec<&[u8]> = bytes.chunks(ty.row_bytes(n).unwrap()).collect();
                let xs: Vec<f32> = wild(4 * n, 3);
                let mut room = Vec::new();
                let input = packed::prepare_input(ty, &xs, n, 4, &mut room);
                let four_inputs = [input(0), input(1), input(2), input(3)];
                let bits = |a: &[f32]| a.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                let (simd, portable) =
                    (super::dot_packed_inputs4(ty, rows[2], four_inputs), packed::dot(ty, rows[2], four_inputs));
                assert_eq!(bits(&simd), bits(&portable), "{ty:?} n = {n}, 4 inputs");
                for (r, row) in rows.iter().enumerate() {
                    let (simd, portable) = (super::dot_packed(ty, row, input(r)), packed::dot(ty, row, [input(r)]));
                    assert_eq!(bits(&[simd]), bits(&portable), "{ty:?} n = {n}, row {r}");
                }
            }
        }
    }
}
