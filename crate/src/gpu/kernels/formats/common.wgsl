// Helpers every weight format may use; prepended to every matmul kernel (matmul.rs).

// IEEE half → f32, exactly, by hand. WGSL's unpack2x16float would do, but wgpu's native backends
// accept it only on adapters with 16-bit float support, and a GPU may flush the subnormals that
// real models' tiny scales and mins are.
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

// Byte i of the block starting at word `block` (bytes little-endian in a word).
fn block_byte(block: u32, i: u32) -> u32 {
    return (w[block + i / 4u] >> (8u * (i % 4u))) & 0xFFu;
}

// Q4_K's and Q5_K's six-bit scale (x) and min (y) of sub-block j (0..7): 12 packed bytes from
// byte 4 of the super-block, as llama.cpp's get_scale_min_k4.
fn k_scale_min(sb: u32, j: u32) -> vec2<u32> {
    if (j < 4u) {
        return vec2<u32>(block_byte(sb, 4u + j) & 63u, block_byte(sb, 8u + j) & 63u);
    }
    let lo = block_byte(sb, 8u + j);          // s[j + 4]: min low nibble | scale low nibble
    let sc_hi = block_byte(sb, j) >> 6u;      // s[j - 4] top two bits
    let mn_hi = block_byte(sb, 4u + j) >> 6u; // s[j] top two bits
    return vec2<u32>((lo & 15u) | (sc_hi << 4u), (lo >> 4u) | (mn_hi << 4u));
}
