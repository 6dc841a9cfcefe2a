// Q6_K weights (GGUF type 14) for the matmul shader.
//
// Super-block of 256 weights, 210 bytes in the file, stored here zero-padded to 212 bytes (53
// words) so every super-block starts on a u32 word (GPU storage is read in whole words), bytes
// little-endian in a word:
//   byte 0..128 ql (low 4 bits) | 128..192 qh (high 2 bits) | 192..208 scales (i8) | 208..210 d (f16)
//   | 210..212 zero padding
// Each half (128 weights) uses 64 bytes of ql and 32 of qh. Within a half, weight 32*k + l
// (k = 0..3, l = 0..31) has low bits from ql[l + 32*(k%2)] (low nibble for k < 2, high otherwise)
// and high bits from bits 2k, 2k+1 of qh[l]; its scale is scales[8*half + (32*k + l)/16].
// Weight = (d*sc)*(q - 32). Unit u (32 weights) is super-block u/8, half (u%8)/4, k = u%4.
//
// Requires `@group(0) @binding(1) var<storage, read> w: array<u32>;` (declared by matmul.wgsl).

const SUPER_WORDS: u32 = 53u;

// The i8 scale at byte i, as f32.
fn q6k_scale(sb: u32, i: u32) -> f32 {
    return f32(bitcast<i32>(block_byte(sb, i) << 24u) >> 24u);
}

fn decode_unit(base: u32, u: u32, cols: u32) -> array<f32, 32> {
    let sb = base + (u / 8u) * SUPER_WORDS;
    let s = u % 8u;
    let hf = s / 4u;
    let k = s % 4u;
    let d = f16_to_f32(w[sb + 52u]); // byte 208
    let sc0 = d * q6k_scale(sb, 192u + 8u * hf + 2u * k);       // l = 0..15
    let sc1 = d * q6k_scale(sb, 192u + 8u * hf + 2u * k + 1u);  // l = 16..31
    let ql = sb + 16u * hf + 8u * (k % 2u); // byte 64*half + 32*(k%2)
    let qh = sb + 32u + 8u * hf;            // byte 128 + 32*half
    let ql_shift = 4u * (k / 2u);
    let qh_shift = 2u * k;
    var res: array<f32, 32>;
    for (var i = 0u; i < 8u; i++) {
        let lo = (w[ql + i] >> ql_shift) & 0x0F0F0F0Fu;
        let hi = ((w[qh + i] >> qh_shift) & 0x03030303u) << 4u;
        let q = lo | hi;
        let sc = select(sc0, sc1, i >= 4u);
        res[4u * i] = sc * f32(i32(q & 0xFFu) - 32);
        res[4u * i + 1u] = sc * f32(i32((q >> 8u) & 0xFFu) - 32);
        res[4u * i + 2u] = sc * f32(i32((q >> 16u) & 0xFFu) - 32);
        res[4u * i + 3u] = sc * f32(i32(q >> 24u) - 32);
    }
    return res;
}
