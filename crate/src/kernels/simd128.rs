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
//! Block matrices (Q4_0, Q4_1, Q8_0) have two kernels of their own, the SIMD128 twins of
//! `x86::dot_quant_rows4` and of [`quant::dequantize_row`]: each 32-weight block is decoded
//! straight into eight vectors, its f16 scales converted exactly in scalar code by the portable
//! decoder's own conversion, and every weight is the portable decoder's `d·q` or `d·q + m`, one
//! rounding per operation.

use core::arch::wasm32::{
    f32x4_add, f32x4_convert_i32x4, f32x4_extract_lane, f32x4_mul, f32x4_splat, i16x8_extend_high_i8x16,
    i16x8_extend_low_i8x16, i32x4_extend_high_i16x8, i32x4_extend_low_i16x8, i8x16_splat, i8x16_sub, u8x16_shr,
    v128, v128_and, v128_load, v128_store,
};

use super::quant::{self, f16_at, GgmlType};
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

/// One 32-weight block in registers: element `8g + l` is lane `l % 4` of vector `2g + l / 4`, so
/// vectors `2g` and `2g + 1` are lanes 0–3 and 4–7 of group `g`, as in every reduction here.
type Block = [v128; 8];

/// Four stored rows (each holding whole blocks for `x.len()` weights) against one input `x`,
/// bit-identical to [`quant::dot_row_quant`] on each row. The twin of `x86::dot_quant_rows4`:
/// blocks decoded straight into registers, four rows' independent accumulators.
///
/// # Panics
/// If `ty` is not Q4_0, Q4_1 or Q8_0, or a row is not `ty.row_bytes(x.len())` long.
// Out of line, as is `dequantize_row`: merged into matmul's (large) tile function, this ran 10–15%
// slower in V8.
#[inline(never)]
pub fn dot_quant_rows4(ty: GgmlType, rows: [&[u8]; 4], x: &[f32]) -> [f32; 4] {
    match ty {
        GgmlType::Q4_0 => dot_blocks4::<Q4_0, 18>(rows, x),
        GgmlType::Q4_1 => dot_blocks4::<Q4_1, 20>(rows, x),
        GgmlType::Q8_0 => dot_blocks4::<Q8_0, 34>(rows, x),
        _ => panic!("no SIMD128 kernel for {} rows", ty.name()),
    }
}

/// [`quant::dequantize_row`], bit for bit, with Q4_0, Q4_1 and Q8_0 blocks decoded here (LLVM
/// vectorises the portable 4-bit decoders across blocks, with a scalar store per weight).
#[inline(never)]
pub fn dequantize_row(ty: GgmlType, bytes: &[u8], out: &mut [f32]) {
    match ty {
        GgmlType::Q4_0 => dequantize_blocks::<Q4_0, 18>(bytes, out),
        GgmlType::Q4_1 => dequantize_blocks::<Q4_1, 20>(bytes, out),
        GgmlType::Q8_0 => dequantize_blocks::<Q8_0, 34>(bytes, out),
        _ => quant::dequantize_row(ty, bytes, out),
    }
}

#[inline(always)]
fn dot_blocks4<F: Decode<BYTES>, const BYTES: usize>(rows: [&[u8]; 4], x: &[f32]) -> [f32; 4] {
    let (x_blocks, x_tail) = x.as_chunks::<32>();
    let rows = rows.map(|row| row.as_chunks::<BYTES>());
    for (blocks, tail) in &rows {
        assert!(x_tail.is_empty() && tail.is_empty() && blocks.len() == x_blocks.len(), "rows of whole blocks for {} weights", x.len());
    }
    let mut lo = [f32x4_splat(0.0); 4];
    let mut hi = [f32x4_splat(0.0); 4];
    for (b, x_block) in x_blocks.iter().enumerate() {
        let xs = x_block.as_chunks::<LANES>().0;
        for r in 0..4 {
            let w = F::decode(&rows[r].0[b]);
            for (g, x_group) in xs.iter().enumerate() {
                let (x_lo, x_hi) = load(x_group);
                lo[r] = f32x4_add(lo[r], f32x4_mul(w[2 * g], x_lo));
                hi[r] = f32x4_add(hi[r], f32x4_mul(w[2 * g + 1], x_hi));
            }
        }
    }
    [0, 1, 2, 3].map(|r| fold_lanes(unpack(lo[r], hi[r])))
}

#[inline(always)]
fn dequantize_blocks<F: Decode<BYTES>, const BYTES: usize>(bytes: &[u8], out: &mut [f32]) {
    let (blocks, tail) = bytes.as_chunks::<BYTES>();
    let (outs, out_tail) = out.as_chunks_mut::<32>();
    assert!(tail.is_empty() && out_tail.is_empty() && blocks.len() == outs.len(), "{} bytes are not the blocks of {} weights", bytes.len(), out.len());
    for (block, o) in blocks.iter().zip(outs) {
        for (v, o) in F::decode(block).into_iter().zip(o.as_chunks_mut::<4>().0) {
            // SAFETY: `o` is 4 f32s, exactly one v128; wasm stores need no alignment.
            unsafe { v128_store(o.as_mut_ptr().cast(), v) };
        }
    }
}

/// How a `BYTES`-byte block becomes a [`Block`]: one zero-sized type per format, so that the
/// decoder is inlined into each kernel (a closure or function argument is not reliably inlined).
trait Decode<const BYTES: usize> {
    fn decode(b: &[u8; BYTES]) -> Block;
}

struct Q4_0;
struct Q4_1;
struct Q8_0;

/// `w = d·(q − 8)`, `q − 8` computed on the bytes as the portable decoder does in `i32`.
impl Decode<18> for Q4_0 {
    #[inline(always)]
    fn decode(b: &[u8; 18]) -> Block {
        let d = f32x4_splat(f16_at(b, 0));
        // Cannot fail: the last 16 of a block's 18 bytes always exist (a compile-time size).
        let (lo, hi) = nibbles(b.last_chunk().unwrap());
        let eight = i8x16_splat(8);
        widen(i8x16_sub(lo, eight), i8x16_sub(hi, eight)).map(|q| f32x4_mul(d, q))
    }
}

/// `w = d·q + m`.
impl Decode<20> for Q4_1 {
    #[inline(always)]
    fn decode(b: &[u8; 20]) -> Block {
        let (d, m) = (f32x4_splat(f16_at(b, 0)), f32x4_splat(f16_at(b, 2)));
        // Cannot fail: the last 16 of a block's 20 bytes always exist (a compile-time size).
        let (lo, hi) = nibbles(b.last_chunk().unwrap());
        widen(lo, hi).map(|q| f32x4_add(f32x4_mul(d, q), m))
    }
}

/// `w = d·q`, `q` a signed byte.
impl Decode<34> for Q8_0 {
    #[inline(always)]
    fn decode(b: &[u8; 34]) -> Block {
        let d = f32x4_splat(f16_at(b, 0));
        let halves = b.last_chunk::<32>().unwrap().as_chunks::<16>().0;
        widen(bytes16(&halves[0]), bytes16(&halves[1])).map(|q| f32x4_mul(d, q))
    }
}

#[inline(always)]
fn bytes16(p: &[u8; 16]) -> v128 {
    // SAFETY: `p` is 16 readable bytes, exactly one v128; wasm loads need no alignment.
    unsafe { v128_load(p.as_ptr().cast()) }
}

/// 16 bytes of nibbles: the low nibbles (elements 0–15) and the high nibbles (16–31), as bytes.
#[inline(always)]
fn nibbles(p: &[u8; 16]) -> (v128, v128) {
    let bytes = bytes16(p);
    (v128_and(bytes, i8x16_splat(0x0F)), u8x16_shr(bytes, 4))
}

/// Elements 0–15 (`a`) and 16–31 (`b`) of a block, signed bytes, as f32 in [`Block`] order.
#[inline(always)]
fn widen(a: v128, b: v128) -> Block {
    let f = |v: v128| f32x4_convert_i32x4(v);
    let (a_lo, a_hi, b_lo, b_hi) = (i16x8_extend_low_i8x16(a), i16x8_extend_high_i8x16(a), i16x8_extend_low_i8x16(b), i16x8_extend_high_i8x16(b));
    [
        f(i32x4_extend_low_i16x8(a_lo)),
        f(i32x4_extend_high_i16x8(a_lo)),
        f(i32x4_extend_low_i16x8(a_hi)),
        f(i32x4_extend_high_i16x8(a_hi)),
        f(i32x4_extend_low_i16x8(b_lo)),
        f(i32x4_extend_high_i16x8(b_lo)),
        f(i32x4_extend_low_i16x8(b_hi)),
        f(i32x4_extend_high_i16x8(b_hi)),
    ]
}

#[cfg(test)]
mod tests {
    use wasm_bindgen_test::wasm_bindgen_test;

    use super::super::matmul::{matmul, WeightRows};
    use super::super::quant::{self, GgmlType};
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

    /// `n_rows` rows of `n` weights of `ty`: arbitrary quant bytes, and scales that vary from block
    /// to block over normal and subnormal f16 values of both signs.
    fn block_rows(ty: GgmlType, n: usize, n_rows: usize) -> Vec<u8> {
        let scales = [0.037, -0.25, 1.5e-6, -3.0e-7, 7.0, 0.0, -0.0041];
        let mut bytes: Vec<u8> = (0..n_rows * ty.row_bytes(n).unwrap()).map(|i| (i * 37 % 251) as u8).collect();
        for (i, block) in bytes.chunks_mut(ty.block_bytes()).enumerate() {
            block[..2].copy_from_slice(&half::f16::from_f32(scales[i % scales.len()]).to_le_bytes());
            if ty == GgmlType::Q4_1 {
                block[2..4].copy_from_slice(&half::f16::from_f32(scales[(i + 3) % scales.len()]).to_le_bytes());
            }
        }
        bytes
    }

    const BLOCK_TYPES: [GgmlType; 3] = [GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0];

    #[wasm_bindgen_test]
    fn quantized_rows_are_bit_identical_to_the_portable_decoder() {
        for ty in BLOCK_TYPES {
            for n in [32, 64, 96, 160, 576] {
                let x = wild(n, 3);
                let bytes = block_rows(ty, n, 4);
                let rows: Vec<&[u8]> = bytes.chunks(ty.row_bytes(n).unwrap()).collect();
                let simd = super::dot_quant_rows4(ty, [rows[0], rows[1], rows[2], rows[3]], &x);
                for r in 0..4 {
                    assert_eq!(simd[r].to_bits(), quant::dot_row_quant(ty, rows[r], &x).to_bits(), "{ty:?} n = {n} row {r}");
                }
            }
        }
    }

    /// Q4_0, Q4_1 and Q8_0 rows of several lengths, and a type the portable decoder handles alone.
    #[wasm_bindgen_test]
    fn dequantized_rows_are_bit_identical_to_the_portable_decoder() {
        let q6_k = [(GgmlType::Q6_K, 512)].into_iter();
        for (ty, n) in BLOCK_TYPES.into_iter().flat_map(|ty| [32, 96, 576].map(|n| (ty, n))).chain(q6_k) {
            let bytes = block_rows(ty, n, 1);
            let (mut simd, mut portable) = (vec![f32::NAN; n], vec![f32::NAN; n]);
            super::dequantize_row(ty, &bytes, &mut simd);
            quant::dequantize_row(ty, &bytes, &mut portable);
            assert_eq!(simd.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), portable.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "{ty:?} n = {n}");
        }
    }

    /// `matmul` runs these kernels on block matrices (decode: four rows at a time, then the
    /// ragged rest; prefill: rows decoded here), and must give the decoded matrix's bits.
    #[wasm_bindgen_test]
    fn block_matrices_in_matmul_match_their_decoded_twin_bit_for_bit() {
        let (n_in, n_out) = (96, 19);
        for ty in BLOCK_TYPES {
            let blocks = block_rows(ty, n_in, n_out);
            let mut decoded = vec![0.0; n_out * n_in];
            quant::dequantize_row(ty, &blocks, &mut decoded);
            for n_tok in [1, 5] {
                let x = wild(n_tok * n_in, 9);
                let (mut a, mut b) = (vec![0.0; n_tok * n_out], vec![0.0; n_tok * n_out]);
                matmul(&mut a, n_out, &x, WeightRows::Blocks(ty, &blocks), None, n_tok, n_in, n_out);
                matmul(&mut b, n_out, &x, WeightRows::F32(&decoded), None, n_tok, n_in, n_out);
                assert_eq!(a.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), b.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "{ty:?}, {n_tok} tokens");
            }
        }
    }
}
