//! GGUF tensor types and their block formats: decoding to f32, and dot products that decode one
//! block at a time so a quantized matrix is never expanded whole.
//!
//! A ggml tensor row is a run of fixed-size blocks; each block packs `block_len` weights into
//! `block_bytes` bytes with its own scale(s). The decoders follow llama.cpp's `dequantize_row_*`
//! exactly and are checked bit for bit against the `gguf` Python package (see
//! `tests/fixtures/quant/`). Every product and sum is a separate f32 operation in llama.cpp's
//! order (Rust never fuses them into an FMA), so the results are the same bits on every platform.
//! A llama.cpp built with FMA contraction may differ from both in the last bit of `d·q − m`.
//!
//! [`dot_row_quant`] gives exactly the bits of [`dequantize_row`] followed by [`super::dot`]: it
//! feeds the same products to the same [`LANES`] partial sums in the same order; only where the
//! decoded weights live (a stack buffer of one block instead of a whole row) differs.

use half::{bf16, f16};

use super::{fold_lanes, LANES};

/// The tensor types gptlens reads, with their ggml type ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)] // ggml's spelling, so `Q4_K` reads the same here, in files and in llama.cpp
pub enum GgmlType {
    F32,
    F16,
    BF16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q4_K,
    Q5_K,
    Q6_K,
}

/// Weights per K-quant super-block.
const QK_K: usize = 256;

impl GgmlType {
    /// Every type gptlens reads.
    pub const ALL: [GgmlType; 11] = [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::BF16,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
    ];

    /// The type with ggml id `id` (`ggml_type` in ggml.h), if gptlens can decode it.
    pub fn from_id(id: u32) -> Option<GgmlType> {
        Some(match id {
            0 => GgmlType::F32,
            1 => GgmlType::F16,
            2 => GgmlType::Q4_0,
            3 => GgmlType::Q4_1,
            6 => GgmlType::Q5_0,
            7 => GgmlType::Q5_1,
            8 => GgmlType::Q8_0,
            12 => GgmlType::Q4_K,
            13 => GgmlType::Q5_K,
            14 => GgmlType::Q6_K,
            30 => GgmlType::BF16,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            GgmlType::F32 => "F32",
            GgmlType::F16 => "F16",
            GgmlType::BF16 => "BF16",
            GgmlType::Q4_0 => "Q4_0",
            GgmlType::Q4_1 => "Q4_1",
            GgmlType::Q5_0 => "Q5_0",
            GgmlType::Q5_1 => "Q5_1",
            GgmlType::Q8_0 => "Q8_0",
            GgmlType::Q4_K => "Q4_K",
            GgmlType::Q5_K => "Q5_K",
            GgmlType::Q6_K => "Q6_K",
        }
    }

    /// Weights per block (1 for the float types).
    pub fn block_len(self) -> usize {
        match self {
            GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => 1,
            GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q5_1 | GgmlType::Q8_0 => 32,
            GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K => QK_K,
        }
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        match self {
            GgmlType::F32 => 4,
            GgmlType::F16 | GgmlType::BF16 => 2,
            GgmlType::Q4_0 => Q4_0_BYTES,
            GgmlType::Q4_1 => Q4_1_BYTES,
            GgmlType::Q5_0 => Q5_0_BYTES,
            GgmlType::Q5_1 => Q5_1_BYTES,
            GgmlType::Q8_0 => Q8_0_BYTES,
            GgmlType::Q4_K => Q4_K_BYTES,
            GgmlType::Q5_K => Q5_K_BYTES,
            GgmlType::Q6_K => Q6_K_BYTES,
        }
    }

    /// Bytes that `n` weights occupy, or `None` when `n` is not a whole number of blocks or the
    /// size overflows `usize`.
    pub fn row_bytes(self, n: usize) -> Option<usize> {
        if !n.is_multiple_of(self.block_len()) {
            return None;
        }
        (n / self.block_len()).checked_mul(self.block_bytes())
    }
}

/// Decodes `out.len()` weights from `bytes`: one row, or several rows back to back (any run of
/// whole blocks).
///
/// # Panics
/// If `bytes.len()` is not exactly `ggml_type.row_bytes(out.len())`; a tensor from
/// [`crate::formats::gguf`] always has whole rows of the right size.
pub fn dequantize_row(ggml_type: GgmlType, bytes: &[u8], out: &mut [f32]) {
    check_row(ggml_type, bytes.len(), out.len());
    match ggml_type {
        GgmlType::F32 => dequantize_blocks(LanesF32, bytes, out),
        GgmlType::F16 => dequantize_blocks(LanesF16, bytes, out),
        GgmlType::BF16 => dequantize_blocks(LanesBf16, bytes, out),
        GgmlType::Q4_0 => dequantize_blocks(BlockQ4_0, bytes, out),
        GgmlType::Q4_1 => dequantize_blocks(BlockQ4_1, bytes, out),
        GgmlType::Q5_0 => dequantize_blocks(BlockQ5_0, bytes, out),
        GgmlType::Q5_1 => dequantize_blocks(BlockQ5_1, bytes, out),
        GgmlType::Q8_0 => dequantize_blocks(BlockQ8_0, bytes, out),
        GgmlType::Q4_K => dequantize_blocks(BlockQ4_K, bytes, out),
        GgmlType::Q5_K => dequantize_blocks(BlockQ5_K, bytes, out),
        GgmlType::Q6_K => dequantize_blocks(BlockQ6_K, bytes, out),
    }
}

/// `Σ_i w[i]·x[i]` for one stored row `w`, bit-identical to `dot(&dequantized_row, x)`.
///
/// # Panics
/// If `row.len()` is not exactly `ggml_type.row_bytes(x.len())`.
#[inline(always)]
pub fn dot_row_quant(ggml_type: GgmlType, row: &[u8], x: &[f32]) -> f32 {
    dot_rows_quant::<1>(ggml_type, row, [x])[0]
}

/// One stored row against `R` input rows: each block is decoded once for all of them (prefill).
/// Each result has the bits of [`dot_row_quant`] on that input alone.
///
/// # Panics
/// If the inputs differ in length, or `row.len()` is not `ggml_type.row_bytes` of that length.
#[inline(always)]
pub fn dot_rows_quant<const R: usize>(ggml_type: GgmlType, row: &[u8], xs: [&[f32]; R]) -> [f32; R] {
    let n = xs.first().map_or(0, |x| x.len());
    for x in &xs {
        assert_eq!(x.len(), n, "dot product of rows with different lengths");
    }
    check_row(ggml_type, row.len(), n);
    match ggml_type {
        GgmlType::F32 => dot_blocks(LanesF32, row, xs),
        GgmlType::F16 => dot_blocks(LanesF16, row, xs),
        GgmlType::BF16 => dot_blocks(LanesBf16, row, xs),
        GgmlType::Q4_0 => dot_blocks(BlockQ4_0, row, xs),
        GgmlType::Q4_1 => dot_blocks(BlockQ4_1, row, xs),
        GgmlType::Q5_0 => dot_blocks(BlockQ5_0, row, xs),
        GgmlType::Q5_1 => dot_blocks(BlockQ5_1, row, xs),
        GgmlType::Q8_0 => dot_blocks(BlockQ8_0, row, xs),
        GgmlType::Q4_K => dot_blocks(BlockQ4_K, row, xs),
        GgmlType::Q5_K => dot_blocks(BlockQ5_K, row, xs),
        GgmlType::Q6_K => dot_blocks(BlockQ6_K, row, xs),
    }
}

fn check_row(ggml_type: GgmlType, n_bytes: usize, n: usize) {
    let expected = ggml_type.row_bytes(n);
    assert!(expected == Some(n_bytes), "{n} {} weights need {expected:?} bytes, got {n_bytes}", ggml_type.name());
}

/// How `BYTES` stored bytes become `LEN` weights. One zero-sized type per format, so each
/// kernel is compiled for its format with the decoder inlined (a function pointer or closure
/// argument is not reliably inlined, and an out-of-line call per block costs more than the block).
trait BlockFormat<const BYTES: usize, const LEN: usize> {
    fn decode(block: &[u8; BYTES], out: &mut [f32; LEN]);
}

/// Decodes every block. The float types are decoded [`LANES`] values at a time; their last,
/// partial group is decoded from a zero-padded copy.
#[inline(always)]
fn dequantize_blocks<F: BlockFormat<BYTES, LEN>, const BYTES: usize, const LEN: usize>(
    _format: F,
    bytes: &[u8],
    out: &mut [f32],
) {
    let (blocks, tail) = bytes.as_chunks::<BYTES>();
    let (outs, out_tail) = out.as_chunks_mut::<LEN>();
    for (block, o) in blocks.iter().zip(outs) {
        F::decode(block, o);
    }
    if !tail.is_empty() {
        let decoded = decode_padded::<F, BYTES, LEN>(tail);
        out_tail.copy_from_slice(&decoded[..out_tail.len()]);
    }
}

/// The dot product of [`super::dot_rows`], with the weights decoded a block at a time. Blocks hold
/// a multiple of [`LANES`] weights, so each block's products land in the same partial sums as in
/// `dot_rows`; the float types' partial last group is its tail (`acc[j − full]`).
#[inline(always)]
fn dot_blocks<F: BlockFormat<BYTES, LEN>, const BYTES: usize, const LEN: usize, const R: usize>(
    _format: F,
    row: &[u8],
    xs: [&[f32]; R],
) -> [f32; R] {
    const { assert!(LEN.is_multiple_of(LANES), "a block must cover whole lane groups") };
    let mut acc = [[0.0f32; LANES]; R];
    let mut w = [0.0f32; LEN];
    let (blocks, tail) = row.as_chunks::<BYTES>();
    for (b, block) in blocks.iter().enumerate() {
        F::decode(block, &mut w);
        let start = b * LEN;
        for r in 0..R {
            let x = &xs[r][start..start + LEN];
            for (wl, xl) in w.as_chunks::<LANES>().0.iter().zip(x.as_chunks::<LANES>().0) {
                for l in 0..LANES {
                    acc[r][l] += wl[l] * xl[l];
                }
            }
        }
    }
    if !tail.is_empty() {
        let w = decode_padded::<F, BYTES, LEN>(tail);
        let full = blocks.len() * LEN;
        for r in 0..R {
            for (j, x) in xs[r][full..].iter().enumerate() {
                acc[r][j] += w[j] * x;
            }
        }
    }
    acc.map(fold_lanes)
}

/// Decodes a partial block (only the float types have one) from a zero-padded copy.
#[inline(always)]
fn decode_padded<F: BlockFormat<BYTES, LEN>, const BYTES: usize, const LEN: usize>(tail: &[u8]) -> [f32; LEN] {
    let mut padded = [0u8; BYTES];
    padded[..tail.len()].copy_from_slice(tail);
    let mut w = [0.0f32; LEN];
    F::decode(&padded, &mut w);
    w
}

/// The f16 at byte `i`. `to_f32_const` is half's portable bit-twiddling conversion; `to_f32`
/// would check for F16C at run time on every call, which costs more than decoding the block.
/// Both are exact, so the bits are the same.
#[inline(always)]
pub(super) fn f16_at(bytes: &[u8], i: usize) -> f32 {
    f16::from_le_bytes([bytes[i], bytes[i + 1]]).to_f32_const()
}

// ---- float types, decoded LANES values per call --------------------------------------------

struct LanesF32;

impl BlockFormat<{ 4 * LANES }, LANES> for LanesF32 {
    #[inline(always)]
    fn decode(b: &[u8; 4 * LANES], out: &mut [f32; LANES]) {
        for (o, c) in out.iter_mut().zip(b.as_chunks::<4>().0) {
            *o = f32::from_le_bytes(*c);
        }
    }
}

struct LanesF16;

impl BlockFormat<{ 2 * LANES }, LANES> for LanesF16 {
    #[inline(always)]
    fn decode(b: &[u8; 2 * LANES], out: &mut [f32; LANES]) {
        for (o, c) in out.iter_mut().zip(b.as_chunks::<2>().0) {
            *o = f16::from_le_bytes(*c).to_f32_const();
        }
    }
}

struct LanesBf16;

impl BlockFormat<{ 2 * LANES }, LANES> for LanesBf16 {
    #[inline(always)]
    fn decode(b: &[u8; 2 * LANES], out: &mut [f32; LANES]) {
        for (o, c) in out.iter_mut().zip(b.as_chunks::<2>().0) {
            *o = bf16::from_le_bytes(*c).to_f32_const();
        }
    }
}

// ---- 32-weight blocks ------------------------------------------------------------------------

const Q4_0_BYTES: usize = 18;
const Q4_1_BYTES: usize = 20;
const Q5_0_BYTES: usize = 22;
const Q5_1_BYTES: usize = 24;
const Q8_0_BYTES: usize = 34;

/// Q4_0: 32 weights in 18 bytes, `w = d·(q − 8)` with 4-bit `q`.
/// ```text
/// byte  0  1 | 2        3        …  17
///       d f16 | q16 q0 | q17 q1 | … | q31 q15     (high nibble | low nibble)
/// ```
/// Low nibbles are weights 0–15, high nibbles 16–31.
struct BlockQ4_0;

impl BlockFormat<Q4_0_BYTES, 32> for BlockQ4_0 {
    #[inline(always)]
    fn decode(b: &[u8; Q4_0_BYTES], out: &mut [f32; 32]) {
        let d = f16_at(b, 0);
        for j in 0..16 {
            let q = b[2 + j];
            out[j] = d * ((q & 0x0F) as i32 - 8) as f32;
            out[j + 16] = d * ((q >> 4) as i32 - 8) as f32;
        }
    }
}

/// Q4_1: 32 weights in 20 bytes, `w = d·q + m` with 4-bit `q`.
/// ```text
/// byte  0  1 | 2  3  | 4        …  19
///       d f16 | m f16 | q16 q0 | … | q31 q15
/// ```
struct BlockQ4_1;

impl BlockFormat<Q4_1_BYTES, 32> for BlockQ4_1 {
    #[inline(always)]
    fn decode(b: &[u8; Q4_1_BYTES], out: &mut [f32; 32]) {
        let d = f16_at(b, 0);
        let m = f16_at(b, 2);
        for j in 0..16 {
            let q = b[4 + j];
            out[j] = d * (q & 0x0F) as f32 + m;
            out[j + 16] = d * (q >> 4) as f32 + m;
        }
    }
}

/// The 5-bit values of a Q5_0/Q5_1 block: nibbles as in Q4 (low nibbles weights 0–15, high
/// nibbles 16–31), the fifth bit of weight `e` is bit `e` of the little-endian u32 `qh`.
#[inline(always)]
pub(super) fn q5_values(qh: &[u8], qs: &[u8]) -> [u8; 32] {
    let qh = u32::from_le_bytes([qh[0], qh[1], qh[2], qh[3]]);
    let mut q = [0u8; 32];
    for j in 0..16 {
        q[j] = (qs[j] & 0x0F) | ((((qh >> j) & 1) as u8) << 4);
        q[j + 16] = (qs[j] >> 4) | ((((qh >> (j + 16)) & 1) as u8) << 4);
    }
    q
}

/// Q5_0: 32 weights in 22 bytes, `w = d·(q − 16)` with 5-bit `q`.
/// ```text
/// byte  0  1 | 2  …  5          | 6        …  21
///       d f16 | qh (fifth bits) | q16 q0 | … | q31 q15   (low four bits)
/// ```
struct BlockQ5_0;

impl BlockFormat<Q5_0_BYTES, 32> for BlockQ5_0 {
    #[inline(always)]
    fn decode(b: &[u8; Q5_0_BYTES], out: &mut [f32; 32]) {
        let d = f16_at(b, 0);
        for (o, q) in out.iter_mut().zip(q5_values(&b[2..6], &b[6..])) {
            *o = (q as i32 - 16) as f32 * d;
        }
    }
}

/// Q5_1: 32 weights in 24 bytes, `w = d·q + m` with 5-bit `q`.
/// ```text
/// byte  0  1 | 2  3  | 4  …  7 | 8  …  23
///       d f16 | m f16 | qh      | qs
/// ```
struct BlockQ5_1;

impl BlockFormat<Q5_1_BYTES, 32> for BlockQ5_1 {
    #[inline(always)]
    fn decode(b: &[u8; Q5_1_BYTES], out: &mut [f32; 32]) {
        let (d, m) = (f16_at(b, 0), f16_at(b, 2));
        for (o, q) in out.iter_mut().zip(q5_values(&b[4..8], &b[8..])) {
            *o = q as f32 * d + m;
        }
    }
}

/// Q8_0: 32 weights in 34 bytes, `w = d·q` with `q` an i8.
/// ```text
/// byte  0  1 | 2  3  …  33
///       d f16 | q0 q1 … q31
/// ```
struct BlockQ8_0;

impl BlockFormat<Q8_0_BYTES, 32> for BlockQ8_0 {
    #[inline(always)]
    fn decode(b: &[u8; Q8_0_BYTES], out: &mut [f32; 32]) {
        let d = f16_at(b, 0);
        for j in 0..32 {
            out[j] = d * (b[2 + j] as i8) as f32;
        }
    }
}

// ---- K-quants: 256-weight super-blocks --------------------------------------------------------

const Q4_K_BYTES: usize = 2 + 2 + 12 + QK_K / 2;
const Q5_K_BYTES: usize = 2 + 2 + 12 + QK_K / 8 + QK_K / 2;
const Q6_K_BYTES: usize = QK_K / 2 + QK_K / 4 + QK_K / 16 + 2;

/// The eight 6-bit scales and eight 6-bit mins of a Q4_K/Q5_K super-block, packed in 12 bytes
/// (llama.cpp's `get_scale_min_k4`). Sub-blocks 0–3 keep theirs in the low 6 bits of bytes 0–7;
/// sub-blocks 4–7 split theirs into a low nibble (bytes 8–11) and two high bits borrowed from the
/// top of bytes 0–7:
/// ```text
/// byte 0..4 : s4 s4 | scale0..3  (6 bits)        sK = bits 4–5 of scale K
/// byte 4..8 : m4 m4 | min0..3    (6 bits)        mK = bits 4–5 of min K
/// byte 8..12: min4..7 low nibble | scale4..7 low nibble
/// ```
#[inline(always)]
fn unpack_scales_mins(s: &[u8]) -> ([u8; 8], [u8; 8]) {
    let mut scales = [0u8; 8];
    let mut mins = [0u8; 8];
    for j in 0..4 {
        scales[j] = s[j] & 0x3F;
        mins[j] = s[j + 4] & 0x3F;
        scales[j + 4] = (s[j + 8] & 0x0F) | ((s[j] >> 6) << 4);
        mins[j + 4] = (s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4);
    }
    (scales, mins)
}

/// Q4_K: 256 weights in 144 bytes: eight sub-blocks of 32, each with a 6-bit scale `sc` and
/// min `mn`; `w = (d·sc)·q − (dmin·mn)` with 4-bit `q`.
/// ```text
/// byte 0..2 d f16 | 2..4 dmin f16 | 4..16 scales+mins (see unpack_scales_mins) | 16..144 qs
/// ```
/// `qs` is four 32-byte chunks; chunk `c`'s low nibbles are sub-block `2c`, its high nibbles
/// sub-block `2c + 1`.
#[allow(non_camel_case_types)] // ggml's block_q4_k
struct BlockQ4_K;

impl BlockFormat<Q4_K_BYTES, QK_K> for BlockQ4_K {
    #[inline(always)]
    fn decode(b: &[u8; Q4_K_BYTES], out: &mut [f32; QK_K]) {
        let d = f16_at(b, 0);
        let dmin = f16_at(b, 2);
        let (scales, mins) = unpack_scales_mins(&b[4..16]);
        let qs = &b[16..];
        for c in 0..4 {
            let (d_lo, m_lo) = (d * scales[2 * c] as f32, dmin * mins[2 * c] as f32);
            let (d_hi, m_hi) = (d * scales[2 * c + 1] as f32, dmin * mins[2 * c + 1] as f32);
            for l in 0..32 {
                let q = qs[32 * c + l];
                out[64 * c + l] = d_lo * (q & 0x0F) as f32 - m_lo;
                out[64 * c + 32 + l] = d_hi * (q >> 4) as f32 - m_hi;
            }
        }
    }
}

/// Q5_K: Q4_K plus a fifth bit per weight: 256 weights in 176 bytes.
/// ```text
/// byte 0..2 d | 2..4 dmin | 4..16 scales+mins | 16..48 qh | 48..176 qs
/// ```
/// Sub-block `s` (32 weights) takes its low nibbles from `qs` as in Q4_K and its fifth bit from
/// bit `s` of `qh[l]`, `l` = 0‥31 its position in the sub-block: `q = nibble + 16·bit`.
#[allow(non_camel_case_types)] // ggml's block_q5_k
struct BlockQ5_K;

impl BlockFormat<Q5_K_BYTES, QK_K> for BlockQ5_K {
    #[inline(always)]
    fn decode(b: &[u8; Q5_K_BYTES], out: &mut [f32; QK_K]) {
        let d = f16_at(b, 0);
        let dmin = f16_at(b, 2);
        let (scales, mins) = unpack_scales_mins(&b[4..16]);
        let qh = &b[16..48];
        let qs = &b[48..];
        for c in 0..4 {
            let (lo, hi) = (2 * c, 2 * c + 1);
            let (d_lo, m_lo) = (d * scales[lo] as f32, dmin * mins[lo] as f32);
            let (d_hi, m_hi) = (d * scales[hi] as f32, dmin * mins[hi] as f32);
            for l in 0..32 {
                let q = qs[32 * c + l];
                let q_lo = (q & 0x0F) | (((qh[l] >> lo) & 1) << 4);
                let q_hi = (q >> 4) | (((qh[l] >> hi) & 1) << 4);
                out[64 * c + l] = d_lo * q_lo as f32 - m_lo;
                out[64 * c + 32 + l] = d_hi * q_hi as f32 - m_hi;
            }
        }
    }
}

/// Q6_K: 256 weights in 210 bytes, sixteen sub-blocks of 16 with an i8 scale each;
/// `w = (d·sc)·(q − 32)` with 6-bit `q`.
/// ```text
/// byte 0..128 ql (low 4 bits) | 128..192 qh (high 2 bits) | 192..208 scales i8 | 208..210 d f16
/// ```
/// Each half (128 weights) uses 64 bytes of `ql` and 32 of `qh`. Within a half, weight
/// `32·k + l` (k = 0‥3, l = 0‥31) has low bits from `ql[l + 32·(k % 2)]` (low nibble for k < 2,
/// high nibble otherwise) and high bits from bits `2k, 2k+1` of `qh[l]`; its scale is
/// `scales[8·half + (32·k + l) / 16]`.
#[allow(non_camel_case_types)] // ggml's block_q6_k
struct BlockQ6_K;

impl BlockFormat<Q6_K_BYTES, QK_K> for BlockQ6_K {
    #[inline(always)]
    fn decode(b: &[u8; Q6_K_BYTES], out: &mut [f32; QK_K]) {
        let d = f16_at(b, 208);
        for half in 0..2 {
            let ql = &b[64 * half..64 * half + 64];
            let qh = &b[128 + 32 * half..128 + 32 * half + 32];
            let scales = &b[192 + 8 * half..192 + 8 * half + 8];
            let out = &mut out[128 * half..128 * half + 128];
            for l in 0..32 {
                let h = qh[l];
                let q = [
                    (ql[l] & 0x0F) | ((h & 3) << 4),
                    (ql[l + 32] & 0x0F) | (((h >> 2) & 3) << 4),
                    (ql[l] >> 4) | (((h >> 4) & 3) << 4),
                    (ql[l + 32] >> 4) | (((h >> 6) & 3) << 4),
                ];
                for (k, q) in q.into_iter().enumerate() {
                    let i = 32 * k + l;
                    let scale = d * (scales[i / 16] as i8) as f32;
                    out[i] = scale * (q as i32 - 32) as f32;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::dot;

    const ALL: [GgmlType; 11] = GgmlType::ALL;

    /// A fixture from `make_quant_fixtures.py`: raw blocks and the `gguf` package's decoding.
    struct Fixture {
        blocks: Vec<u8>,
        expected: Vec<f32>,
    }

    fn fixture(ggml_type: GgmlType) -> Fixture {
        let file: &[u8] = match ggml_type {
            GgmlType::F32 => unreachable!("F32 has no fixture: decoding it is a byte copy"),
            GgmlType::F16 => include_bytes!("../../../tests/fixtures/quant/f16.bin"),
            GgmlType::BF16 => include_bytes!("../../../tests/fixtures/quant/bf16.bin"),
            GgmlType::Q4_0 => include_bytes!("../../../tests/fixtures/quant/q4_0.bin"),
            GgmlType::Q4_1 => include_bytes!("../../../tests/fixtures/quant/q4_1.bin"),
            GgmlType::Q5_0 => include_bytes!("../../../tests/fixtures/quant/q5_0.bin"),
            GgmlType::Q5_1 => include_bytes!("../../../tests/fixtures/quant/q5_1.bin"),
            GgmlType::Q8_0 => include_bytes!("../../../tests/fixtures/quant/q8_0.bin"),
            GgmlType::Q4_K => include_bytes!("../../../tests/fixtures/quant/q4_k.bin"),
            GgmlType::Q5_K => include_bytes!("../../../tests/fixtures/quant/q5_k.bin"),
            GgmlType::Q6_K => include_bytes!("../../../tests/fixtures/quant/q6_k.bin"),
        };
        let word = |i: usize| u32::from_le_bytes(file[4 * i..4 * i + 4].try_into().unwrap()) as usize;
        let (n, n_bytes) = (word(0), word(1));
        let blocks = file[8..8 + n_bytes].to_vec();
        let expected: Vec<f32> =
            file[8 + n_bytes..].chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(expected.len(), n, "{} fixture is malformed", ggml_type.name());
        Fixture { blocks, expected }
    }

    fn quantized() -> impl Iterator<Item = GgmlType> {
        ALL.into_iter().filter(|&t| t != GgmlType::F32)
    }

    fn inputs(n: usize, seed: u64) -> Vec<f32> {
        let mut rng = crate::sample::Rng::new(seed);
        (0..n).map(|_| rng.next_f32() * 2.0 - 1.0).collect()
    }

    #[test]
    fn ids_and_sizes_match_ggml() {
        let table = [
            (0, GgmlType::F32, 1, 4),
            (1, GgmlType::F16, 1, 2),
            (2, GgmlType::Q4_0, 32, 18),
            (3, GgmlType::Q4_1, 32, 20),
            (6, GgmlType::Q5_0, 32, 22),
            (7, GgmlType::Q5_1, 32, 24),
            (8, GgmlType::Q8_0, 32, 34),
            (12, GgmlType::Q4_K, 256, 144),
            (13, GgmlType::Q5_K, 256, 176),
            (14, GgmlType::Q6_K, 256, 210),
            (30, GgmlType::BF16, 1, 2),
        ];
        for (id, t, len, bytes) in table {
            assert_eq!(GgmlType::from_id(id), Some(t));
            assert_eq!((t.block_len(), t.block_bytes()), (len, bytes), "{}", t.name());
        }
        for unsupported in [4, 5, 9, 10, 11, 15, 16, 24, 28, 31, 39, 1000] {
            assert_eq!(GgmlType::from_id(unsupported), None);
        }
        assert_eq!(GgmlType::Q4_K.row_bytes(576), None);
        assert_eq!(GgmlType::Q4_1.row_bytes(576), Some(18 * 20));
        assert_eq!(GgmlType::F32.row_bytes(usize::MAX), None);
    }

    /// Bit-exact: both sides convert f16 exactly and round each product and sum once, in the
    /// same order (see the module docs).
    #[test]
    fn decoding_matches_the_gguf_package_bit_for_bit() {
        for t in quantized() {
            let f = fixture(t);
            let mut got = vec![f32::NAN; f.expected.len()];
            dequantize_row(t, &f.blocks, &mut got);
            for (i, (g, e)) in got.iter().zip(&f.expected).enumerate() {
                assert_eq!(g.to_bits(), e.to_bits(), "{} weight {i}: got {g}, gguf has {e}", t.name());
            }
        }
    }

    #[test]
    fn f32_rows_decode_to_themselves_for_every_tail_length() {
        for n in 0..20 {
            let values = inputs(n, n as u64);
            let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            let mut out = vec![0.0; n];
            dequantize_row(GgmlType::F32, &bytes, &mut out);
            assert_eq!(out, values);
        }
    }

    /// A row is any run of whole blocks: decoding the fixture in pieces gives the same values.
    #[test]
    fn rows_can_start_at_any_block() {
        for t in quantized() {
            let f = fixture(t);
            let n_blocks = f.blocks.len() / t.block_bytes();
            let split = n_blocks / 3;
            let (head, tail) = f.blocks.split_at(split * t.block_bytes());
            let mut out = vec![0.0; f.expected.len()];
            let (out_head, out_tail) = out.split_at_mut(split * t.block_len());
            dequantize_row(t, head, out_head);
            dequantize_row(t, tail, out_tail);
            assert!(out.iter().zip(&f.expected).all(|(a, b)| a.to_bits() == b.to_bits()), "{}", t.name());
        }
    }

    /// The fused dot product must be exactly `dot(dequantize_row(…), x)`, not merely close: the
    /// same products reach the same partial sums in the same order.
    #[test]
    fn fused_dot_equals_dequantize_then_dot_exactly() {
        for t in quantized() {
            let f = fixture(t);
            // Rows of a few lengths, including ones whose length is not a multiple of LANES.
            for n_blocks in [1, 2, 5] {
                let n = n_blocks * t.block_len().max(13);
                let Some(n_bytes) = t.row_bytes(n) else { continue };
                let row = &f.blocks[..n_bytes];
                let mut w = vec![0.0; n];
                dequantize_row(t, row, &mut w);
                let x = inputs(n, 7);
                assert_eq!(dot_row_quant(t, row, &x).to_bits(), dot(&w, &x).to_bits(), "{} n = {n}", t.name());
            }
        }
    }

    #[test]
    fn fused_dot_of_float_rows_matches_dot_for_every_tail_length() {
        for n in 0..40 {
            let w = inputs(n, 1);
            let x = inputs(n, 2);
            let f32_row: Vec<u8> = w.iter().flat_map(|v| v.to_le_bytes()).collect();
            assert_eq!(dot_row_quant(GgmlType::F32, &f32_row, &x).to_bits(), dot(&w, &x).to_bits(), "n = {n}");
            let f16_row: Vec<u8> = w.iter().flat_map(|&v| f16::from_f32(v).to_le_bytes()).collect();
            let w16: Vec<f32> = w.iter().map(|&v| f16::from_f32(v).to_f32()).collect();
            assert_eq!(dot_row_quant(GgmlType::F16, &f16_row, &x).to_bits(), dot(&w16, &x).to_bits(), "n = {n}");
        }
    }

    #[test]
    fn several_inputs_give_the_bits_of_one_at_a_time() {
        for t in quantized() {
            let f = fixture(t);
            let n = 2 * t.block_len().max(16);
            let row = &f.blocks[..t.row_bytes(n).unwrap()];
            let xs: Vec<Vec<f32>> = (0..3).map(|s| inputs(n, 10 + s)).collect();
            let three = dot_rows_quant::<3>(t, row, [&xs[0], &xs[1], &xs[2]]);
            for r in 0..3 {
                assert_eq!(three[r].to_bits(), dot_row_quant(t, row, &xs[r]).to_bits(), "{}", t.name());
            }
        }
    }

    #[test]
    #[should_panic(expected = "need")]
    fn a_row_of_the_wrong_size_is_refused() {
        dot_row_quant(GgmlType::Q4_0, &[0; 17], &[0.0; 32]);
    }

    /// The packing diagram in [`unpack_scales_mins`], built by hand.
    #[test]
    fn k_quant_scales_unpack_as_drawn() {
        let scales: [u8; 8] = [1, 2, 3, 4, 0x15, 0x26, 0x37, 0x3F];
        let mins: [u8; 8] = [5, 6, 7, 8, 0x2A, 0x1B, 0x3C, 0x0D];
        let mut packed = [0u8; 12];
        for j in 0..4 {
            packed[j] = scales[j] | ((scales[j + 4] >> 4) << 6);
            packed[j + 4] = mins[j] | ((mins[j + 4] >> 4) << 6);
            packed[j + 8] = (scales[j + 4] & 0x0F) | ((mins[j + 4] & 0x0F) << 4);
        }
        assert_eq!(unpack_scales_mins(&packed), (scales, mins));
    }
}
