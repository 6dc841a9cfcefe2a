//! One query row of self-attention for one head.

use std::ops::Range;

use super::{add_scaled, dot, exp_in_place, largest, sum};

/// One head's keys and values in the KV cache: key `j` is `keys[j·stride .. j·stride + hd]` (the
/// cache holds all heads side by side; `keys` and `values` start at this head's column).
pub struct HeadCache<'a> {
    pub keys: &'a [f32],
    pub values: &'a [f32],
    pub stride: usize,
}

/// Attends query `q` (`[hd]`) over the keys and values at positions `visible` (all earlier
/// positions, a sliding window of them, or the whole sequence), less those `attended` marks
/// `false` (padding). Scores are `q·k / divisor`. Leaves the softmax probabilities in
/// `probs[..visible.end]` (zero outside the window and at padding) and their weighted sum of
/// values in `out` (`[hd]`). A query with no key to read gets zeros, not NaN.
pub fn attend(
    q: &[f32],
    cache: &HeadCache,
    visible: Range<usize>,
    attended: Option<&[bool]>,
    divisor: f32,
    probs: &mut [f32],
    out: &mut [f32],
) {
    let HeadCache { keys, values, stride } = *cache;
    let hd = q.len();
    let (hidden, probs) = probs[..visible.end].split_at_mut(visible.start);
    hidden.fill(0.0);
    let is_read = |j: usize| attended.is_none_or(|mask| mask.get(j).copied().unwrap_or(false));
    // transformers divides GPT-2's scores by sqrt(head_dim) rather than multiplying by its
    // inverse; so do we. (LLaMA's multiply by the inverse is the same bits for the power-of-4
    // head sizes the fixtures use.)
    for (j, p) in visible.clone().zip(probs.iter_mut()) {
        *p = if is_read(j) { dot(q, &keys[j * stride..j * stride + hd]) / divisor } else { f32::NEG_INFINITY };
    }
    out.fill(0.0);
    if probs.iter().all(|&p| p == f32::NEG_INFINITY) {
        probs.fill(0.0);
        return;
    }
    softmax(probs);
    for (j, &p) in visible.zip(probs.iter()) {
        add_scaled(out, p, &values[j * stride..j * stride + hd]);
    }
}

/// In-place softmax, shifted by the maximum so large scores cannot overflow.
pub fn softmax(x: &mut [f32]) {
    let max = largest(x);
    for v in x.iter_mut() {
        *v -= max;
    }
    exp_in_place(x);
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
        let cache = HeadCache { keys: &[0., 0., 2., 0.], values: &[1., 0., 0., 1.], stride: 2 };
        attend(&[1., 0.], &cache, 0..2, None, 2f32.sqrt(), &mut probs, &mut out);
        let p1 = 1.0 / (1.0 + (-(2f32).sqrt()).exp());
        assert!((probs[1] - p1).abs() < 1e-6 && (probs[0] - (1.0 - p1)).abs() < 1e-6);
        assert!((out[0] - probs[0]).abs() < 1e-6 && (out[1] - probs[1]).abs() < 1e-6);
    }

    /// A window that starts at the second key: the first gets probability zero and no weight.
    #[test]
    fn a_window_hides_the_keys_before_it() {
        let (mut probs, mut out) = ([9.0; 3], [0.0; 2]);
        let cache = HeadCache { keys: &[5., 0., 0., 0., 2., 0.], values: &[1., 0., 0., 1., 0., 1.], stride: 2 };
        attend(&[1., 0.], &cache, 1..3, None, 1.0, &mut probs, &mut out);
        let p2 = 1.0 / (1.0 + (-2f32).exp());
        assert_eq!(probs[0], 0.0);
        assert!((probs[2] - p2).abs() < 1e-6 && (probs[1] - (1.0 - p2)).abs() < 1e-6);
        assert!(out[0].abs() < 1e-7 && (out[1] - 1.0).abs() < 1e-6);
    }

    /// Padding hides a key like a window does; a query whose every key is padding reads nothing.
    #[test]
    fn padding_is_never_read_and_all_padding_gives_zeros() {
        let cache = HeadCache { keys: &[5., 0., 0., 0., 2., 0.], values: &[1., 0., 0., 1., 0., 1.], stride: 2 };
        let (mut masked, mut windowed, mut out, mut out2) = ([9.0; 3], [9.0; 3], [0.0; 2], [0.0; 2]);
        attend(&[1., 0.], &cache, 0..3, Some(&[false, true, true]), 1.0, &mut masked, &mut out);
        attend(&[1., 0.], &cache, 1..3, None, 1.0, &mut windowed, &mut out2);
        assert_eq!((masked, out), (windowed, out2));
        attend(&[1., 0.], &cache, 0..3, Some(&[false; 3]), 1.0, &mut masked, &mut out);
        assert_eq!((masked, out), ([0.0; 3], [0.0; 2]));
    }

    #[test]
    fn softmax_is_stable_and_normalised() {
        let mut x = [1000.0, 1000.0, -1000.0];
        softmax(&mut x);
        assert_eq!(x, [0.5, 0.5, 0.0]);
    }
}
