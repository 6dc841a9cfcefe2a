//! The architecture: hyperparameters, weights, the forward pass and sessions that run it.

mod config;
mod embedding;
pub(crate) mod forward;
pub(crate) mod session;
mod weights;

pub use config::{
    Arch, Attention, Config, Mlp, NormPlacement, Positions, Rope, RopePairing, SlidingWindow, Variant, MAX_DIM,
};
pub use embedding::{cosine, mean_pooled_unit};
pub use forward::{Model, CHUNK};
pub use session::Session;
pub use weights::{GgufFill, LayerWeights, Linear, Matrix, Norm, Rows, View, Weights};
