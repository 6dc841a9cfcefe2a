// out[t, out_offset + r] (+)= Σ_k W[r, k] · x[t, k] + bias[r], for one piece of a weight matrix in
// any storage format. The format's `decode_unit` (a file from formats/, prepended by matmul.rs)
// turns 32 consecutive weights of a row into f32 inside the kernel: quantized matrices stay in their
// block form in GPU memory.
//
// A workgroup is 8 rows × 8 threads along k × a tile of 8 tokens: each thread decodes a unit of
// its row once and uses it for every token of the tile, then the 8 partial sums of each (row, token)
// are added in workgroup memory. For decode (one token) that is a matvec with a workgroup reduction.

struct Params {
    rows: u32,        // rows in this piece of the matrix
    cols: u32,        // inputs per row
    n: u32,           // tokens
    row_words: u32,   // u32 words per stored row
    x_offset: u32,    // first input value
    x_stride: u32,    // values between tokens in x
    out_offset: u32,  // output column of the piece's first row
    out_stride: u32,  // values between tokens in out
    bias_offset: u32, // bias of the piece's first row
    has_bias: u32,
    accumulate: u32,  // 1: add to out (a residual connection), 0: overwrite it
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

const K_THREADS: u32 = 8u;
const ROWS: u32 = 8u;
const TOKENS: u32 = 8u;
var<workgroup> partial: array<f32, 512>; // [ROWS][K_THREADS][TOKENS]

@compute @workgroup_size(8, 8)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
    let row = (wid.x + wid.y * groups.x) * ROWS + lid.y;
    let t0 = wid.z * TOKENS;
    var acc: array<f32, 8>;
    if (row < p.rows) {
        let base = row * p.row_words;
        let units = (p.cols + 31u) / 32u;
        for (var u = lid.x; u < units; u += K_THREADS) {
            var wv = decode_unit(base, u, p.cols);
            let c0 = u * 32u;
            let len = min(32u, p.cols - c0);
            for (var t = 0u; t < TOKENS; t++) {
                if (t0 + t < p.n) {
                    let xb = p.x_offset + (t0 + t) * p.x_stride + c0;
                    var s = 0.0;
                    for (var e = 0u; e < len; e++) {
                        s += wv[e] * x[xb + e];
                    }
                    acc[t] += s;
                }
            }
        }
    }
    for (var t = 0u; t < TOKENS; t++) {
        partial[(lid.y * K_THREADS + lid.x) * TOKENS + t] = acc[t];
    }
    workgroupBarrier();
    if (lid.x == 0u && row < p.rows) {
        for (var t = 0u; t < TOKENS; t++) {
            if (t0 + t < p.n) {
                var s = 0.0;
                for (var k = 0u; k < K_THREADS; k++) {
                    s += partial[(lid.y * K_THREADS + k) * TOKENS + t];
                }
                if (p.has_bias == 1u) {
                    s += bias[p.bias_offset + row];
                }
                let o = (t0 + t) * p.out_stride + p.out_offset + row;
                if (p.accumulate == 1u) {
                    out[o] = out[o] + s;
                } else {
                    out[o] = s;
                }
            }
        }
    }
}
