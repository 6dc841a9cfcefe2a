// Runs in the bench page: a GPT-2-small-shaped checkpoint with random weights, generated here
// (never stored), timed through the package's worker client the way a web page would use it.
import { createWorkerClient } from '/pkg/dist/index.js';
import { allocateSafetensors } from '/tests/support/safetensors.mjs';

export const GPT2_SMALL = { n_layer: 12, n_head: 12, n_embd: 768, vocab_size: 50257, n_positions: 1024 };

// Mulberry32: a tiny deterministic generator, so every run benchmarks the same weights.
function mulberry32(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), seed | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
}

// f32 → f16 bits, truncating the mantissa and flushing values below f16's normal range to zero:
// enough for random weights of a benchmark.
function f16Bits(value) {
  const bits = new Uint32Array(new Float32Array([value]).buffer)[0];
  const exponent = ((bits >>> 23) & 0xff) - 127 + 15;
  return exponent <= 0 ? 0 : ((bits >>> 16) & 0x8000) | (exponent << 10) | ((bits >>> 13) & 0x3ff);
}

/** config.json + model.safetensors (F16): GPT-2 init (N(0, 0.02²) weights, zero biases, unit LayerNorms). */
export function gpt2SmallFiles(seed = 124) {
  const { n_layer: layers, n_embd: d, vocab_size: vocab, n_positions: positions } = GPT2_SMALL;
  const shapes = { 'wte.weight': [vocab, d], 'wpe.weight': [positions, d], 'ln_f.weight': [d], 'ln_f.bias': [d] };
  for (let l = 0; l < layers; l++) {
    Object.assign(shapes, {
      [`h.${l}.ln_1.weight`]: [d], [`h.${l}.ln_1.bias`]: [d],
      [`h.${l}.attn.c_attn.weight`]: [d, 3 * d], [`h.${l}.attn.c_attn.bias`]: [3 * d],
      [`h.${l}.attn.c_proj.weight`]: [d, d], [`h.${l}.attn.c_proj.bias`]: [d],
      [`h.${l}.ln_2.weight`]: [d], [`h.${l}.ln_2.bias`]: [d],
      [`h.${l}.mlp.c_fc.weight`]: [d, 4 * d], [`h.${l}.mlp.c_fc.bias`]: [4 * d],
      [`h.${l}.mlp.c_proj.weight`]: [4 * d, d], [`h.${l}.mlp.c_proj.bias`]: [d],
    });
  }
  const { file, regions } = allocateSafetensors(
    Object.entries(shapes).map(([name, shape]) => ({ name, dtype: 'F16', shape, byteLength: 2 * shape.reduce((a, b) => a * b) })),
  );
  const next = mulberry32(seed);
  // Box–Muller once into a table of 1024 normal values; weights draw table entries, 3 per random word.
  const normal = Uint16Array.from({ length: 1024 }, () => {
    const u = (next() + 1) / 2 ** 32;
    return f16Bits(0.02 * Math.sqrt(-2 * Math.log(u)) * Math.cos((2 * Math.PI * next()) / 2 ** 32));
  });
  for (const [name, bytes] of Object.entries(regions)) {
    const values = new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 2);
    if (/ln_.*\.weight$/.test(name)) {
      values.fill(f16Bits(1));
    } else if (name.endsWith('.weight')) {
      for (let i = 0; i < values.length; i += 3) {
        const word = next();
        values[i] = normal[word & 1023];
        values[i + 1] = normal[(word >>> 10) & 1023];
        values[i + 2] = normal[(word >>> 20) & 1023];
      }
    } // biases stay zero
  }
  const config = { model_type: 'gpt2', ...GPT2_SMALL, n_ctx: GPT2_SMALL.n_positions, layer_norm_epsilon: 1e-5, activation_function: 'gelu_new' };
  return { 'config.json': new TextEncoder().encode(JSON.stringify(config)), 'model.safetensors': file };
}

let checkpoint;

const median = (values) => [...values].sort((a, b) => a - b)[values.length >> 1];

/**
 * One worker with `threads`; for each capture mode, `runs` timed runs after one warm-up, each a
 * fresh session: prefill `prompt` tokens, then `decode` greedy steps (sampleNext appends its choice).
 */
export async function bench({ threads, runs, prompt, decode }) {
  checkpoint ??= gpt2SmallFiles();
  const engine = await createWorkerClient({ threads });
  try {
    let started = performance.now();
    // Copies move to the worker, so the next worker gets the same bytes.
    const copies = Object.fromEntries(Object.entries(checkpoint).map(([name, bytes]) => [name, bytes.slice()]));
    await engine.load(copies, { transfer: true });
    const loadMs = performance.now() - started;
    const tokens = Uint32Array.from({ length: prompt }, (_, i) => (i * 7919) % GPT2_SMALL.vocab_size);
    const modes = {};
    for (const [mode, capture] of [['off', []], ['all hooks', undefined]]) {
      const prefill = [];
      const decoding = [];
      for (let run = 0; run <= runs; run++) {
        const session = await engine.session();
        started = performance.now();
        const trace = await session.run(tokens, capture);
        const prefillMs = performance.now() - started;
        await trace.release();
        started = performance.now();
        for (let step = 0; step < decode; step++) await session.sampleNext({ temperature: 0 });
        const decodeMs = performance.now() - started;
        await session.close();
        if (run > 0) {
          prefill.push((1000 * prompt) / prefillMs);
          decoding.push((1000 * decode) / decodeMs);
        }
      }
      modes[mode] = { prefill: median(prefill), decode: median(decoding) };
    }
    return { backend: engine.backend(), loadMs, modes };
  } finally {
    engine.terminate();
  }
}
