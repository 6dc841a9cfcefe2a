//! The WGSL kernels, compiled once per device. Each `.wgsl` file sits beside this one; a kernel's
//! bindings are declared here once ([`Kernel::bindings`]) and its uniform parameters are a list of
//! 32-bit words in the order of the shader's `Params` struct.
//!
//! | kernel | file | one workgroup per |
//! |---|---|---|
//! | matmul / matvec (every weight format) | `matmul.wgsl` + `formats/*.wgsl` | 8 rows × 8 tokens |
//! | LayerNorm / RMSNorm, residual norms, Gemma's per-head q/k norms | `norm.wgsl` | row |
//! | RoPE (both pairings) and the KV-cache append | `rope.wgsl` | token |
//! | causal attention with grouped KV heads | `attention.wgsl` | head × query |
//! | GELU, SwiGLU, GeGLU | `activation.wgsl` | 256 values |

use std::collections::HashMap;

use crate::gpu::weights::GpuFormat;
use crate::kernels::quant::GgmlType;

/// How a kernel binds a buffer.
#[derive(Clone, Copy)]
enum Binding {
    Uniform,
    Read,
    ReadWrite,
}

/// Every entry point gptlens dispatches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kernel {
    Matmul(GgmlType),
    Norm,
    ResidNorm,
    HeadNorm,
    Rope,
    Attention,
    Gelu,
    SiluMul,
    GeluMul,
}

impl Kernel {
    fn source(self) -> String {
        match self {
            Kernel::Matmul(format) => {
                format!("{}\n{}\n{}", include_str!("formats/common.wgsl"), format.wgsl(), include_str!("matmul.wgsl"))
            }
            Kernel::Norm | Kernel::ResidNorm | Kernel::HeadNorm => include_str!("norm.wgsl").into(),
            Kernel::Rope => include_str!("rope.wgsl").into(),
            Kernel::Attention => include_str!("attention.wgsl").into(),
            Kernel::Gelu | Kernel::SiluMul | Kernel::GeluMul => include_str!("activation.wgsl").into(),
        }
    }

    fn entry_point(self) -> &'static str {
        match self {
            Kernel::ResidNorm => "resid_norm",
            Kernel::HeadNorm => "head_norm",
            Kernel::Gelu => "gelu",
            Kernel::SiluMul => "silu_mul",
            Kernel::GeluMul => "gelu_mul",
            _ => "main",
        }
    }

    /// Binding 0 is always the uniform parameters; the rest in the shader's order.
    fn bindings(self) -> &'static [Binding] {
        use Binding::*;
        match self {
            // params, weights, x, bias, out
            Kernel::Matmul(_) => &[Uniform, Read, Read, Read, ReadWrite],
            // params, x, weight, bias, y, stats
            Kernel::Norm | Kernel::ResidNorm | Kernel::HeadNorm => &[Uniform, Read, Read, Read, ReadWrite, ReadWrite],
            // params, qkv, angles, k cache, v cache
            Kernel::Rope => &[Uniform, ReadWrite, Read, ReadWrite, ReadWrite],
            // params, qkv, k cache, v cache, out, pattern
            Kernel::Attention => &[Uniform, Read, Read, Read, ReadWrite, ReadWrite],
            // params, up, gate
            Kernel::Gelu | Kernel::SiluMul | Kernel::GeluMul => &[Uniform, ReadWrite, Read],
        }
    }
}

/// A compiled kernel and the layout its bind groups are made with.
pub struct Pipeline {
    pub pipeline: wgpu::ComputePipeline,
    pub layout: wgpu::BindGroupLayout,
}

/// The pipelines a model needs, compiled when the model is put on the device.
pub struct Pipelines {
    map: HashMap<Kernel, Pipeline>,
}

impl Pipelines {
    pub fn new(device: &wgpu::Device, kernels: impl IntoIterator<Item = Kernel>) -> Pipelines {
        let mut map = HashMap::new();
        for kernel in kernels {
            map.entry(kernel).or_insert_with(|| compile(device, kernel));
        }
        Pipelines { map }
    }

    /// A kernel compiled by [`Pipelines::new`]; the model asks only for the ones it listed.
    pub fn get(&self, kernel: Kernel) -> Option<&Pipeline> {
        self.map.get(&kernel)
    }
}

fn compile(device: &wgpu::Device, kernel: Kernel) -> Pipeline {
    let label = format!("{kernel:?}");
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some(&label),
        source: wgpu::ShaderSource::Wgsl(kernel.source().into()),
    });
    let entries: Vec<wgpu::BindGroupLayoutEntry> = kernel
        .bindings()
        .iter()
        .enumerate()
        .map(|(i, binding)| wgpu::BindGroupLayoutEntry {
            binding: i as u32,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: match binding {
                    Binding::Uniform => wgpu::BufferBindingType::Uniform,
                    Binding::Read => wgpu::BufferBindingType::Storage { read_only: true },
                    Binding::ReadWrite => wgpu::BufferBindingType::Storage { read_only: false },
                },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        })
        .collect();
    let layout =
        device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: Some(&label), entries: &entries });
    let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some(&label),
        bind_group_layouts: &[Some(&layout)],
        immediate_size: 0,
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(&label),
        layout: Some(&pipeline_layout),
        module: &module,
        entry_point: Some(kernel.entry_point()),
        compilation_options: Default::default(),
        cache: None,
    });
    Pipeline { pipeline, layout }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests;
