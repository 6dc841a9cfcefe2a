//! Q4_0, Q4_1, Q8_0 and Q5_1 (and Q5_0, as Q8_0) matrices as gptlens keeps them in memory, and their dot products: ~90 % of
//! a decode step for the GGUF models people run in a browser.
//!
//! # Exact, and factored
//! No activation is ever quantized: every product is an f32 product of a weight's integer and an
//! input value, every sum an f32 sum. The block's scale `d` (and min `m`) multiply once per block
//! instead of once per weight:
//! ```text
//! Σ_i (d·q_i + m)·x_i  =  d·Σ_i q_i·x_i  +  m·Σ_i x_i          (Q4_1; Q4_0 has q − 8 and no m)
//! ```
//! `Σ q·x` accumulates products that are exact in f32 up to their own rounding, and `Σ x` of a
//! block is the same for every row, so it is computed once per input ([`prepare_input`]). That is
//! a different rounding from decoding each weight to f32 first (`d·q + m` rounds once per weight,
//! which this avoids), so these kernels are checked against an f64 oracle with a tolerance, and
//! against each other bit for bit.
//!
//! # The layout
//! Loading re-lays the file's blocks ([`pack`]) so that a vector of four 32-bit lanes turns into
//! four weights with two shifts by constants (no mask, no table: nothing a wasm engine has to keep
//! in a register) and one conversion, whatever the SIMD width:
//! ```text
//! Q4_0 (20 bytes)  | d f32 | W0 W1 W2 W3 |            element 4p + k = nibble p of W_k (p < 8, k < 4)
//! Q4_1 (24 bytes)  | d f32 | m f32 | W0 W1 W2 W3 |
//! Q8_0 (36 bytes)  | d f32 | W0 … W7 |               element 16h + 4p + k = byte p of W_{4h+k}
//! Q5_1 (40 bytes)  | d f32 | m f32 | W0 … W7 |       bytes as Q8_0's, unsigned (q < 32)
//! ```
//! (`W` little-endian u32; the scales are the file's f16 values widened exactly, so a Q4_1 matrix
//! takes 24 bytes per 32 weights instead of the file's 20.) A lane's integer `v` is `q` for Q4_1,
//! `q − 8` for Q4_0, the signed byte for Q8_0, the 5-bit `q` for Q5_1: exact in f32.
//!
//! Q5_0 (`w = d·(q − 16)`, 5-bit `q`) has no layout of its own: `q − 16` fits a signed byte, so a
//! Q5_0 block is packed as the Q8_0 block of the same weights, exactly, and runs on Q8_0's
//! kernels (and the GPU's Q8_0 decoder) — 36 bytes per 32 weights instead of the file's 22, for
//! SIMD kernels that already exist and are already checked.
//!
//! # The order of operations
//! With lanes `j < 8` and `e = 8c + j` the block's elements (`c < 4`):
//! ```text
//! P_j = ((v_j·x_j + v_{8+j}·x_{8+j}) + v_{16+j}·x_{16+j}) + v_{24+j}·x_{24+j}
//! acc_j = acc_j + d·P_j                       Q4_0, Q8_0
//! acc_j = (acc_j + d·P_j) + m·S_j             Q4_1, Q5_1, with S_j = ((x_j + x_{8+j}) + x_{16+j}) + x_{24+j}
//! ```
//! over the blocks in order, then [`fold_lanes`]. The code here is that definition, the fallback
//! on every target, and the oracle the SIMD128 and AVX2 twins are tested against.

use std::mem::MaybeUninit;

use super::quant::{f16_at, q5_values, GgmlType};
use super::{fold_lanes, pool, LANES};

/// Weights per block.
pub const BLOCK: usize = 32;

/// A matrix type with a packed form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)] // ggml's spelling
pub enum PackedType {
    Q4_0,
    Q4_1,
    Q8_0,
    Q5_1,
}

impl PackedType {
    /// The packed form of a file type, if it has one (Q5_0's is Q8_0's; see the module docs).
    pub fn of(ty: GgmlType) -> Option<PackedType> {
        match ty {
            GgmlType::Q4_0 => Some(PackedType::Q4_0),
            GgmlType::Q4_1 => Some(PackedType::Q4_1),
            GgmlType::Q5_0 | GgmlType::Q8_0 => Some(PackedType::Q8_0),
            GgmlType::Q5_1 => Some(PackedType::Q5_1),
            _ => None,
        }
    }

    pub fn ggml(self) -> GgmlType {
        match self {
            PackedType::Q4_0 => GgmlType::Q4_0,
            PackedType::Q4_1 => GgmlType::Q4_1,
            PackedType::Q8_0 => GgmlType::Q8_0,
            PackedType::Q5_1 => GgmlType::Q5_1,
        }
    }

    /// A block min `m` (`w = d·q + m`), and so inputs with block sums.
    pub fn has_min(self) -> bool {
        matches!(self, PackedType::Q4_1 | PackedType::Q5_1)
    }

    /// The lane integers are bytes (Q8_0's layout) rather than nibbles.
    fn bytes(self) -> bool {
        matches!(self, PackedType::Q8_0 | PackedType::Q5_1)
    }

    /// Bytes per packed block.
    pub const fn block_bytes(self) -> usize {
        match self {
            PackedType::Q4_0 => 20,
            PackedType::Q4_1 => 24,
            PackedType::Q8_0 => 36,
            PackedType::Q5_1 => 40,
        }
    }

    /// Bytes of `n` packed weights, or `None` when `n` is not whole blocks or the size overflows.
    pub fn row_bytes(self, n: usize) -> Option<usize> {
        if !n.is_multiple_of(BLOCK) {
            return None;
        }
        (n / BLOCK).checked_mul(self.block_bytes())
    }

    /// Floats [`prepare_input`] writes for one input of `n` values: the block sums of a type
    /// with a min.
    pub fn input_floats(self, n: usize) -> usize {
        if self.has_min() {
            n / 4
        } else {
            0
        }
    }
}

/// Appends the packed form of `file_bytes`, whole blocks of `source` as a GGUF file stores them.
///
/// # Panics
/// If `source` has no packed form, or `file_bytes` is not whole blocks (a tensor from
/// [`crate::formats::gguf`] always is), or the packed size overflows (the loader checks every
/// tensor's size against its memory budget first).
pub fn pack(source: GgmlType, file_bytes: &[u8], out: &mut Vec<u8>) {
    let ty = PackedType::of(source).unwrap_or_else(|| panic!("{} has no packed form", source.name()));
    let file_block = source.block_bytes();
    assert!(
        file_bytes.len().is_multiple_of(file_block),
        "{} bytes are not whole {} blocks",
        file_bytes.len(),
        source.name()
    );
    let (blocks, start) = (file_bytes.len() / file_block, out.len());
    let end = blocks
        .checked_mul(ty.block_bytes())
        .and_then(|bytes| bytes.checked_add(start))
        .unwrap_or_else(|| panic!("{} packed bytes after {start} overflow", source.name()));
    // Written once, in place, into room not zeroed first (the loader's buffer is reserved whole
    // for the model): a fill before the packing would write the ~100 MB twice, and first touch
    // (fault in) its fresh pages on one thread, where the packing below spreads over the pool
    // (SmolLM2's cold start in the page: faster in 30 of 40 alternating pairs, by 50–110 ms).
    // Appending a few bytes at a time instead, a weight at a time, made SmolLM2's load in Node
    // 1.7× as long (0.13 s against 0.08 s).
    out.reserve(end - start);
    let room = &mut out.spare_capacity_mut()[..end - start];
    // Loading is otherwise one thread's work while the pool's threads wait for the first pass: a
    // piece of a streamed file (4 MiB in the page) is packed by all of them, a run of blocks each.
    let (packed_block, run) = (ty.block_bytes(), PACK_RUN_BLOCKS);
    let (whole_runs, rest) = (blocks / run, blocks % run);
    let (in_runs, in_rest) = file_bytes.split_at(whole_runs * run * file_block);
    let (out_runs, out_rest) = room.split_at_mut(whole_runs * run * packed_block);
    pool::for_each_chunk(whole_runs, (out_runs, run * packed_block), |i, out_run| {
        let in_run = &in_runs[i * run * file_block..(i + 1) * run * file_block];
        pack_blocks(source, ty, in_run, out_run);
    });
    debug_assert_eq!(in_rest.len(), rest * file_block);
    pack_blocks(source, ty, in_rest, out_rest);
    // SAFETY: `room` was the `end − start` bytes of `out`'s spare capacity after its `start`
    // bytes, and `pack_blocks` wrote every one of them: its runs and rest tile `room`, and it
    // writes each packed block whole.
    unsafe { out.set_len(end) };
}

/// Blocks packed by one task of [`pack`]: 4,096 blocks are 96 KiB of packed Q4_1, ~0.1 ms of
/// work (natively ~19 ns a block), enough to repay handing a task to another thread.
const PACK_RUN_BLOCKS: usize = 4096;

/// `file_bytes` (whole blocks of `source`) packed as `ty` into `out`, exactly their size: every
/// byte of `out` is written.
fn pack_blocks(source: GgmlType, ty: PackedType, file_bytes: &[u8], out: &mut [MaybeUninit<u8>]) {
    assert_eq!(out.len(), file_bytes.len() / source.block_bytes() * ty.block_bytes());
    for (block, packed) in file_bytes.chunks_exact(source.block_bytes()).zip(out.chunks_exact_mut(ty.block_bytes())) {
        // The scale (and min): f16, widened exactly as the file decoder does.
        packed[..4].write_copy_of_slice(&f16_at(block, 0).to_le_bytes());
        let words = if ty.has_min() {
            packed[4..8].write_copy_of_slice(&f16_at(block, 2).to_le_bytes());
            &mut packed[8..]
        } else {
            &mut packed[4..]
        };
        let lanes = if ty.bytes() {
            byte_words(&file_integers(source, block))
        } else {
            nibble_words(&block[block.len() - 16..])
        };
        // The words fill the rest of the block: all eight (32 bytes) for byte lanes, the first
        // four (16 bytes) for nibbles, where `zip` stops.
        debug_assert_eq!(words.len(), if ty.bytes() { 32 } else { 16 });
        for (word, bytes) in lanes.iter().zip(words.chunks_exact_mut(4)) {
            bytes.write_copy_of_slice(&word.to_le_bytes());
        }
    }
}

/// A nibble block's words from the file's 16 bytes (byte j: element j low, element j + 16 high).
/// Word k holds elements k, k + 4, …, k + 28: the low nibbles of bytes k, k + 4, k + 8, k + 12,
/// then their high nibbles.
fn nibble_words(nibbles: &[u8]) -> [u32; 8] {
    let mut words = [0u32; 8];
    for (k, word) in words[..4].iter_mut().enumerate() {
        for p in 0..4 {
            let byte = u32::from(nibbles[k + 4 * p]);
            *word |= (byte & 0xF) << (4 * p) | (byte >> 4) << (16 + 4 * p);
        }
    }
    words
}

/// A byte block's words: word 4h + k holds elements 16h + k, 16h + k + 4, 16h + k + 8 and
/// 16h + k + 12, as its bytes 0 to 3.
fn byte_words(q: &[u8; BLOCK]) -> [u32; 8] {
    std::array::from_fn(|w| {
        let first = 16 * (w / 4) + w % 4;
        u32::from_le_bytes([q[first], q[first + 4], q[first + 8], q[first + 12]])
    })
}

/// The 32 integers a file block packs to: nibbles 0..16, the bytes of Q8_0's i8s (for Q5_0,
/// `q − 16` as an i8), or Q5_1's 5-bit values.
fn file_integers(source: GgmlType, block: &[u8]) -> [u8; BLOCK] {
    let mut q = [0u8; BLOCK];
    match source {
        GgmlType::Q8_0 => q.copy_from_slice(&block[2..34]),
        GgmlType::Q5_0 => {
            for (out, v) in q.iter_mut().zip(q5_values(&block[2..6], &block[6..22])) {
                *out = (v as i8 - 16) as u8;
            }
        }
        GgmlType::Q5_1 => q = q5_values(&block[4..8], &block[8..24]),
        _ => {
            let nibbles = &block[block.len() - 16..];
            for (j, &byte) in nibbles.iter().enumerate() {
                q[j] = byte & 0x0F;
                q[j + 16] = byte >> 4;
            }
        }
    }
    q
}

/// One packed block: its scale, its min (0 when the type has none) and its 32 lane integers as f32.
#[inline(always)]
fn unpack(ty: PackedType, block: &[u8]) -> (f32, f32, [f32; BLOCK]) {
    let f32_at = |i: usize| f32::from_le_bytes([block[i], block[i + 1], block[i + 2], block[i + 3]]);
    let word = |i: usize| u32::from_le_bytes([block[i], block[i + 1], block[i + 2], block[i + 3]]);
    let mut v = [0.0f32; BLOCK];
    let (d, m) = if ty.has_min() { (f32_at(0), f32_at(4)) } else { (f32_at(0), 0.0) };
    // The words start after the scale and min.
    let at = if ty.has_min() { 8 } else { 4 };
    for (e, v) in v.iter_mut().enumerate() {
        *v = match ty {
            PackedType::Q4_0 => ((word(at + 4 * (e % 4)) >> (4 * (e / 4))) & 0xF) as i32 - 8,
            PackedType::Q4_1 => ((word(at + 4 * (e % 4)) >> (4 * (e / 4))) & 0xF) as i32,
            PackedType::Q8_0 | PackedType::Q5_1 => {
                (word(at + 4 * (4 * (e / 16) + e % 4)) << (24 - 8 * (e % 16 / 4))) as i32 >> 24
            }
        } as f32;
    }
    (d, m, v)
}

/// Decodes packed weights to f32 (an embedding lookup): the same bits as the file's decoder.
///
/// # Panics
/// If `bytes.len()` is not `ty.row_bytes(out.len())`.
pub fn dequantize_row(ty: PackedType, bytes: &[u8], out: &mut [f32]) {
    assert_eq!(ty.row_bytes(out.len()), Some(bytes.len()), "packed row of the wrong size");
    for (block, out) in bytes.chunks_exact(ty.block_bytes()).zip(out.chunks_exact_mut(BLOCK)) {
        let (d, m, v) = unpack(ty, block);
        for (o, v) in out.iter_mut().zip(v) {
            // The file decoder's `d·(q − 8)`, `d·q + m` and `d·q`.
            *o = if ty.has_min() { d * v + m } else { d * v };
        }
    }
}

/// One input as the kernels read it: the values, and for Q4_1 / Q5_1 their per-block lane sums.
#[derive(Clone, Copy)]
pub struct Input<'a> {
    /// `[n]`.
    pub x: &'a [f32],
    /// `[n / 4]`: `S_j` of every block, 8 per block (Q4_1 and Q5_1 only; empty otherwise).
    pub sums: &'a [f32],
}

impl Input<'_> {
    /// Panics unless this input has `n` values and, for Q4_1, its sums: what every kernel reads.
    pub fn check(&self, ty: PackedType, n: usize) {
        assert!(
            self.x.len() == n && self.sums.len() >= ty.input_floats(n),
            "inputs of different lengths, or without their sums"
        );
    }
}

/// Fills `room` (grown if it is too small, then reused) with what the kernels need of `n_tok`
/// inputs of `n` values, `xs: [n_tok, n]`, and returns a function that hands out input `t`.
pub fn prepare_input<'a>(
    ty: PackedType,
    xs: &'a [f32],
    n: usize,
    n_tok: usize,
    room: &'a mut Vec<f32>,
) -> impl Fn(usize) -> Input<'a> + Copy + Sync {
    let per = ty.input_floats(n);
    assert!(xs.len() >= n * n_tok && n.is_multiple_of(BLOCK));
    if room.len() < per * n_tok {
        room.resize(per * n_tok, 0.0);
    }
    if per > 0 {
        for (x, sums) in xs.chunks_exact(n).zip(room.chunks_exact_mut(per)).take(n_tok) {
            for (block, sums) in x.chunks_exact(BLOCK).zip(sums.chunks_exact_mut(LANES)) {
                for j in 0..LANES {
                    sums[j] = ((block[j] + block[8 + j]) + block[16 + j]) + block[24 + j];
                }
            }
        }
    }
    let room: &'a [f32] = &room[..];
    move |t| Input { x: &xs[t * n..(t + 1) * n], sums: &room[t * per..(t + 1) * per] }
}

/// One packed row against `NT` prepared inputs: `out[t] = row · x_t`. Every result has the bits
/// of `dot::<1>` on that input alone.
///
/// # Panics
/// If the row is not `ty.row_bytes(n)` long for the inputs' length `n`.
#[inline(always)]
pub fn dot<const NT: usize>(ty: PackedType, row: &[u8], xs: [Input; NT]) -> [f32; NT] {
    let n = xs.first().map_or(0, |x| x.x.len());
    assert_eq!(ty.row_bytes(n), Some(row.len()), "packed row of the wrong size");
    for x in &xs {
        x.check(ty, n);
    }
    let mut acc = [[0.0f32; LANES]; NT];
    for b in 0..n / BLOCK {
        let (d, m, v) = unpack(ty, &row[b * ty.block_bytes()..(b + 1) * ty.block_bytes()]);
        for t in 0..NT {
            let x = &xs[t].x[b * BLOCK..(b + 1) * BLOCK];
            let mut p = [0.0f32; LANES];
            for j in 0..LANES {
                p[j] = v[j] * x[j];
            }
            for c in 1..4 {
                for j in 0..LANES {
                    p[j] += v[8 * c + j] * x[8 * c + j];
                }
            }
            for j in 0..LANES {
                acc[t][j] += d * p[j];
                if ty.has_min() {
                    acc[t][j] += m * xs[t].sums[b * LANES + j];
                }
            }
        }
    }
    acc.map(fold_lanes)
}

/// `n_rows` packed rows of `n` weights of `ty` ([`sample_file_rows`] packed): test data for the
/// kernels here and their SIMD twins.
#[cfg(test)]
pub(super) fn sample_rows(ty: PackedType, n: usize, n_rows: usize) -> Vec<u8> {
    let mut packed = Vec::new();
    pack(ty.ggml(), &sample_file_rows(ty, n, n_rows), &mut packed);
    packed
}

/// `n_rows` rows of file blocks with arbitrary integers, and scales (and mins) that vary from
/// block to block over normal and subnormal f16 values of both signs.
#[cfg(test)]
fn sample_file_rows(ty: PackedType, n: usize, n_rows: usize) -> Vec<u8> {
    let scales = [0.037, -0.25, 1.5e-6, -3.0e-7, 7.0, 0.0, -0.0041];
    let file_ty = ty.ggml();
    let mut file: Vec<u8> = (0..n_rows * file_ty.row_bytes(n).unwrap()).map(|i| (i * 37 % 251) as u8).collect();
    for (i, block) in file.chunks_mut(file_ty.block_bytes()).enumerate() {
        block[..2].copy_from_slice(&half::f16::from_f32(scales[i % scales.len()]).to_le_bytes());
        if ty.has_min() {
            block[2..4].copy_from_slice(&half::f16::from_f32(scales[(i + 3) % scales.len()]).to_le_bytes());
        }
    }
    file
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::quant;
    use crate::kernels::tests::wild;

    const TYPES: [PackedType; 4] = [PackedType::Q4_0, PackedType::Q4_1, PackedType::Q8_0, PackedType::Q5_1];

    /// One Q4_1 block, `d = 0.5`, `m = −1`, nibbles `q_e = e mod 4`, against `x_e = 1` (and `x_e = e`):
    /// ```text
    /// w = 0.5·q − 1 = [−1 −0.5 0 0.5 | −1 −0.5 0 0.5 | … ]   (8 times)
    /// w · 1 = 8·(−1 − 0.5 + 0 + 0.5) = −8
    /// w · e = Σ_a Σ_r (0.5r − 1)·(4a + r) = Σ_a (−4a + 1) = −104        (e = 4a + r)
    /// ```
    #[test]
    fn one_q4_1_block_as_drawn() {
        let mut file = Vec::new();
        file.extend_from_slice(&half::f16::from_f32(0.5).to_le_bytes());
        file.extend_from_slice(&half::f16::from_f32(-1.0).to_le_bytes());
        // Byte j holds element j (low nibble) and j + 16 (high nibble), both j mod 4.
        file.extend((0..16u8).map(|j| (j % 4) | ((j % 4) << 4)));
        let mut row = Vec::new();
        pack(GgmlType::Q4_1, &file, &mut row);
        assert_eq!(row.len(), 24);
        let xs: Vec<f32> = (0..BLOCK).map(|_| 1.0).chain((0..BLOCK).map(|e| e as f32)).collect();
        let mut room = Vec::new();
        let input = prepare_input(PackedType::Q4_1, &xs, BLOCK, 2, &mut room);
        assert_eq!(dot(PackedType::Q4_1, &row, [input(0), input(1)]), [-8.0, -104.0]);
    }

    /// Packing keeps every weight: decoding the packed row gives the file decoder's bits.
    #[test]
    fn packed_rows_decode_to_the_file_decoders_bits() {
        for ty in TYPES {
            let n = 5 * BLOCK;
            let packed = sample_rows(ty, n, 3);
            let file = sample_file_rows(ty, n, 3);
            let (mut ours, mut theirs) = (vec![f32::NAN; 3 * n], vec![f32::NAN; 3 * n]);
            dequantize_row(ty, &packed, &mut ours);
            quant::dequantize_row(ty.ggml(), &file, &mut theirs);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&ours), bits(&theirs), "{ty:?}");
        }
    }

    /// A tensor that arrives in pieces (a file read as it comes) packs to the bytes it packs to whole.
    #[test]
    fn packing_in_pieces_appends_what_packing_whole_gives() {
        for source in [GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::Q5_0, GgmlType::Q5_1] {
            let block = source.block_bytes();
            let file: Vec<u8> = (0..7 * block).map(|i| (i * 37 % 251) as u8).collect();
            let mut whole = Vec::new();
            pack(source, &file, &mut whole);
            let mut pieces = Vec::new();
            for piece in [&file[..2 * block], &file[2 * block..3 * block], &file[3 * block..]] {
                pack(source, piece, &mut pieces);
            }
            assert_eq!(pieces, whole, "{source:?}");
            assert_eq!(whole.len(), 7 * PackedType::of(source).map_or(0, PackedType::block_bytes));
        }
    }

    /// A piece of several runs (and a rest) packed by a pool of threads, a run each, gives the
    /// bytes packing it block by block on one thread gives.
    #[test]
    fn packing_on_the_pool_gives_what_one_thread_gives() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        for source in [GgmlType::Q4_1, GgmlType::Q8_0] {
            let block = source.block_bytes();
            let blocks = 2 * PACK_RUN_BLOCKS + 5;
            let file: Vec<u8> = (0..blocks * block).map(|i| (i * 37 % 251) as u8).collect();
            let mut on_the_pool = vec![7];
            pool.install(|| pack(source, &file, &mut on_the_pool));
            let mut one_by_one = vec![7];
            for one in file.chunks_exact(block) {
                pack(source, one, &mut one_by_one);
            }
            assert!(on_the_pool == one_by_one, "{source:?}");
        }
    }

    /// Q5_0 packs as Q8_0: the same weights, bit for bit, as the Q5_0 decoder gives (checked
    /// against the gguf package on tests/fixtures/quant/q5_0.bin).
    #[test]
    fn q5_0_packs_as_q8_0_with_the_same_weights() {
        let fixture = include_bytes!("../../../tests/fixtures/quant/q5_0.bin");
        let word =
            |i: usize| u32::from_le_bytes([fixture[4 * i], fixture[4 * i + 1], fixture[4 * i + 2], fixture[4 * i + 3]]);
        let (n, n_bytes) = (word(0) as usize, word(1) as usize);
        let file = &fixture[8..8 + n_bytes];
        let mut packed = Vec::new();
        pack(GgmlType::Q5_0, file, &mut packed);
        assert_eq!(PackedType::of(GgmlType::Q5_0), Some(PackedType::Q8_0));
        assert_eq!(packed.len(), PackedType::Q8_0.row_bytes(n).unwrap());
        let (mut ours, mut theirs) = (vec![f32::NAN; n], vec![f32::NAN; n]);
        dequantize_row(PackedType::Q8_0, &packed, &mut ours);
        quant::dequantize_row(GgmlType::Q5_0, file, &mut theirs);
        assert!(ours.iter().zip(&theirs).all(|(a, b)| a.to_bits() == b.to_bits()));
    }

    /// The factored dot against the decoded weights summed in f64: the difference is f32
    /// rounding, bounded relative to `Σ |w·x|` (what any f32 summation order can be off by).
    #[test]
    fn dots_match_an_f64_oracle() {
        for ty in TYPES {
            for n in [32, 96, 576, 1536] {
                let packed = sample_rows(ty, n, 4);
                let mut w = vec![0.0; 4 * n];
                dequantize_row(ty, &packed, &mut w);
                // Inputs of an ordinary range: a norm's output (the wild inputs of the SIMD tests
                // also include 1e−6 next to 1e6, where only the bits matter).
                let x: Vec<f32> = (0..n).map(|i| (i * 7919 % 1000) as f32 / 250.0 - 2.0).collect();
                let mut room = Vec::new();
                let input = prepare_input(ty, &x, n, 1, &mut room);
                let rows: Vec<&[u8]> = packed.chunks(ty.row_bytes(n).unwrap()).collect();
                for r in 0..4 {
                    let [got] = dot(ty, rows[r], [input(0)]);
                    let wr = &w[r * n..(r + 1) * n];
                    let exact: f64 = wr.iter().zip(&x).map(|(a, b)| f64::from(*a) * f64::from(*b)).sum();
                    let magnitude: f64 = wr.iter().zip(&x).map(|(a, b)| (f64::from(*a) * f64::from(*b)).abs()).sum();
                    let err = (f64::from(got) - exact).abs();
                    assert!(
                        err <= 1e-6 * magnitude + 1e-30,
                        "{ty:?} n = {n} row {r}: {got} vs {exact} (Σ|wx| = {magnitude})"
                    );
                }
            }
        }
    }

    /// A row against four inputs at once gives every result the bits it has alone: decode and
    /// prefill agree to the bit.
    #[test]
    fn batched_dots_give_the_bits_of_single_ones() {
        for ty in TYPES {
            let n = 96;
            let packed = sample_rows(ty, n, 1);
            let xs = wild(4 * n, 5);
            let mut room = Vec::new();
            let input = prepare_input(ty, &xs, n, 4, &mut room);
            let by_inputs = dot(ty, &packed, [input(0), input(1), input(2), input(3)]);
            for (t, got) in by_inputs.into_iter().enumerate() {
                assert_eq!(got.to_bits(), dot(ty, &packed, [input(t)])[0].to_bits(), "{ty:?} input {t}");
            }
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(PackedType::Q4_1.row_bytes(576), Some(18 * 24));
        assert_eq!(PackedType::Q8_0.row_bytes(33), None);
        assert_eq!(PackedType::of(GgmlType::Q6_K), None);
    }
}
