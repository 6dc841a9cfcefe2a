// Q5_1 in gptlens's packed layout (kernels/packed.rs), 10 words a block of 32:
// | d f32 | m f32 | W0 … W7 |, element 16h + 4p + k = byte p of W_{4h+k} (a 5-bit q),
// weight d·q + m.
fn decode_unit(base: u32, u: u32, cols: u32) -> array<f32, 32> {
    var v: array<f32, 32>;
    let b = base + u * 10u;
    let d = bitcast<f32>(w[b]);
    let m = bitcast<f32>(w[b + 1u]);
    for (var h = 0u; h < 2u; h++) {
        for (var k = 0u; k < 4u; k++) {
            let word = w[b + 2u + 4u * h + k];
            for (var q = 0u; q < 4u; q++) {
                v[16u * h + 4u * q + k] = d * f32(extractBits(word, 8u * q, 8u)) + m;
            }
        }
    }
    return v;
}
