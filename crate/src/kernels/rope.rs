//! Rotary position embeddings: rotate pairs of a head's dimensions by position-dependent angles.

use crate::model::RopePairing;

/// `cos` and `sin` of every rotation angle at position `pos`: `angle_i = pos · θ^(−2i/hd)` for
/// `i < hd/2`, computed in f32 as transformers does. `cos` and `sin` hold `hd/2` values each.
pub fn angles(pos: usize, head_dim: usize, theta: f32, cos: &mut [f32], sin: &mut [f32]) {
    for (i, (c, s)) in cos.iter_mut().zip(sin.iter_mut()).enumerate() {
        let inv_freq = 1.0 / libm::powf(theta, (2 * i) as f32 / head_dim as f32);
        let angle = pos as f32 * inv_freq;
        *c = libm::cosf(angle);
        *s = libm::sinf(angle);
    }
}

/// Rotates every head (`head_dim` values each) of `x` in place by the angles of one position.
/// Pair `i` is dimensions `(i, i + hd/2)` for [`RopePairing::HalfSplit`] and `(2i, 2i + 1)` for
/// [`RopePairing::Adjacent`] (see [`RopePairing`] for why there are two).
pub fn rotate(x: &mut [f32], head_dim: usize, pairing: RopePairing, cos: &[f32], sin: &[f32]) {
    let half = head_dim / 2;
    for head in x.chunks_exact_mut(head_dim) {
        for i in 0..half {
            let (a, b) = match pairing {
                RopePairing::HalfSplit => (i, i + half),
                RopePairing::Adjacent => (2 * i, 2 * i + 1),
            };
            let (x0, x1) = (head[a], head[b]);
            head[a] = x0 * cos[i] - x1 * sin[i];
            head[b] = x1 * cos[i] + x0 * sin[i];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Position 1, hd 4, θ 100: angles [1, 1/10]. Half-split pairs (0,2) and (1,3):
    /// ```text
    /// x = [1 0 0 1]  →  [cos 1, −sin 0.1, sin 1, cos 0.1]
    /// ```
    /// Adjacent pairs (0,1), (2,3) rotate the same values when x is stored interleaved.
    #[test]
    fn both_pairings_rotate_the_same_vector() {
        let (mut cos, mut sin) = ([0.0; 2], [0.0; 2]);
        angles(1, 4, 100.0, &mut cos, &mut sin);
        let mut half = [1.0, 0.0, 0.0, 1.0];
        rotate(&mut half, 4, RopePairing::HalfSplit, &cos, &sin);
        let expected = [1f32.cos(), -(0.1f32).sin(), 1f32.sin(), 0.1f32.cos()];
        for (a, b) in half.iter().zip(expected) {
            assert!((a - b).abs() < 1e-6, "{half:?}");
        }
        // The same vector interleaved: [x0, x2, x1, x3].
        let mut adjacent = [1.0, 0.0, 0.0, 1.0];
        rotate(&mut adjacent, 4, RopePairing::Adjacent, &cos, &sin);
        assert_eq!(adjacent, [half[0], half[2], half[1], half[3]]);
    }

    #[test]
    fn position_zero_is_the_identity() {
        let (mut cos, mut sin) = ([0.0; 3], [0.0; 3]);
        angles(0, 6, 10000.0, &mut cos, &mut sin);
        let mut x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        rotate(&mut x, 6, RopePairing::HalfSplit, &cos, &sin);
        assert_eq!(x, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    }
}
