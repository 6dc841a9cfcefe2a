// Q5_0 weights (GGUF type 6) for the matmul shader: blocks of 32 weights in 22 bytes, each padded
// to 24 (6 words) on the GPU:
//   byte 0..2 d (f16) | 2..6 qh, the fifth bits (bit e for weight e) | 6..22 qs, low nibbles
//   weights 0–15, high nibbles 16–31
// Weight = d·(q − 16), q = nibble + 16·bit, as llama.cpp's dequantize_row_q5_0.
fn decode_unit(base: u32, u: u32, cols: u32) -> array<f32, 32> {
    var v: array<f32, 32>;
    let b = base + u * 6u;
    let d = f16_to_f32(w[b]);
    let qh = (w[b] >> 16u) | (w[b + 1u] << 16u);
    for (var j = 0u; j < 16u; j++) {
        let q = block_byte(b, 6u + j);
        v[j] = f32(i32((q & 15u) | (((qh >> j) & 1u) << 4u)) - 16) * d;
        v[j + 16u] = f32(i32((q >> 4u) | (((qh >> (j + 16u)) & 1u) << 4u)) - 16) * d;
    }
    return v;
}
