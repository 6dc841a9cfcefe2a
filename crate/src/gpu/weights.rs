//! A model's weights on a device: every matrix in its own storage format (quantized blocks stay
//! blocks: [`GpuFormat`]), vectors as f32, each tensor its own buffer. A matrix larger than the
//! device's largest storage binding is split into pieces of whole rows, each multiplied by its own
//! dispatch into its own range of outputs.
//!
//! The GPU layout of a row is the CPU's, made of whole 32-bit words (WGSL reads `array<u32>`):
//! f32 rows as they are; F16/BF16 rows padded to an even count; Q4_0/Q4_1/Q8_0 in the packed layout
//! of `kernels/packed.rs` (already whole words; Q5_0 is packed as Q8_0 there, Q5_1 has its own);
//! K-quant super-blocks each padded to a multiple of four bytes (only Q6_K's 210 needs it).

use wgpu::util::DeviceExt;

use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::kernels::quant::GgmlType;
use crate::model::{Linear, Matrix, Model, Norm, Rows, Weights};

/// The type a matrix's rows are stored as (Q4_0/Q4_1/Q8_0/Q5_1: in their packed layout).
pub fn storage_type(rows: &Rows) -> GgmlType {
    match *rows {
        Rows::F32(_) => GgmlType::F32,
        Rows::Packed { ty, .. } => ty.ggml(),
        Rows::Blocks { ty, .. } => ty,
    }
}

/// How a matrix of a stored type sits on the GPU and which decoder reads it. Every
/// [`GgmlType::ALL`] has a `formats/*.wgsl` decoder (Q4_0, Q4_1 and Q8_0 in the packed layout of
/// `kernels/packed.rs`, as loading leaves them).
pub trait GpuFormat: Copy {
    /// The WGSL `decode_unit` for this format (prepended to `matmul.wgsl`).
    fn wgsl(self) -> &'static str;
    /// 32-bit words of one row of `cols` weights on the GPU.
    fn row_words(self, cols: usize) -> usize;
    /// Bytes one weight takes on the GPU, on average (for bandwidth estimates).
    fn bytes_per_weight(self) -> f64;
    /// Appends one row in the GPU layout, from its bytes in the CPU layout.
    fn push_row(self, cpu_row: &[u8], out: &mut Vec<u8>);
}

/// (weights, bytes in the CPU's layout, bytes on the GPU) of one block, for block formats.
fn gpu_block(ty: GgmlType) -> Option<(usize, usize, usize)> {
    match ty {
        GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => None,
        GgmlType::Q4_0 => Some((32, 20, 20)),
        GgmlType::Q4_1 => Some((32, 24, 24)),
        GgmlType::Q5_1 => Some((32, 40, 40)),
        // Q5_0 is kept as packed Q8_0 (kernels/packed.rs).
        GgmlType::Q5_0 | GgmlType::Q8_0 => Some((32, 36, 36)),
        GgmlType::Q4_K => Some((256, 144, 144)),
        GgmlType::Q5_K => Some((256, 176, 176)),
        GgmlType::Q6_K => Some((256, 210, 212)),
    }
}

impl GpuFormat for GgmlType {
    fn wgsl(self) -> &'static str {
        match self {
            GgmlType::F32 => include_str!("kernels/formats/f32.wgsl"),
            GgmlType::F16 => include_str!("kernels/formats/f16.wgsl"),
            GgmlType::BF16 => include_str!("kernels/formats/bf16.wgsl"),
            GgmlType::Q4_0 => include_str!("kernels/formats/q4_0.wgsl"),
            GgmlType::Q4_1 => include_str!("kernels/formats/q4_1.wgsl"),
            GgmlType::Q5_1 => include_str!("kernels/formats/q5_1.wgsl"),
            GgmlType::Q5_0 | GgmlType::Q8_0 => include_str!("kernels/formats/q8_0.wgsl"),
            GgmlType::Q4_K => include_str!("kernels/formats/q4_k.wgsl"),
            GgmlType::Q5_K => include_str!("kernels/formats/q5_k.wgsl"),
            GgmlType::Q6_K => include_str!("kernels/formats/q6_k.wgsl"),
        }
    }

    fn row_words(self, cols: usize) -> usize {
        match gpu_block(self) {
            None if self == GgmlType::F32 => cols,
            None => cols.div_ceil(2),
            Some((len, _, gpu_bytes)) => cols / len * gpu_bytes / 4,
        }
    }

    fn bytes_per_weight(self) -> f64 {
        match gpu_block(self) {
            None if self == GgmlType::F32 => 4.0,
            None => 2.0,
            Some((len, _, gpu_bytes)) => gpu_bytes as f64 / len as f64,
        }
    }

    fn push_row(self, cpu_row: &[u8], out: &mut Vec<u8>) {
        match gpu_block(self) {
            None => {
                out.extend_from_slice(cpu_row);
                out.resize(out.len().next_multiple_of(4), 0);
            }
            Some((_, cpu_bytes, gpu_bytes)) => {
                for block in cpu_row.chunks_exact(cpu_bytes) {
                    out.extend_from_slice(block);
                    out.resize(out.len() + gpu_bytes - cpu_bytes, 0);
                }
            }
        }
    }
}

/// Rows `row0..row0 + rows` of a matrix, in one buffer.
pub struct Piece {
    pub buffer: wgpu::Buffer,
    pub row0: usize,
    pub rows: usize,
}

pub struct GpuMatrix {
    pub format: GgmlType,
    pub rows: usize,
    pub cols: usize,
    pub row_words: usize,
    pub pieces: Vec<Piece>,
}

pub struct GpuLinear {
    pub weight: GpuMatrix,
    pub bias: Option<wgpu::Buffer>,
}

pub struct GpuNorm {
    pub weight: wgpu::Buffer,
    pub bias: Option<wgpu::Buffer>,
}

pub struct GpuLayer {
    pub attn_norm: GpuNorm,
    pub attn_qkv: Vec<GpuLinear>,
    pub attn_output: GpuLinear,
    pub ffn_norm: GpuNorm,
    pub ffn_up: GpuLinear,
    pub ffn_gate: Option<GpuLinear>,
    pub ffn_down: GpuLinear,
    /// Gemma's per-head q/k norms and its norms after attention and after the MLP.
    pub attn_q_norm: Option<GpuNorm>,
    pub attn_k_norm: Option<GpuNorm>,
    pub attn_post_norm: Option<GpuNorm>,
    pub ffn_post_norm: Option<GpuNorm>,
}

/// Everything of a model the GPU forward pass reads. The embedding tables stay on the host: a
/// lookup is a copy of one row per token, made there and uploaded with the tokens.
pub struct GpuWeights {
    pub layers: Vec<GpuLayer>,
    pub output_norm: GpuNorm,
    pub output: GpuMatrix,
    /// Bytes uploaded.
    pub bytes: u64,
}

impl GpuWeights {
    pub fn upload(gpu: &Gpu, model: &Model) -> Result<GpuWeights> {
        let w = &model.weights;
        let mut up = Uploader { gpu, weights: w, bytes: 0 };
        let layers = w
            .layers
            .iter()
            .enumerate()
            .map(|(l, lw)| {
                Ok(GpuLayer {
                    attn_norm: up.norm(&lw.attn_norm, &format!("blk.{l}.attn_norm"))?,
                    attn_qkv: lw
                        .attn_qkv
                        .iter()
                        .map(|lin| up.linear(lin, &format!("blk.{l}.attn_qkv")))
                        .collect::<Result<_>>()?,
                    attn_output: up.linear(&lw.attn_output, &format!("blk.{l}.attn_output"))?,
                    ffn_norm: up.norm(&lw.ffn_norm, &format!("blk.{l}.ffn_norm"))?,
                    ffn_up: up.linear(&lw.ffn_up, &format!("blk.{l}.ffn_up"))?,
                    ffn_gate: lw.ffn_gate.as_ref().map(|g| up.linear(g, &format!("blk.{l}.ffn_gate"))).transpose()?,
                    ffn_down: up.linear(&lw.ffn_down, &format!("blk.{l}.ffn_down"))?,
                    attn_q_norm: up.optional_norm(lw.attn_q_norm.as_ref(), &format!("blk.{l}.attn_q_norm"))?,
                    attn_k_norm: up.optional_norm(lw.attn_k_norm.as_ref(), &format!("blk.{l}.attn_k_norm"))?,
                    attn_post_norm: up
                        .optional_norm(lw.attn_post_norm.as_ref(), &format!("blk.{l}.post_attention_norm"))?,
                    ffn_post_norm: up.optional_norm(lw.ffn_post_norm.as_ref(), &format!("blk.{l}.post_ffw_norm"))?,
                })
            })
            .collect::<Result<_>>()?;
        // `GpuModel::new` admits only decoders with a final norm and a head.
        let missing = |what: &str| Error::Gpu(format!("the GPU backend needs the model's {what}"));
        let output_norm = up.norm(w.output_norm.as_ref().ok_or_else(|| missing("final norm"))?, "output_norm")?;
        let output = up.matrix(w.output.as_ref().ok_or_else(|| missing("LM head"))?, "output")?;
        Ok(GpuWeights { layers, output_norm, output, bytes: up.bytes })
    }

    /// Every matrix format the model uses (each needs its matmul kernel).
    pub fn formats(&self) -> Vec<GgmlType> {
        let mut formats = vec![self.output.format];
        for l in &self.layers {
            for lin in l.attn_qkv.iter().chain([&l.attn_output, &l.ffn_up, &l.ffn_down]).chain(&l.ffn_gate) {
                formats.push(lin.weight.format);
            }
        }
        formats.sort_by_key(|f| *f as u8);
        formats.dedup();
        formats
    }
}

struct Uploader<'a> {
    gpu: &'a Gpu,
    weights: &'a Weights,
    bytes: u64,
}

impl Uploader<'_> {
    fn buffer(&mut self, label: &str, contents: &[u8]) -> wgpu::Buffer {
        self.bytes += contents.len() as u64;
        self.gpu.device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some(label),
            contents,
            usage: wgpu::BufferUsages::STORAGE,
        })
    }

    fn floats(&mut self, label: &str, values: &[f32]) -> wgpu::Buffer {
        self.buffer(label, bytemuck::cast_slice(values))
    }

    fn norm(&mut self, n: &Norm, name: &str) -> Result<GpuNorm> {
        let w = self.weights;
        Ok(GpuNorm {
            weight: self.floats(&format!("{name}.weight"), w.get(n.weight)),
            bias: n.bias.map(|b| self.floats(&format!("{name}.bias"), w.get(b))),
        })
    }

    fn optional_norm(&mut self, n: Option<&Norm>, name: &str) -> Result<Option<GpuNorm>> {
        n.map(|n| self.norm(n, name)).transpose()
    }

    fn linear(&mut self, lin: &Linear, name: &str) -> Result<GpuLinear> {
        let w = self.weights;
        Ok(GpuLinear {
            weight: self.matrix(&lin.weight, name)?,
            bias: lin.bias.map(|b| self.floats(&format!("{name}.bias"), w.get(b))),
        })
    }

    fn matrix(&mut self, m: &Matrix, name: &str) -> Result<GpuMatrix> {
        let format = storage_type(&m.data);
        let row_words = format.row_words(m.cols);
        let row_bytes = (row_words * 4) as u64;
        let limits = &self.gpu.limits;
        let largest = limits.max_storage_buffer_binding_size.min(limits.max_buffer_size);
        let rows_per_piece = (largest / row_bytes.max(1)) as usize;
        if rows_per_piece == 0 {
            return Err(Error::Gpu(format!(
                "{name}: one row of {row_bytes} bytes exceeds the device's largest storage binding ({largest} bytes)"
            )));
        }
        let cpu: Vec<u8> = match m.data {
            Rows::F32(view) => bytemuck::cast_slice(self.weights.get(view)).to_vec(),
            Rows::Packed { offset, len, .. } | Rows::Blocks { offset, len, .. } => {
                self.weights.blocks(offset, len).to_vec()
            }
        };
        let cpu_row = cpu.len() / m.rows.max(1);
        let mut pieces = Vec::new();
        let mut gpu_rows = Vec::with_capacity(rows_per_piece.min(m.rows) * row_words * 4);
        for row0 in (0..m.rows).step_by(rows_per_piece) {
            let rows = rows_per_piece.min(m.rows - row0);
            gpu_rows.clear();
            for r in row0..row0 + rows {
                format.push_row(&cpu[r * cpu_row..(r + 1) * cpu_row], &mut gpu_rows);
            }
            let buffer = self.buffer(&format!("{name} rows {row0}.."), &gpu_rows);
            pieces.push(Piece { buffer, row0, rows });
        }
        Ok(GpuMatrix { format, rows: m.rows, cols: m.cols, row_words, pieces })
    }
}
