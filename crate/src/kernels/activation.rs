//! MLP activations: GPT-2's GELU (`gelu_new`, the tanh approximation), LLaMA's SwiGLU, Gemma's
//! GeGLU (the same GELU as a gate), BERT's exact GELU (erf) and the original transformer's ReLU,
//! written as PyTorch and transformers write them.

const SQRT_2_OVER_PI: f32 = 0.797_884_6;

fn gelu(u: f32) -> f32 {
    0.5 * u * (1.0 + libm::tanhf(SQRT_2_OVER_PI * (u + 0.044715 * u * u * u)))
}

pub fn gelu_new(x: &mut [f32]) {
    for v in x {
        *v = gelu(*v);
    }
}

/// The exact GELU, `x · ½(1 + erf(x/√2))` (PyTorch's `F.gelu`, BERT's `"gelu"`).
pub fn gelu_erf(x: &mut [f32]) {
    for v in x {
        *v = 0.5 * *v * (1.0 + libm::erff(*v * std::f32::consts::FRAC_1_SQRT_2));
    }
}

pub fn relu(x: &mut [f32]) {
    for v in x {
        *v = v.max(0.0);
    }
}

/// GeGLU's gating: `up[i] = gelu(gate[i]) · up[i]`.
pub fn gelu_mul(gate: &[f32], up: &mut [f32]) {
    for (u, &g) in up.iter_mut().zip(gate) {
        *u *= gelu(g);
    }
}

/// SwiGLU's gating: `up[i] = silu(gate[i]) · up[i]`, with `silu(x) = x / (1 + e^−x)`.
pub fn silu_mul(gate: &[f32], up: &mut [f32]) {
    // The exponentials a group at a time, on the stack, so they take the vector path.
    const GROUP: usize = 64;
    let mut exps = [0f32; GROUP];
    for (gates, ups) in gate.chunks(GROUP).zip(up.chunks_mut(GROUP)) {
        let exps = &mut exps[..gates.len()];
        for (e, &g) in exps.iter_mut().zip(gates) {
            *e = -g;
        }
        super::exp_in_place(exps);
        for ((u, &g), &e) in ups.iter_mut().zip(gates).zip(exps.iter()) {
            *u *= g / (1.0 + e);
        }
    }
}

#[cfg(test)]
mod tests {
    /// Φ(1) = 0.841344746…, so gelu(1) = 0.841344746; gelu(−1) = −(1 − Φ(1)) = −0.158655254.
    #[test]
    fn exact_gelu_and_relu() {
        let mut x = [1.0, -1.0, 0.0];
        super::gelu_erf(&mut x);
        assert!((x[0] - 0.841_344_7).abs() < 1e-6 && (x[1] + 0.158_655_25).abs() < 1e-6 && x[2] == 0.0);
        let mut y = [-2.0, 3.0];
        super::relu(&mut y);
        assert_eq!(y, [0.0, 3.0]);
    }

    #[test]
    fn silu_gates() {
        let mut up = [2.0, 2.0, 2.0];
        super::silu_mul(&[0.0, 1.0, -20.0], &mut up);
        let silu1 = 1.0 / (1.0 + (-1f32).exp());
        assert_eq!(up[0], 0.0);
        assert!((up[1] - 2.0 * silu1).abs() < 1e-6 && up[2].abs() < 1e-7);
    }

    /// Values from `transformers.activations.NewGELUActivation` in float64.
    #[test]
    fn matches_reference_values() {
        let mut x = [-3.0, -1.0, 0.0, 0.5, 2.0];
        super::gelu_new(&mut x);
        let expected = [-0.003_637_392, -0.158_808, 0.0, 0.345_714, 1.954_597_7];
        for (a, b) in x.iter().zip(expected) {
            assert!((a - b).abs() < 1e-5, "{a} vs {b}");
        }
    }
}
