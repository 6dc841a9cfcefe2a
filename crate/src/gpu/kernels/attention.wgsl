// Causal attention of one query token over keys 0..=pos (or the last `window` of them) for one
// head, grouped-query (query head h reads KV head h / group). One workgroup per (head, token).
//   pass 1: every thread scores a strided share of the keys, keeping a running max and a sum of
//           exponentials relative to it; the workgroup merges them (softmax's normaliser);
//   pass 2: tiles of 64 keys: the probabilities p_j = exp(s_j − max)/sum are scored again, written
//           to the pattern buffer only when a hook wants them, and each thread accumulates
//           Σ p_j v_j for its output dimensions.
// Scores are recomputed rather than stored, so no [keys]-sized scratch is needed at any context.

struct Params {
    n_head: u32,
    group: u32,        // query heads per KV head
    head_dim: u32,
    qkv_dim: u32,
    q_dim: u32,
    kv_dim: u32,
    pos0: u32,
    capture: u32,      // 1: write probabilities to `pattern`
    pattern_at: u32,   // this layer's chunk region in `pattern`
    window: u32,       // keys a query reads on a sliding-window layer; 0: all
    divisor: f32,      // scores are q·k / divisor
    ablated: u32,      // bit h set: head h is zero-ablated (its output is 0; its pattern stays)
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> qkv: array<f32>;
@group(0) @binding(2) var<storage, read> k_cache: array<f32>;
@group(0) @binding(3) var<storage, read> v_cache: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<storage, read_write> pattern: array<f32>;

const THREADS: u32 = 64u;
const MAX_HEAD_DIM: u32 = 256u;
var<workgroup> q: array<f32, 256>;
var<workgroup> tile: array<f32, 64>;
var<workgroup> maxes: array<f32, 64>;
var<workgroup> sums: array<f32, 64>;

fn score(j: u32, kv_col: u32, scale: f32) -> f32 {
    var s = 0.0;
    let kb = j * p.kv_dim + kv_col;
    for (var i = 0u; i < p.head_dim; i++) {
        s += q[i] * k_cache[kb + i];
    }
    return s / scale;
}

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let tid = lid.x;
    let h = wid.x;
    let t = wid.y;
    let n_keys = p.pos0 + t + 1u;
    var first = 0u;
    if (p.window != 0u && n_keys > p.window) {
        first = n_keys - p.window;
    }
    let kv_col = (h / p.group) * p.head_dim;
    // transformers divides by sqrt(head_dim) (or Gemma's sqrt(query_pre_attn_scalar)); so does
    // the CPU path.
    let scale = p.divisor;
    for (var i = tid; i < p.head_dim; i += THREADS) {
        q[i] = qkv[t * p.qkv_dim + h * p.head_dim + i];
    }
    workgroupBarrier();

    var m = -3.0e38;
    var total = 0.0;
    for (var j = first + tid; j < n_keys; j += THREADS) {
        let s = score(j, kv_col, scale);
        if (s > m) {
            total = total * exp(m - s) + 1.0;
            m = s;
        } else {
            total += exp(s - m);
        }
    }
    maxes[tid] = m;
    sums[tid] = total;
    workgroupBarrier();
    for (var stride = THREADS / 2u; stride > 0u; stride /= 2u) {
        if (tid < stride) {
            let m1 = maxes[tid];
            let m2 = maxes[tid + stride];
            let mm = max(m1, m2);
            sums[tid] = sums[tid] * exp(m1 - mm) + sums[tid + stride] * exp(m2 - mm);
            maxes[tid] = mm;
        }
        workgroupBarrier();
    }
    let row_max = maxes[0];
    let row_sum = sums[0];

    // Row (t, h) of the chunk's pattern: position-major, each position's heads in order, each
    // row as long as its keys; the layout the session stores (model/session.rs, `Captures`).
    let row_at = p.pattern_at + p.n_head * (t * p.pos0 + t * (t + 1u) / 2u) + h * n_keys;
    var acc: array<f32, 4>;
    if (p.capture == 1u) {
        for (var j = tid; j < first; j += THREADS) {
            pattern[row_at + j] = 0.0;
        }
    }
    for (var j0 = first; j0 < n_keys; j0 += THREADS) {
        let j = j0 + tid;
        var prob = 0.0;
        if (j < n_keys) {
            prob = exp(score(j, kv_col, scale) - row_max) / row_sum;
            if (p.capture == 1u) {
                pattern[row_at + j] = prob;
            }
        }
        tile[tid] = prob;
        workgroupBarrier();
        let count = min(THREADS, n_keys - j0);
        for (var c = 0u; c < 4u; c++) {
            let dim = tid + c * THREADS;
            if (dim < p.head_dim) {
                var a = acc[c];
                for (var k = 0u; k < count; k++) {
                    a += tile[k] * v_cache[(j0 + k) * p.kv_dim + kv_col + dim];
                }
                acc[c] = a;
            }
        }
        workgroupBarrier();
    }
    for (var c = 0u; c < 4u; c++) {
        let dim = tid + c * THREADS;
        if (dim < p.head_dim) {
            out[t * p.q_dim + h * p.head_dim + dim] = select(acc[c], 0.0, ((p.ablated >> h) & 1u) == 1u);
        }
    }
}
