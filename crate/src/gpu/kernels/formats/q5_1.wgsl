// Q5_1 weights (GGUF type 7) for the matmul shader: blocks of 32 weights in 24 bytes (6 words):
//   byte 0..2 d (f16) | 2..4 m (f16) | 4..8 qh, the fifth bits (bit e for weight e) | 8..24 qs,
//   low nibbles weights 0–15, high nibbles 16–31
// Weight = d·q + m, q = nibble + 16·bit, as llama.cpp's dequantize_row_q5_1.
fn decode_unit(base: u32, u: u32, cols: u32) -> array<f32, 32> {
    var v: array<f32, 32>;
    let b = base + u * 6u;
    let d = f16_to_f32(w[b]);
    let m = f16_to_f32(w[b] >> 16u);
    let qh = w[b + 1u];
    for (var j = 0u; j < 16u; j++) {
        let q = block_byte(b, 8u + j);
        v[j] = f32((q & 15u) | (((qh >> j) & 1u) << 4u)) * d + m;
        v[j + 16u] = f32((q >> 4u) | (((qh >> (j + 16u)) & 1u) << 4u)) * d + m;
    }
    return v;
}
