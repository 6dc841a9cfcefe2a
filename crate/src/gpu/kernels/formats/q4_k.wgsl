// Q4_K weights (GGUF type 12) for the matmul shader.
//
// Super-block of 256 weights, 144 bytes (36 words; a multiple of 4 already, no padding needed):
//   byte 0..2 d (f16) | 2..4 dmin (f16) | 4..16 six-bit scales and mins, packed as in llama.cpp's
//   get_scale_min_k4 | 16..144 qs: four 32-byte chunks, chunk c's low nibbles are sub-block 2c,
//   its high nibbles sub-block 2c+1.
// Weight = (d*sc)*q - dmin*m for sub-block scale sc, min m and 4-bit q.
// Every super-block is stored word-aligned (GPU storage is read in u32 words; Q5_K/Q6_K need
// zero padding for that, Q4_K's 144 bytes are already 36 whole words), bytes little-endian in a word.
//
// Requires `@group(0) @binding(1) var<storage, read> w: array<u32>;` (declared by matmul.wgsl).

const SUPER_WORDS: u32 = 36u;

fn decode_unit(base: u32, u: u32, cols: u32) -> array<f32, 32> {
    let sb = base + (u / 8u) * SUPER_WORDS;
    let s = u % 8u;
    let dw = w[sb];
    let d = f16_to_f32(dw);
    let dmin = f16_to_f32(dw >> 16u);
    let sm = k_scale_min(sb, s);
    let dl = d * f32(sm.x);
    let ml = dmin * f32(sm.y);
    let qs = sb + 4u + 8u * (s / 2u); // chunk s/2 at byte 16 + 32*(s/2)
    let shift = 4u * (s % 2u);
    var res: array<f32, 32>;
    for (var i = 0u; i < 8u; i++) {
        let word = w[qs + i] >> shift;
        res[4u * i] = dl * f32(word & 15u) - ml;
        res[4u * i + 1u] = dl * f32((word >> 8u) & 15u) - ml;
        res[4u * i + 2u] = dl * f32((word >> 16u) & 15u) - ml;
        res[4u * i + 3u] = dl * f32((word >> 24u) & 15u) - ml;
    }
    return res;
}
