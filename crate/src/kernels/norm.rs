//! LayerNorm, with the per-row statistics the visualizer draws.

use super::{dot, sum};

/// Normalises each `d`-wide row of `x`: `out = (x − mean) / scale · weight + bias`, where
/// `scale = sqrt(biased variance + eps)` (TransformerLens's `hook_scale`). Each row's mean and scale
/// land in `mean[row]` and `scale[row]`. Variance is two-pass (subtract the mean first) because
/// the residual stream's mean can dwarf its spread.
pub fn layernorm(
    out: &mut [f32],
    x: &[f32],
    weight: &[f32],
    bias: &[f32],
    eps: f32,
    mean: &mut [f32],
    scale: &mut [f32],
) {
    let d = weight.len();
    for (((o, xr), m), s) in out.chunks_exact_mut(d).zip(x.chunks_exact(d)).zip(mean.iter_mut()).zip(scale.iter_mut()) {
        let mu = sum(xr) / d as f32;
        for (oi, xi) in o.iter_mut().zip(xr) {
            *oi = xi - mu;
        }
        let var = dot(o, o) / d as f32;
        let sigma = (var + eps).sqrt();
        for ((oi, w), b) in o.iter_mut().zip(weight).zip(bias) {
            *oi = *oi / sigma * w + b;
        }
        *m = mu;
        *s = sigma;
    }
}

/// RMSNorm of each `d`-wide row of `x`: `out = x / scale · weight` with
/// `scale = sqrt(mean(x²) + eps)`, each row's scale in `scale[row]`.
pub fn rmsnorm(out: &mut [f32], x: &[f32], weight: &[f32], eps: f32, scale: &mut [f32]) {
    let d = weight.len();
    for ((o, xr), s) in out.chunks_exact_mut(d).zip(x.chunks_exact(d)).zip(scale.iter_mut()) {
        let rms = (dot(xr, xr) / d as f32 + eps).sqrt();
        for ((oi, xi), w) in o.iter_mut().zip(xr).zip(weight) {
            *oi = xi / rms * w;
        }
        *s = rms;
    }
}

/// L2 norm of each `d`-wide row of `x`.
pub fn row_norms(x: &[f32], d: usize, out: &mut [f32]) {
    for (o, row) in out.iter_mut().zip(x.chunks_exact(d)) {
        *o = dot(row, row).sqrt();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ```text
    /// x = [1 2 3 4]   mean 2.5   var 1.25   scale = sqrt(1.25 + 0.75) = sqrt(2)
    /// out = (x − 2.5)/sqrt(2) · 2 + 1 = [1 − 1.5√2, 1 − 0.5√2, 1 + 0.5√2, 1 + 1.5√2]
    /// ```
    #[test]
    fn normalises_one_row() {
        let (mut out, mut mean, mut scale) = ([0.0; 4], [0.0], [0.0]);
        layernorm(&mut out, &[1., 2., 3., 4.], &[2.; 4], &[1.; 4], 0.75, &mut mean, &mut scale);
        let r2 = 2f32.sqrt();
        let expected = [1. - 1.5 * r2, 1. - 0.5 * r2, 1. + 0.5 * r2, 1. + 1.5 * r2];
        for (a, b) in out.iter().zip(expected) {
            assert!((a - b).abs() < 1e-6);
        }
        assert_eq!(mean, [2.5]);
        assert!((scale[0] - r2).abs() < 1e-6);
    }

    /// A large common offset must not destroy the variance (one-pass E[x²] − E[x]² would).
    #[test]
    fn variance_survives_a_large_mean() {
        let x: Vec<f32> = (0..64).map(|i| 1000.0 + (i % 2) as f32).collect();
        let (mut out, mut mean, mut scale) = (vec![0.0; 64], [0.0], [0.0]);
        layernorm(&mut out, &x, &[1.; 64], &[0.; 64], 0.0, &mut mean, &mut scale);
        assert!((scale[0] - 0.5).abs() < 1e-4, "{}", scale[0]);
    }

    /// ```text
    /// x = [3 4 0 0]   mean(x²) = 25/4   scale = sqrt(6.25 + 0.75) = sqrt(7)
    /// out = x / sqrt(7) · [1 2 1 1] = [3/√7, 8/√7, 0, 0]
    /// ```
    #[test]
    fn rmsnorm_one_row() {
        let (mut out, mut scale) = ([0.0; 4], [0.0]);
        rmsnorm(&mut out, &[3., 4., 0., 0.], &[1., 2., 1., 1.], 0.75, &mut scale);
        let r7 = 7f32.sqrt();
        assert!((scale[0] - r7).abs() < 1e-6);
        assert!((out[0] - 3. / r7).abs() < 1e-6 && (out[1] - 8. / r7).abs() < 1e-6 && out[2] == 0.);
    }

    #[test]
    fn row_norms_are_euclidean() {
        let mut n = [0.0; 2];
        row_norms(&[3., 4., 0., 5.], 2, &mut n);
        assert_eq!(n, [5., 5.]);
    }
}
