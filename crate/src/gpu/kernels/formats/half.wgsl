// IEEE half → f32, exactly, by hand. WGSL's unpack2x16float would do, but wgpu's native backends
// accept it only on adapters with 16-bit float support, and a GPU may flush the subnormals that
// real models' tiny scales and mins are. Prepended to every matmul kernel.
fn f16_to_f32(h: u32) -> f32 {
    let bits = h & 0xFFFFu;
    let sign = (bits & 0x8000u) << 16u;
    let exponent = (bits >> 10u) & 0x1Fu;
    let mantissa = bits & 0x3FFu;
    if (exponent == 0u) {
        // Zero and subnormals: mantissa · 2^-24, exact in f32.
        let magnitude = f32(mantissa) * 5.9604644775390625e-8;
        return select(magnitude, -magnitude, sign != 0u);
    }
    if (exponent == 31u) {
        return bitcast<f32>(sign | 0x7F800000u | (mantissa << 13u));
    }
    return bitcast<f32>(sign | ((exponent + 112u) << 23u) | (mantissa << 13u));
}
