// Choosing where a model runs: the CPU, or WebGPU through the engine's wgpu backend (in the
// single-thread build only). `auto` takes WebGPU when the browser offers a hardware adapter; a
// software fallback adapter (SwiftShader, WARP) computes correctly but slower than the CPU
// kernels, so `auto` stays on the CPU there and says why. `webgpu` takes any adapter, or fails.
import type { Glue } from './backend.js';
import type { AdapterInfo, BackendChoice, BackendInfo, GpuAdapterInfo } from './types.js';

// The few WebGPU declarations used here (TypeScript's DOM library has none).
interface BrowserAdapterInfo {
  vendor: string;
  architecture: string;
  device: string;
  description: string;
  isFallbackAdapter?: boolean;
}
interface BrowserAdapter {
  readonly info?: BrowserAdapterInfo;
  readonly limits: {
    maxStorageBufferBindingSize: number;
    maxBufferSize: number;
    maxComputeWorkgroupStorageSize: number;
    maxComputeInvocationsPerWorkgroup: number;
  };
  /** Where browsers before `info.isFallbackAdapter` (Chrome 132) said it. */
  readonly isFallbackAdapter?: boolean;
}
interface BrowserGpu {
  requestAdapter(options?: { powerPreference?: 'high-performance' | 'low-power' }): Promise<BrowserAdapter | null>;
}

type RawModel = Glue['Model']['prototype'];
type RawGpu = Awaited<ReturnType<NonNullable<Glue['requestGpu']>>>;

/** What the browser offers, asked once: its adapter, or why there is none. */
export interface Probe {
  adapter?: BrowserAdapter;
  /** Why there is no adapter, e.g. "navigator.gpu is undefined (…)". */
  missing?: string;
}

let probing: Promise<Probe> | undefined;

/** The browser's WebGPU adapter (high performance preferred), asked once per realm. */
export function probeWebGpu(): Promise<Probe> {
  probing ??= (async (): Promise<Probe> => {
    const gpu = (globalThis.navigator as { gpu?: BrowserGpu } | undefined)?.gpu;
    if (!gpu) {
      const where = typeof process !== 'undefined' && process.versions?.node !== undefined ? 'Node.js has no WebGPU' : 'this browser or page has no WebGPU';
      return { missing: `navigator.gpu is undefined (${where})` };
    }
    try {
      const adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
      return adapter ? { adapter } : { missing: 'navigator.gpu.requestAdapter() found no adapter' };
    } catch (error) {
      return { missing: `navigator.gpu.requestAdapter() failed (${message(error)})` };
    }
  })();
  return probing;
}

/** True when the adapter is a real GPU: what `auto` takes. */
export function isHardware(adapter: BrowserAdapter): boolean {
  return !(adapter.info?.isFallbackAdapter ?? adapter.isFallbackAdapter ?? false);
}

/** The engine's device, shared by every model of this realm (one per adapter is plenty). */
let device: Promise<RawGpu> | undefined;

function requestDevice(glue: Glue): Promise<RawGpu> {
  const request = glue.requestGpu!;
  device ??= request().catch((error: unknown) => {
    device = undefined; // let a later load retry
    throw error;
  });
  return device;
}

/** Puts `raw` on the backend `requested` names, and says what it chose and why. */
export async function selectBackend(glue: Glue, raw: RawModel, requested: BackendChoice): Promise<BackendInfo> {
  const cpu = (reason: string, adapter?: GpuAdapterInfo): BackendInfo => {
    raw.useCpu();
    return { backend: 'cpu', requested, reason: `cpu: ${reason}`, ...(adapter ? { adapter } : {}) };
  };
  if (requested === 'cpu') return cpu('the CPU was asked for');
  const declined = (why: string, adapter?: GpuAdapterInfo): BackendInfo => {
    if (requested === 'webgpu') throw new Error(`WebGPU was asked for, but ${why}`);
    return cpu(`no usable WebGPU: ${why}`, adapter);
  };
  const { adapter, missing } = await probeWebGpu();
  if (!adapter) return declined(missing!);
  let info = browserAdapterInfo(adapter);
  if (requested === 'auto' && info.isFallbackAdapter) {
    return cpu(`the only WebGPU adapter, ${adapterName(info)}, is a software fallback adapter: the CPU kernels are faster (ask for webgpu to use it anyway)`, info);
  }
  if (!glue.requestGpu) {
    return declined('the threaded wasm build is running and has no WebGPU: pass the backend to init() or createWorkerClient() so that it loads the single-thread build', info);
  }
  let gpu: RawGpu;
  try {
    gpu = await requestDevice(glue);
  } catch (error) {
    return declined(`the engine could not open ${adapterName(info)} (${message(error)})`, info);
  }
  info = { ...info, ...engineAdapterInfo(gpu, info) };
  const name = adapterName(info);
  if (requested === 'auto' && info.isSoftware) {
    return cpu(`the only WebGPU adapter, ${name}, is a software rasterizer: the CPU kernels are faster (ask for webgpu to use it anyway)`, info);
  }
  try {
    raw.useGpu(gpu);
  } catch (error) {
    if (requested === 'webgpu') throw new Error(`WebGPU was asked for, but the model does not fit ${name} (${message(error)})`);
    return cpu(`the model does not fit ${name} (${message(error)})`, info);
  }
  const why = requested === 'webgpu' ? `WebGPU was asked for: ${name}${info.isSoftware ? ', a software fallback adapter' : ''}` : `a hardware WebGPU adapter is available: ${name}`;
  return { backend: 'webgpu', requested, reason: `webgpu: ${why}`, adapter: info };
}

/** What the browser says about its adapter, in the engine's record (its limits are the adapter's). */
function browserAdapterInfo(adapter: BrowserAdapter): GpuAdapterInfo {
  const info = adapter.info;
  const fallback = !isHardware(adapter);
  const limits = adapter.limits;
  return {
    name: info?.description || info?.device || '',
    vendor: info?.vendor ?? '',
    architecture: info?.architecture ?? '',
    backend: 'BrowserWebGpu',
    deviceType: fallback ? 'Cpu' : 'Other',
    driver: '',
    isSoftware: fallback,
    isFallbackAdapter: fallback,
    maxStorageBufferBindingSize: limits.maxStorageBufferBindingSize,
    maxBufferSize: limits.maxBufferSize,
    maxComputeWorkgroupStorageSize: limits.maxComputeWorkgroupStorageSize,
    maxComputeInvocationsPerWorkgroup: limits.maxComputeInvocationsPerWorkgroup,
  };
}

/** The engine's record of the device it opened, keeping the browser's names where it has none. */
function engineAdapterInfo(gpu: RawGpu, browser: GpuAdapterInfo): AdapterInfo {
  const engine = gpu.info();
  return { ...engine, name: engine.name || browser.name, vendor: browser.vendor || engine.vendor };
}

/** "google swiftshader", "nvidia ampere (NVIDIA GeForce …)": how a person recognises the adapter. */
export function adapterName(info: GpuAdapterInfo): string {
  const maker = [info.vendor, info.architecture].filter((word) => word && word !== 'unknown').join(' ');
  if (maker && info.name) return `${maker} (${info.name})`;
  return maker || info.name || 'an unnamed adapter';
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
