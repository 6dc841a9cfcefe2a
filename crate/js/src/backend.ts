// Picks the WebAssembly build for this environment, loads it once, and remembers why it chose it.
// Both builds use SIMD128. The threaded one (wasm-bindgen-rayon) needs shared memory, which
// browsers grant only to cross-origin-isolated pages, and blocking waits, which a page's main
// thread may not do; everywhere else the single-thread build runs. Only the single-thread build
// has WebGPU: asked for it (or for `auto`, with a hardware adapter present), init loads that one.
import type * as SingleThreadGlue from '../wasm/st/gptlens.js';
import { intoEngine } from './crash.js';
import { isHardware, probeWebGpu } from './gpu.js';
import type { Backend, InitOptions } from './types.js';

/** `st`: single-thread build; `mt`: threaded build (rayon on Web Workers). */
type Build = 'st' | 'mt';

/**
 * Either build's wasm-bindgen module: the same classes; the single-thread one adds WebGPU
 * (`requestGpu`, `Model.useGpu`), the threaded one the thread pool.
 */
export type Glue = Omit<typeof SingleThreadGlue, 'requestGpu'> & {
  requestGpu?: typeof SingleThreadGlue.requestGpu;
  initThreadPool?(threads: number): Promise<unknown>;
};

interface Loaded {
  glue: Glue;
  backend: Backend;
  memory: WebAssembly.Memory;
}

let loading: Promise<Loaded> | undefined;
let loaded: Loaded | undefined;

/**
 * Loads the engine. The first call decides the build; later calls return the same backend.
 * Resolves to which build runs and why.
 */
export function init(options: InitOptions = {}): Promise<Backend> {
  loading ??= load(options).then(
    (result) => (loaded = result),
    (error: unknown) => {
      loading = undefined; // let a later call retry, e.g. after the page fixed its headers
      throw error;
    },
  );
  return loading.then(({ backend }) => backend);
}

/** The running build and the reason for it. Throws before `init()` has resolved. */
export function backend(): Backend {
  return current().backend;
}

/** The loaded wasm-bindgen module; for this package's wrappers. */
export function glue(): Glue {
  return current().glue;
}

/**
 * Bytes of the engine's WebAssembly memory: what loading a model and running it took at most,
 * since wasm memory grows and never shrinks. Throws before `init()` has resolved.
 */
export function engineMemoryBytes(): number {
  return current().memory.buffer.byteLength;
}

/**
 * `length` bytes of the engine's memory from `ptr` (a buffer the engine says will not move): a view,
 * not a copy, which the single-thread build's memory growth empties — make one per use.
 */
export function engineBytes(ptr: number, length: number): Uint8Array {
  return new Uint8Array(current().memory.buffer, ptr, length);
}

function current(): Loaded {
  if (!loaded) throw new Error('gptlens is not initialised: await init() first');
  return loaded;
}

// The smallest module that uses a SIMD128 instruction: it validates only where SIMD128 runs.
const SIMD_PROBE = new Uint8Array([
  0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 10, 1, 8, 0, 65, 0, 253, 15, 253, 98, 11,
]);

interface Plan {
  build: Build;
  threads: number;
  reason: string;
}

const isNode = () => typeof process !== 'undefined' && process.versions?.node !== undefined;

const singleThread = (reason: string): Plan => ({ build: 'st', threads: 1, reason: `single-thread: ${reason}` });

/**
 * The build this environment can run. For `auto`, a hardware WebGPU adapter would take the
 * single-thread build instead: `load` asks for one (`hardwareGpu`) while the threaded build loads.
 */
function plan({ threads, backend = 'cpu' }: InitOptions): Plan {
  if (threads !== undefined && !(Number.isInteger(threads) && threads >= 1)) {
    throw new RangeError(`threads must be a whole number ≥ 1, not ${threads}`);
  }
  if (!['auto', 'cpu', 'webgpu'].includes(backend)) {
    throw new RangeError(`backend must be 'auto', 'cpu' or 'webgpu', not ${JSON.stringify(backend)}`);
  }
  if (isNode()) {
    return singleThread('Node.js (the threaded build needs browser Web Workers)');
  }
  if (threads === 1) return singleThread('1 thread requested');
  if (backend === 'webgpu') return singleThread('WebGPU was asked for (the threaded build has no WebGPU)');
  if (!('WorkerGlobalScope' in globalThis)) {
    return singleThread("running on the page's main thread, which must not block; use createWorkerClient() for threads");
  }
  if (!globalThis.crossOriginIsolated) {
    return singleThread(
      'page is not crossOriginIsolated (serve it with Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp)',
    );
  }
  // More threads than cores only add spinning workers that take cores from each other (and each
  // costs a Worker and its stack): a count above the machine's is clamped, and the reason says so.
  const available = navigator.hardwareConcurrency ?? 1;
  const count = Math.min(threads ?? available, available);
  const clamped = threads !== undefined && threads > available ? `; ${threads} asked, this machine offers ${available}` : '';
  if (count < 2) return singleThread(`navigator.hardwareConcurrency is ${available}${clamped}`);
  return { build: 'mt', threads: count, reason: `multi-thread: ${count} threads (page is crossOriginIsolated)${clamped}` };
}

/** Why `auto` should run the single-thread build after all (a hardware WebGPU adapter, which only it can use), or undefined. */
async function hardwareGpu({ backend }: InitOptions): Promise<string | undefined> {
  if (backend !== 'auto') return undefined;
  const { adapter } = await probeWebGpu();
  return adapter && isHardware(adapter) ? 'a hardware WebGPU adapter is available (the threaded build has no WebGPU)' : undefined;
}

async function start(build: Build): Promise<{ glue: Glue; memory: WebAssembly.Memory }> {
  // Literal specifiers so bundlers see both builds; `as string` because the threaded build's
  // files exist only where the nightly toolchain built them.
  const glue = (build === 'mt'
    ? await import('../wasm/mt/gptlens.js' as string)
    : await import('../wasm/st/gptlens.js')) as Glue;
  const { memory } = await glue.default(isNode() ? { module_or_path: await readWasmFile(build) } : undefined);
  return { glue, memory };
}

/**
 * Node's fetch cannot read file: URLs, so there the glue gets the module's bytes. Elsewhere it
 * fetches its .wasm from beside itself with `new URL(…, import.meta.url)`, which bundlers rewrite.
 */
async function readWasmFile(build: Build): Promise<Uint8Array> {
  // Names bundlers cannot follow: a browser bundle must not try to include node:fs, nor
  // both .wasm files through this URL.
  const fs: string = 'node:fs/promises';
  const here = import.meta.url;
  const { readFile } = (await import(/* webpackIgnore: true */ /* @vite-ignore */ fs)) as typeof import('node:fs/promises');
  return readFile(new URL(`../wasm/${build}/gptlens_bg.wasm`, here));
}

async function load(options: InitOptions): Promise<Loaded> {
  if (!WebAssembly.validate(SIMD_PROBE)) {
    throw new Error('gptlens needs WebAssembly SIMD128 (Chrome 91, Firefox 89, Safari 16.4, Node 16.4 or later)');
  }
  let chosen = plan(options);
  if (chosen.build === 'mt') {
    // The threaded build loads while `auto` asks for a GPU adapter: asked first, the adapter
    // (Chromium's software one, here) took 30–80 ms of the Worker's start, on the page's way to
    // its first run. A hardware adapter then takes the single-thread build, and this one is
    // dropped before its thread pool starts (its module keeps its 1.3 MB of memory).
    const threaded = start('mt');
    threaded.catch(() => {}); // thrown where it is awaited, unless it is dropped
    const gpu = await hardwareGpu(options);
    if (gpu) {
      chosen = singleThread(gpu);
    } else {
      try {
        const { glue, memory } = await threaded;
        if (!glue.initThreadPool) throw new Error('the threaded build exports no initThreadPool');
        await glue.initThreadPool(chosen.threads);
        return { glue, memory, backend: { simd: true, threads: glue.threadCount(), reason: chosen.reason } };
      } catch (error) {
        chosen = singleThread(`the threaded build failed to start (${error instanceof Error ? error.message : error})`);
      }
    }
  }
  return { ...(await start('st')), backend: { simd: true, threads: 1, reason: chosen.reason } };
}

/**
 * Crashes the engine on purpose, as a bug would (a Rust panic: a wasm trap), for tests of crash
 * handling. `how`: `now`; `microtask` — inside a Promise the engine drives, like the async runs;
 * `pool thread` — on a thread of the threaded build's pool, while the engine's thread waits for it
 * (that call never returns: the worker client notices the crash flag). Afterwards every call
 * throws EngineCrashedError. @internal not for applications.
 */
export function abortForTesting(how: 'now' | 'microtask' | 'pool thread' = 'now'): Promise<void> {
  return intoEngine(async () => {
    await glue().abortForTesting(how);
  });
}

/**
 * The engine's crash flag (an `i32`, 1 once any of its threads panicked) as a view of its shared
 * memory, or undefined for the single-thread build, whose traps reach their caller.
 */
export function crashFlag(): Int32Array | undefined {
  const { memory } = current();
  if (!(typeof SharedArrayBuffer !== 'undefined' && memory.buffer instanceof SharedArrayBuffer)) return undefined;
  return new Int32Array(memory.buffer, glue().crashFlag(), 1);
}
