// `npm run bench:train`: gptlens's training throughput next to PyTorch's on the CPU, same shape,
// batch, data and optimizer (crate/examples/bench_train.rs and torch_train.py beside this file), in
// one alternating run: each round runs both engines at 1 and at 2 threads, the order of the two
// flipped every round, the 1-minute load average read before every run. Reports each side's pooled
// median tokens/s with its min–max and the ratio of medians; a run that started with the load above
// the core count is marked and left out of the medians.
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

const cores = cpus().length;
const results = []; // { engine, threads, tokensPerSecond, load, starved, label }
for (let round = 0; round < rounds; round++) {
  for (const threads of threadCounts) {
    const order = round % 2 === 0 ? ['gptlens', 'pytorch'] : ['pytorch', 'gptlens'];
    for (const engine of order) {
      const load = loadavg()[0];
      const [command, args] = engines[engine](threads);
      const line = execFileSync(command, args, { cwd: repo, encoding: 'utf8' }).trim().split('\n').at(-1);
      const run = JSON.parse(line);
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
  const [g, p] = [summary('gptlens', threads), summary('pytorch', threads)];
  const cell = (s) => `${s.median.toFixed(0)} (${s.min.toFixed(0)}–${s.max.toFixed(0)}, ${s.used} runs${s.starved ? `, ${s.starved} starved left out` : ''})`;
  return `| ${threads} | ${cell(g)} | ${cell(p)} | **${(g.median / p.median).toFixed(2)}×** |`;
});
const table = [
  `Training throughput, tokens (bytes) per second: 4 layers × 4 heads × 128 wide, context 64, batch 12, AdamW + clipping, ${steps} timed steps after 5 untimed, ${rounds} alternating rounds; ${cores} cores, load ${Math.min(...loads).toFixed(2)}–${Math.max(...loads).toFixed(2)} before the runs; PyTorch: ${torchLabel}.`,
  '',
  '| threads | gptlens: median (min–max) | PyTorch: median (min–max) | gptlens / PyTorch |',
  '|---|---|---|---|',
  ...rows,
].join('\n');
console.log(`\n${table}`);
mkdirSync(`${repo}/tests/output`, { recursive: true });
writeFileSync(`${repo}/tests/output/bench-train.md`, `${table}\n`);
