// Q4_0 in gptlens's packed layout (kernels/packed.rs), 5 words a block of 32:
// | d f32 | W0 W1 W2 W3 |, element 4p + k = nibble p of W_k, weight d·(q − 8).
fn decode_unit(base: u32, u: u32, cols: u32) -> array<f32, 32> {
    var v: array<f32, 32>;
    let b = base + u * 5u;
    let d = bitcast<f32>(w[b]);
    for (var k = 0u; k < 4u; k++) {
        let word = w[b + 1u + k];
        for (var q = 0u; q < 8u; q++) {
            v[4u * q + k] = d * (f32(extractBits(word, 4u * q, 4u)) - 8.0);
        }
    }
    return v;
}
