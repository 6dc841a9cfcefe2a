//! `Gpu`: a WebGPU adapter and device, for `Model.useGpu`.

use std::sync::Arc;

use wasm_bindgen::prelude::*;

use super::to_js;

/// A device on the browser's WebGPU adapter; any number of models can share it.
#[wasm_bindgen]
pub struct Gpu {
    gpu: Arc<crate::gpu::Gpu>,
}

impl Gpu {
    pub(super) fn shared(&self) -> Arc<crate::gpu::Gpu> {
        Arc::clone(&self.gpu)
    }
}

/// The browser's WebGPU adapter (high performance preferred) with a device that has its full
/// limits. Rejects with an Error saying why when there is none (no `navigator.gpu`, no adapter,
/// or the adapter refused a device).
// wgpu's browser objects are not Send: fine, the single-thread build is the only one with a GPU.
#[allow(clippy::arc_with_non_send_sync)]
#[wasm_bindgen(js_name = requestGpu)]
pub async fn request_gpu() -> Result<Gpu, JsError> {
    // wgpu panics where neither a window nor a worker is the global (Node): say it instead.
    let navigator = js_sys::Reflect::get(&js_sys::global(), &"navigator".into()).unwrap_or(JsValue::UNDEFINED);
    let gpu = if navigator.is_object() {
        js_sys::Reflect::get(&navigator, &"gpu".into()).unwrap_or(JsValue::UNDEFINED)
    } else {
        JsValue::UNDEFINED
    };
    if gpu.is_undefined() || gpu.is_null() {
        return Err(JsError::new(
            "no WebGPU here: navigator.gpu is undefined (Node.js, or a browser or page without WebGPU)",
        ));
    }
    Ok(Gpu { gpu: Arc::new(crate::gpu::Gpu::request().await?) })
}

#[wasm_bindgen]
impl Gpu {
    /// Who made the adapter, whether it is software, and its key limits.
    #[wasm_bindgen(unchecked_return_type = "AdapterInfo")]
    pub fn info(&self) -> Result<JsValue, JsError> {
        to_js(&self.gpu.adapter)
    }
}
