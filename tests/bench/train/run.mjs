// `npm run bench:train`: gptlens's training throughput next to PyTorch's on the CPU, same shape,
// batch, data and optimizer (crate/examples/bench_train.rs and torch_train.py beside this file),
// and gptlens's wasm build in headless Chromium (page.mjs: the package's worker client, as the
// page's Train panel trains), in one alternating run: each round runs the three at 1 and at 2
// threads, the order rotated every round, the 1-minute load average read before every run. Reports
// each one's pooled median tokens/s with its min–max and the ratios of medians; a run that started
// with the load above the core count is marked and left out of the medians. Without Chromium or the
// wasm build (npm run build:wasm) the browser column says so.
//
//   TORCH_PYTHON=/path/to/venv/bin/python npm run bench:train [-- --rounds 5 --steps 40 --threads 1,2]
//
// PyTorch comes from a venv outside the repository (TORCH_PYTHON; default `python3`), e.g.
//   python3 -m venv ~/.cache/gptlens/torch && ~/.cache/gptlens/torch/bin/pip install torch transformers numpy
// A benchmark, never a test: it asserts nothing about time. Writes tests/output/bench-train.md.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { launchChromium, openPage, serve } from '../../support/browser.mjs';
import { cpuName, sourceVersion } from '../../support/machine.mjs';

const repo = fileURLToPath(new URL('../../..', import.meta.url));
const option = (name, fallback) => {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 ? process.argv[at + 1] : fallback;
};
const rounds = Number(option('rounds', '5'));
const steps = option('steps', '40');
const threadCounts = option('threads', '1,2').split(',').map(Number);
const python = process.env.TORCH_PYTHON ?? 'python3';
const data = `${repo}/assets/data/shakespeare.txt`;
if (!existsSync(data)) throw new Error(`${data} is missing: npm run setup fetches the corpus`);
try {
  execFileSync(python, ['-c', 'import torch, transformers, numpy'], { stdio: 'ignore' });
} catch {
  console.error(`${python} cannot import torch, transformers and numpy: set TORCH_PYTHON to a venv's python that can (see the top of this file)`);
  process.exit(1);
}

console.log('building the gptlens half (cargo build --release --example bench_train)…');
execFileSync('cargo', ['build', '--release', '--quiet', '--example', 'bench_train'], { cwd: repo, stdio: 'inherit' });
const engines = {
  gptlens: (threads) => [`${repo}/target/release/examples/bench_train`, ['--data', data, '--threads', String(threads), '--steps', steps]],
  pytorch: (threads) => [python, [`${repo}/tests/bench/train/torch_train.py`, '--data', data, '--threads', String(threads), '--steps', steps]],
};

// The browser half: the package's threaded build needs a cross-origin-isolated page.
let browser;
let server;
let page;
let browserMissing;
if (!existsSync(`${repo}/crate/js/dist/index.js`)) browserMissing = 'no wasm build (npm run build:wasm)';
else {
  try {
    server = await serve({ '/pkg/': `${repo}/crate/js`, '/tests/': `${repo}/tests`, '/data/': `${repo}/assets/data` }, { isolated: true, limitSeconds: 3600 });
    browser = await launchChromium();
    page = await openPage(browser, `${server.url}/tests/browser/index.html`);
  } catch (error) {
    browserMissing = `no headless Chromium (${error.message})`;
  }
}
engines.wasm = async (threads) =>
  page.evaluate((options) => import('/tests/bench/train/page.mjs').then((bench) => bench.trainBench(options)), {
    threads,
    steps: Number(steps),
    warmup: 5,
    textUrl: '/data/shakespeare.txt',
  });

const cores = cpus().length;
const results = []; // { engine, threads, tokensPerSecond, load, starved, label }
for (let round = 0; round < rounds; round++) {
  for (const threads of threadCounts) {
    const all = page ? ['gptlens', 'pytorch', 'wasm'] : ['gptlens', 'pytorch'];
    const order = all.map((_, i) => all[(i + round) % all.length]);
    for (const engine of order) {
      const load = loadavg()[0];
      let run;
      if (engine === 'wasm') run = await engines.wasm(threads);
      else {
        const [command, args] = engines[engine](threads);
        run = JSON.parse(execFileSync(command, args, { cwd: repo, encoding: 'utf8' }).trim().split('\n').at(-1));
      }
      // A side that ran on fewer threads than asked would make a false ratio.
      if (run.threads !== threads) throw new Error(`${engine} ran on ${run.threads} threads, not ${threads}`);
      results.push({ engine, threads, tokensPerSecond: run.tokensPerSecond, load, starved: load > cores, label: run.engine });
      console.log(`round ${round + 1}/${rounds} · ${engine} · ${threads} thread(s) · ${run.tokensPerSecond.toFixed(0)} tok/s · load ${load.toFixed(2)}`);
    }
  }
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};
const summary = (engine, threads) => {
  const runs = results.filter((r) => r.engine === engine && r.threads === threads);
  const used = runs.filter((r) => !r.starved).map((r) => r.tokensPerSecond);
  return { median: used.length ? median(used) : NaN, min: Math.min(...used), max: Math.max(...used), used: used.length, starved: runs.length - used.length };
};
const loads = results.map((r) => r.load);
const torchLabel = results.find((r) => r.engine === 'pytorch')?.label ?? 'pytorch';
const rows = threadCounts.map((threads) => {
  const [g, p, w] = [summary('gptlens', threads), summary('pytorch', threads), summary('wasm', threads)];
  const cell = (s) => `${s.median.toFixed(0)} (${s.min.toFixed(0)}–${s.max.toFixed(0)}, ${s.used} runs${s.starved ? `, ${s.starved} starved left out` : ''})`;
  const browserCells = page ? `${cell(w)} | ${(w.median / g.median).toFixed(2)}×` : `${browserMissing} | –`;
  return `| ${threads} | ${cell(g)} | ${cell(p)} | **${(g.median / p.median).toFixed(2)}×** | ${browserCells} |`;
});
const table = [
  `Training throughput, tokens (bytes) per second: 4 layers × 4 heads × 128 wide, context 64, batch 12, AdamW + clipping, ${steps} timed steps after 5 untimed, ${rounds} alternating rounds; ${cores} cores (${cpuName()}), the source of ${sourceVersion()}, load ${Math.min(...loads).toFixed(2)}–${Math.max(...loads).toFixed(2)} before the runs; PyTorch: ${torchLabel}.`,
  '',
  '| threads | gptlens native: median (min–max) | PyTorch: median (min–max) | gptlens / PyTorch | gptlens wasm in Chromium: median (min–max) | wasm / native |',
  '|---|---|---|---|---|---|',
  ...rows,
].join('\n');
await browser?.close();
await server?.close();
console.log(`\n${table}`);
mkdirSync(`${repo}/tests/output`, { recursive: true });
writeFileSync(`${repo}/tests/output/bench-train.md`, `${table}\n`);
