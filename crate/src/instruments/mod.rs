//! Instruments that read a run's captures or re-run parts of it, and say what the components do:
//! head detectors ([`HeadScores`]), ablation ([`Ablation`]), activation patching
//! ([`patching`]), the logit lens and direct logit attribution ([`attribution`]).

mod ablation;
pub mod attribution;
mod heads;
pub mod patching;

pub(crate) use ablation::Replacements;
pub use ablation::{AblateWith, Ablation};
pub use heads::{repeated_random_tokens, HeadScores, REPEATED_HALF};
