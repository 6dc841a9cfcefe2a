// Runs in the bench page of `npm run bench:peers` (served cross-origin isolated by run.mjs):
// one engine per page, set up once, then timed runs one call at a time so run.mjs can read the
// machine load and the browser's CPU time around each.
//   gptlens: the package's direct API in a module Worker (gptlens-worker.mjs).
//   wllama:  @wllama/wllama (llama.cpp → wasm), the GGUF as a Blob, n_threads explicit, CPU only.
const WLLAMA = '/peers/@wllama/wllama/esm';

let engine;

async function modelBytes(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}

/** A request/response channel to the gptlens bench worker. */
function connect(worker) {
  const pending = new Map();
  let next = 1;
  worker.onmessage = ({ data: { id, ok, result, error } }) => {
    const { resolve, reject } = pending.get(id);
    pending.delete(id);
    ok ? resolve(result) : reject(new Error(error));
  };
  worker.onerror = (event) => {
    for (const { reject } of pending.values()) reject(new Error(`bench worker failed: ${event.message}`));
    pending.clear();
  };
  return (op, args, transfer = []) =>
    new Promise((resolve, reject) => {
      const id = next++;
      pending.set(id, { resolve, reject });
      worker.postMessage({ id, op, args }, transfer);
    });
}

export async function setupGptlens({ threads, prompt, model }) {
  const bytes = await modelBytes(model);
  const worker = new Worker('/tests/bench/peers/gptlens-worker.mjs', { type: 'module' });
  const call = connect(worker);
  const setup = await call('setup', { threads, bytes, prompt }, [bytes.buffer]);
  engine = { run: (options) => call('run', options), close: () => worker.terminate() };
  return { crossOriginIsolated, ...setup };
}

export async function setupWllama({ threads, prompt, model }) {
  const { Wllama } = await import(`${WLLAMA}/index.js`);
  const bytes = await modelBytes(model);
  // The worker that loads the .wasm runs from a blob: URL, so give it an absolute address.
  const wllama = new Wllama({ default: new URL(`${WLLAMA}/wasm/wllama.wasm`, location.href).href }, { suppressNativeLog: true });
  const started = performance.now();
  // Flash attention off, as for native llama.cpp in llama-native.mjs and llama-bench.
  await wllama.loadModel([new Blob([bytes])], { n_threads: threads, n_gpu_layers: 0, n_ctx: 512, n_batch: 512, flash_attn: false });
  const loadMs = performance.now() - started;
  engine = {
    // wllama takes the prompt as text (token ids fail in 3.8.1) and tokenizes it with llama.cpp;
    // run.mjs checks that `prompt_n` equals the gptlens token count. `max_tokens: decode + 1`
    // because the first token comes from the prefill logits.
    async run({ prompt, decode }) {
      const started = performance.now();
      const response = await wllama.createCompletion({
        prompt,
        max_tokens: decode + 1,
        temperature: 0,
        top_k: 1,
        ignore_eos: true,
        cache_prompt: false,
      });
      const wallMs = performance.now() - started;
      const { timings, usage } = response;
      return {
        // timings are llama-server's: prompt_ms covers the prompt batch; predicted_ms runs from
        // the first sampled token to the last, i.e. predicted_n - 1 decode steps.
        prefillMs: timings.prompt_ms,
        prefillTokens: timings.prompt_n,
        decodeMs: timings.predicted_ms,
        decodeSteps: timings.predicted_n - 1,
        wallMs,
        usage,
        timings,
        text: response.choices[0].text,
      };
    },
    close: () => wllama.exit(),
  };
  return {
    crossOriginIsolated,
    loadMs,
    threads: wllama.getNumThreads(),
    flashAttention: false,
    multithread: wllama.isMultithread(),
    libllama: Wllama.getLibllamaVersion?.(),
    context: wllama.getLoadedContextInfo?.(),
  };
}

export function run(options) {
  return engine.run(options);
}

export async function close() {
  await engine?.close();
  engine = undefined;
}
