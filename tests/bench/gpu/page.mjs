// Runs in the bench page (npm run bench:gpu, browser half): one worker client per backend —
// `webgpu` and `cpu` (both the single-thread build, the one with WebGPU) — each with the model
// loaded and one session, so that browser.mjs can alternate runs between them from Node (where
// it reads the load average before each run). A run is what a page does: a prefill of the
// prompt, capture off, then decode steps one token at a time, through the worker.
import { createWorkerClient } from '/pkg/dist/index.js';

const engines = new Map();
let files;

/** What the browser's WebGPU offers: the adapter's info, or why there is none. */
export async function webgpuAdapter() {
  if (!navigator.gpu) return { missing: 'navigator.gpu is undefined' };
  const adapter = await navigator.gpu.requestAdapter({ powerPreference: 'high-performance' });
  if (!adapter) return { missing: 'navigator.gpu.requestAdapter() returned null' };
  const { vendor, architecture, description, isFallbackAdapter } = adapter.info;
  return { vendor, architecture, description, isFallbackAdapter, timestamps: adapter.features.has('timestamp-query') };
}

/** Fetches the model's files (`{ name: url }`) once for every engine of this model. */
export async function fetchModel(urls) {
  closeAll();
  const entries = await Promise.all(
    Object.entries(urls).map(async ([name, url]) => {
      const response = await fetch(url);
      if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
      return [name, new Uint8Array(await response.arrayBuffer())];
    }),
  );
  files = Object.fromEntries(entries);
  return Object.values(files).reduce((sum, bytes) => sum + bytes.byteLength, 0);
}

/** Starts a worker on `backend` with the fetched model and opens its session. */
export async function open(backend) {
  const started = performance.now();
  const engine = await createWorkerClient({ threads: 1, backend });
  try {
    // Copies move to the worker, so the next engine gets the same bytes.
    const copies = Object.fromEntries(Object.entries(files).map(([name, bytes]) => [name, bytes.slice()]));
    const info = await engine.load(copies, { transfer: true, backend });
    const session = await engine.session();
    engines.set(backend, { engine, session });
    return { build: engine.backend(), placed: engine.backendInfo(), info, loadMs: performance.now() - started };
  } catch (error) {
    engine.terminate();
    throw error;
  }
}

/** One run on `backend`: the prefill of `prompt` (a fresh sequence), then `decode` steps. */
export async function run(backend, prompt, decode) {
  const { session } = engines.get(backend);
  await session.reset();
  let started = performance.now();
  const trace = await session.run(Uint32Array.from(prompt), []);
  const prefillMs = performance.now() - started;
  await trace.release();
  started = performance.now();
  for (const token of decode) await session.step(token);
  const decodeMs = performance.now() - started;
  return { prefillMs, stepMs: decodeMs / Math.max(1, decode.length) };
}

export function closeAll() {
  for (const { engine } of engines.values()) engine.terminate();
  engines.clear();
}
