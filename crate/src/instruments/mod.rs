//! Instruments that read a run's captures or re-run parts of it, and say what the components do:
//! head detectors ([`HeadScores`]), ablation ([`Ablation`]), activation patching
//! ([`patching`]), the logit lens and direct logit attribution ([`attribution`]).

mod ablation;
pub mod attribution;
mod heads;
pub mod patching;

pub(crate) use ablation::Replacements;
pub use ablation::{AblateWith, Ablation};

use crate::error::{Error, Result};

/// Tells a long computation's caller that step `done` of `total` is finished; its `false` stops
/// the computation with [`Error::Cancelled`].
pub(crate) fn report(progress: &mut dyn FnMut(usize, usize) -> bool, done: usize, total: usize) -> Result<()> {
    if progress(done, total) {
        Ok(())
    } else {
        Err(Error::Cancelled { done, total })
    }
}
pub use heads::{repeated_random_tokens, HeadScores, REPEATED_HALF};
