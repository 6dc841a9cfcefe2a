// LayerNorm / RMSNorm of `rows` rows of d values, and the statistics the trace shows: one workgroup
// a row, the sums reduced in workgroup memory. Statistics go to fixed places in `stats` whether or
// not a hook reads them (a few floats); the readback copies only what was asked for.
//   LayerNorm: mean = Σx/d, scale = sqrt(Σ(x − mean)²/d + eps), y = (x − mean)/scale·w + b
//   RMSNorm:   scale = sqrt(Σx²/d + eps),                     y = x/scale·w
// `resid_norm` (same bindings) writes the L2 norm of each row: `hook_resid_post.norm`.
// `accumulate` adds the result to `y` instead (Gemma's post-norms: x += norm(sublayer output)).
// `head_norm` (same bindings) is RMSNorm in place on `y`, over each head of q or k inside the
// q|k|v rows (Gemma's q/k norms): row r is token r / heads, head r % heads, starting at
// token·stride + col0 + head·d.

struct Params {
    d: u32,
    x_row0: u32,      // first input row
    layer_norm: u32,  // 1: LayerNorm (mean and bias), 0: RMSNorm
    eps: f32,
    mean_at: u32,     // where row i's mean goes in `stats`: mean_at + i
    scale_at: u32,
    accumulate: u32,  // 1: y += result
    heads: u32,       // head_norm: heads per token
    stride: u32,      // head_norm: floats per token row
    col0: u32,        // head_norm: first column of the heads
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> weight: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<storage, read_write> stats: array<f32>;

const THREADS: u32 = 64u;
var<workgroup> sums: array<f32, 64>;

// Σ over the row of f(x), the same total in every thread.
fn row_sum(v: f32, tid: u32) -> f32 {
    sums[tid] = v;
    workgroupBarrier();
    for (var stride = THREADS / 2u; stride > 0u; stride /= 2u) {
        if (tid < stride) {
            sums[tid] += sums[tid + stride];
        }
        workgroupBarrier();
    }
    let total = sums[0];
    workgroupBarrier();
    return total;
}

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let tid = lid.x;
    let row = wid.x;
    let xb = (p.x_row0 + row) * p.d;
    let d = f32(p.d);
    var mean = 0.0;
    if (p.layer_norm == 1u) {
        var s = 0.0;
        for (var i = tid; i < p.d; i += THREADS) { s += x[xb + i]; }
        mean = row_sum(s, tid) / d;
    }
    var s2 = 0.0;
    for (var i = tid; i < p.d; i += THREADS) {
        let c = x[xb + i] - mean;
        s2 += c * c;
    }
    let scale = sqrt(row_sum(s2, tid) / d + p.eps);
    let yb = row * p.d;
    for (var i = tid; i < p.d; i += THREADS) {
        var v = (x[xb + i] - mean) / scale * weight[i];
        if (p.layer_norm == 1u) { v += bias[i]; }
        if (p.accumulate == 1u) {
            y[yb + i] += v;
        } else {
            y[yb + i] = v;
        }
    }
    if (tid == 0u) {
        stats[p.mean_at + row] = mean;
        stats[p.scale_at + row] = scale;
    }
}

@compute @workgroup_size(64)
fn resid_norm(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let tid = lid.x;
    let xb = (p.x_row0 + wid.x) * p.d;
    var s2 = 0.0;
    for (var i = tid; i < p.d; i += THREADS) { s2 += x[xb + i] * x[xb + i]; }
    let total = row_sum(s2, tid);
    if (tid == 0u) {
        stats[p.scale_at + wid.x] = sqrt(total);
    }
}

@compute @workgroup_size(64)
fn head_norm(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let tid = lid.x;
    let base = (wid.x / p.heads) * p.stride + p.col0 + (wid.x % p.heads) * p.d;
    var s2 = 0.0;
    for (var i = tid; i < p.d; i += THREADS) { s2 += y[base + i] * y[base + i]; }
    let scale = sqrt(row_sum(s2, tid) / f32(p.d) + p.eps);
    // Every read of the row is in the sum above, behind row_sum's barriers: writing is safe.
    for (var i = tid; i < p.d; i += THREADS) {
        y[base + i] = y[base + i] / scale * weight[i];
    }
}
