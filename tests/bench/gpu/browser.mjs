// npm run bench:gpu, browser half: whole forward passes of the npm package in headless Chromium
// on backend 'webgpu' (SwiftShader here: Chromium's software WebGPU adapter) next to backend 'cpu'
// (the same single-thread wasm build), for the tiny fixtures and SmolLM2-135M Q4_1. Each model:
// one worker per backend, one untimed warm-up each, then rounds alternating webgpu and cpu runs
// (a run: a prefill, capture off, then decode steps one token at a time), the 1-minute load
// average read before every run; medians with min–max. Prints a table and writes
// tests/output/bench-gpu-browser.md. A benchmark, not a test: nothing about time is asserted.
// Stops itself after LIMIT_SECONDS.
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { loadavg, cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import { launchChromium, openPage, serve } from '../../support/browser.mjs';
import { cpuName, sourceVersion } from '../../support/machine.mjs';

const LIMIT_SECONDS = 720;
const repo = fileURLToPath(new URL('../../..', import.meta.url));
const SMOLLM = 'assets/models/SmolLM2-135M-Instruct.Q4_1.gguf';

// Rounds per model; `gpuRuns` of them also time the GPU (spread evenly); decode steps per run.
const MODELS = [
  { title: 'gpt2-tiny-f32 (fixture)', files: { 'config.json': '/tests/fixtures/gpt2-tiny-f32/config.json', 'model.safetensors': '/tests/fixtures/gpt2-tiny-f32/model.safetensors' }, rounds: 5, gpuRuns: 5, decode: 16, gpuDecode: 16 },
  { title: 'llama-tiny-q (fixture, Q8_0/Q4_0/Q4_1/K-quants/F16)', files: { 'model.gguf': '/tests/fixtures/llama-tiny-q/model.gguf' }, rounds: 5, gpuRuns: 5, decode: 16, gpuDecode: 16 },
  // SwiftShader takes ~3 minutes for this prefill and ~9 s per decode step (2 shared cores): one WebGPU run.
  { title: 'SmolLM2-135M-Instruct Q4_1', files: { 'model.gguf': '/models/SmolLM2-135M-Instruct.Q4_1.gguf' }, rounds: 5, gpuRuns: 1, decode: 16, gpuDecode: 2, needs: SMOLLM },
];

// `node browser.mjs smollm2 tiny-q`: only the models whose title contains one of the words.
const only = process.argv.length > 2 ? process.argv.slice(2).map((word) => word.toLowerCase()) : undefined;

setTimeout(() => {
  console.error(`bench:gpu (browser): stopped after ${LIMIT_SECONDS} s`);
  process.exit(1);
}, LIMIT_SECONDS * 1000).unref();

const started = Date.now();
const load = () => loadavg()[0];
const lines = [];
const say = (text = '') => {
  console.log(text);
  lines.push(text);
};
const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};
const num = (x) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x >= 1 ? x.toFixed(2) : x.toFixed(3));

/** A markdown table padded to line up in a terminal too; columns from `firstNumber` on right-aligned. */
function table(header, rows, firstNumber = 2) {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i].length)));
  const right = (i) => i >= firstNumber;
  const line = (cells) => `| ${cells.map((cell, i) => (right(i) ? cell.padStart(widths[i]) : cell.padEnd(widths[i]))).join(' | ')} |`;
  return [line(header), `|${widths.map((w, i) => (right(i) ? `${'-'.repeat(w + 1)}:` : '-'.repeat(w + 2))).join('|')}|`, ...rows.map(line)].join('\n');
}

say('# gptlens in headless Chromium: WebGPU vs CPU (single-thread build)\n');
say(`${cpuName()}, ${cpus().length} cores, the source of ${sourceVersion()}; load average ${load().toFixed(2)} at start.`);
const server = await serve({ '/pkg/': `${repo}/crate/js`, '/tests/': `${repo}/tests`, '/models/': `${repo}/assets/models` }, { isolated: false, limitSeconds: LIMIT_SECONDS });
const browser = await launchChromium();
say(`Chromium ${browser.version()} (headless, --enable-unsafe-webgpu).`);
const summary = [];
try {
  const page = await openPage(browser, `${server.url}/tests/browser/index.html`);
  const call = (name, ...args) => page.evaluate(([name, args]) => import('/tests/bench/gpu/page.mjs').then((bench) => bench[name](...args)), [name, args]);
  const adapter = await call('webgpuAdapter');
  if (adapter.missing) {
    say(`No WebGPU adapter (${adapter.missing}): CPU runs only.`);
  } else {
    const { vendor, architecture, description, isFallbackAdapter, timestamps } = adapter;
    say(`WebGPU adapter: ${[vendor, architecture, description].filter(Boolean).join(' ')}${isFallbackAdapter ? ' (fallback adapter)' : ''}; timestamp-query ${timestamps ? 'offered' : 'not offered'} (whole-pass times only here).`);
  }
  for (const model of MODELS) {
    if (only && !only.some((word) => model.title.toLowerCase().includes(word))) continue;
    if (model.needs && !existsSync(`${repo}/${model.needs}`)) {
      say(`\n## ${model.title}\n\nSkipped: ${model.needs} is absent (bash scripts/fetch-smollm.sh fetches it).`);
      continue;
    }
    summary.push(...(await benchModel(call, model, !adapter.missing)));
    await call('closeAll');
  }
} finally {
  await browser.close();
  await server.close();
}

say(`\n## Summary (medians)\n\n${table(['model', 'backend', 'prefill tok/s', 'decode tok/s', 'load 1 min'], summary)}`);
say(`\nbench:gpu (browser): ${((Date.now() - started) / 1000).toFixed(0)} s, load average ${load().toFixed(2)} at the end`);
mkdirSync(`${repo}/tests/output`, { recursive: true });
writeFileSync(`${repo}/tests/output/bench-gpu-browser.md`, `${lines.join('\n')}\n`);
console.log(`report: ${repo}tests/output/bench-gpu-browser.md`);

async function benchModel(call, model, withGpu) {
  const bytes = await call('fetchModel', model.files);
  const backends = [];
  const notes = [];
  for (const backend of withGpu ? ['webgpu', 'cpu'] : ['cpu']) {
    try {
      const opened = await call('open', backend);
      backends.push({ backend, ...opened });
      notes.push(`- ${backend}: ${opened.placed.reason}; wasm build ${opened.build.reason}; loaded in ${(opened.loadMs / 1000).toFixed(1)} s`);
    } catch (error) {
      notes.push(`- ${backend}: not run: ${error.message.split('\n')[0]}`);
    }
  }
  const info = backends[0]?.info;
  if (!info) {
    say(`\n## ${model.title}\n\n${notes.join('\n')}`);
    return [];
  }
  const prompt = Math.min(64, Math.floor(info.contextLength / 2));
  const decode = Math.min(model.decode, info.contextLength - prompt);
  const gpuDecode = Math.min(model.gpuDecode, decode);
  const tokens = Array.from({ length: prompt + decode }, (_, i) => (i * 7919) % info.vocabSize);
  say(`\n## ${model.title}\n`);
  say(`${info.nLayer} layers, d_model ${info.dModel}, vocab ${info.vocabSize}, context ${info.contextLength}; ${(bytes / 1e6).toFixed(1)} MB of files. Capture off; prefill ${prompt} tokens, then decode steps one token at a time (${decode} on the CPU, ${gpuDecode} on WebGPU); ${model.rounds} rounds, ${Math.min(model.gpuRuns, model.rounds)} of them with a WebGPU run.\n`);
  say(notes.join('\n'));

  const steps = (backend) => tokens.slice(prompt, prompt + (backend === 'webgpu' ? gpuDecode : decode));
  // Warm-up, untimed: a 1-token pass on the GPU (its buffers and pipelines exist already), a whole run on the CPU.
  for (const { backend } of backends) {
    const warm = backend === 'webgpu'
      ? await call('run', backend, tokens.slice(0, 1), [])
      : await call('run', backend, tokens.slice(0, prompt), steps(backend));
    const decoded = backend === 'webgpu' ? '' : `, decode ${num(warm.stepMs)} ms/token`;
    console.error(`  ${model.title}, warm-up, ${backend}: prefill ${num(warm.prefillMs)} ms${decoded}`);
  }
  const runs = Object.fromEntries(backends.map(({ backend }) => [backend, []]));
  const gpuRuns = Math.min(model.gpuRuns, model.rounds);
  for (let round = 0; round < model.rounds; round++) {
    const gpuRound = Math.floor(((round + 1) * gpuRuns) / model.rounds) > Math.floor((round * gpuRuns) / model.rounds);
    for (const { backend } of backends) {
      if (backend === 'webgpu' && !gpuRound) continue;
      const before = load();
      const run = await call('run', backend, tokens.slice(0, prompt), steps(backend));
      runs[backend].push({ ...run, load: before });
      console.error(`  ${model.title}, round ${round + 1}, ${backend}: prefill ${num(run.prefillMs)} ms, decode ${num(run.stepMs)} ms/token (load ${before.toFixed(2)})`);
    }
  }
  const rows = [];
  const summaryRows = [];
  for (const [backend, list] of Object.entries(runs)) {
    const range = (values, f) => `${num(f(median(values)))} (${num(Math.min(...values.map(f)))}–${num(Math.max(...values.map(f)))})`;
    const pre = list.map((r) => r.prefillMs);
    const step = list.map((r) => r.stepMs);
    const loads = list.map((r) => r.load);
    const loadRange = `${Math.min(...loads).toFixed(2)}–${Math.max(...loads).toFixed(2)}`;
    rows.push([backend, String(list.length), range(pre, (x) => x), range(pre, (x) => (1000 * prompt) / x), range(step, (x) => x), range(step, (x) => 1000 / x), loadRange]);
    summaryRows.push([model.title, backend, num((1000 * prompt) / median(pre)), num(1000 / median(step)), loadRange]);
  }
  say(`\n${table(['backend', 'runs', 'prefill ms (min–max)', 'prefill tok/s (min–max)', 'decode ms/token (min–max)', 'decode tok/s (min–max)', 'load 1 min'], rows, 1)}`);
  return summaryRows;
}
