//! Sentence embeddings from an encoder: the final hidden states, averaged over the tokens and
//! scaled to length 1 — sentence-transformers' recipe for all-MiniLM-L6-v2 — and the cosine
//! similarity that compares two of them.

use crate::error::Result;
use crate::model::forward::{final_hidden, Activations};
use crate::model::Session;
use crate::trace::{CaptureSpec, Hook};

impl Session {
    /// The model's output for every position, `[T, d_model]`: the last block's output, through the
    /// final norm where the model has one (pre-LN).
    pub fn hidden_states(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        let c = self.config().clone();
        let last = Hook::ResidPost(c.n_layer - 1).to_string();
        let mut trace = self.run(tokens, &CaptureSpec::from_names(&[&last], &c)?)?;
        let rows = trace.tensors.remove(&last).map(|t| t.data).unwrap_or_default();
        if !c.has_final_norm() {
            return Ok(rows);
        }
        Ok(final_hidden(self.model(), &mut Activations::new(&c), &rows))
    }

    /// The sentence embedding of `tokens`: the mean of [`Session::hidden_states`] over the
    /// positions, L2-normalised (`[d_model]`).
    pub fn embed(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        let d = self.config().d_model;
        let hidden = self.hidden_states(tokens)?;
        Ok(mean_pooled_unit(&hidden, d))
    }
}

/// The mean of `rows` (`[T, d]`), divided by its length (left as is when that is zero, as
/// sentence-transformers' `normalize` clamps it). Summed in f64, so the order of positions
/// does not move the result.
pub fn mean_pooled_unit(rows: &[f32], d: usize) -> Vec<f32> {
    let n = (rows.len() / d.max(1)).max(1) as f64;
    let mut mean = vec![0f64; d];
    for row in rows.chunks_exact(d.max(1)) {
        mean.iter_mut().zip(row).for_each(|(m, &x)| *m += f64::from(x));
    }
    mean.iter_mut().for_each(|m| *m /= n);
    let norm = mean.iter().map(|m| m * m).sum::<f64>().sqrt().max(1e-12);
    mean.iter().map(|m| (m / norm) as f32).collect()
}

/// Cosine similarity of two vectors (0 when either is zero).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f64 = a.iter().zip(b).map(|(&x, &y)| f64::from(x) * f64::from(y)).sum();
    let norm = |v: &[f32]| v.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>().sqrt();
    let denominator = norm(a) * norm(b);
    if denominator == 0.0 {
        0.0
    } else {
        (dot / denominator) as f32
    }
}

#[cfg(test)]
mod tests {
    /// Rows (3, 0) and (1, 4): mean (2, 2), unit length (1/√2, 1/√2).
    #[test]
    fn mean_then_unit_length() {
        let e = super::mean_pooled_unit(&[3.0, 0.0, 1.0, 4.0], 2);
        let h = std::f32::consts::FRAC_1_SQRT_2;
        assert!((e[0] - h).abs() < 1e-7 && (e[1] - h).abs() < 1e-7);
        assert!((super::cosine(&[1.0, 0.0], &[1.0, 1.0]) - h).abs() < 1e-7);
        assert_eq!(super::cosine(&[0.0, 0.0], &[1.0, 1.0]), 0.0);
    }
}
