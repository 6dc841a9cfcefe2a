//! Snapshots of a GGUF model's weights ([`crate::checkpoint::snapshot`]) for JS to write and read
//! (crate/js/src/snapshot.ts keeps them in the origin-private file system): the snapshot's start
//! as bytes, and where each weight buffer is, in the engine's memory and in the snapshot, so that
//! JS moves the buffers between the file and the engine with no copy in between.

use wasm_bindgen::prelude::*;

use super::session::whole_number;
use super::Model;
use crate::checkpoint::snapshot::{self, Placement};
use crate::checkpoint::LoadOptions;
use crate::error::Error;

/// Where a model's two weight buffers are: `…Ptr` in the engine's memory, `…At` in the snapshot,
/// `…Bytes` long; `length`: the snapshot's whole length.
#[wasm_bindgen]
#[derive(Clone, Copy)]
pub struct SnapshotBuffers {
    #[wasm_bindgen(js_name = floatsPtr)]
    pub floats_ptr: usize,
    #[wasm_bindgen(js_name = floatsAt)]
    pub floats_at: usize,
    #[wasm_bindgen(js_name = floatsBytes)]
    pub floats_bytes: usize,
    #[wasm_bindgen(js_name = blocksPtr)]
    pub blocks_ptr: usize,
    #[wasm_bindgen(js_name = blocksAt)]
    pub blocks_at: usize,
    #[wasm_bindgen(js_name = blocksBytes)]
    pub blocks_bytes: usize,
    pub length: usize,
}

impl SnapshotBuffers {
    fn of(placement: Placement, floats: &[f32], blocks: &[u8]) -> SnapshotBuffers {
        SnapshotBuffers {
            floats_ptr: floats.as_ptr() as usize,
            floats_at: placement.floats_at,
            floats_bytes: std::mem::size_of_val(floats),
            blocks_ptr: blocks.as_ptr() as usize,
            blocks_at: placement.blocks_at,
            blocks_bytes: blocks.len(),
            length: placement.len,
        }
    }
}

fn no_header() -> JsError {
    JsError::new("this model was not loaded for a snapshot: load it with a GgufLoader made with forSnapshot")
}

#[wasm_bindgen]
impl Model {
    /// The start of a snapshot of this model's weights (its prefix and the GGUF's header), to be
    /// written at offset 0 after the buffers ([`Model::snapshot_buffers`]): a snapshot whose
    /// writing stopped before then has no valid start.
    #[wasm_bindgen(js_name = snapshotStart)]
    pub fn snapshot_start(&self) -> Result<Vec<u8>, JsError> {
        let header = self.gguf_header.as_ref().ok_or_else(no_header)?;
        Ok(snapshot::start(header, &self.checkpoint.model.weights))
    }

    /// Where this model's weight buffers are, to write them into a snapshot. The pointers stay
    /// valid while the model lives (its weights never move).
    #[wasm_bindgen(js_name = snapshotBuffers)]
    pub fn snapshot_buffers(&self) -> Result<SnapshotBuffers, JsError> {
        let header = self.gguf_header.as_ref().ok_or_else(no_header)?;
        let weights = &self.checkpoint.model.weights;
        let (floats, blocks) = weights.buffers();
        Ok(SnapshotBuffers::of(snapshot::placement(header, weights)?, floats, blocks))
    }
}

/// A model loaded from a snapshot: `new` checks its start and allocates the weights; JS reads
/// the snapshot's bytes into the `buffers()` and then calls `finish`.
#[wasm_bindgen]
pub struct SnapshotRestore {
    /// `None` once `finish` has taken it.
    restore: Option<snapshot::SnapshotRestore>,
}

#[wasm_bindgen]
impl SnapshotRestore {
    /// How many bytes of the snapshot's start `new` needs, from its first `SnapshotRestore.prefixBytes`;
    /// throws when they are not those of a whole snapshot of this engine's layout.
    #[wasm_bindgen(js_name = startBytes)]
    pub fn start_bytes(prefix: &[u8]) -> Result<usize, JsError> {
        Ok(snapshot::start_len(prefix)?)
    }

    /// Throws why the snapshot whose first `SnapshotRestore.prefixBytes` are `prefix` and whose
    /// whole length is `snapshotBytes` cannot be loaded (cut short, being written, another
    /// version's), as far as its prefix tells.
    pub fn check(prefix: &[u8], #[wasm_bindgen(js_name = snapshotBytes)] snapshot_bytes: f64) -> Result<(), JsError> {
        snapshot::described_placement(prefix, snapshot_length(snapshot_bytes)?)?;
        Ok(())
    }

    /// The length of the fixed prefix `startBytes` reads.
    #[wasm_bindgen(js_name = prefixBytes)]
    pub fn prefix_bytes() -> usize {
        snapshot::PREFIX
    }

    /// `start`: the snapshot's first `startBytes` bytes; `snapshotBytes`: its whole length.
    #[wasm_bindgen(constructor)]
    pub fn new(
        start: &[u8],
        #[wasm_bindgen(js_name = snapshotBytes)] snapshot_bytes: f64,
    ) -> Result<SnapshotRestore, JsError> {
        let len = snapshot_length(snapshot_bytes)?;
        Ok(SnapshotRestore { restore: Some(snapshot::SnapshotRestore::new(start, len, &LoadOptions::default())?) })
    }

    /// Where to read the snapshot's buffers to.
    pub fn buffers(&mut self) -> Result<SnapshotBuffers, JsError> {
        let restore = self.restore.as_mut().ok_or_else(finished)?;
        let placement = restore.placement();
        let (floats, blocks) = restore.buffers();
        Ok(SnapshotBuffers::of(placement, floats, blocks))
    }

    /// The model, once the buffers hold the snapshot's bytes; it runs on the CPU.
    pub fn finish(&mut self) -> Result<Model, JsError> {
        Ok(Model::from_checkpoint(self.restore.take().ok_or_else(finished)?.finish()?))
    }
}

/// A snapshot's length in bytes, from JS.
fn snapshot_length(bytes: f64) -> Result<usize, JsError> {
    let len = whole_number(bytes, "snapshotBytes")?;
    usize::try_from(len).map_err(|_| JsError::from(Error::Snapshot(format!("{len} bytes do not fit in memory"))))
}

fn finished() -> JsError {
    JsError::new("this SnapshotRestore has finished; make a new one")
}
