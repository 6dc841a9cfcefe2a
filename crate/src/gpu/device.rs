//! Acquiring a GPU: adapter, device and queue, once, apart from the kernels. Tests, the CLI and the
//! browser call [`Gpu::request`] (or hand in a device of their own with [`Gpu::from_device`]);
//! everything else only uses the [`Gpu`] it is given.

use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::error::{Error, Result};

/// A device and its queue, with what the adapter said about itself.
pub struct Gpu {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub adapter: AdapterInfo,
    /// The limits the device was created with: the adapter's own, not WebGPU's defaults, so that
    /// a vocabulary-sized matrix fits in one binding wherever the hardware allows it.
    pub limits: wgpu::Limits,
    /// Errors wgpu reports outside an error scope (a shader a driver rejects, a lost device), kept
    /// to be returned as [`Error::Gpu`] by the next call that checks, instead of wgpu's default
    /// of panicking.
    errors: Arc<Mutex<Vec<String>>>,
}

/// What a person needs to judge an adapter: who made it, whether it is software, its key limits.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AdapterInfo {
    pub name: String,
    pub vendor: String,
    pub backend: String,
    pub device_type: String,
    pub driver: String,
    /// A CPU implementation (lavapipe/llvmpipe, SwiftShader, WARP): correct, never fast.
    pub is_software: bool,
    pub max_storage_buffer_binding_size: u64,
    pub max_buffer_size: u64,
    pub max_compute_workgroup_storage_size: u32,
    pub max_compute_invocations_per_workgroup: u32,
}

impl Gpu {
    /// The best adapter the platform offers (high performance preferred), with a device that has
    /// its full limits. An error, never a panic, when there is none: callers fall back to the CPU.
    pub async fn request() -> Result<Gpu> {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                ..Default::default()
            })
            .await
            .map_err(|e| Error::Gpu(format!("no GPU adapter: {e}")))?;
        let limits = adapter.limits();
        // Timestamps let `npm run bench:gpu` time each kernel; nothing else depends on them.
        let required_features = adapter.features() & wgpu::Features::TIMESTAMP_QUERY;
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("gptlens"),
                required_features,
                required_limits: limits.clone(),
                ..Default::default()
            })
            .await
            .map_err(|e| Error::Gpu(format!("the adapter refused a device: {e}")))?;
        Ok(Gpu::from_device(device, queue, &adapter.get_info(), limits))
    }

    /// A device someone else created (a test harness, a host application).
    pub fn from_device(
        device: wgpu::Device,
        queue: wgpu::Queue,
        info: &wgpu::AdapterInfo,
        limits: wgpu::Limits,
    ) -> Gpu {
        let name_says_software = ["llvmpipe", "lavapipe", "swiftshader", "warp", "software"]
            .iter()
            .any(|s| info.name.to_lowercase().contains(s) || info.driver.to_lowercase().contains(s));
        let adapter = AdapterInfo {
            // The browser's WebGPU does not tell wgpu its adapter's name (the page reads
            // `GPUAdapter.info` itself).
            name: if info.name.is_empty() { "the browser's WebGPU adapter".into() } else { info.name.clone() },
            vendor: vendor_name(info.vendor),
            backend: format!("{:?}", info.backend),
            device_type: format!("{:?}", info.device_type),
            driver: format!("{} {}", info.driver, info.driver_info).trim().to_string(),
            is_software: info.device_type == wgpu::DeviceType::Cpu || name_says_software,
            max_storage_buffer_binding_size: limits.max_storage_buffer_binding_size,
            max_buffer_size: limits.max_buffer_size,
            max_compute_workgroup_storage_size: limits.max_compute_workgroup_storage_size,
            max_compute_invocations_per_workgroup: limits.max_compute_invocations_per_workgroup,
        };
        let errors = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&errors);
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            if let Ok(mut errors) = sink.lock() {
                errors.push(e.to_string());
            }
        }));
        Gpu { device, queue, adapter, limits, errors }
    }

    /// The same device, pretending to have other limits (tests of how the engine fits them).
    pub fn with_limits(&self, limits: wgpu::Limits) -> Gpu {
        Gpu {
            device: self.device.clone(),
            queue: self.queue.clone(),
            adapter: self.adapter.clone(),
            limits,
            errors: Arc::clone(&self.errors),
        }
    }

    /// The first error wgpu reported since the last check, as an [`Error::Gpu`].
    pub(crate) fn check(&self) -> Result<()> {
        let mut errors = self.errors.lock().map_err(|_| Error::Gpu("the GPU error log was poisoned".into()))?;
        let first = errors.drain(..).next();
        first.map_or(Ok(()), |e| Err(Error::Gpu(e)))
    }

    /// Blocks until the queue's work is done (natively; the browser resolves mappings itself).
    pub(crate) fn wait(&self) -> Result<()> {
        #[cfg(not(target_arch = "wasm32"))]
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Gpu(format!("waiting for the GPU: {e}")))?;
        Ok(())
    }

    /// The first `bytes` of a mappable buffer, once the GPU has written them. Natively this waits
    /// for the queue; in the browser it yields to the event loop until the mapping resolves.
    pub(crate) async fn read(&self, buffer: &wgpu::Buffer, bytes: u64) -> Result<Vec<u8>> {
        if bytes == 0 {
            return Ok(Vec::new());
        }
        let (done, mapped) = futures_channel::oneshot::channel();
        buffer.map_async(wgpu::MapMode::Read, ..bytes, move |result| {
            let _ = done.send(result);
        });
        self.wait()?;
        mapped
            .await
            .map_err(|_| Error::Gpu("the device was lost while reading back".into()))?
            .map_err(|e| Error::Gpu(format!("reading back: {e}")))?;
        let data = buffer.get_mapped_range(..bytes).map_err(|e| Error::Gpu(format!("reading back: {e}")))?.to_vec();
        buffer.unmap();
        Ok(data)
    }
}

/// PCI vendor ids of the GPU makers people will see.
fn vendor_name(id: u32) -> String {
    match id {
        0x1002 => "AMD".into(),
        0x10de => "NVIDIA".into(),
        0x8086 => "Intel".into(),
        0x106b => "Apple".into(),
        0x13b5 => "ARM".into(),
        0x5143 => "Qualcomm".into(),
        0x10005 => "Mesa".into(),
        0 => "unknown".into(),
        other => format!("{other:#x}"),
    }
}
