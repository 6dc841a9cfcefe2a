//! The forward pass on the GPU, for one session: its buffers, made once and grown only when the
//! context or the captured patterns outgrow them; the list of dispatches (its "plan"), whose bind
//! groups are made with the buffers; and one pass: upload the new tokens' embeddings, write every
//! dispatch's parameters with one queue write, record every dispatch in one compute pass and the
//! copies of what was asked for into one readback buffer, submit, and map that buffer once.
//!
//! The layout of what is read back is the session's own (`model/session.rs`): attention rows are
//! written by the kernel position by position, heads in order, each as long as its keys, so a
//! pattern arrives ready to append.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::gpu::kernels::{Kernel, Pipelines};
use crate::gpu::weights::{GpuLinear, GpuMatrix, GpuNorm, GpuWeights};
use crate::gpu::Gpu;
use crate::instruments::Ablation;
use crate::kernels::rope;
use crate::model::{Config, Mlp, Model, RopePairing};
use crate::trace::{Hook, NormSite};

/// Tokens per GPU pass: a prompt of up to this many new tokens is one command encoder.
pub const GPU_CHUNK: usize = 256;
/// The attention kernel takes each layer's ablated heads as a 32-bit mask.
pub const MAX_GPU_ABLATED_HEAD: usize = 32;

/// A model resident on a device: weights and compiled kernels, shared by its sessions.
pub struct GpuModel {
    pub gpu: Arc<Gpu>,
    pub model: Arc<Model>,
    weights: GpuWeights,
    pipelines: Pipelines,
    /// Bound where a kernel's optional input (a bias) is absent.
    zeros: wgpu::Buffer,
}

impl GpuModel {
    /// Uploads the weights (quantized matrices in their block form) and compiles the kernels.
    pub fn new(gpu: Arc<Gpu>, model: Arc<Model>) -> Result<GpuModel> {
        let c = &model.config;
        if !c.variant.is_standard_for(c.arch) || c.arch == crate::model::Arch::Bert {
            return Err(Error::Gpu(format!(
                "the GPU backend runs GPT-2, LLaMA, Qwen2 and Gemma 3 as built; this {} model's variant ({:?}) \
                 runs on the CPU backend",
                c.arch.name(),
                c.variant
            )));
        }
        if c.head_dim() > 256 {
            return Err(Error::Gpu(format!("head size {} is above the GPU attention kernel's 256", c.head_dim())));
        }
        let weights = GpuWeights::upload(&gpu, &model)?;
        let kernels = weights.formats().into_iter().map(Kernel::Matmul).chain([
            Kernel::Norm,
            Kernel::ResidNorm,
            Kernel::HeadNorm,
            Kernel::Rope,
            Kernel::Attention,
            Kernel::Gelu,
            Kernel::SiluMul,
            Kernel::GeluMul,
        ]);
        let pipelines = Pipelines::new(&gpu.device, kernels);
        let zeros = storage(&gpu.device, "zeros", 16);
        // A driver that rejects a kernel, or an allocation that failed, shows up here.
        gpu.check()?;
        Ok(GpuModel { gpu, model, weights, pipelines, zeros })
    }

    /// Bytes of weights on the device.
    pub fn weight_bytes(&self) -> u64 {
        self.weights.bytes
    }

    /// The most pieces any matrix was split into to fit the device's bindings (1: none split).
    pub fn largest_piece_count(&self) -> usize {
        let w = &self.weights;
        let layers = w
            .layers
            .iter()
            .flat_map(|l| l.attn_qkv.iter().chain([&l.attn_output, &l.ffn_up, &l.ffn_down]).chain(&l.ffn_gate));
        layers.map(|lin| lin.weight.pieces.len()).chain([w.output.pieces.len()]).max().unwrap_or(1)
    }
}

/// Which activation a dispatch reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Act {
    X,
    Xn,
    Qkv,
    AttOut,
    Up,
    Gate,
    /// A sublayer's output before Gemma's post-norm.
    Proj,
    Logits,
}

/// What one dispatch does; with the pass's token count and position this gives its parameters.
#[derive(Clone, Copy, Debug)]
enum Op {
    /// A norm of `x` into `xn`, statistics at `site`'s slots; or, with `site` `None`, Gemma's
    /// post-norm of `proj` added into `x` (statistics to scratch slots).
    Norm {
        site: Option<NormSite>,
        layer_norm: bool,
    },
    /// Gemma's RMSNorm over each head of q (`keys` false) or of k, in place.
    HeadNorm {
        keys: bool,
    },
    /// One piece of a matrix: `rows` outputs from column `out_col` of `output`.
    Matmul {
        rows: usize,
        cols: usize,
        row_words: usize,
        bias_offset: usize,
        has_bias: bool,
        input: Act,
        output: Act,
        out_col: usize,
    },
    Rope,
    Attention {
        layer: usize,
    },
    Gelu,
    SiluMul,
    GeluMul,
    ResidNorm {
        layer: usize,
    },
}

struct Step {
    kernel: Kernel,
    op: Op,
    bind_group: wgpu::BindGroup,
}

/// A uniform slot per dispatch: 256 bytes is WebGPU's largest `minUniformBufferOffsetAlignment`.
const SLOT: u64 = 256;

/// Statistics slots in `stats`, each [`GPU_CHUNK`] values: five per layer, two for the final norm,
/// and two that no hook reads (Gemma's post-norms write there).
const STAT_SLOTS_AFTER_LAYERS: usize = 4;

fn stat_slot(hook: Hook, n_layer: usize) -> Option<usize> {
    let site = |s: NormSite, mean: bool| match s {
        NormSite::Ln1(l) => 5 * l + usize::from(!mean),
        NormSite::Ln2(l) => 5 * l + 2 + usize::from(!mean),
        NormSite::Final => 5 * n_layer + usize::from(!mean),
    };
    match hook {
        Hook::NormMean(s) => Some(site(s, true)),
        Hook::NormScale(s) => Some(site(s, false)),
        Hook::ResidPostNorm(l) => Some(5 * l + 4),
        _ => None,
    }
}

/// What a pass hands back: the logits after its last token, and each wanted hook's values for
/// its positions, in the session's storage layout.
pub struct PassOutput {
    pub last_logits: Vec<f32>,
    pub hooks: Vec<(Hook, Vec<f32>)>,
}

/// A session's state on the device.
pub struct GpuPass {
    model: Arc<GpuModel>,
    x: wgpu::Buffer,
    xn: wgpu::Buffer,
    qkv: wgpu::Buffer,
    att_out: wgpu::Buffer,
    up: wgpu::Buffer,
    gate: wgpu::Buffer,
    proj: wgpu::Buffer,
    logits: wgpu::Buffer,
    /// Rows of logits `logits` holds: 1, or [`GPU_CHUNK`] once a pass wanted every row's.
    logit_rows: usize,
    stats: wgpu::Buffer,
    /// RoPE's cos/sin tables for the pass's positions: the model's base, and the local layers'
    /// base of a sliding-window model.
    angles: wgpu::Buffer,
    angles_local: wgpu::Buffer,
    params: wgpu::Buffer,
    patterns: wgpu::Buffer,
    /// The KV cache, per layer `[kv_positions, kv_dim]`, grown by doubling.
    k: Vec<wgpu::Buffer>,
    v: Vec<wgpu::Buffer>,
    kv_positions: usize,
    staging: wgpu::Buffer,
    steps: Vec<Step>,
    /// Host-side room for a pass's embeddings and rotation tables.
    embed: Vec<f32>,
    /// Set by [`GpuPass::set_profiling`]: each dispatch is timed with timestamp queries.
    profiling: bool,
    profile: Vec<KernelTime>,
}

/// The measured GPU time of one dispatch of a pass, with the bytes it must move and the
/// arithmetic it does, for a roofline judgement of the kernel.
#[derive(Clone, Debug)]
pub struct KernelTime {
    /// The kernel, e.g. `Matmul(Q4_1)`, `Attention`.
    pub kernel: String,
    /// What it computed, e.g. `blk.3 matmul 1536×576 × 1 tokens`.
    pub what: String,
    pub seconds: f64,
    /// Bytes read and written at least once (weights, inputs, outputs, KV cache).
    pub bytes: u64,
    pub flops: u64,
}

fn storage(device: &wgpu::Device, label: &str, bytes: u64) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: bytes.max(16).next_multiple_of(4),
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}

fn floats(n: usize) -> u64 {
    (n * 4) as u64
}

impl GpuPass {
    pub fn new(model: Arc<GpuModel>) -> Result<GpuPass> {
        let c = model.model.config.clone();
        let device = &model.gpu.device;
        let g = GPU_CHUNK;
        let half = c.head_dim() / 2;
        let gate_len = if model.weights.layers.iter().any(|l| l.ffn_gate.is_some()) { g * c.d_ff } else { 1 };
        let post_norms = model.weights.layers.iter().any(|l| l.attn_post_norm.is_some() || l.ffn_post_norm.is_some());
        let local_half = if c.sliding_window.is_some() { half } else { 0 };
        let kv_positions = c.n_ctx.min(g);
        let mut pass = GpuPass {
            x: storage(device, "x", floats(g * c.d_model)),
            xn: storage(device, "xn", floats(g * c.d_model)),
            qkv: storage(device, "qkv", floats(g * (c.q_dim() + 2 * c.kv_dim()))),
            att_out: storage(device, "att_out", floats(g * c.q_dim())),
            up: storage(device, "up", floats(g * c.d_ff)),
            gate: storage(device, "gate", floats(gate_len)),
            proj: storage(device, "proj", floats(if post_norms { g * c.d_model } else { 1 })),
            logits: storage(device, "logits", floats(c.vocab_size)),
            logit_rows: 1,
            stats: storage(device, "stats", floats((5 * c.n_layer + STAT_SLOTS_AFTER_LAYERS) * g)),
            angles: storage(device, "angles", floats(2 * g * half.max(1))),
            angles_local: storage(device, "angles_local", floats(2 * g * local_half.max(1))),
            params: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("params"),
                size: 16,
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
            patterns: storage(device, "patterns", 16),
            k: (0..c.n_layer).map(|l| storage(device, &format!("k.{l}"), floats(kv_positions * c.kv_dim()))).collect(),
            v: (0..c.n_layer).map(|l| storage(device, &format!("v.{l}"), floats(kv_positions * c.kv_dim()))).collect(),
            kv_positions,
            staging: readback_buffer(device, 16),
            steps: Vec::new(),
            embed: Vec::new(),
            profiling: false,
            profile: Vec::new(),
            model,
        };
        pass.plan()?;
        pass.model.gpu.check()?;
        Ok(pass)
    }

    /// The dispatches of one pass and their bind groups; made again when a buffer is replaced.
    fn plan(&mut self) -> Result<()> {
        let ops = self.ops();
        let bytes = ops.len() as u64 * SLOT;
        let device = &self.model.gpu.device;
        if self.params.size() < bytes {
            self.params = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("params"),
                size: bytes,
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
        }
        let mut steps = Vec::with_capacity(ops.len());
        for (slot, (kernel, op, buffers)) in ops.into_iter().enumerate() {
            let pipeline = self
                .model
                .pipelines
                .get(kernel)
                .ok_or_else(|| Error::Gpu(format!("kernel {kernel:?} was not compiled")))?;
            let mut entries = vec![wgpu::BindGroupEntry {
                binding: 0,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: &self.params,
                    offset: slot as u64 * SLOT,
                    size: wgpu::BufferSize::new(SLOT),
                }),
            }];
            for (i, buffer) in buffers.iter().enumerate() {
                entries.push(wgpu::BindGroupEntry { binding: i as u32 + 1, resource: buffer.as_entire_binding() });
            }
            let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: None,
                layout: &pipeline.layout,
                entries: &entries,
            });
            steps.push(Step { kernel, op, bind_group });
        }
        self.steps = steps;
        Ok(())
    }

    /// Every dispatch of a pass in order, with the buffers it binds (after its parameters).
    fn ops(&self) -> Vec<(Kernel, Op, Vec<wgpu::Buffer>)> {
        let gm = &self.model;
        let w = &gm.weights;
        let zeros = &gm.zeros;
        let mut ops = Vec::new();
        let norm = |ops: &mut Vec<_>, n: &GpuNorm, site| {
            let op = Op::Norm { site: Some(site), layer_norm: n.bias.is_some() };
            let bias = n.bias.as_ref().unwrap_or(zeros);
            ops.push((
                Kernel::Norm,
                op,
                vec![self.x.clone(), n.weight.clone(), bias.clone(), self.xn.clone(), self.stats.clone()],
            ));
        };
        // x += post_norm(proj), Gemma's way for a sublayer's output to join the residual stream.
        let post_norm = |ops: &mut Vec<_>, n: &GpuNorm| {
            let buffers = vec![self.proj.clone(), n.weight.clone(), zeros.clone(), self.x.clone(), self.stats.clone()];
            ops.push((Kernel::Norm, Op::Norm { site: None, layer_norm: false }, buffers));
        };
        let head_norm = |ops: &mut Vec<_>, n: &GpuNorm, keys: bool| {
            // `stats` only fills the layout's writable slot (a buffer may not be bound both
            // read-only and writable in one dispatch); head_norm writes no statistics.
            let buffers = vec![zeros.clone(), n.weight.clone(), zeros.clone(), self.qkv.clone(), self.stats.clone()];
            ops.push((Kernel::HeadNorm, Op::HeadNorm { keys }, buffers));
        };
        let c = &gm.model.config;
        let matmul =
            |ops: &mut Vec<_>, m: &GpuMatrix, bias: Option<&wgpu::Buffer>, input: Act, output: Act, out_col: usize| {
                for piece in &m.pieces {
                    let op = Op::Matmul {
                        rows: piece.rows,
                        cols: m.cols,
                        row_words: m.row_words,
                        bias_offset: piece.row0,
                        has_bias: bias.is_some(),
                        input,
                        output,
                        out_col: out_col + piece.row0,
                    };
                    let buffers = vec![
                        piece.buffer.clone(),
                        self.act(input).clone(),
                        bias.unwrap_or(zeros).clone(),
                        self.act(output).clone(),
                    ];
                    ops.push((Kernel::Matmul(m.format), op, buffers));
                }
            };
        let linear = |ops: &mut Vec<_>, lin: &GpuLinear, input, output, out_col| {
            matmul(ops, &lin.weight, lin.bias.as_ref(), input, output, out_col)
        };
        for (l, lw) in w.layers.iter().enumerate() {
            norm(&mut ops, &lw.attn_norm, NormSite::Ln1(l));
            let mut col = 0;
            for lin in &lw.attn_qkv {
                linear(&mut ops, lin, Act::Xn, Act::Qkv, col);
                col += lin.weight.rows;
            }
            if let (Some(qn), Some(kn)) = (&lw.attn_q_norm, &lw.attn_k_norm) {
                head_norm(&mut ops, qn, false);
                head_norm(&mut ops, kn, true);
            }
            let angles = if c.is_global_layer(l) { &self.angles } else { &self.angles_local };
            ops.push((
                Kernel::Rope,
                Op::Rope,
                vec![self.qkv.clone(), angles.clone(), self.k[l].clone(), self.v[l].clone()],
            ));
            let attention = vec![
                self.qkv.clone(),
                self.k[l].clone(),
                self.v[l].clone(),
                self.att_out.clone(),
                self.patterns.clone(),
            ];
            ops.push((Kernel::Attention, Op::Attention { layer: l }, attention));
            // A sublayer's output joins the residual stream in the matmul (accumulating into x),
            // or through Gemma's post-norm.
            let sublayer_output = |ops: &mut Vec<_>, lin: &GpuLinear, input: Act, post: Option<&GpuNorm>| match post {
                Some(n) => {
                    linear(ops, lin, input, Act::Proj, 0);
                    post_norm(ops, n);
                }
                None => linear(ops, lin, input, Act::X, 0),
            };
            sublayer_output(&mut ops, &lw.attn_output, Act::AttOut, lw.attn_post_norm.as_ref());
            norm(&mut ops, &lw.ffn_norm, NormSite::Ln2(l));
            linear(&mut ops, &lw.ffn_up, Act::Xn, Act::Up, 0);
            match (&lw.ffn_gate, c.variant.mlp) {
                (Some(gate), mlp) => {
                    linear(&mut ops, gate, Act::Xn, Act::Gate, 0);
                    let (kernel, op) =
                        if mlp == Mlp::GeGlu { (Kernel::GeluMul, Op::GeluMul) } else { (Kernel::SiluMul, Op::SiluMul) };
                    ops.push((kernel, op, vec![self.up.clone(), self.gate.clone()]));
                }
                (None, _) => ops.push((Kernel::Gelu, Op::Gelu, vec![self.up.clone(), zeros.clone()])),
            }
            sublayer_output(&mut ops, &lw.ffn_down, Act::Up, lw.ffn_post_norm.as_ref());
            let resid = vec![self.x.clone(), zeros.clone(), zeros.clone(), self.xn.clone(), self.stats.clone()];
            ops.push((Kernel::ResidNorm, Op::ResidNorm { layer: l }, resid));
        }
        norm(&mut ops, &w.output_norm, NormSite::Final);
        matmul(&mut ops, &w.output, None, Act::Xn, Act::Logits, 0);
        ops
    }

    fn act(&self, a: Act) -> &wgpu::Buffer {
        match a {
            Act::X => &self.x,
            Act::Xn => &self.xn,
            Act::Qkv => &self.qkv,
            Act::AttOut => &self.att_out,
            Act::Up => &self.up,
            Act::Gate => &self.gate,
            Act::Proj => &self.proj,
            Act::Logits => &self.logits,
        }
    }
}

/// `[words…]` as a uniform slot.
fn slot(words: &[u32]) -> [u8; SLOT as usize] {
    let mut bytes = [0u8; SLOT as usize];
    for (chunk, w) in bytes.chunks_exact_mut(4).zip(words) {
        chunk.copy_from_slice(&w.to_le_bytes());
    }
    bytes
}

/// Workgroups for `count` groups of work, folded into a second dimension past WebGPU's 65535.
fn spread(count: usize) -> (u32, u32) {
    const MAX: usize = 65535;
    let x = count.clamp(1, MAX);
    (x as u32, count.div_ceil(x).max(1) as u32)
}

fn readback_buffer(device: &wgpu::Device, bytes: u64) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("readback"),
        size: bytes.max(16),
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}

/// A copy from a device buffer into the readback buffer, and whose values it holds.
struct Readback {
    from: Act2,
    offset: u64,
    floats: usize,
    hook: Option<Hook>,
}

#[derive(Clone, Copy)]
enum Act2 {
    Logits,
    Stats,
    Patterns,
}

impl GpuPass {
    /// Runs `tokens` (at most [`GPU_CHUNK`]) at positions `pos0..`, extending the KV cache, and
    /// reads back the last logits and the hooks `wants` asks for. `ablation`'s heads (below
    /// [`MAX_GPU_ABLATED_HEAD`]) are zeroed as on the CPU.
    pub async fn forward(
        &mut self,
        tokens: &[u32],
        pos0: usize,
        wants: &dyn Fn(Hook) -> bool,
        ablation: &Ablation,
    ) -> Result<PassOutput> {
        let gm = Arc::clone(&self.model);
        let c: &Config = &gm.model.config;
        let n = tokens.len();
        if n == 0 || n > GPU_CHUNK || pos0 + n > c.n_ctx {
            return Err(Error::InvalidArgument(format!("a GPU pass runs 1..={GPU_CHUNK} tokens inside the context")));
        }
        let (d, hd, v, g) = (c.d_model, c.head_dim(), c.vocab_size, GPU_CHUNK);
        let half = hd / 2;
        let pattern_layers: Vec<usize> = (0..c.n_layer).filter(|&l| wants(Hook::AttnPattern(l))).collect();
        let per_layer = c.n_head * (n * pos0 + n * (n + 1) / 2);
        let all_logits = wants(Hook::Logits);
        let all_rows = all_logits || wants(Hook::NormScale(NormSite::Final)) || wants(Hook::NormMean(NormSite::Final));
        let first = if all_rows { 0 } else { n - 1 };
        let rows = n - first;
        self.reserve(pos0 + n, floats(pattern_layers.len() * per_layer), all_rows)?;

        // The embeddings (a row per token, plus its position's for GPT-2) and the rotation
        // tables, made on the host exactly as the CPU path makes them.
        let w = &gm.model.weights;
        let local = c.sliding_window.filter(|_| c.rope.is_some());
        let tables = if local.is_some() { 2 } else { 1 };
        self.embed.clear();
        self.embed.resize(n * d + d + tables * 2 * n * half, 0.0);
        let (x, rest) = self.embed.split_at_mut(n * d);
        let (position, all_angles) = rest.split_at_mut(d);
        let (angles, angles_local) = all_angles.split_at_mut(2 * n * half);
        let embedding_scale = c.embedding_scale();
        for (i, &tok) in tokens.iter().enumerate() {
            let row = &mut x[i * d..(i + 1) * d];
            w.row(&w.token_embd, tok as usize, row);
            if let Some(scale) = embedding_scale {
                row.iter_mut().for_each(|v| *v *= scale);
            }
            if let Some(wpe) = &w.position_embd {
                w.row(wpe, pos0 + i, position);
                for (a, b) in row.iter_mut().zip(position.iter()) {
                    *a += b;
                }
            }
        }
        let thetas = c.rope.map(|r| (r.theta, angles)).into_iter().chain(local.map(|w| (w.local_theta, angles_local)));
        for (theta, table) in thetas {
            let (cos, sin) = table.split_at_mut(n * half);
            for i in 0..n {
                rope::angles(
                    pos0 + i,
                    hd,
                    theta,
                    &mut cos[i * half..(i + 1) * half],
                    &mut sin[i * half..(i + 1) * half],
                );
            }
        }
        let queue = &gm.gpu.queue;
        queue.write_buffer(&self.x, 0, bytemuck::cast_slice(&self.embed[..n * d]));
        if c.rope.is_some() {
            let tables = &self.embed[n * d + d..];
            queue.write_buffer(&self.angles, 0, bytemuck::cast_slice(&tables[..2 * n * half]));
            if local.is_some() {
                queue.write_buffer(&self.angles_local, 0, bytemuck::cast_slice(&tables[2 * n * half..]));
            }
        }

        // Every dispatch's parameters, then the dispatches in one compute pass.
        let qkv_dim = c.q_dim() + 2 * c.kv_dim();
        let stat_at = |hook: Hook| (stat_slot(hook, c.n_layer).unwrap_or(0) * g) as u32;
        let mut params = Vec::with_capacity(self.steps.len() * SLOT as usize);
        let mut dispatches = Vec::with_capacity(self.steps.len());
        for (i, step) in self.steps.iter().enumerate() {
            let (words, groups): (Vec<u32>, Option<(u32, u32, u32)>) = match step.op {
                Op::Norm { site, layer_norm } => {
                    let (count, row0) = if site == Some(NormSite::Final) { (rows, first) } else { (n, 0) };
                    let scratch = ((5 * c.n_layer + 2) * g) as u32;
                    let (mean_at, scale_at) = match site {
                        Some(site) => (stat_at(Hook::NormMean(site)), stat_at(Hook::NormScale(site))),
                        None => (scratch, scratch + g as u32),
                    };
                    let accumulate = site.is_none();
                    let words = vec![
                        d as u32,
                        row0 as u32,
                        layer_norm as u32,
                        c.norm_eps.to_bits(),
                        mean_at,
                        scale_at,
                        accumulate as u32,
                    ];
                    (words, Some((count as u32, 1, 1)))
                }
                Op::HeadNorm { keys } => {
                    let (heads, col0) = if keys { (c.n_kv_head, c.q_dim()) } else { (c.n_head, 0) };
                    let words =
                        vec![hd as u32, 0, 0, c.norm_eps.to_bits(), 0, 0, 0, heads as u32, qkv_dim as u32, col0 as u32];
                    (words, Some(((n * heads) as u32, 1, 1)))
                }
                Op::Matmul { rows: piece_rows, cols, row_words, bias_offset, has_bias, input, output, out_col } => {
                    let _ = input;
                    let tokens = if output == Act::Logits { rows } else { n };
                    let out_stride = match output {
                        Act::Qkv => qkv_dim,
                        Act::X | Act::Xn | Act::Proj => d,
                        Act::AttOut => c.q_dim(),
                        Act::Up | Act::Gate => c.d_ff,
                        Act::Logits => v,
                    };
                    let words = vec![
                        piece_rows as u32,
                        cols as u32,
                        tokens as u32,
                        row_words as u32,
                        0,
                        cols as u32,
                        out_col as u32,
                        out_stride as u32,
                        bias_offset as u32,
                        has_bias as u32,
                        (output == Act::X) as u32,
                    ];
                    let (gx, gy) = spread(piece_rows.div_ceil(8));
                    (words, Some((gx, gy, tokens.div_ceil(8) as u32)))
                }
                Op::Rope => {
                    let pairing = match c.rope.map(|r| r.pairing) {
                        None => 0,
                        Some(RopePairing::HalfSplit) => 1,
                        Some(RopePairing::Adjacent) => 2,
                    };
                    let words =
                        vec![qkv_dim as u32, c.q_dim() as u32, c.kv_dim() as u32, hd as u32, pos0 as u32, pairing];
                    (words, Some((n as u32, 1, 1)))
                }
                Op::Attention { layer } => {
                    let region = pattern_layers.iter().position(|&l| l == layer);
                    let words = vec![
                        c.n_head as u32,
                        (c.n_head / c.n_kv_head) as u32,
                        hd as u32,
                        qkv_dim as u32,
                        c.q_dim() as u32,
                        c.kv_dim() as u32,
                        pos0 as u32,
                        region.is_some() as u32,
                        (region.unwrap_or(0) * per_layer) as u32,
                        c.sliding_window.filter(|_| !c.is_global_layer(layer)).map_or(0, |w| w.size as u32),
                        c.score_divisor().to_bits(),
                        ablation.heads_in_layer(layer).fold(0u32, |mask, head| mask | 1 << head),
                    ];
                    (words, Some((c.n_head as u32, n as u32, 1)))
                }
                Op::Gelu | Op::SiluMul | Op::GeluMul => {
                    let (gx, gy) = spread((n * c.d_ff).div_ceil(256));
                    (vec![(n * c.d_ff) as u32], Some((gx, gy, 1)))
                }
                Op::ResidNorm { layer } => {
                    let hook = Hook::ResidPostNorm(layer);
                    let groups = wants(hook).then_some((n as u32, 1, 1));
                    (vec![d as u32, 0, 0, 0, 0, stat_at(hook)], groups)
                }
            };
            params.extend_from_slice(&slot(&words));
            if let Some(groups) = groups {
                dispatches.push((i, groups));
            }
        }
        queue.write_buffer(&self.params, 0, &params);

        let device = &gm.gpu.device;
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("forward") });
        let timing = self.profiling && device.features().contains(wgpu::Features::TIMESTAMP_QUERY);
        let queries = timing.then(|| {
            device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("kernel times"),
                ty: wgpu::QueryType::Timestamp,
                count: 2 * dispatches.len() as u32,
            })
        });
        {
            // One compute pass for the whole forward pass; when profiling, one per dispatch so
            // that each can carry its own timestamps.
            let mut cpass = None;
            for (k, &(i, (x, y, z))) in dispatches.iter().enumerate() {
                if cpass.is_none() || queries.is_some() {
                    // A pass must end before the next one begins on the same encoder.
                    drop(cpass.take());
                    let timestamp_writes = queries.as_ref().map(|q| wgpu::ComputePassTimestampWrites {
                        query_set: q,
                        beginning_of_pass_write_index: Some(2 * k as u32),
                        end_of_pass_write_index: Some(2 * k as u32 + 1),
                    });
                    cpass = Some(
                        encoder
                            .begin_compute_pass(&wgpu::ComputePassDescriptor {
                                label: Some("forward"),
                                timestamp_writes,
                            })
                            .forget_lifetime(),
                    );
                }
                let Some(cpass) = cpass.as_mut() else { continue };
                let step = &self.steps[i];
                let pipeline = gm.pipelines.get(step.kernel).ok_or_else(|| Error::Gpu("kernel missing".into()))?;
                cpass.set_pipeline(&pipeline.pipeline);
                cpass.set_bind_group(0, &step.bind_group, &[]);
                cpass.dispatch_workgroups(x, y, z);
            }
        }
        let timestamps = queries.map(|q| {
            let bytes = 16 * dispatches.len() as u64;
            let resolved = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("kernel times"),
                size: bytes,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            encoder.resolve_query_set(&q, 0..2 * dispatches.len() as u32, &resolved, 0);
            let readable = readback_buffer(device, bytes);
            encoder.copy_buffer_to_buffer(&resolved, 0, &readable, 0, bytes);
            (readable, bytes)
        });

        // What to read back: the logits after the last token, then each wanted hook.
        let mut reads = vec![Readback { from: Act2::Logits, offset: floats((rows - 1) * v), floats: v, hook: None }];
        for hook in crate::trace::Hook::standard(c) {
            if !wants(hook) {
                continue;
            }
            if let Some(s) = stat_slot(hook, c.n_layer) {
                reads.push(Readback { from: Act2::Stats, offset: floats(s * g), floats: n, hook: Some(hook) });
            }
        }
        for (i, &l) in pattern_layers.iter().enumerate() {
            let hook = Some(Hook::AttnPattern(l));
            reads.push(Readback { from: Act2::Patterns, offset: floats(i * per_layer), floats: per_layer, hook });
        }
        if all_logits {
            reads.push(Readback { from: Act2::Logits, offset: 0, floats: n * v, hook: Some(Hook::Logits) });
        }
        let total: u64 = reads.iter().map(|r| floats(r.floats)).sum();
        if self.staging.size() < total {
            self.staging = readback_buffer(device, total);
        }
        let mut at = 0;
        for r in &reads {
            let from = match r.from {
                Act2::Logits => &self.logits,
                Act2::Stats => &self.stats,
                Act2::Patterns => &self.patterns,
            };
            if r.floats > 0 {
                encoder.copy_buffer_to_buffer(from, r.offset, &self.staging, at, floats(r.floats));
            }
            at += floats(r.floats);
        }
        queue.submit([encoder.finish()]);
        let bytes = gm.gpu.read(&self.staging, total).await;
        gm.gpu.check()?;
        let bytes = bytes?;
        if let Some((readable, size)) = timestamps {
            let ticks = gm.gpu.read(&readable, size).await?;
            let ticks: Vec<u64> =
                ticks.chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default())).collect();
            let period = f64::from(queue.get_timestamp_period()) * 1e-9;
            let ctx = Shape { c, n, pos0, rows };
            self.profile = dispatches
                .iter()
                .zip(ticks.chunks_exact(2))
                .map(|(&(i, _), t)| {
                    let (what, bytes, flops) = ctx.cost(&self.steps[i].op);
                    let kernel = format!("{:?}", self.steps[i].kernel);
                    KernelTime { kernel, what, seconds: t[1].saturating_sub(t[0]) as f64 * period, bytes, flops }
                })
                .collect();
        }
        let values: &[f32] = bytemuck::cast_slice(&bytes);
        let mut at = 0;
        let mut last_logits = Vec::new();
        let mut hooks = Vec::new();
        for r in reads {
            let part = values[at..at + r.floats].to_vec();
            at += r.floats;
            match r.hook {
                None => last_logits = part,
                Some(hook) => hooks.push((hook, part)),
            }
        }
        Ok(PassOutput { last_logits, hooks })
    }

    /// Times every dispatch of the following passes (when the device has timestamp queries).
    pub fn set_profiling(&mut self, on: bool) {
        self.profiling = on;
    }

    /// The kernel times of the last pass run with profiling on (empty without timestamps).
    pub fn last_profile(&self) -> &[KernelTime] {
        &self.profile
    }

    /// Grows the KV cache to `positions`, the pattern buffer to `pattern_bytes` and the logits to
    /// every row of a chunk when `all_rows`; each growth re-plans the bind groups.
    fn reserve(&mut self, positions: usize, pattern_bytes: u64, all_rows: bool) -> Result<()> {
        let gm = Arc::clone(&self.model);
        let c = &gm.model.config;
        let device = &gm.gpu.device;
        let largest = gm.gpu.limits.max_storage_buffer_binding_size.min(gm.gpu.limits.max_buffer_size);
        let mut changed = false;
        if positions > self.kv_positions {
            let grown = positions.max(2 * self.kv_positions).min(c.n_ctx);
            let bytes = floats(grown * c.kv_dim());
            if bytes > largest {
                return Err(Error::Gpu(format!("a KV cache of {grown} positions needs {bytes} bytes a layer, more than the device binds ({largest})")));
            }
            let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("grow kv") });
            for (l, cache) in self.k.iter_mut().chain(self.v.iter_mut()).enumerate() {
                let bigger = storage(device, &format!("kv.{l}"), bytes);
                encoder.copy_buffer_to_buffer(cache, 0, &bigger, 0, floats(self.kv_positions * c.kv_dim()));
                *cache = bigger;
            }
            gm.gpu.queue.submit([encoder.finish()]);
            self.kv_positions = grown;
            changed = true;
        }
        if pattern_bytes > self.patterns.size() {
            if pattern_bytes > largest {
                return Err(Error::Gpu(format!(
                    "capturing these attention patterns takes {pattern_bytes} bytes in one pass, more than the device binds ({largest}); capture fewer layers or run the prompt in shorter pieces"
                )));
            }
            self.patterns = storage(device, "patterns", pattern_bytes.next_power_of_two().min(largest));
            changed = true;
        }
        if all_rows && self.logit_rows < GPU_CHUNK {
            let bytes = floats(GPU_CHUNK * c.vocab_size);
            if bytes > largest {
                return Err(Error::Gpu(format!(
                    "the logits of {GPU_CHUNK} positions take {bytes} bytes, more than the device binds ({largest})"
                )));
            }
            self.logits = storage(device, "logits", bytes);
            self.logit_rows = GPU_CHUNK;
            changed = true;
        }
        if changed {
            self.plan()?;
        }
        Ok(())
    }
}

/// The sizes of one pass, for the cost of each dispatch.
struct Shape<'a> {
    c: &'a Config,
    n: usize,
    pos0: usize,
    rows: usize,
}

impl Shape<'_> {
    /// (description, bytes moved, FLOPs) of one dispatch: the least traffic it needs, each value
    /// read or written once.
    fn cost(&self, op: &Op) -> (String, u64, u64) {
        let c = self.c;
        let (n, d) = (self.n as u64, c.d_model as u64);
        match *op {
            Op::Norm { site, .. } => {
                let rows = if site == Some(NormSite::Final) { self.rows as u64 } else { n };
                let what = site.map_or("post-norm".to_string(), |s| format!("{s:?} norm"));
                (what, 4 * (2 * rows * d + 2 * d), 5 * rows * d)
            }
            Op::HeadNorm { keys } => {
                let width = if keys { c.kv_dim() } else { c.q_dim() } as u64;
                ("q/k head norm".into(), 4 * 2 * n * width, 4 * n * width)
            }
            Op::Matmul { rows, cols, row_words, output, .. } => {
                let tokens = if output == Act::Logits { self.rows } else { self.n } as u64;
                let (rows, cols) = (rows as u64, cols as u64);
                let bytes = 4 * rows * row_words as u64 + 4 * tokens * (cols + rows);
                (format!("matmul {rows}×{cols} × {tokens} tokens → {output:?}"), bytes, 2 * rows * cols * tokens)
            }
            Op::Rope => (
                "rope + kv append".into(),
                4 * n * (c.q_dim() + 3 * c.kv_dim()) as u64,
                6 * n * (c.q_dim() + c.kv_dim()) as u64 / 2,
            ),
            Op::Attention { layer } => {
                // Every query reads q, its keys and values, and writes its output.
                let keys: u64 = (0..self.n).map(|t| (self.pos0 + t + 1) as u64).sum();
                let hd = c.head_dim() as u64;
                let bytes = 4 * (c.n_head as u64 * keys * 2 * hd + 2 * n * c.q_dim() as u64);
                (format!("blk.{layer} attention over {keys} keys"), bytes, c.n_head as u64 * keys * 6 * hd)
            }
            Op::Gelu | Op::SiluMul | Op::GeluMul => {
                ("activation".into(), 4 * 3 * n * c.d_ff as u64, 10 * n * c.d_ff as u64)
            }
            Op::ResidNorm { layer } => (format!("blk.{layer} residual norm"), 4 * n * d, 2 * n * d),
        }
    }
}
