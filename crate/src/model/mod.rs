//! The architecture: hyperparameters, weights, the forward pass and sessions that run it.

mod config;
pub(crate) mod forward;
pub(crate) mod session;
mod weights;

pub use config::{Arch, Config, Mlp, Rope, RopePairing, SlidingWindow, MAX_DIM};
pub use forward::{Model, CHUNK};
pub use session::Session;
pub use weights::{GgufFill, LayerWeights, Linear, Matrix, Norm, Rows, View, Weights};
