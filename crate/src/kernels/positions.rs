//! The original transformer's fixed position table (*Attention Is All You Need*, §3.5).

/// Row `pos` of the sinusoidal table, `d` wide: PE(pos, 2i) = sin(pos / 10000^(2i/d)),
/// PE(pos, 2i+1) = cos(pos / 10000^(2i/d)). Computed in f64 and rounded once, so that the table
/// is the formula's value to the last bit of f32 whatever the platform's `sin`.
pub fn sinusoidal(pos: usize, out: &mut [f32]) {
    let d = out.len() as f64;
    for (i, pair) in out.chunks_mut(2).enumerate() {
        let angle = pos as f64 / libm::pow(10_000.0, (2 * i) as f64 / d);
        pair[0] = libm::sin(angle) as f32;
        if let Some(odd) = pair.get_mut(1) {
            *odd = libm::cos(angle) as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    /// Position 0 is sin 0 = 0 and cos 0 = 1 alternately; at position 1 the first pair is
    /// (sin 1, cos 1) and the last pair's frequency is 10000^(−(d−2)/d).
    #[test]
    fn the_papers_formula() {
        let mut row = [9.0; 4];
        super::sinusoidal(0, &mut row);
        assert_eq!(row, [0.0, 1.0, 0.0, 1.0]);
        super::sinusoidal(1, &mut row);
        let slow = 1.0 / 100f64; // 10000^(2/4)
        let want = [1f64.sin(), 1f64.cos(), slow.sin(), slow.cos()].map(|x| x as f32);
        assert_eq!(row, want);
    }
}
