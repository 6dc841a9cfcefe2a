//! GPT-2's GELU (`gelu_new`, the tanh approximation), exactly as transformers writes it.

const SQRT_2_OVER_PI: f32 = 0.797_884_6;

pub fn gelu_new(x: &mut [f32]) {
    for v in x {
        let u = *v;
        *v = 0.5 * u * (1.0 + libm::tanhf(SQRT_2_OVER_PI * (u + 0.044715 * u * u * u)));
    }
}

#[cfg(test)]
mod tests {
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
