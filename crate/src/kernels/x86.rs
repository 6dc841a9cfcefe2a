//! Explicit AVX/AVX2 versions of the hottest reductions for x86-64, chosen at run time:
//! [`dot_rows`] (f32 weights) and [`dot_quant_rows4`] (Q4_0 / Q4_1 / Q8_0 weights, decode).
//!
//! Lane `l` of the 256-bit accumulator is partial sum `l` of the portable code, the tail goes to
//! the same lanes, and the fold is [`super::fold_lanes`]: results are bit-identical to the
//! portable twins. Multiply and add stay separate instructions (no FMA) for the same reason.

use std::arch::x86_64::*;

use super::quant::GgmlType;
use super::{fold_lanes, LANES};

/// Dot products of one weight row with `R` input rows.
///
/// # Safety
/// The CPU must support AVX, and every row must have `w.len()` values.
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

/// Four stored rows (each `row_bytes` long, back to back from `rows`) against one input `x`:
/// each block is decoded straight into registers as four groups of eight weights (elements
/// 8g..8g+8 of the block → lanes 0..8, as in the portable decoder + `dot_rows`). Four rows give
/// four independent accumulator chains, which is what makes decode fast with a fixed lane order.
///
/// # Safety
/// The CPU must support AVX2 and F16C, `ty` must be Q4_0, Q4_1 or Q8_0 (the types real small
/// models ship in), and each row must hold whole blocks for `x.len()` weights.
#[target_feature(enable = "avx2,f16c")]
pub unsafe fn dot_quant_rows4(ty: GgmlType, rows: [&[u8]; 4], x: &[f32]) -> [f32; 4] {
    // Array `map` and closures would not be compiled with AVX2 and would turn every intrinsic
    // into a call: the decoders are plain functions, inlined into each instantiation.
    match ty {
        GgmlType::Q4_0 => dot_blocks4::<18>(rows, x, decode_q4_0),
        GgmlType::Q4_1 => dot_blocks4::<20>(rows, x, decode_q4_1),
        _ => dot_blocks4::<34>(rows, x, decode_q8_0),
    }
}

/// Q4_0: `w = d·(q − 8)`; `q − 8` is exact in f32, so subtracting after conversion matches.
#[inline(always)]
unsafe fn decode_q4_0(b: *const u8) -> [__m256; 4] {
    let (d, eight) = (_mm256_set1_ps(f16_at(b)), _mm256_set1_ps(8.0));
    let q = nibbles(b.add(2));
    let w = |q: __m256| _mm256_mul_ps(d, _mm256_sub_ps(q, eight));
    [w(q[0]), w(q[1]), w(q[2]), w(q[3])]
}

/// Q4_1: `w = d·q + m`.
#[inline(always)]
unsafe fn decode_q4_1(b: *const u8) -> [__m256; 4] {
    let (d, m) = (_mm256_set1_ps(f16_at(b)), _mm256_set1_ps(f16_at(b.add(2))));
    let q = nibbles(b.add(4));
    let w = |q: __m256| _mm256_add_ps(_mm256_mul_ps(d, q), m);
    [w(q[0]), w(q[1]), w(q[2]), w(q[3])]
}

/// Q8_0: `w = d·q`, q a signed byte.
#[inline(always)]
unsafe fn decode_q8_0(b: *const u8) -> [__m256; 4] {
    let d = _mm256_set1_ps(f16_at(b));
    let w = |g: usize| {
        let q = _mm256_cvtepi8_epi32(_mm_loadl_epi64(b.add(2 + 8 * g) as *const __m128i));
        _mm256_mul_ps(d, _mm256_cvtepi32_ps(q))
    };
    [w(0), w(1), w(2), w(3)]
}

/// An f16 stored little-endian at `p`, widened exactly.
#[inline(always)]
unsafe fn f16_at(p: *const u8) -> f32 {
    let bits = u16::from_le_bytes([*p, *p.add(1)]);
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(bits))))
}

/// 16 bytes of nibbles → 32 values: low nibbles are elements 0–15, high nibbles 16–31.
#[inline(always)]
unsafe fn nibbles(p: *const u8) -> [__m256; 4] {
    let bytes = _mm_loadu_si128(p as *const __m128i);
    let mask = _mm_set1_epi8(0x0F);
    let lo = _mm_and_si128(bytes, mask);
    let hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);
    [widen(lo), widen(_mm_srli_si128(lo, 8)), widen(hi), widen(_mm_srli_si128(hi, 8))]
}

/// The low eight bytes of `v` as eight f32.
#[inline(always)]
unsafe fn widen(v: __m128i) -> __m256 {
    _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v))
}

#[inline(always)]
unsafe fn dot_blocks4<const BYTES: usize>(rows: [&[u8]; 4], x: &[f32], decode: unsafe fn(*const u8) -> [__m256; 4]) -> [f32; 4] {
    let mut acc = [_mm256_setzero_ps(); 4];
    let xp = x.as_ptr();
    for b in 0..x.len() / 32 {
        let xs = [
            _mm256_loadu_ps(xp.add(32 * b)),
            _mm256_loadu_ps(xp.add(32 * b + 8)),
            _mm256_loadu_ps(xp.add(32 * b + 16)),
            _mm256_loadu_ps(xp.add(32 * b + 24)),
        ];
        for r in 0..4 {
            let w = decode(rows[r].as_ptr().add(b * BYTES));
            for g in 0..4 {
                acc[r] = _mm256_add_ps(acc[r], _mm256_mul_ps(w[g], xs[g]));
            }
        }
    }
    let mut out = [0.0; 4];
    for r in 0..4 {
        let mut lanes = [0.0f32; LANES];
        _mm256_storeu_ps(lanes.as_mut_ptr(), acc[r]);
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

    #[test]
    fn quantized_rows_are_bit_identical_to_the_portable_decoder() {
        if !(std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("f16c")) {
            return eprintln!("no AVX2/F16C on this CPU: nothing to compare");
        }
        use crate::kernels::quant::{dot_row_quant, GgmlType};
        let n = 96;
        let x: Vec<f32> = (0..n).map(|i| (i as f32 * 0.41).sin()).collect();
        for ty in [GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0] {
            let row_bytes = ty.row_bytes(n).unwrap();
            // Any bytes are a valid block once the f16 scales are sane numbers.
            let mut bytes: Vec<u8> = (0..4 * row_bytes).map(|i| (i * 37 % 251) as u8).collect();
            for block in bytes.chunks_mut(ty.block_bytes()) {
                block[..2].copy_from_slice(&half::f16::from_f32(0.037).to_le_bytes());
                if ty == GgmlType::Q4_1 {
                    block[2..4].copy_from_slice(&half::f16::from_f32(-0.25).to_le_bytes());
                }
            }
            let rows: Vec<&[u8]> = bytes.chunks(row_bytes).collect();
            // SAFETY: AVX2 and F16C checked above; rows hold whole blocks for n weights.
            let fast = unsafe { super::dot_quant_rows4(ty, [rows[0], rows[1], rows[2], rows[3]], &x) };
            for r in 0..4 {
                assert_eq!(fast[r].to_bits(), dot_row_quant(ty, rows[r], &x).to_bits(), "{ty:?} row {r}");
            }
        }
    }
}
