// After the q|k|v projections of a chunk: rotate q and k by their positions (RoPE, either pairing;
// none for learned positions) and append k and v to the layer's KV cache. One workgroup a token.
// The cos/sin tables are computed by the host exactly as the CPU path computes them (f32 sin/cos
// of angles up to the context length are not portable across GPUs).

struct Params {
    qkv_dim: u32,
    q_dim: u32,
    kv_dim: u32,
    head_dim: u32,
    pos0: u32,
    pairing: u32,     // 0: no rotation, 1: (i, i + hd/2) "rotate half", 2: (2i, 2i + 1) adjacent
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> qkv: array<f32>;
@group(0) @binding(2) var<storage, read> angles: array<f32>;  // [n, hd/2] cos, then [n, hd/2] sin
@group(0) @binding(3) var<storage, read_write> k_cache: array<f32>;
@group(0) @binding(4) var<storage, read_write> v_cache: array<f32>;

const THREADS: u32 = 64u;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
    let t = wid.x;
    let n = groups.x;
    let row = t * p.qkv_dim;
    if (p.pairing != 0u) {
        let half = p.head_dim / 2u;
        let pairs = (p.q_dim + p.kv_dim) / 2u;
        for (var j = lid.x; j < pairs; j += THREADS) {
            let head = j / half;
            let i = j % half;
            var a = head * p.head_dim + i;
            var b = a + half;
            if (p.pairing == 2u) {
                a = head * p.head_dim + 2u * i;
                b = a + 1u;
            }
            let c = angles[t * half + i];
            let s = angles[n * half + t * half + i];
            let x0 = qkv[row + a];
            let x1 = qkv[row + b];
            qkv[row + a] = x0 * c - x1 * s;
            qkv[row + b] = x1 * c + x0 * s;
        }
    }
    storageBarrier();
    let at = (p.pos0 + t) * p.kv_dim;
    for (var j = lid.x; j < p.kv_dim; j += THREADS) {
        k_cache[at + j] = qkv[row + p.q_dim + j];
        v_cache[at + j] = qkv[row + p.q_dim + p.kv_dim + j];
    }
}
