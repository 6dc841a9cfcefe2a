//! One query row of causal self-attention for one head.

use super::{add_scaled, dot, sum};

/// Attends query `q` (`[hd]`) over keys and values `0..n_keys`, where key `j` is
/// `keys[j·stride .. j·stride + hd]` (the KV cache holds all heads side by side; `keys` starts at
/// this head's column). Leaves the softmax probabilities in `probs[..n_keys]` and their weighted
/// sum of values in `out` (`[hd]`).
pub fn attend(
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    stride: usize,
    n_keys: usize,
    probs: &mut [f32],
    out: &mut [f32],
) {
    let hd = q.len();
    // transformers divides by sqrt(head_dim) rather than multiplying by its inverse; so do we.
    let denom = (hd as f32).sqrt();
    let probs = &mut probs[..n_keys];
    for (j, p) in probs.iter_mut().enumerate() {
        *p = dot(q, &keys[j * stride..j * stride + hd]) / denom;
    }
    softmax(probs);
    out.fill(0.0);
    for (j, &p) in probs.iter().enumerate() {
        add_scaled(out, p, &values[j * stride..j * stride + hd]);
    }
}

/// In-place softmax, shifted by the maximum so large scores cannot overflow.
pub fn softmax(x: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    for v in x.iter_mut() {
        *v = libm::expf(*v - max);
    }
    let total = sum(x);
    for v in x.iter_mut() {
        *v /= total;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two keys, the second scoring higher:
    /// ```text
    /// q = [1 0]  k0 = [0 0]  k1 = [2 0]   scores = [0, 2/√2]   probs = softmax = [0.1956, 0.8044]
    ///            v0 = [1 0]  v1 = [0 1]   out = probs · V = [0.1956, 0.8044]
    /// ```
    #[test]
    fn two_keys() {
        let (mut probs, mut out) = ([0.0; 2], [0.0; 2]);
        attend(&[1., 0.], &[0., 0., 2., 0.], &[1., 0., 0., 1.], 2, 2, &mut probs, &mut out);
        let p1 = 1.0 / (1.0 + (-(2f32).sqrt()).exp());
        assert!((probs[1] - p1).abs() < 1e-6 && (probs[0] - (1.0 - p1)).abs() < 1e-6);
        assert!((out[0] - probs[0]).abs() < 1e-6 && (out[1] - probs[1]).abs() < 1e-6);
    }

    #[test]
    fn softmax_is_stable_and_normalised() {
        let mut x = [1000.0, 1000.0, -1000.0];
        softmax(&mut x);
        assert_eq!(x, [0.5, 0.5, 0.0]);
    }
}
