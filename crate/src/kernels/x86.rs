//! Explicit AVX/AVX2 versions of the hottest reductions for x86-64, chosen at run time:
//! [`dot_block`] (f32 weights) and [`dot_packed`] (packed Q4_0 / Q4_1 / Q8_0 / Q5_1 weights), and
//! AVX-512 ones over packed weights: [`dot_packed_avx512`] (a row at a time: decode, and what
//! prefill does not pair) and [`dot_packed_rows2`] (two rows: prefill).
//!
//! Lane `l` of the 256-bit accumulator is partial sum `l` of the portable code, the tail goes to
//! the same lanes, and the fold is [`super::fold_lanes`]: results are bit-identical to the
//! portable twins. Multiply and add stay separate instructions (no FMA) for the same reason.

use std::arch::x86_64::*;

use super::packed::{Input, PackedType, BLOCK};
use super::{expf, fold_lanes, LANES};

/// [`super::dot_block`]: `W` weight rows against `R` input rows.
///
/// # Safety
/// The CPU must support AVX, and every row must have the first weight row's length.
#[target_feature(enable = "avx")]
pub unsafe fn dot_block<const W: usize, const R: usize>(ws: [&[f32]; W], xs: [&[f32]; R]) -> [[f32; R]; W] {
    let n = ws.first().map_or(0, |w| w.len());
    let full = n - n % LANES;
    let mut acc = [[_mm256_setzero_ps(); R]; W];
    let mut i = 0;
    while i < full {
        for w in 0..W {
            // SAFETY: i + LANES ≤ full ≤ n, the length of every row.
            let wv = _mm256_loadu_ps(ws[w].as_ptr().add(i));
            for r in 0..R {
                let xv = _mm256_loadu_ps(xs[r].as_ptr().add(i));
                acc[w][r] = _mm256_add_ps(acc[w][r], _mm256_mul_ps(wv, xv));
            }
        }
        i += LANES;
    }
    let mut out = [[0.0; R]; W];
    for w in 0..W {
        for r in 0..R {
            let mut lanes = [0.0f32; LANES];
            _mm256_storeu_ps(lanes.as_mut_ptr(), acc[w][r]);
            for j in full..n {
                lanes[j - full] += ws[w][j] * xs[r][j];
            }
            out[w][r] = fold_lanes(lanes);
        }
    }
    out
}

/// [`super::scalar::exp_in_place`] with AVX2: eight lanes at a time, operation for operation the
/// SIMD128 twin's `exp4` (FreeBSD's `e_expf.c`, which `libm::expf` is), so bit for bit
/// `libm::expf`; a group with a lane outside its range (|x| ≥ 87.33655: overflow, underflow, NaN)
/// and the tail go through `libm::expf` itself. (Natively the softmaxes and SiLU took 3–7 % of a
/// pass in scalar `expf`.)
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub unsafe fn exp_in_place(x: &mut [f32]) {
    let (groups, tail) = x.as_chunks_mut::<8>();
    for group in groups {
        let v = _mm256_loadu_ps(group.as_ptr());
        let magnitude = _mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(0x7fff_ffff));
        // `magnitude ≥ LIMIT`: both are below 2^31, so the signed comparison is the unsigned one.
        if _mm256_movemask_epi8(_mm256_cmpgt_epi32(magnitude, splat(expf::LIMIT - 1))) != 0 {
            for e in group.iter_mut() {
                *e = libm::expf(*e);
            }
        } else {
            _mm256_storeu_ps(group.as_mut_ptr(), exp8(v, magnitude));
        }
    }
    for e in tail {
        *e = libm::expf(*e);
    }
}

/// Eight lanes of `bits` (constants below 2^31).
#[inline(always)]
unsafe fn splat(bits: u32) -> __m256i {
    _mm256_set1_epi32(bits as i32)
}

/// `a` where `mask` is set, else `b` (masks of whole lanes).
#[inline(always)]
unsafe fn select(a: __m256i, b: __m256i, mask: __m256i) -> __m256i {
    _mm256_blendv_epi8(b, a, mask)
}

/// The SIMD128 `exp4` on eight lanes with |x| < 87.33655 (`hx` = the bits of |x|); see there.
#[inline(always)]
unsafe fn exp8(x: __m256, hx: __m256i) -> __m256 {
    use super::expf::{FAR, INV_LN2, LN2_HI, LN2_LO, NEAR, P1, P2, TINY};
    let negative = _mm256_srai_epi32(_mm256_castps_si256(x), 31);
    let half = _mm256_castsi256_ps(select(
        _mm256_castps_si256(_mm256_set1_ps(-0.5)),
        _mm256_castps_si256(_mm256_set1_ps(0.5)),
        negative,
    ));
    let k_far = _mm256_cvttps_epi32(_mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(INV_LN2), x), half));
    let k_near = select(_mm256_set1_epi32(-1), _mm256_set1_epi32(1), negative);
    let k = select(
        k_far,
        select(k_near, _mm256_setzero_si256(), _mm256_cmpgt_epi32(hx, splat(NEAR))),
        _mm256_cmpgt_epi32(hx, splat(FAR)),
    );
    let kf = _mm256_cvtepi32_ps(k);
    let hi = _mm256_sub_ps(x, _mm256_mul_ps(kf, _mm256_set1_ps(LN2_HI)));
    let lo = _mm256_mul_ps(kf, _mm256_set1_ps(LN2_LO));
    let r = _mm256_sub_ps(hi, lo);
    let rr = _mm256_mul_ps(r, r);
    let c =
        _mm256_sub_ps(r, _mm256_mul_ps(rr, _mm256_add_ps(_mm256_set1_ps(P1), _mm256_mul_ps(rr, _mm256_set1_ps(P2)))));
    let q = _mm256_div_ps(_mm256_mul_ps(r, c), _mm256_sub_ps(_mm256_set1_ps(2.0), c));
    let y = _mm256_add_ps(_mm256_set1_ps(1.0), _mm256_add_ps(_mm256_sub_ps(q, lo), hi));
    let scale = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23));
    let scaled = _mm256_mul_ps(y, scale);
    // |x| ≤ 2^−14: 1 + x.
    let tiny = _mm256_cmpgt_epi32(splat(TINY + 1), hx);
    _mm256_castsi256_ps(select(
        _mm256_castps_si256(_mm256_add_ps(_mm256_set1_ps(1.0), x)),
        _mm256_castps_si256(scaled),
        tiny,
    ))
}

/// [`super::packed::dot`]: one packed row against `NT` prepared inputs, bit for bit.
///
/// A block becomes four 8-lane vectors of lane integers, vector `c` holding elements `8c..8c+8`:
/// the block's words are broadcast to both 128-bit halves and each half shifts its own nibble (or
/// byte) into place. Multiply and add stay separate.
///
/// # Safety
/// The CPU must support AVX2. (A row of `ty.row_bytes(n)` bytes for inputs of `n` values, and
/// Q4_1's sums, are checked.)
#[target_feature(enable = "avx2")]
pub unsafe fn dot_packed<const NT: usize>(ty: PackedType, row: &[u8], xs: [Input; NT]) -> [f32; NT] {
    // The per-format code is plain functions, inlined into each instantiation (see below).
    match ty {
        PackedType::Q4_0 => dot_blocks::<NT>(ty, row, xs, lanes_q4_0),
        PackedType::Q4_1 => dot_blocks::<NT>(ty, row, xs, lanes_q4_1),
        PackedType::Q8_0 => dot_blocks::<NT>(ty, row, xs, lanes_q8_0),
        PackedType::Q5_1 => dot_blocks::<NT>(ty, row, xs, lanes_q5_1),
    }
}

/// [`dot_packed`] on a CPU with AVX-512VL, whose three-input logic instruction turns Q4_0's,
/// Q8_0's and Q5_1's integers into floats without a conversion (see `from_mantissa`). The CLI's
/// SmolLM2 decode at one thread on Zen 4, alternating binaries (6 pairs each): Q4_0 74 → 84 tok/s,
/// Q8_0 75 → 79; Q4_1, whose nibbles need no subtraction, was no faster that way and keeps
/// the AVX2 kernel's mask and conversion.
///
/// # Safety
/// The CPU must support AVX2, AVX-512F and AVX-512VL. (As [`dot_packed`], sizes are checked.)
#[target_feature(enable = "avx2,avx512f,avx512vl")]
pub unsafe fn dot_packed_avx512<const NT: usize>(ty: PackedType, row: &[u8], xs: [Input; NT]) -> [f32; NT] {
    match ty {
        PackedType::Q4_0 => dot_blocks::<NT>(ty, row, xs, lanes_q4_0_avx512),
        PackedType::Q4_1 => dot_blocks::<NT>(ty, row, xs, lanes_q4_1),
        PackedType::Q8_0 => dot_blocks::<NT>(ty, row, xs, lanes_q8_0_avx512),
        PackedType::Q5_1 => dot_blocks::<NT>(ty, row, xs, lanes_q5_1_avx512),
    }
}

/// A block's scale `d`, min `m` (zero when the format has none) and lane integers as f32.
type Lanes = [__m256; 4];

#[inline(always)]
unsafe fn dot_blocks<const NT: usize>(
    ty: PackedType,
    row: &[u8],
    xs: [Input; NT],
    lanes: unsafe fn(*const u8) -> (__m256, __m256, Lanes),
) -> [f32; NT] {
    let n = xs.first().map_or(0, |x| x.x.len());
    assert_eq!(ty.row_bytes(n), Some(row.len()), "packed row of the wrong size");
    // The loads below read whole blocks of every input, and Q4_1's sums: check that they exist.
    for x in &xs {
        x.check(ty, n);
    }
    let with_min = ty.has_min();
    let mut acc = [_mm256_setzero_ps(); NT];
    for b in 0..n / BLOCK {
        // SAFETY: block b is inside the row (length checked above).
        let (d, m, v) = lanes(row.as_ptr().add(b * ty.block_bytes()));
        for t in 0..NT {
            // SAFETY: elements 32b..32b+32 are inside every input (n = blocks × 32).
            let x = xs[t].x.as_ptr().add(b * BLOCK);
            let mut p = _mm256_mul_ps(v[0], _mm256_loadu_ps(x));
            for (c, v) in v.iter().enumerate().skip(1) {
                p = _mm256_add_ps(p, _mm256_mul_ps(*v, _mm256_loadu_ps(x.add(8 * c))));
            }
            acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(d, p));
            if with_min {
                // SAFETY: Q4_1 inputs hold 8 sums per block.
                let s = _mm256_loadu_ps(xs[t].sums.as_ptr().add(b * LANES));
                acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(m, s));
            }
        }
    }
    // A loop, not `acc.map`: a closure does not inherit `target_feature`, and the intrinsic in it
    // became a function call (prefill 25 % slower).
    let mut out = [0.0; NT];
    for t in 0..NT {
        let mut lanes = [0.0f32; LANES];
        _mm256_storeu_ps(lanes.as_mut_ptr(), acc[t]);
        out[t] = fold_lanes(lanes);
    }
    out
}

#[inline(always)]
unsafe fn f32_at(p: *const u8) -> __m256 {
    _mm256_set1_ps(f32::from_le_bytes(*(p as *const [u8; 4])))
}

/// Four words at `p`, in both halves of a 256-bit vector.
#[inline(always)]
unsafe fn words(p: *const u8) -> __m256i {
    _mm256_broadcastsi128_si256(_mm_loadu_si128(p as *const __m128i))
}

/// Lanes 0–3 set to `lo`, 4–7 to `hi`.
#[inline(always)]
unsafe fn halves(lo: i32, hi: i32) -> __m256i {
    _mm256_setr_epi32(lo, lo, lo, lo, hi, hi, hi, hi)
}

/// Vector `c`: nibble `2c` of each word in lanes 0–3 and nibble `2c + 1` in lanes 4–7.
// No closures here or below: they would not be compiled with AVX2, and every intrinsic in them
// would become a call.
#[inline(always)]
unsafe fn nibbles(w: __m256i) -> [__m256i; 4] {
    let low = _mm256_set1_epi32(0xF);
    [
        _mm256_and_si256(_mm256_srlv_epi32(w, halves(0, 4)), low),
        _mm256_and_si256(_mm256_srlv_epi32(w, halves(8, 12)), low),
        _mm256_and_si256(_mm256_srlv_epi32(w, halves(16, 20)), low),
        _mm256_and_si256(_mm256_srlv_epi32(w, halves(24, 28)), low),
    ]
}

/// Q4_0: `q − 8`.
#[inline(always)]
unsafe fn lanes_q4_0(b: *const u8) -> (__m256, __m256, Lanes) {
    let q = nibbles(words(b.add(4)));
    let eight = _mm256_set1_epi32(8);
    let v = [
        _mm256_cvtepi32_ps(_mm256_sub_epi32(q[0], eight)),
        _mm256_cvtepi32_ps(_mm256_sub_epi32(q[1], eight)),
        _mm256_cvtepi32_ps(_mm256_sub_epi32(q[2], eight)),
        _mm256_cvtepi32_ps(_mm256_sub_epi32(q[3], eight)),
    ];
    (f32_at(b), _mm256_setzero_ps(), v)
}

#[inline(always)]
unsafe fn lanes_q4_1(b: *const u8) -> (__m256, __m256, Lanes) {
    let q = nibbles(words(b.add(8)));
    (
        f32_at(b),
        f32_at(b.add(4)),
        [_mm256_cvtepi32_ps(q[0]), _mm256_cvtepi32_ps(q[1]), _mm256_cvtepi32_ps(q[2]), _mm256_cvtepi32_ps(q[3])],
    )
}

/// Q8_0: byte `p` of each word shifted to the top, then arithmetically down. Vector `c` reads the
/// words of half `c / 2`, bytes 0 and 1 (even `c`) or 2 and 3 (odd `c`).
#[inline(always)]
unsafe fn lanes_q8_0(b: *const u8) -> (__m256, __m256, Lanes) {
    let (w0, w1) = (words(b.add(4)), words(b.add(20)));
    let (even, odd) = (halves(24, 16), halves(8, 0));
    (
        f32_at(b),
        _mm256_setzero_ps(),
        [signed_byte(w0, even), signed_byte(w0, odd), signed_byte(w1, even), signed_byte(w1, odd)],
    )
}

/// Q5_1: Q8_0's bytes (unsigned 5-bit values, so the sign extension changes nothing) after a
/// scale and a min.
#[inline(always)]
unsafe fn lanes_q5_1(b: *const u8) -> (__m256, __m256, Lanes) {
    let (w0, w1) = (words(b.add(8)), words(b.add(24)));
    let (even, odd) = (halves(24, 16), halves(8, 0));
    (
        f32_at(b),
        f32_at(b.add(4)),
        [signed_byte(w0, even), signed_byte(w0, odd), signed_byte(w1, even), signed_byte(w1, odd)],
    )
}

#[inline(always)]
unsafe fn signed_byte(w: __m256i, shift: __m256i) -> __m256 {
    _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_sllv_epi32(w, shift), 24))
}

// ---- With AVX-512VL: integers made floats without a conversion ---------------------------------

/// The float 2^23's bits. A float in [2^23, 2^24) holds an integer in its low mantissa bits, so
/// `bits(2^23) ^ u` for `u < 2^23` is the float `2^23 + u`, exactly.
const TWO_23_BITS: i32 = 0x4B00_0000;
const TWO_23: f32 = 8_388_608.0;

/// How a format's lane integers sit in its words, for [`from_mantissa`]: the mask that takes one
/// (after a shift), the bit that flips its sign (so that a signed byte `q` reads as the unsigned
/// `q + 128`), and the float that stands for a lane integer of zero, subtracted last (`2^23`, plus
/// 8 for Q4_0's `q − 8`, plus 128 for Q8_0's flipped bytes).
struct Mantissa {
    mask: i32,
    flip: i32,
    zero: f32,
}

/// Q4_0: `q − 8` from the nibble `q`.
const Q4_0_MANTISSA: Mantissa = Mantissa { mask: 0xF, flip: 0, zero: TWO_23 + 8.0 };
/// Q8_0: the signed byte `q`, read as `q + 128`.
const Q8_0_MANTISSA: Mantissa = Mantissa { mask: 0xFF, flip: 0x80, zero: TWO_23 + 128.0 };
/// Q5_1: the byte `q` (below 32).
const Q5_1_MANTISSA: Mantissa = Mantissa { mask: 0xFF, flip: 0, zero: TWO_23 };

/// The lane integers of `shifted` (each in its lane's low bits, under `m.mask`) as floats:
/// `(shifted & mask) ^ (bits(2^23) | flip)` in one instruction (truth table 0x6A is `(a & b) ^ c`),
/// then one float subtraction, instead of a conversion after the integer work (for Q4_0 a mask and
/// a subtraction, now one instruction; for bytes a shift, as many as before). Every value is an
/// integer below 2^24, so the result is the conversion's, bit for bit.
#[inline(always)]
unsafe fn from_mantissa(shifted: __m256i, m: &Mantissa) -> __m256 {
    let bits =
        _mm256_ternarylogic_epi32::<0x6A>(shifted, _mm256_set1_epi32(m.mask), _mm256_set1_epi32(TWO_23_BITS | m.flip));
    _mm256_sub_ps(_mm256_castsi256_ps(bits), _mm256_set1_ps(m.zero))
}

/// [`lanes_q4_0`]'s nibbles, each shifted to the bottom of its lane.
#[inline(always)]
unsafe fn nibble_lanes_avx512(w: __m256i, m: &Mantissa) -> Lanes {
    [
        from_mantissa(_mm256_srlv_epi32(w, halves(0, 4)), m),
        from_mantissa(_mm256_srlv_epi32(w, halves(8, 12)), m),
        from_mantissa(_mm256_srlv_epi32(w, halves(16, 20)), m),
        from_mantissa(_mm256_srlv_epi32(w, halves(24, 28)), m),
    ]
}

/// [`lanes_q8_0`] and [`lanes_q5_1`]'s bytes, each shifted to the bottom of its lane.
#[inline(always)]
unsafe fn byte_lanes_avx512(w0: __m256i, w1: __m256i, m: &Mantissa) -> Lanes {
    let (even, odd) = (halves(0, 8), halves(16, 24));
    [
        from_mantissa(_mm256_srlv_epi32(w0, even), m),
        from_mantissa(_mm256_srlv_epi32(w0, odd), m),
        from_mantissa(_mm256_srlv_epi32(w1, even), m),
        from_mantissa(_mm256_srlv_epi32(w1, odd), m),
    ]
}

#[inline(always)]
unsafe fn lanes_q4_0_avx512(b: *const u8) -> (__m256, __m256, Lanes) {
    (f32_at(b), _mm256_setzero_ps(), nibble_lanes_avx512(words(b.add(4)), &Q4_0_MANTISSA))
}

#[inline(always)]
unsafe fn lanes_q8_0_avx512(b: *const u8) -> (__m256, __m256, Lanes) {
    (f32_at(b), _mm256_setzero_ps(), byte_lanes_avx512(words(b.add(4)), words(b.add(20)), &Q8_0_MANTISSA))
}

#[inline(always)]
unsafe fn lanes_q5_1_avx512(b: *const u8) -> (__m256, __m256, Lanes) {
    (f32_at(b), f32_at(b.add(4)), byte_lanes_avx512(words(b.add(8)), words(b.add(24)), &Q5_1_MANTISSA))
}

/// [`dot_packed`] of two consecutive rows against `NT` inputs (prefill), with AVX-512: row A's
/// eight lanes in the low half of each 512-bit vector, row B's in the high half, so that every
/// multiply and add serves both rows, and each input is loaded once for the two (broadcast to both
/// halves by the load). The lanes, and the order of every sum in them, are the AVX2 kernel's: the
/// same bits.
///
/// # Safety
/// The CPU must support AVX-512F, AVX-512DQ and AVX2. (Rows of `ty.row_bytes(n)` bytes for inputs of `n`
/// values, and Q4_1's sums, are checked.)
#[target_feature(enable = "avx512f,avx512dq,avx2")]
pub unsafe fn dot_packed_rows2<const NT: usize>(ty: PackedType, rows: [&[u8]; 2], xs: [Input; NT]) -> [[f32; NT]; 2] {
    match ty {
        PackedType::Q4_0 => dot_blocks_rows2(ty, rows, xs, lanes2_q4_0),
        PackedType::Q4_1 => dot_blocks_rows2(ty, rows, xs, lanes2_q4_1),
        PackedType::Q8_0 => dot_blocks_rows2(ty, rows, xs, lanes2_q8_0),
        PackedType::Q5_1 => dot_blocks_rows2(ty, rows, xs, lanes2_q5_1),
    }
}

/// Two rows' blocks: scales, mins and lane integers as f32, row A's in the low halves.
type Lanes2 = (__m512, __m512, [__m512; 4]);

#[inline(always)]
unsafe fn dot_blocks_rows2<const NT: usize>(
    ty: PackedType,
    rows: [&[u8]; 2],
    xs: [Input; NT],
    lanes: unsafe fn(*const u8, *const u8) -> Lanes2,
) -> [[f32; NT]; 2] {
    let n = xs.first().map_or(0, |x| x.x.len());
    for row in rows {
        assert_eq!(ty.row_bytes(n), Some(row.len()), "packed row of the wrong size");
    }
    // The loads below read whole blocks of every input, and Q4_1's sums: check that they exist.
    for x in &xs {
        x.check(ty, n);
    }
    let with_min = ty.has_min();
    let mut acc = [_mm512_setzero_ps(); NT];
    for b in 0..n / BLOCK {
        let at = b * ty.block_bytes();
        for row in rows {
            // A hint, never a fault, so past the row's end is fine (hence `wrapping_add`).
            _mm_prefetch::<_MM_HINT_T0>(row.as_ptr().wrapping_add(at + AHEAD).cast());
        }
        // SAFETY: block b is inside both rows (lengths checked above).
        let (d, m, v) = lanes(rows[0].as_ptr().add(at), rows[1].as_ptr().add(at));
        for t in 0..NT {
            // SAFETY: elements 32b..32b+32 are inside every input (n = blocks × 32).
            let x = xs[t].x.as_ptr().add(b * BLOCK);
            let mut p = _mm512_mul_ps(v[0], both_halves(x));
            for (c, v) in v.iter().enumerate().skip(1) {
                p = _mm512_add_ps(p, _mm512_mul_ps(*v, both_halves(x.add(8 * c))));
            }
            acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(d, p));
            if with_min {
                // SAFETY: Q4_1 inputs hold 8 sums per block.
                let s = both_halves(xs[t].sums.as_ptr().add(b * LANES));
                acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(m, s));
            }
        }
    }
    let mut out = [[0.0; NT]; 2];
    for t in 0..NT {
        let mut lanes = [0.0f32; 2 * LANES];
        _mm512_storeu_ps(lanes.as_mut_ptr(), acc[t]);
        for (r, &half) in lanes.as_chunks::<LANES>().0.iter().enumerate() {
            out[r][t] = fold_lanes(half);
        }
    }
    out
}

/// How far ahead of its block the 2-row kernel asks for each row (bytes): `perf` put the first
/// load of each block's weights at the top of the kernel, waiting on memory. The CLI's SmolLM2
/// Q8_0 prefill (52 tokens, alternating binaries): 358–362 → 383–391 tok/s at 1 thread, 611–616 →
/// 636–654 at 2; Q4_1 unchanged; 128 and 512 bytes no better.
const AHEAD: usize = 256;

/// Eight floats at `p`, in both halves.
#[inline(always)]
unsafe fn both_halves(p: *const f32) -> __m512 {
    _mm512_broadcast_f32x8(_mm256_loadu_ps(p))
}

/// Row A's vector in the low half, row B's in the high half.
#[inline(always)]
unsafe fn pair(a: __m256, b: __m256) -> __m512 {
    _mm512_insertf32x8(_mm512_castps256_ps512(a), b, 1)
}

/// The words of both rows' blocks (see [`words`]), row A's in the low half.
#[inline(always)]
unsafe fn words2(a: *const u8, b: *const u8) -> __m512i {
    _mm512_inserti64x4(_mm512_castsi256_si512(words(a)), words(b), 1)
}

/// [`halves`] in both halves.
#[inline(always)]
unsafe fn halves2(lo: i32, hi: i32) -> __m512i {
    _mm512_setr_epi32(lo, lo, lo, lo, hi, hi, hi, hi, lo, lo, lo, lo, hi, hi, hi, hi)
}

/// [`from_mantissa`] for both rows.
#[inline(always)]
unsafe fn from_mantissa2(shifted: __m512i, m: &Mantissa) -> __m512 {
    let bits =
        _mm512_ternarylogic_epi32::<0x6A>(shifted, _mm512_set1_epi32(m.mask), _mm512_set1_epi32(TWO_23_BITS | m.flip));
    _mm512_sub_ps(_mm512_castsi512_ps(bits), _mm512_set1_ps(m.zero))
}

/// [`nibble_lanes_avx512`] of both rows.
#[inline(always)]
unsafe fn nibble_lanes2(w: __m512i, m: &Mantissa) -> [__m512; 4] {
    [
        from_mantissa2(_mm512_srlv_epi32(w, halves2(0, 4)), m),
        from_mantissa2(_mm512_srlv_epi32(w, halves2(8, 12)), m),
        from_mantissa2(_mm512_srlv_epi32(w, halves2(16, 20)), m),
        from_mantissa2(_mm512_srlv_epi32(w, halves2(24, 28)), m),
    ]
}

/// [`byte_lanes_avx512`] of both rows.
#[inline(always)]
unsafe fn byte_lanes2(w0: __m512i, w1: __m512i, m: &Mantissa) -> [__m512; 4] {
    let (even, odd) = (halves2(0, 8), halves2(16, 24));
    [
        from_mantissa2(_mm512_srlv_epi32(w0, even), m),
        from_mantissa2(_mm512_srlv_epi32(w0, odd), m),
        from_mantissa2(_mm512_srlv_epi32(w1, even), m),
        from_mantissa2(_mm512_srlv_epi32(w1, odd), m),
    ]
}

#[inline(always)]
unsafe fn f32_pair(a: *const u8, b: *const u8) -> __m512 {
    pair(f32_at(a), f32_at(b))
}

#[inline(always)]
unsafe fn lanes2_q4_0(a: *const u8, b: *const u8) -> Lanes2 {
    (f32_pair(a, b), _mm512_setzero_ps(), nibble_lanes2(words2(a.add(4), b.add(4)), &Q4_0_MANTISSA))
}

/// Q4_1 keeps [`lanes_q4_1`]'s mask and conversion: made from the mantissa, its prefill was no
/// faster (152–158 → 147–156 tok/s at one thread).
#[inline(always)]
unsafe fn lanes2_q4_1(a: *const u8, b: *const u8) -> Lanes2 {
    let q = nibbles2(words2(a.add(8), b.add(8)));
    (
        f32_pair(a, b),
        f32_pair(a.add(4), b.add(4)),
        [_mm512_cvtepi32_ps(q[0]), _mm512_cvtepi32_ps(q[1]), _mm512_cvtepi32_ps(q[2]), _mm512_cvtepi32_ps(q[3])],
    )
}

/// [`nibbles`] of both rows.
#[inline(always)]
unsafe fn nibbles2(w: __m512i) -> [__m512i; 4] {
    let low = _mm512_set1_epi32(0xF);
    [
        _mm512_and_si512(_mm512_srlv_epi32(w, halves2(0, 4)), low),
        _mm512_and_si512(_mm512_srlv_epi32(w, halves2(8, 12)), low),
        _mm512_and_si512(_mm512_srlv_epi32(w, halves2(16, 20)), low),
        _mm512_and_si512(_mm512_srlv_epi32(w, halves2(24, 28)), low),
    ]
}

#[inline(always)]
unsafe fn lanes2_q8_0(a: *const u8, b: *const u8) -> Lanes2 {
    let (w0, w1) = (words2(a.add(4), b.add(4)), words2(a.add(20), b.add(20)));
    (f32_pair(a, b), _mm512_setzero_ps(), byte_lanes2(w0, w1, &Q8_0_MANTISSA))
}

#[inline(always)]
unsafe fn lanes2_q5_1(a: *const u8, b: *const u8) -> Lanes2 {
    let (w0, w1) = (words2(a.add(8), b.add(8)), words2(a.add(24), b.add(24)));
    (f32_pair(a, b), f32_pair(a.add(4), b.add(4)), byte_lanes2(w0, w1, &Q5_1_MANTISSA))
}

#[cfg(test)]
mod tests {
    #[test]
    fn bit_identical_to_the_portable_twin() {
        if !std::arch::is_x86_feature_detected!("avx") {
            return eprintln!("no AVX on this CPU: nothing to compare");
        }
        for n in [1, 7, 8, 9, 64, 77, 768] {
            let ws: Vec<Vec<f32>> =
                (0..2).map(|r| (0..n).map(|i| ((i + r) as f32 * 0.37).sin() * 5.0).collect()).collect();
            let xs: Vec<Vec<f32>> = (0..4).map(|r| (0..n).map(|i| ((i + r) as f32 * 0.11).cos()).collect()).collect();
            let (weights, rows) = ([&ws[0][..], &ws[1]], [&xs[0][..], &xs[1], &xs[2], &xs[3]]);
            let bits = |b: [[f32; 4]; 2]| b.map(|row| row.map(f32::to_bits));
            // SAFETY: AVX checked above; all rows have n values.
            let fast = unsafe { super::dot_block(weights, rows) };
            assert_eq!(bits(fast), bits(super::super::scalar::dot_block(weights, rows)), "n = {n}");
        }
    }

    #[test]
    fn exp_matches_libm_bit_for_bit() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return eprintln!("no AVX2 on this CPU: nothing to compare");
        }
        // SAFETY: AVX2 checked above.
        crate::kernels::tests::assert_exp_matches_libm(|x| unsafe { super::exp_in_place(x) });
    }

    /// Every packed type and matmul shape (see the SIMD128 twin's test), bit for bit.
    #[test]
    fn packed_dots_are_bit_identical_to_the_portable_code() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return eprintln!("no AVX2 on this CPU: nothing to compare");
        }
        use crate::kernels::packed::{self, PackedType};
        use crate::kernels::tests::wild;
        for ty in [PackedType::Q4_0, PackedType::Q4_1, PackedType::Q8_0, PackedType::Q5_1] {
            for n in [32, 64, 96, 576] {
                let bytes = packed::sample_rows(ty, n, 4);
                let rows: Vec<&[u8]> = bytes.chunks(ty.row_bytes(n).unwrap()).collect();
                // Eight inputs: the two-row kernel takes as many as prefill gives it.
                let xs = wild(8 * n, 3);
                let mut room = Vec::new();
                let input = packed::prepare_input(ty, &xs, n, 8, &mut room);
                let four_inputs = [input(0), input(1), input(2), input(3)];
                let eight_inputs: [_; 8] = std::array::from_fn(&input);
                let bits = |a: Vec<f32>| a.into_iter().map(f32::to_bits).collect::<Vec<_>>();
                let avx512 = std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512dq")
                    && std::arch::is_x86_feature_detected!("avx512vl");
                for (r, row) in rows.iter().enumerate() {
                    let portable = bits(packed::dot(ty, row, [input(r)]).to_vec());
                    // SAFETY: AVX2 checked above; rows hold whole blocks for n weights.
                    let fast = unsafe { super::dot_packed(ty, row, [input(r)]) };
                    assert_eq!(bits(fast.to_vec()), portable, "{ty:?} n = {n}, row {r}");
                    if avx512 {
                        // SAFETY: AVX-512F and VL checked.
                        let fast = unsafe { super::dot_packed_avx512(ty, row, [input(r)]) };
                        assert_eq!(bits(fast.to_vec()), portable, "{ty:?} n = {n}, row {r} (AVX-512)");
                    }
                }
                if avx512 {
                    // SAFETY: AVX-512F and DQ (and AVX2) checked; rows hold whole blocks for n weights.
                    let fast = unsafe { super::dot_packed_rows2(ty, [rows[1], rows[3]], eight_inputs) };
                    for (r, row) in [rows[1], rows[3]].into_iter().enumerate() {
                        assert_eq!(
                            bits(fast[r].to_vec()),
                            bits(packed::dot(ty, row, eight_inputs).to_vec()),
                            "{ty:?} n = {n}, two rows × 8 inputs (AVX-512), row {r}"
                        );
                    }
                }
                let portable = bits(packed::dot(ty, rows[2], four_inputs).to_vec());
                // SAFETY: as above.
                let fast = unsafe { super::dot_packed(ty, rows[2], four_inputs) };
                assert_eq!(bits(fast.to_vec()), portable, "{ty:?} n = {n}, 4 inputs");
                if avx512 {
                    // SAFETY: AVX-512F and VL checked.
                    let fast = unsafe { super::dot_packed_avx512(ty, rows[2], four_inputs) };
                    assert_eq!(bits(fast.to_vec()), portable, "{ty:?} n = {n}, 4 inputs (AVX-512)");
                }
            }
        }
    }
}
