// Node: `fetch` cannot read file: URLs, so the glue gets the module's bytes instead.
import { readFile } from 'node:fs/promises';
import type { Build } from './backend.js';

export async function wasmModuleOrPath(build: Build): Promise<BufferSource | undefined> {
  return readFile(new URL(`../wasm/${build}/gptlens_bg.wasm`, import.meta.url));
}
