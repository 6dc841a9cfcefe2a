//! A snapshot of a GGUF model's weights as the engine holds them — f32 tensors decoded, block
//! matrices packed ([`crate::model::GgufFill`]) — with the file's header (config, vocabulary), so
//! that a page can keep it (the browser's origin-private file system) and load the model again by
//! reading two buffers straight into place: no download or HTTP-cache read through the page, no
//! copies into the engine, no decoding or packing.
//!
//! Layout, little-endian, every part at a multiple of [`ALIGN`]:
//!
//! | bytes | what |
//! |---|---|
//! | 0..8 | [`MAGIC`], written last: a snapshot cut short has none |
//! | 8..12 | [`FORMAT`] |
//! | 12..16 | zero |
//! | 16..32 | the engine's version (`CARGO_PKG_VERSION`, zero-padded) |
//! | 32..40 | the GGUF file's length |
//! | 40..48 | the header's length `h` |
//! | 48..56 | f32 values in the weights' float buffer `f` |
//! | 56..64 | bytes in their block buffer `b` |
//! | 64..64+h | the GGUF's header, as in the file |
//! | `floats_at`.. | `f` f32 values |
//! | `blocks_at`.. | `b` bytes |
//!
//! The buffers' layout is planned again from the header on loading, and must come out the same
//! sizes; bump [`FORMAT`] whenever what a buffer holds changes without its size changing (a
//! packed type's interleave, say), since a snapshot of the old layout would then load as wrong
//! numbers (the test `the_buffers_layout_is_the_one_format_names` trips when the layout moves).

use std::sync::Arc;

use super::{
    build_tokenizer_aside, built, tokenizer_of, warm_up_aside, Aside, Checkpoint, GgufHead, LoadOptions, TokenizerBuild,
};
use crate::error::{Error, Result};
use crate::formats::{gguf::GgufFile, limits::Budget};
use crate::kernels::pool;
use crate::model::Weights;

pub const MAGIC: [u8; 8] = *b"gptlSNAP";
/// The version of this layout and of what the buffers hold.
pub const FORMAT: u32 = 1;
/// The fixed part before the header.
pub const PREFIX: usize = 64;
/// Where each part starts: a multiple of this, so that a reader can place the buffers with
/// aligned reads.
pub const ALIGN: usize = 64;

/// The header of the GGUF a model was loaded from ([`super::GgufStream::keep_header`]).
pub struct GgufHeader {
    pub(super) bytes: Vec<u8>,
    pub(super) file_len: usize,
}

/// Where a snapshot's buffers go, and its whole length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    pub floats_at: usize,
    pub blocks_at: usize,
    pub len: usize,
}

impl Placement {
    /// For a header of `header_len` bytes, `floats` f32 values and `blocks` bytes of blocks.
    fn of(header_len: usize, floats: usize, blocks: usize) -> Result<Placement> {
        let align = |n: usize| n.checked_next_multiple_of(ALIGN);
        let placed = || {
            let floats_at = align(PREFIX.checked_add(header_len)?)?;
            let blocks_at = align(floats_at.checked_add(floats.checked_mul(4)?)?)?;
            Some(Placement { floats_at, blocks_at, len: blocks_at.checked_add(blocks)? })
        };
        placed().ok_or_else(|| Error::Snapshot("the weights' sizes overflow".into()))
    }
}

/// Where the buffers of `weights`, loaded from the GGUF whose header is `header`, go in their snapshot.
pub fn placement(header: &GgufHeader, weights: &Weights) -> Result<Placement> {
    let (floats, blocks) = weights.buffers();
    Placement::of(header.bytes.len(), floats.len(), blocks.len())
}

/// The engine's version, as the prefix stores it.
fn engine_version() -> [u8; 16] {
    let mut version = [0u8; 16];
    let text = env!("CARGO_PKG_VERSION").as_bytes();
    let n = text.len().min(version.len());
    version[..n].copy_from_slice(&text[..n]);
    version
}

/// The start of a snapshot of `weights`, loaded from the GGUF whose header is `header`: the prefix
/// and the header, to be written at offset 0 once the buffers are written where [`placement`] says
/// (the f32 values little-endian).
pub fn start(header: &GgufHeader, weights: &Weights) -> Vec<u8> {
    let (floats, blocks) = weights.buffers();
    let mut start = Vec::with_capacity(PREFIX + header.bytes.len());
    start.extend_from_slice(&MAGIC);
    start.extend_from_slice(&FORMAT.to_le_bytes());
    start.extend_from_slice(&[0; 4]);
    start.extend_from_slice(&engine_version());
    for n in [header.file_len, header.bytes.len(), floats.len(), blocks.len()] {
        start.extend_from_slice(&(n as u64).to_le_bytes());
    }
    start.extend_from_slice(&header.bytes);
    start
}

/// The little-endian u64 at `at` in the prefix (which is [`PREFIX`] long), as a size.
fn size_at(prefix: &[u8], at: usize) -> Result<usize> {
    let bytes: [u8; 8] = prefix.get(at..at + 8).and_then(|b| b.try_into().ok()).unwrap_or_default();
    usize::try_from(u64::from_le_bytes(bytes))
        .map_err(|_| Error::Snapshot(format!("a size at byte {at} does not fit in this address space")))
}

/// How many bytes of a snapshot's start (the prefix and the header) [`SnapshotRestore::new`]
/// needs, read from its first [`PREFIX`] bytes; refuses what is not a whole snapshot of this
/// engine's layout.
pub fn start_len(prefix: &[u8]) -> Result<usize> {
    let prefix = prefix.get(..PREFIX).ok_or_else(|| Error::Snapshot("it is shorter than its prefix".into()))?;
    if prefix[..8] != MAGIC {
        return Err(Error::Snapshot("it is not a snapshot, or its writing did not finish".into()));
    }
    let format = u32::from_le_bytes([prefix[8], prefix[9], prefix[10], prefix[11]]);
    if format != FORMAT || prefix[16..32] != engine_version() {
        let version = String::from_utf8_lossy(&prefix[16..32]).trim_end_matches('\0').to_string();
        return Err(Error::Snapshot(format!(
            "it was written by gptlens {version} (layout {format}); this is {} (layout {FORMAT})",
            env!("CARGO_PKG_VERSION")
        )));
    }
    PREFIX.checked_add(size_at(prefix, 40)?).ok_or_else(|| Error::Snapshot("its header's length overflows".into()))
}

/// What a snapshot's prefix says, checked against the snapshot's whole length.
struct Described {
    /// Where the header ends: the prefix and the header.
    start_len: usize,
    file_len: usize,
    floats: usize,
    blocks: usize,
    placement: Placement,
}

impl Described {
    fn of(prefix: &[u8], len: usize) -> Result<Described> {
        let start_len = start_len(prefix)?;
        let (floats, blocks) = (size_at(prefix, 48)?, size_at(prefix, 56)?);
        let placement = Placement::of(start_len - PREFIX, floats, blocks)?;
        if placement.len != len {
            return Err(Error::Snapshot(format!("it is {len} bytes long; its prefix says {}", placement.len)));
        }
        Ok(Described { start_len, file_len: size_at(prefix, 32)?, floats, blocks, placement })
    }
}

/// Where the buffers of the snapshot whose first [`PREFIX`] bytes are `prefix` go, checked against
/// the snapshot's whole length `len`: what [`SnapshotRestore::new`] checks first, for a list of
/// snapshots to say which can be loaded without reading their headers.
pub fn described_placement(prefix: &[u8], len: usize) -> Result<Placement> {
    Ok(Described::of(prefix, len)?.placement)
}

/// A model being loaded from a snapshot: its start is checked and the buffers allocated, while
/// the header is parsed and planned on the thread pool (and the tokenizer built); the reader
/// fills [`SnapshotRestore::buffers`] from the snapshot's bytes at the [`Placement`] meanwhile,
/// then [`SnapshotRestore::finish`]es, which checks the plan against the buffers.
pub struct SnapshotRestore {
    floats: Vec<f32>,
    blocks: Vec<u8>,
    plan: Aside<Result<GgufHead>>,
    tokenizer: TokenizerBuild,
    placement: Placement,
}

/// `n` bytes of `value`, written by the pool's threads a mebibyte at a time. For a snapshot's
/// blocks (zeros) the writing is not the cost: fresh pages are, each faulted in by the kernel at its
/// first touch, which one thread did for all ~110 MB of SmolLM2's blocks in 135–217 ms in the page
/// before the snapshot's read (then 11–57 ms). Spread over the pool: 67–101 ms (4–7 restores
/// each, timed in the Worker).
fn filled_on_pool(n: usize, value: u8) -> Vec<u8> {
    const PIECE: usize = 1 << 20;
    let mut bytes = Vec::with_capacity(n);
    let room = &mut bytes.spare_capacity_mut()[..n];
    let (pieces, rest) = room.split_at_mut(n / PIECE * PIECE);
    let value = std::mem::MaybeUninit::new(value);
    pool::for_each_chunk(n / PIECE, (pieces, PIECE), |_, piece| piece.fill(value));
    rest.fill(value);
    // SAFETY: `room` was the first `n` bytes of the spare capacity of an empty vector, and its
    // pieces and rest, which tile it, were all written.
    unsafe { bytes.set_len(n) };
    bytes
}

/// The GGUF header kept in a snapshot, parsed.
fn parse(header: &[u8], file_len: usize) -> Result<GgufFile<'_>> {
    GgufFile::parse_header(header, file_len)?.ok_or_else(|| Error::Snapshot("its GGUF header is incomplete".into()))
}

impl SnapshotRestore {
    /// `start`: the snapshot's first [`start_len`] bytes (or more); `len`: its whole length.
    pub fn new(start: &[u8], len: usize, options: &LoadOptions) -> Result<SnapshotRestore> {
        let Described { start_len, file_len, floats, blocks, placement } = Described::of(start, len)?;
        let header = start.get(PREFIX..start_len).ok_or_else(|| Error::Snapshot("its header is cut short".into()))?;
        let budget = Budget::resolve(options.memory_budget, header.len() as u64)?;
        // The buffers are allocated before the plan that checks the budget has run.
        let weights = (placement.len - placement.floats_at) as u64;
        if weights > budget.bytes {
            return Err(Error::Snapshot(format!(
                "its {weights} bytes of weights are more than the memory budget of {} bytes",
                budget.bytes
            )));
        }
        // Before the asides: the pool's threads zero the blocks first, then take them.
        let blocks = filled_on_pool(blocks, 0);
        warm_up_aside();
        let (plan, tokenizer) = if rayon::current_num_threads() < 2 {
            let file = parse(header, file_len)?;
            (Aside::Done(Box::new(GgufHead::plan(&file, &budget, false))), Aside::Done(Box::new(tokenizer_of(&file))))
        } else {
            let header = Arc::new(header.to_vec());
            let planned = Arc::clone(&header);
            let plan = Aside::spawn(move || GgufHead::plan(&parse(&planned, file_len)?, &budget, false));
            (plan, build_tokenizer_aside(header, file_len))
        };
        Ok(SnapshotRestore { floats: vec![0.0; floats], blocks, plan, tokenizer, placement })
    }

    /// Where the buffers are in the snapshot.
    pub fn placement(&self) -> Placement {
        self.placement
    }

    /// The buffers to fill with the snapshot's bytes at [`SnapshotRestore::placement`]: the f32
    /// values (little-endian in the snapshot) and the blocks.
    pub fn buffers(&mut self) -> (&mut [f32], &mut [u8]) {
        (&mut self.floats, &mut self.blocks)
    }

    /// The model, once the buffers hold the snapshot's bytes.
    pub fn finish(self) -> Result<Checkpoint> {
        let planned = self.plan.wait().ok_or_else(|| Error::Snapshot("its plan stopped before it ended".into()))?;
        let mut head = planned?;
        head.fill.install(self.floats, self.blocks)?;
        head.finish(built(self.tokenizer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::GgufStream;

    /// The quantized LLaMA fixture: f32 vectors, and Q4_0/Q4_1/Q8_0 matrices that get packed.
    const GGUF: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/llama-tiny-q/model.gguf");

    fn loaded() -> (Checkpoint, GgufHeader) {
        let file = std::fs::read(GGUF).unwrap();
        let mut stream = GgufStream::new(file.len() as u64, &LoadOptions::default()).unwrap().keep_header();
        for piece in file.chunks(1000) {
            stream.push(piece).unwrap();
        }
        let (checkpoint, header) = stream.finish_keeping_header().unwrap();
        (checkpoint, header.unwrap())
    }

    /// The snapshot's bytes, as the page's writer lays them out.
    fn snapshot(checkpoint: &Checkpoint, header: &GgufHeader) -> Vec<u8> {
        let start = start(header, &checkpoint.model.weights);
        let placement = placement(header, &checkpoint.model.weights).unwrap();
        let (floats, blocks) = checkpoint.model.weights.buffers();
        let mut bytes = vec![0u8; placement.len];
        bytes[..start.len()].copy_from_slice(&start);
        for (i, v) in floats.iter().enumerate() {
            bytes[placement.floats_at + 4 * i..][..4].copy_from_slice(&v.to_le_bytes());
        }
        bytes[placement.blocks_at..].copy_from_slice(blocks);
        bytes
    }

    fn restore(bytes: &[u8]) -> Result<Checkpoint> {
        let mut restore = SnapshotRestore::new(bytes, bytes.len(), &LoadOptions::default())?;
        let Placement { floats_at, blocks_at, .. } = restore.placement();
        let (floats, blocks) = restore.buffers();
        for (i, v) in floats.iter_mut().enumerate() {
            *v = f32::from_le_bytes(bytes[floats_at + 4 * i..][..4].try_into().unwrap());
        }
        blocks.copy_from_slice(&bytes[blocks_at..blocks_at + blocks.len()]);
        restore.finish()
    }

    #[test]
    fn a_restored_model_has_the_same_weights_tokenizer_and_logits() {
        let (checkpoint, header) = loaded();
        let (floats, blocks) = checkpoint.model.weights.buffers();
        assert!(!blocks.is_empty() && !floats.is_empty(), "the fixture should have packed and f32 tensors");
        let bytes = snapshot(&checkpoint, &header);
        let restored = restore(&bytes).unwrap();
        assert_eq!(restored.model.weights.buffers(), checkpoint.model.weights.buffers());
        assert_eq!(restored.model.config.n_layer, checkpoint.model.config.n_layer);
        let text = "Hello, world";
        let ids = checkpoint.tokenizer().unwrap().encode(text).unwrap();
        assert_eq!(restored.tokenizer().unwrap().encode(text).unwrap(), ids);
        let logits = |c: &Checkpoint| {
            let mut session = crate::model::Session::new(c.model.clone());
            session.run(&ids, &Default::default()).unwrap();
            session.last_logits().to_vec()
        };
        assert_eq!(logits(&restored), logits(&checkpoint));
    }

    /// A tripwire, not a reference value: the fixture's buffers as this engine lays them out. When
    /// a change to the packing or the decoding moves it, snapshots written before would load as
    /// other numbers: bump [`FORMAT`], then set both here.
    #[test]
    fn the_buffers_layout_is_the_one_format_names() {
        /// The format, and the hash of the fixture's buffers in its layout.
        const LAYOUT: (u32, u64) = (1, 7_567_272_608_494_627_530);
        let (checkpoint, _) = loaded();
        let (floats, blocks) = checkpoint.model.weights.buffers();
        // FNV-1a over the f32 values' bytes, then the blocks.
        let bytes = floats.iter().flat_map(|v| v.to_le_bytes()).chain(blocks.iter().copied());
        let hash = bytes.fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
        assert_eq!((FORMAT, hash), LAYOUT, "the weights' layout or FORMAT changed: see the test's comment");
    }

    #[test]
    fn a_list_of_snapshots_tells_from_the_prefix_alone_which_can_load() {
        let (checkpoint, header) = loaded();
        let bytes = snapshot(&checkpoint, &header);
        let prefix = &bytes[..PREFIX];
        let placed = placement(&header, &checkpoint.model.weights).unwrap();
        assert_eq!(described_placement(prefix, bytes.len()).unwrap(), placed);
        let why = |prefix: &[u8], len: usize| match described_placement(prefix, len) {
            Err(Error::Snapshot(message)) => message,
            other => panic!("expected a snapshot error, got {other:?}"),
        };
        assert!(why(prefix, bytes.len() - 1).contains("bytes long"));
        let mut unfinished = prefix.to_vec();
        unfinished[..8].fill(0);
        assert!(why(&unfinished, bytes.len()).contains("did not finish"));
        let mut other_version = prefix.to_vec();
        other_version[16..32].copy_from_slice(b"0.0.0-other\0\0\0\0\0");
        assert!(why(&other_version, bytes.len()).contains("0.0.0-other"));
    }

    #[test]
    fn a_snapshot_cut_short_changed_or_from_another_layout_is_refused() {
        let (checkpoint, header) = loaded();
        let bytes = snapshot(&checkpoint, &header);
        let refused = |bytes: &[u8], why: &str| match restore(bytes) {
            Err(Error::Snapshot(message)) => assert!(message.contains(why), "{message:?} should say {why:?}"),
            other => panic!("expected a snapshot error saying {why:?}, got {:?}", other.map(|_| ())),
        };
        refused(&bytes[..bytes.len() - 1], "bytes long");
        refused(&bytes[..40], "shorter than its prefix");
        let mut unfinished = bytes.clone();
        unfinished[..8].fill(0);
        refused(&unfinished, "did not finish");
        let mut other_format = bytes.clone();
        other_format[8] ^= 0xff;
        refused(&other_format, "layout");
        let mut other_version = bytes.clone();
        other_version[16..32].copy_from_slice(b"0.0.0-other\0\0\0\0\0");
        refused(&other_version, "0.0.0-other");
        // 16 more f32 values than the header plans, and the snapshot 64 bytes longer to hold them.
        let mut other_sizes = bytes.clone();
        let floats = u64::from_le_bytes(other_sizes[48..56].try_into().unwrap());
        other_sizes[48..56].copy_from_slice(&(floats + 16).to_le_bytes());
        other_sizes.extend_from_slice(&[0; 64]);
        refused(&other_sizes, "its header plans");
        let tight = LoadOptions { memory_budget: Some(64 << 10) };
        match SnapshotRestore::new(&bytes, bytes.len(), &tight) {
            Err(Error::Snapshot(message)) => assert!(message.contains("memory budget"), "{message}"),
            other => panic!("expected the budget to refuse the snapshot, got {:?}", other.map(|_| ())),
        }
        let mut cut_header = bytes.clone();
        cut_header[40..48].copy_from_slice(&8u64.to_le_bytes());
        assert!(restore(&cut_header).is_err());
    }

    #[test]
    fn bytes_filled_on_the_pool_are_all_there_and_all_written() {
        let mib = 1 << 20;
        // Each side of a piece's boundary: the rest alone, whole pieces alone, both. Not zeros,
        // which fresh memory would hold whether written or not.
        for n in [0, 1, mib - 1, mib, mib + 1, 3 * mib + 5] {
            let bytes = filled_on_pool(n, 0xA5);
            assert_eq!(bytes.len(), n);
            assert!(bytes.iter().all(|&b| b == 0xA5), "a byte of {n} was not written");
        }
    }
}
