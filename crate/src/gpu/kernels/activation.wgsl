// The MLP's activation, in place on `up`: GPT-2's gelu_new (tanh approximation), SwiGLU's
// up · silu(gate) or GeGLU's up · gelu(gate), written as transformers writes them.

struct Params {
    count: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> up: array<f32>;
@group(0) @binding(2) var<storage, read> gate: array<f32>;

fn index(gid: vec3<u32>, groups: vec3<u32>) -> u32 {
    return gid.x + gid.y * groups.x * 256u;
}

fn gelu_of(u: f32) -> f32 {
    // tanh saturates to ±1 in f32 beyond |10|; clamping keeps GPUs whose tanh goes through exp
    // from overflowing to NaN.
    let z = clamp(0.7978846 * (u + 0.044715 * u * u * u), -10.0, 10.0);
    return 0.5 * u * (1.0 + tanh(z));
}

@compute @workgroup_size(256)
fn gelu(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = index(gid, groups);
    if (i < p.count) {
        up[i] = gelu_of(up[i]);
    }
}

@compute @workgroup_size(256)
fn gelu_mul(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = index(gid, groups);
    if (i < p.count) {
        up[i] = up[i] * gelu_of(gate[i]);
    }
}

@compute @workgroup_size(256)
fn silu_mul(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = index(gid, groups);
    if (i < p.count) {
        let g = gate[i];
        up[i] = up[i] * (g / (1.0 + exp(-g)));
    }
}
