// F16 rows: two values a word (element 2i in the low half), a row padded to whole words.
fn decode_unit(base: u32, u: u32, cols: u32) -> array<f32, 32> {
    var v: array<f32, 32>;
    let c0 = u * 32u;
    for (var i = 0u; i < 16u; i++) {
        if (c0 + 2u * i < cols) {
            let word = w[base + c0 / 2u + i];
            v[2u * i] = f16_to_f32(word);
            v[2u * i + 1u] = f16_to_f32(word >> 16u);
        }
    }
    return v;
}
