// Q5_K weights (GGUF type 13) for the matmul shader.
//
// Super-block of 256 weights, 176 bytes (44 words; a multiple of 4 already, no padding needed):
//   byte 0..2 d (f16) | 2..4 dmin (f16) | 4..16 six-bit scales and mins (as Q4_K, llama.cpp's
//   get_scale_min_k4) | 16..48 qh | 48..176 qs
// Sub-block s (32 weights, l = 0..31) takes its low nibble from qs as in Q4_K (chunk s/2, low
// nibbles for even s, high for odd) and its fifth bit from bit s of qh[l]: q = nibble + 16*bit.
// Weight = (d*sc)*q - dmin*m.
// Every super-block is stored word-aligned (GPU storage is read in u32 words; Q6_K needs zero
// padding for that, Q5_K's 176 bytes are already 44 whole words), bytes little-endian in a word.
//
// Requires `@group(0) @binding(1) var<storage, read> w: array<u32>;` (declared by matmul.wgsl).

const SUPER_WORDS: u32 = 44u;

fn decode_unit(base: u32, u: u32, cols: u32) -> array<f32, 32> {
    let sb = base + (u / 8u) * SUPER_WORDS;
    let s = u % 8u;
    let dw = w[sb];
    let d = f16_to_f32(dw);
    let dmin = f16_to_f32(dw >> 16u);
    let sm = k_scale_min(sb, s);
    let dl = d * f32(sm.x);
    let ml = dmin * f32(sm.y);
    let qh = sb + 4u;                 // byte 16
    let qs = sb + 12u + 8u * (s / 2u); // byte 48 + 32*(s/2)
    let shift = 4u * (s % 2u);
    var res: array<f32, 32>;
    for (var i = 0u; i < 8u; i++) {
        let lo = (w[qs + i] >> shift) & 0x0F0F0F0Fu;
        let hi = ((w[qh + i] >> s) & 0x01010101u) << 4u;
        let q = lo | hi;
        res[4u * i] = dl * f32(q & 0xFFu) - ml;
        res[4u * i + 1u] = dl * f32((q >> 8u) & 0xFFu) - ml;
        res[4u * i + 2u] = dl * f32((q >> 16u) & 0xFFu) - ml;
        res[4u * i + 3u] = dl * f32(q >> 24u) - ml;
    }
    return res;
}
