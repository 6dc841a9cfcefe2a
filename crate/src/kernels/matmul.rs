//! `out[t, o] = bias[o] + Σ_i x[t, i] · w[o, i]` — every linear layer of the model.
//!
//! Weights are `[out, in]`, so each output is a dot product of two contiguous rows. Work is split
//! across threads by tiles of output rows; within a tile, weight rows meet four tokens at a time
//! (prefill: two f32 rows or one packed row per pass); decoding, the rows meet the token one at a
//! time, so that the matrix is read front to back (see `packed_rows`).

use std::cell::RefCell;

use super::dot_block;
use super::packed::{self, Input, PackedType};
use super::pool;
use super::quant::{dot_rows_quant, GgmlType};

/// Output rows per parallel task: enough work to amortise scheduling, small enough to balance.
const TILE: usize = 16;

/// A weight matrix's rows: f32 values, packed Q4_0 / Q4_1 / Q8_0 / Q5_1 blocks ([`packed`]), or other
/// ggml blocks (K-quants, F16, BF16) decoded one row (prefill) or one block (decode) at a time.
#[derive(Clone, Copy)]
pub enum WeightRows<'a> {
    F32(&'a [f32]),
    Packed(PackedType, &'a [u8]),
    Blocks(GgmlType, &'a [u8]),
}

/// Raw output pointer shared by the tile tasks. Each task writes only the outputs of its own tile
/// (one part's rows `o0..o1` in every token row), so writes never overlap.
#[derive(Clone, Copy)]
struct Out(*mut f32);
unsafe impl Send for Out {}
unsafe impl Sync for Out {}

impl Out {
    /// The same buffer from element `at` on.
    ///
    /// # Safety
    /// `at` must lie within the buffer (or at its end).
    unsafe fn offset(self, at: usize) -> Out {
        Out(unsafe { self.0.add(at) })
    }
}

/// `out[t·ld + o] = bias[o] + Σ_i x[t·n_in + i] · w[o, i]` for `x: [n_tok, n_in]`,
/// `w: [n_out, n_in]`. `ld ≥ n_out` lets several matmuls fill column ranges of one wider buffer.
/// `room` holds the input prepared for packed matrices; it grows once and is reused.
#[allow(clippy::too_many_arguments)]
pub fn matmul(
    out: &mut [f32],
    ld: usize,
    x: &[f32],
    w: WeightRows,
    bias: Option<&[f32]>,
    n_tok: usize,
    n_in: usize,
    n_out: usize,
    room: &mut Vec<f32>,
) {
    if n_out == 0 {
        return;
    }
    matmuls(out, ld, x, &[Part { w, bias, n_out, at: 0 }], n_tok, n_in, room);
}

/// Runs the packed-matrix tiles a while on dummy rows, so that a JIT which optimizes a function
/// only once it has run a while (V8's tiers for wasm) has them optimized before a model's first
/// pass. Without it the page's first pass ran the tile function, where 80–87 % of a pass goes,
/// unoptimized until V8's optimized compile, on the cores the pass kept busy, was done. In wasm
/// one tile function serves every packed type and both prefill and decode (the type is a value),
/// so Q4_1 rows of four tokens and one stand for all. The results are thrown away.
pub fn warm_up() {
    const ROWS: usize = 64;
    const N_IN: usize = 256;
    const N_TOK: usize = 5;
    // By the size of the tile loop's body, several times V8's tiering budget (its
    // `--wasm-tiering-budget`, about 13 MB of code run), and a few ms of work.
    const ROUNDS: usize = 200;
    let ty = PackedType::Q4_1;
    let w = vec![0; ty.row_bytes(N_IN).unwrap_or(0) * ROWS];
    let x = vec![0.5; N_TOK * N_IN];
    let mut out = vec![0.0; N_TOK * ROWS];
    let mut room = Vec::new();
    // On the calling thread alone: it is not worth waking another.
    pool::run_pass(0, || {
        for _ in 0..ROUNDS {
            matmul(&mut out, ROWS, &x, WeightRows::Packed(ty, &w), None, N_TOK, N_IN, ROWS, &mut room);
        }
    });
}

/// One matrix of a [`matmuls`] group: its rows (`n_out` of them), its bias, and where its output
/// starts: `out[at + t·ld + o]`.
#[derive(Clone, Copy)]
pub struct Part<'a> {
    pub w: WeightRows<'a>,
    pub bias: Option<&'a [f32]>,
    pub n_out: usize,
    pub at: usize,
}

impl Part<'_> {
    /// Rows `r` of the output `out[r·ld + c]` this part writes, and its columns `c`.
    fn writes(&self, n_tok: usize, ld: usize) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
        let (row, col) = (self.at / ld, self.at % ld);
        (row..row + n_tok, col..col + self.n_out)
    }
}

/// Several matrices applied to the same input `x: [n_tok, n_in]` (a layer's q, k and v; an MLP's
/// gate and up) in one parallel loop over all their tiles: a decode step is ~200 small matmuls, and
/// each loop ends with the threads waiting for each other (and a thread that lost its core to the
/// page holds the other for as long as it is off), so one loop instead of three, or two, is fewer
/// such waits. The packed input is prepared once for the group.
///
/// # Panics
/// If a part's shape does not match its rows, its outputs fall outside `out` or a row of width
/// `ld`, or two parts would write the same output.
pub fn matmuls(out: &mut [f32], ld: usize, x: &[f32], parts: &[Part], n_tok: usize, n_in: usize, room: &mut Vec<f32>) {
    if n_tok == 0 {
        return;
    }
    assert!(ld > 0 && x.len() >= n_tok * n_in);
    for (i, p) in parts.iter().enumerate() {
        match p.w {
            WeightRows::F32(w) => assert_eq!(w.len(), p.n_out * n_in),
            WeightRows::Packed(ty, b) => assert_eq!(ty.row_bytes(n_in).map(|r| r * p.n_out), Some(b.len())),
            WeightRows::Blocks(ty, b) => assert_eq!(ty.row_bytes(n_in).map(|r| r * p.n_out), Some(b.len())),
        }
        if let Some(b) = p.bias {
            assert_eq!(b.len(), p.n_out);
        }
        let (rows, cols) = p.writes(n_tok, ld);
        let last = (rows.end - 1).checked_mul(ld).and_then(|row| row.checked_add(cols.end));
        assert!(cols.end <= ld && last.is_some_and(|end| end <= out.len()), "matmul outputs outside the buffer");
        for q in &parts[..i] {
            let (q_rows, q_cols) = q.writes(n_tok, ld);
            let apart = |a: &std::ops::Range<usize>, b: &std::ops::Range<usize>| a.end <= b.start || b.end <= a.start;
            assert!(apart(&rows, &q_rows) || apart(&cols, &q_cols), "two matmuls writing the same outputs");
        }
    }
    let n_tiles = |p: &Part| p.n_out.div_ceil(TILE);
    let total: usize = parts.iter().map(n_tiles).sum();
    // Packed parts read the input as prepared for their type; the block sums (Q4_1, Q5_1) are the
    // only thing that differs, so one preparation with them, if any part needs them, serves all.
    let packed_types =
        || parts.iter().filter_map(|p| if let WeightRows::Packed(ty, _) = p.w { Some(ty) } else { None });
    let input = packed_types()
        .find(|ty| ty.has_min())
        .or_else(|| packed_types().next())
        .map(|ty| packed::prepare_input(ty, x, n_in, n_tok, room));
    let base = Out(out.as_mut_ptr());
    let shape = Shape { ld, n_tok, n_in };
    pool::for_each(total, |mut t| {
        let mut parts = parts.iter();
        let part = loop {
            let p = parts.next().unwrap_or_else(|| unreachable!("tile {t} past the last part"));
            if t < n_tiles(p) {
                break p;
            }
            t -= n_tiles(p);
        };
        let rows = t * TILE..((t + 1) * TILE).min(part.n_out);
        // SAFETY: every `at + t·ld + o` of this part lies in `out` (asserted above: its rows end
        // within `out` and its columns within `ld`), and each task writes only the `o` of its own
        // tile of its own part; parts write apart (asserted above).
        unsafe {
            let out = base.offset(part.at);
            match (part.w, input) {
                (WeightRows::Packed(ty, b), Some(input)) => packed_tile(out, ty, b, input, part.bias, shape, rows),
                (w, _) => matmul_tile(out, x, w, part.bias, shape, rows),
            }
        }
    });
}

#[derive(Clone, Copy)]
struct Shape {
    ld: usize,
    n_tok: usize,
    n_in: usize,
}

/// The f32 dot-product blocks a target runs best. Every one has the lane order of [`dot_block`],
/// so all give the same bits.
trait DotBlock {
    /// # Safety
    /// The CPU must have the implementation's target features, and every row the first's length.
    unsafe fn block<const W: usize, const R: usize>(ws: [&[f32]; W], xs: [&[f32]; R]) -> [[f32; R]; W];
}

/// The portable kernel, which is the SIMD128 one whenever a wasm build has SIMD128.
struct Portable;

impl DotBlock for Portable {
    #[inline(always)]
    unsafe fn block<const W: usize, const R: usize>(ws: [&[f32]; W], xs: [&[f32]; R]) -> [[f32; R]; W] {
        dot_block(ws, xs)
    }
}

#[cfg(target_arch = "x86_64")]
struct Avx;

#[cfg(target_arch = "x86_64")]
impl DotBlock for Avx {
    #[inline(always)]
    unsafe fn block<const W: usize, const R: usize>(ws: [&[f32]; W], xs: [&[f32]; R]) -> [[f32; R]; W] {
        super::x86::dot_block(ws, xs)
    }
}

/// One tile of an f32 or block matrix, with the kernels the target supports best.
unsafe fn matmul_tile(
    out: Out,
    x: &[f32],
    w: WeightRows,
    bias: Option<&[f32]>,
    s: Shape,
    rows: std::ops::Range<usize>,
) {
    let dest = Dest { out, x, bias, s };
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx") {
            return tile_avx(dest, w, rows);
        }
    }
    tile::<Portable>(dest, w, rows)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn tile_avx(dest: Dest, w: WeightRows, rows: std::ops::Range<usize>) {
    // SAFETY: AVX was detected by the caller.
    unsafe { tile::<Avx>(dest, w, rows) }
}

thread_local! {
    /// One decoded weight row per thread, for prefill over block matrices.
    static ROW: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Where a tile's results go: `out[t·ld + o] = bias[o] + w[o] · x[t]`.
#[derive(Clone, Copy)]
struct Dest<'a> {
    out: Out,
    x: &'a [f32],
    bias: Option<&'a [f32]>,
    s: Shape,
}

impl<'a> Dest<'a> {
    #[inline(always)]
    fn x_row(&self, t: usize) -> &'a [f32] {
        &self.x[t * self.s.n_in..(t + 1) * self.s.n_in]
    }

    /// # Safety
    /// `t·ld + o` must lie in `out` and belong to the calling task's tile.
    #[inline(always)]
    unsafe fn store(&self, t: usize, o: usize, v: f32) {
        *self.out.0.add(t * self.s.ld + o) = v + self.bias.map_or(0.0, |b| b[o]);
    }

    /// Outputs `o..o + W` of tokens `t..t + R`, from the weight rows `ws`.
    #[inline(always)]
    unsafe fn block<K: DotBlock, const W: usize, const R: usize>(&self, ws: [&[f32]; W], o: usize, t: usize) {
        let xs: [&[f32]; R] = std::array::from_fn(|r| self.x_row(t + r));
        for (w, row) in K::block(ws, xs).into_iter().enumerate() {
            for (r, v) in row.into_iter().enumerate() {
                self.store(t + r, o + w, v);
            }
        }
    }

    /// Output `o` for every token, from its weight row: four tokens per pass over the row, then one.
    #[inline(always)]
    unsafe fn all_tokens<K: DotBlock>(&self, w: &[f32], o: usize) {
        let n_tok = self.s.n_tok;
        let mut t = 0;
        while t + 4 <= n_tok {
            self.block::<K, 1, 4>([w], o, t);
            t += 4;
        }
        for t in t..n_tok {
            self.block::<K, 1, 1>([w], o, t);
        }
    }

    /// Tokens `t..t + R` against every row of `rows` (f32 weights), two rows per pass.
    #[inline(always)]
    unsafe fn rows_in_pairs<K: DotBlock, const R: usize>(&self, w: &[f32], rows: std::ops::Range<usize>, t: usize) {
        let n_in = self.s.n_in;
        let row = |o: usize| &w[o * n_in..(o + 1) * n_in];
        let mut o = rows.start;
        while o + 2 <= rows.end {
            self.block::<K, 2, R>([row(o), row(o + 1)], o, t);
            o += 2;
        }
        if o < rows.end {
            self.block::<K, 1, R>([row(o)], o, t);
        }
    }
}

/// Output rows `rows` for every token. Decoding (fewer than four tokens), one f32 row at a time,
/// read front to back as the packed ones are (see [`packed_rows`]; they used to go four at a time
/// for four independent sums in flight: GPT-2 small's shape in f32, a decode step in Node (wasm,
/// 1 thread) 48–54 → 34–39 ms, the CLI at 1 thread 26–28 → 39–41 tok/s); otherwise two rows meet
/// four tokens (eight sums sharing six loads per group of lanes), the tokens in the outer loop so
/// that their rows stay in the L1 cache while the tile's weight rows pass.
#[inline(always)]
unsafe fn tile<K: DotBlock>(dest: Dest, w: WeightRows, rows: std::ops::Range<usize>) {
    let Shape { n_tok, n_in, .. } = dest.s;
    match w {
        WeightRows::F32(w) if n_tok < 4 => {
            let row = |o: usize| &w[o * n_in..(o + 1) * n_in];
            for o in rows {
                dest.all_tokens::<K>(row(o), o);
            }
        }
        WeightRows::F32(w) => {
            let mut t = 0;
            while t + 4 <= n_tok {
                dest.rows_in_pairs::<K, 4>(w, rows.clone(), t);
                t += 4;
            }
            for t in t..n_tok {
                dest.rows_in_pairs::<K, 1>(w, rows.clone(), t);
            }
        }
        // Decode: one pass over each block, decoded on the fly.
        WeightRows::Blocks(ty, b) if n_tok < 4 => {
            let row_bytes = ty.row_bytes(n_in).unwrap_or(0); // Some: asserted by `matmul`
            for o in rows {
                for t in 0..n_tok {
                    dest.store(
                        t,
                        o,
                        dot_rows_quant::<1>(ty, &b[o * row_bytes..(o + 1) * row_bytes], [dest.x_row(t)])[0],
                    );
                }
            }
        }
        // Prefill: decode each row once, then reuse it for every token.
        WeightRows::Blocks(ty, b) => ROW.with_borrow_mut(|row| {
            row.resize(n_in, 0.0);
            let row_bytes = ty.row_bytes(n_in).unwrap_or(0); // Some: asserted by `matmul`
            for o in rows {
                super::quant::dequantize_row(ty, &b[o * row_bytes..(o + 1) * row_bytes], row);
                dest.all_tokens::<K>(row, o);
            }
        }),
        WeightRows::Packed(..) => unreachable!("packed matrices go to `packed_tile`"),
    }
}

/// The packed kernels of one target: 1 row × 4 inputs (prefill) and 1 × 1 (decode, and the
/// rest). All give the bits of [`packed::dot`]. `unsafe`: the AVX2 and AVX-512 ones need the CPU
/// features, which the caller has checked.
#[derive(Clone, Copy)]
struct PackedKernels {
    inputs4: unsafe fn(PackedType, &[u8], [Input; 4]) -> [f32; 4],
    one: unsafe fn(PackedType, &[u8], Input) -> f32,
    /// 2 rows × [`ROWS2_TOKENS`] inputs, where the target has a kernel for it (AVX-512).
    rows2: Option<Rows2Kernel>,
}

type Rows2Kernel = unsafe fn(PackedType, [&[u8]; 2], [Input; ROWS2_TOKENS]) -> [[f32; ROWS2_TOKENS]; 2];

/// Tokens per pass of the 2-row kernel: each block is decoded once for this many. The CLI's
/// SmolLM2 prefill (52 tokens, alternating binaries): 8 against 4, +8–11 % (Q4_1, Q8_0); 16 no
/// faster than 8.
const ROWS2_TOKENS: usize = 8;

/// One tile of a packed matrix, with the kernels the target supports best.
unsafe fn packed_tile<'a>(
    out: Out,
    ty: PackedType,
    b: &[u8],
    input: impl Fn(usize) -> Input<'a>,
    bias: Option<&[f32]>,
    s: Shape,
    rows: std::ops::Range<usize>,
) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            if std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512dq")
                && std::arch::is_x86_feature_detected!("avx512vl")
            {
                return packed_tile_avx512(out, ty, b, input, bias, s, rows);
            }
            return packed_tile_avx2(out, ty, b, input, bias, s, rows);
        }
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    let kernels = {
        use super::simd128::{dot_packed, dot_packed_inputs4};
        PackedKernels { inputs4: dot_packed_inputs4, one: dot_packed, rows2: None }
    };
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    let kernels = PackedKernels {
        inputs4: |ty, row, xs| packed::dot(ty, row, xs),
        one: |ty, row, x| packed::dot(ty, row, [x])[0],
        rows2: None,
    };
    packed_rows(out, ty, b, input, bias, s, rows, kernels)
}

/// [`packed_rows`] compiled for one set of x86 features, with that set's kernels as constants: a
/// function per set, because with both sets chosen inside one function Q4_0's decode was 13 %
/// slower (the kernels were no longer inlined into the loops). `$dot`: the one-row kernel;
/// `$rows2`: the two-row one, if the set has it.
#[cfg(target_arch = "x86_64")]
macro_rules! x86_packed_tile {
    ($(#[$doc:meta])* $name:ident, $features:literal, $dot:path, $rows2:expr) => {
        $(#[$doc])*
        #[target_feature(enable = $features)]
        unsafe fn $name<'a>(
            out: Out,
            ty: PackedType,
            b: &[u8],
            input: impl Fn(usize) -> Input<'a>,
            bias: Option<&[f32]>,
            s: Shape,
            rows: std::ops::Range<usize>,
        ) {
            // SAFETY (all): the caller detected this function's features, which the kernels need.
            let kernels = PackedKernels {
                inputs4: |ty, row, xs| unsafe { $dot(ty, row, xs) },
                one: |ty, row, x| unsafe { $dot(ty, row, [x]) }[0],
                rows2: $rows2,
            };
            packed_rows(out, ty, b, input, bias, s, rows, kernels)
        }
    };
}

#[cfg(target_arch = "x86_64")]
x86_packed_tile!(
    /// AVX2: a row at a time, against four tokens or one.
    packed_tile_avx2, "avx2", super::x86::dot_packed, None
);

#[cfg(target_arch = "x86_64")]
x86_packed_tile!(
    /// AVX-512: two rows per pass in prefill, and Q4_0's, Q8_0's and Q5_1's integers made floats
    /// without a conversion.
    packed_tile_avx512,
    "avx2,avx512f,avx512dq,avx512vl",
    super::x86::dot_packed_avx512,
    Some(|ty, rows, xs| unsafe { super::x86::dot_packed_rows2(ty, rows, xs) })
);

/// Output rows `rows` for every token: a row at a time against four tokens per pass, then one.
/// Every result has the same bits either way. Prefill goes a chunk of tokens at a time (see
/// [`CHUNK_INPUT_BYTES`]) with every row of the tile against each chunk: with all the tokens per
/// row, each row read the whole prompt's inputs again from the second-level cache (SmolLM2's
/// 64-token prompt: 147 KiB, 393 KiB for the MLP's down matrix). bench:peers, Q8_0 in Chromium,
/// alternating builds: wasm prefill 137.6–142.4 → 143.6–147.5 tok/s at 1 thread, 257.0–260.6 →
/// 269.3–276.5 at 2; the CLI at 2 threads +3 %.
///
/// Decoding too takes the rows one at a time, so that it reads the matrix front to back and the
/// hardware's prefetchers stream it. It used to take four rows per pass against the one token,
/// which reads four short streams of a few hundred bytes side by side (SmolLM2: 360–648 bytes a
/// row) — too short for the prefetchers to follow — and waited on their loads; touching the next
/// four rows ahead of each pass (x86's prefetch instruction; in wasm, which has none, a volatile
/// load) recovered only part of it. SmolLM2 decode in Node (wasm, one thread), alternating builds:
/// a step 28 → 21 ms (Q8_0) and 25.5 → 21 ms (Q4_0) against four rows with the next four touched
/// in one burst, 48 and 34 ms with them touched block by block; the CLI (AVX2), one thread, Q8_0
/// 63 → 79 tok/s.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn packed_rows<'a>(
    out: Out,
    ty: PackedType,
    b: &[u8],
    input: impl Fn(usize) -> Input<'a>,
    bias: Option<&[f32]>,
    s: Shape,
    rows: std::ops::Range<usize>,
    k: PackedKernels,
) {
    let Shape { ld, n_tok, n_in } = s;
    let row_bytes = ty.row_bytes(n_in).unwrap_or(0); // Some: asserted by `matmul`
    let row = |o: usize| &b[o * row_bytes..(o + 1) * row_bytes];
    let store = |t: usize, o: usize, v: f32| *out.0.add(t * ld + o) = v + bias.map_or(0.0, |b| b[o]);
    let chunk = chunk_tokens(n_in);
    for start in (0..n_tok).step_by(chunk) {
        let end = (start + chunk).min(n_tok);
        // Prefill with a 2-row kernel: two rows at a time against every `ROWS2_TOKENS` tokens, as
        // many rows and tokens as fill whole passes; what they leave, one row at a time below.
        let (mut paired_rows, mut paired_end) = (rows.start..rows.start, start);
        if let Some(rows2) = k.rows2.filter(|_| end - start >= ROWS2_TOKENS) {
            paired_rows.end = rows.start + rows.len() / 2 * 2;
            paired_end = end - (end - start) % ROWS2_TOKENS;
            for o in paired_rows.clone().step_by(2) {
                for t in (start..paired_end).step_by(ROWS2_TOKENS) {
                    let d = rows2(ty, [row(o), row(o + 1)], std::array::from_fn(|i| input(t + i)));
                    for (r, d) in d.into_iter().enumerate() {
                        for (i, v) in d.into_iter().enumerate() {
                            store(t + i, o + r, v);
                        }
                    }
                }
            }
        }
        // A plain loop, not a closure shared with the pairs above: with the closure, decode (which
        // never pairs) ran 20 % slower (the CLI, SmolLM2 Q4_1, 1 thread: 118 → 96 tok/s).
        for o in rows.clone() {
            let mut t = if paired_rows.contains(&o) { paired_end } else { start };
            while t + 4 <= end {
                let d = (k.inputs4)(ty, row(o), [input(t), input(t + 1), input(t + 2), input(t + 3)]);
                for (i, v) in d.into_iter().enumerate() {
                    store(t + i, o, v);
                }
                t += 4;
            }
            for t in t..end {
                store(t, o, (k.one)(ty, row(o), input(t)));
            }
        }
    }
}

/// Input bytes a chunk of prefill's tokens may take: the rows of a tile meet a chunk at a time, so
/// that its inputs stay in the core's first-level cache (32–48 KiB) while every row passes them,
/// instead of coming again from the second level for each row.
const CHUNK_INPUT_BYTES: usize = 32 * 1024;

/// Tokens per chunk for inputs of `n_in` values: whole passes of the 2-row kernel, at least one.
fn chunk_tokens(n_in: usize) -> usize {
    (CHUNK_INPUT_BYTES / (4 * n_in.max(1)) / ROWS2_TOKENS).max(1) * ROWS2_TOKENS
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::quant::dequantize_row;

    #[test]
    fn warm_up_runs_the_packed_tiles() {
        // Its shapes go through `matmuls`' checks, which panic on a mismatch.
        warm_up();
    }

    /// The oracle: three nested loops, sums in f64.
    fn matmul_naive(x: &[f32], w: &[f32], bias: &[f32], n_tok: usize, n_in: usize, n_out: usize) -> Vec<f32> {
        let mut out = vec![0.0; n_tok * n_out];
        for t in 0..n_tok {
            for o in 0..n_out {
                let s: f64 = (0..n_in).map(|i| f64::from(x[t * n_in + i]) * f64::from(w[o * n_in + i])).sum();
                out[t * n_out + o] = (s + f64::from(bias[o])) as f32;
            }
        }
        out
    }

    /// ```text
    /// x = [1 2]   w = [1 0]   bias = [0.5 0 -1]   out = [1.5 2 2]
    ///     [3 4]       [0 1]                             [3.5 4 6]
    ///                 [1 1]
    /// ```
    #[test]
    fn tiny_example() {
        let mut out = [0.0; 6];
        matmul(
            &mut out,
            3,
            &[1., 2., 3., 4.],
            WeightRows::F32(&[1., 0., 0., 1., 1., 1.]),
            Some(&[0.5, 0., -1.]),
            2,
            2,
            3,
            &mut Vec::new(),
        );
        assert_eq!(out, [1.5, 2., 2., 3.5, 4., 6.]);
    }

    #[test]
    fn matches_naive_for_ragged_shapes() {
        for (n_tok, n_in, n_out) in [(1, 1, 1), (3, 13, 17), (4, 64, 48), (9, 70, 33), (1, 768, 40)] {
            let x: Vec<f32> = (0..n_tok * n_in).map(|i| (i as f32 * 0.13).sin()).collect();
            let w: Vec<f32> = (0..n_out * n_in).map(|i| (i as f32 * 0.07).cos()).collect();
            let bias: Vec<f32> = (0..n_out).map(|i| i as f32 * 0.01).collect();
            let mut out = vec![0.0; n_tok * n_out];
            matmul(&mut out, n_out, &x, WeightRows::F32(&w), Some(&bias), n_tok, n_in, n_out, &mut Vec::new());
            let expected = matmul_naive(&x, &w, &bias, n_tok, n_in, n_out);
            for (a, b) in out.iter().zip(&expected) {
                assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "{n_tok}x{n_in}x{n_out}: {a} vs {b}");
            }
        }
    }

    #[test]
    fn a_token_gets_the_same_bits_alone_or_in_a_batch() {
        let (n_in, n_out) = (37, 21);
        let x: Vec<f32> = (0..6 * n_in).map(|i| (i as f32 * 0.29).sin()).collect();
        let w: Vec<f32> = (0..n_out * n_in).map(|i| (i as f32 * 0.05).cos()).collect();
        let mut batch = vec![0.0; 6 * n_out];
        matmul(&mut batch, n_out, &x, WeightRows::F32(&w), None, 6, n_in, n_out, &mut Vec::new());
        for t in 0..6 {
            let mut single = vec![0.0; n_out];
            matmul(
                &mut single,
                n_out,
                &x[t * n_in..(t + 1) * n_in],
                WeightRows::F32(&w),
                None,
                1,
                n_in,
                n_out,
                &mut Vec::new(),
            );
            assert_eq!(single, batch[t * n_out..(t + 1) * n_out]);
        }
    }

    /// Q8_0 rows (f16 scale + 32 signed bytes per block) must give exactly the bits of the
    /// decoded f32 matrix, on the decode path (1 token) and the prefill path (5 tokens).
    #[test]
    fn block_matrices_match_their_decoded_twin_bit_for_bit() {
        let (n_in, n_out) = (64, 19);
        let mut blocks = Vec::new();
        for i in 0..n_out * n_in / 32 {
            blocks.extend_from_slice(&half::f16::from_f32(0.01 + i as f32 * 1e-3).to_le_bytes());
            blocks.extend((0..32).map(|j| ((i * 31 + j * 7) % 255) as u8));
        }
        let mut decoded = vec![0.0; n_out * n_in];
        dequantize_row(GgmlType::Q8_0, &blocks, &mut decoded);
        for n_tok in [1, 5] {
            let x: Vec<f32> = (0..n_tok * n_in).map(|i| (i as f32 * 0.21).sin()).collect();
            let (mut a, mut b) = (vec![0.0; n_tok * n_out], vec![0.0; n_tok * n_out]);
            matmul(
                &mut a,
                n_out,
                &x,
                WeightRows::Blocks(GgmlType::Q8_0, &blocks),
                None,
                n_tok,
                n_in,
                n_out,
                &mut Vec::new(),
            );
            matmul(&mut b, n_out, &x, WeightRows::F32(&decoded), None, n_tok, n_in, n_out, &mut Vec::new());
            assert_eq!(a, b, "{n_tok} tokens");
        }
    }

    /// Packed matrices: decode (1 token: a row at a time) and prefill (6 tokens: four tokens per
    /// pass, then the rest) give every token the bits of the portable kernel alone — with the
    /// best x86 kernels the CPU has natively (AVX-512 or AVX2; `x86`'s tests compare each of them),
    /// and with SIMD128 in the wasm test run.
    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn packed_matrices_give_the_portable_bits_decoding_and_prefilling() {
        use crate::kernels::packed::{self, PackedType};
        let n_out = 19;
        // Inputs of 1,024 values come in chunks of 8 tokens: 21 tokens are two whole chunks and a
        // ragged one.
        assert_eq!(super::chunk_tokens(1024), 8);
        let shapes = [(96, 1), (96, 6), (96, 11), (1024, 21)];
        for ty in [PackedType::Q4_0, PackedType::Q4_1, PackedType::Q8_0, PackedType::Q5_1] {
            for (n_in, n_tok) in shapes {
                let blocks = packed::sample_rows(ty, n_in, n_out);
                let row_bytes = ty.row_bytes(n_in).unwrap();
                let x = crate::kernels::tests::wild(n_tok * n_in, 9);
                let mut out = vec![0.0; n_tok * n_out];
                matmul(&mut out, n_out, &x, WeightRows::Packed(ty, &blocks), None, n_tok, n_in, n_out, &mut Vec::new());
                let mut room = Vec::new();
                let input = packed::prepare_input(ty, &x, n_in, n_tok, &mut room);
                for (i, got) in out.iter().enumerate() {
                    let (t, o) = (i / n_out, i % n_out);
                    let alone = packed::dot(ty, &blocks[o * row_bytes..(o + 1) * row_bytes], [input(t)])[0];
                    assert_eq!(got.to_bits(), alone.to_bits(), "{ty:?}, {n_in} × {n_tok}, token {t} row {o}");
                }
            }
        }
    }

    #[test]
    fn writes_into_a_column_range_of_a_wider_buffer() {
        let mut out = vec![-1.0; 2 * 5];
        matmul(&mut out[1..], 5, &[1., 2., 3., 4.], WeightRows::F32(&[1., 0., 0., 1.]), None, 2, 2, 2, &mut Vec::new());
        assert_eq!(out, [-1., 1., 2., -1., -1., -1., 3., 4., -1., -1.]);
    }

    /// A group of matrices of one input (packed with and without block sums, f32 with a bias,
    /// side by side and stacked) gives each one's bits alone, written only where it belongs.
    #[test]
    fn a_group_gives_each_matrix_its_own_bits_in_its_own_place() {
        use crate::kernels::packed::{self, PackedType};
        let (n_in, n_tok) = (64, 5);
        let x = crate::kernels::tests::wild(n_tok * n_in, 3);
        let q8 = packed::sample_rows(PackedType::Q8_0, n_in, 21);
        let q41 = packed::sample_rows(PackedType::Q4_1, n_in, 7);
        let f32s = crate::kernels::tests::wild(40 * n_in, 5);
        let bias = crate::kernels::tests::wild(40, 6);
        let parts = [
            Part { w: WeightRows::Packed(PackedType::Q8_0, &q8), bias: None, n_out: 21, at: 0 },
            Part { w: WeightRows::Packed(PackedType::Q4_1, &q41), bias: None, n_out: 7, at: 21 },
            // Below the first two and one column in: rows 5.. of a buffer 41 wide.
            Part { w: WeightRows::F32(&f32s), bias: Some(&bias), n_out: 40, at: 5 * 41 + 1 },
        ];
        let ld = 41;
        let mut group = vec![f32::NAN; 10 * ld];
        matmuls(&mut group, ld, &x, &parts, n_tok, n_in, &mut Vec::new());
        let mut expected = vec![f32::NAN; 10 * ld];
        for p in &parts {
            matmul(&mut expected[p.at..], ld, &x, p.w, p.bias, n_tok, n_in, p.n_out, &mut Vec::new());
        }
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&group), bits(&expected));
        assert_eq!(group.iter().filter(|v| v.is_nan()).count(), 10 * ld - n_tok * (21 + 7 + 40));
    }

    #[test]
    #[should_panic(expected = "two matmuls writing the same outputs")]
    fn a_group_whose_matrices_overlap_is_refused() {
        let w = [1.0; 4];
        let part = |at| Part { w: WeightRows::F32(&w), bias: None, n_out: 2, at };
        matmuls(&mut [0.0; 12], 4, &[1.0; 4], &[part(0), part(5)], 2, 2, &mut Vec::new());
    }

    #[test]
    #[should_panic(expected = "matmul outputs outside the buffer")]
    fn a_matrix_past_the_end_of_its_buffer_is_refused() {
        let w = [1.0; 4];
        matmuls(
            &mut [0.0; 7],
            4,
            &[1.0; 4],
            &[Part { w: WeightRows::F32(&w), bias: None, n_out: 2, at: 2 }],
            2,
            2,
            &mut Vec::new(),
        );
    }
}
