//! Where a session's forward passes run, and how `auto` chooses.
//!
//! `auto` takes the GPU when an adapter exists and is a real GPU; a software adapter (lavapipe,
//! SwiftShader, WARP) is correct but slower than the CPU kernels, so `auto` stays on the CPU there
//! and says why. `gpu` forces the GPU (any adapter, software included): what the tests use.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::error::{Error, Result};
#[cfg(feature = "gpu")]
use crate::gpu::{AdapterInfo, Gpu, GpuModel};
use crate::model::Model;

/// What a caller asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BackendChoice {
    #[default]
    Auto,
    Cpu,
    Gpu,
}

impl FromStr for BackendChoice {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "auto" => Ok(BackendChoice::Auto),
            "cpu" => Ok(BackendChoice::Cpu),
            "gpu" | "wgpu" | "webgpu" => Ok(BackendChoice::Gpu),
            other => Err(Error::InvalidArgument(format!("unknown backend `{other}` (choose auto, cpu or wgpu)"))),
        }
    }
}

/// Where sessions run: the CPU, or a model resident on a GPU.
#[derive(Clone)]
pub enum Backend {
    Cpu,
    #[cfg(feature = "gpu")]
    Gpu(Arc<GpuModel>),
}

/// The backend chosen, and the sentence that explains the choice to a person.
pub struct Selected {
    pub backend: Backend,
    pub reason: String,
    #[cfg(feature = "gpu")]
    pub adapter: Option<AdapterInfo>,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Backend::Cpu => write!(f, "cpu"),
            #[cfg(feature = "gpu")]
            Backend::Gpu(m) => write!(f, "gpu ({})", m.gpu.adapter.name),
        }
    }
}

/// Chooses a backend for `model` and, for the GPU, puts the model on it.
// In wasm the GPU's objects are JS handles (not Send); an Arc still lets the sessions of one
// thread share the model on the device. Natively they are Send and Sync.
#[cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]
pub async fn select(choice: BackendChoice, model: &Arc<Model>) -> Result<Selected> {
    #[cfg(feature = "gpu")]
    {
        let cpu = |reason: String, adapter: Option<AdapterInfo>| Selected { backend: Backend::Cpu, reason, adapter };
        match choice {
            BackendChoice::Cpu => Ok(cpu("the CPU was asked for".into(), None)),
            BackendChoice::Gpu => {
                let gpu = Arc::new(Gpu::request().await?);
                let adapter = gpu.adapter.clone();
                let on_gpu = GpuModel::new(gpu, Arc::clone(model))?;
                let reason = format!(
                    "the GPU was asked for: {}{}",
                    adapter.name,
                    if adapter.is_software { " (a software adapter)" } else { "" }
                );
                Ok(Selected { backend: Backend::Gpu(Arc::new(on_gpu)), reason, adapter: Some(adapter) })
            }
            BackendChoice::Auto => match Gpu::request().await {
                Err(e) => Ok(cpu(format!("no usable GPU ({e})"), None)),
                Ok(gpu) if gpu.adapter.is_software => Ok(cpu(
                    format!(
                        "the only GPU adapter, {}, is a software rasterizer: the CPU kernels are faster",
                        gpu.adapter.name
                    ),
                    Some(gpu.adapter.clone()),
                )),
                Ok(gpu) => {
                    let adapter = gpu.adapter.clone();
                    match GpuModel::new(Arc::new(gpu), Arc::clone(model)) {
                        Ok(on_gpu) => Ok(Selected {
                            backend: Backend::Gpu(Arc::new(on_gpu)),
                            reason: format!("a GPU adapter is available: {}", adapter.name),
                            adapter: Some(adapter),
                        }),
                        Err(e) => Ok(cpu(format!("the model does not fit the GPU ({e})"), Some(adapter))),
                    }
                }
            },
        }
    }
    #[cfg(not(feature = "gpu"))]
    {
        let _ = model;
        match choice {
            BackendChoice::Gpu => Err(Error::Gpu("this build of gptlens has no GPU backend".into())),
            _ => Ok(Selected { backend: Backend::Cpu, reason: "this build has no GPU backend".into() }),
        }
    }
}
