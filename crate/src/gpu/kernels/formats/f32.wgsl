// F32 rows: `cols` words each.
fn decode_unit(base: u32, u: u32, cols: u32) -> array<f32, 32> {
    var v: array<f32, 32>;
    let c0 = u * 32u;
    for (var e = 0u; e < 32u; e++) {
        if (c0 + e < cols) {
            v[e] = bitcast<f32>(w[base + c0 + e]);
        }
    }
    return v;
}
