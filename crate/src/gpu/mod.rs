//! The wgpu backend: the whole forward pass of a [`crate::Session`] on a GPU, with the same
//! hooks, the same prefix reuse and the same results as the CPU within float rounding.
//!
//! - [`device`]: acquiring an adapter and a device, once (tests and hosts may hand in their own);
//! - [`weights`]: a model's weights on the device, quantized matrices kept in their block form;
//! - [`kernels`]: the WGSL kernels (one `.wgsl` per kernel) and their pipelines;
//! - [`pass`]: a session's buffers, its planned dispatches and one forward pass.

pub mod device;
pub mod kernels;
pub mod pass;
pub mod weights;

pub use device::{AdapterInfo, Gpu};
pub use pass::{GpuModel, GpuPass, KernelTime, GPU_CHUNK, MAX_GPU_ABLATED_HEAD};
