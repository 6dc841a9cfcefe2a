//! gptlens: a GPT engine that shows its work.
//!
//! Data flows one way: bytes → [`formats`] (validated) → [`model::Model`] (config + weights)
//! → [`model::Session`] (KV cache, prefix reuse) → [`trace::Trace`] (tensors named like
//! TransformerLens hooks). The CLI, the tests and the wasm bindings all sit on that one path.

pub mod backend;
#[cfg(target_arch = "wasm32")]
pub mod bindings;
pub mod checkpoint;
pub mod error;
pub mod formats;
#[cfg(feature = "gpu")]
pub mod gpu;
pub mod instruments;
pub mod kernels;
pub mod model;
pub mod sample;
pub mod tokenizer;
pub mod trace;
pub mod train;

pub use backend::{Backend, BackendChoice};
pub use checkpoint::Checkpoint;
pub use error::{Error, Result};
pub use model::{Model, Session};
pub use trace::{CaptureSpec, Hook, Trace};
