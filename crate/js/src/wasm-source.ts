// Browsers and bundlers: the wasm-bindgen glue fetches its `.wasm` from beside itself with
// `new URL('gptlens_bg.wasm', import.meta.url)`, a pattern bundlers (Vite, webpack) rewrite to the
// emitted asset. Passing nothing keeps that path.
import type { Build } from './backend.js';

export async function wasmModuleOrPath(_build: Build): Promise<BufferSource | undefined> {
  return undefined;
}
