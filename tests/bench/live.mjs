// `npm run bench:live`: the page at typing speed, as a person uses it. For each model it opens the
// built page on a prompt of about 64 tokens, types 40 keystrokes at 8 keys/s, and reads the page's
// own User Timing measures: keystroke → every view redrawn (`gptlens:keystroke→redraw`) and the
// stages of each redraw (`gptlens:stage:*`: tokenize, forward, next token in the Worker; the
// rest of the round trip; views; paint). Three
// runs per model; figures are pooled over the runs (median, p95) with each run's median beside
// them. Cold start is navigation → first probabilities painted (`gptlens:first-probabilities`),
// from an empty HTTP cache and from a warm one (`?snapshot=off`: the file read and packed), and
// for a .gguf, from a warm one with the snapshot of its packed weights kept in the browser (the
// page writes it and the bench waits before the warm start; it stops if the page then did not
// load the snapshot). Each run is a fresh browser profile, whose HTTP cache is on disk. A bench,
// not a test: it checks no figure, and prints a Markdown report (also written to
// tests/output/bench-live.md).
//
//   LIVE_RUNS=3  LIVE_THREADS=2  LIVE_MODELS=assets/gptlens-shakespeare,fixtures/gpt2-tiny-f32,assets/SmolLM2-135M-Instruct.Q4_1.gguf
//
// LIVE_TRACE=1 adds one more run per model with Chromium's tracing on, and a table that splits
// the keystroke's frame into the browser's phases (tests/bench/keystroke-trace.mjs).
//
// LIVE_NOTES=closed closes every panel's "how to read this" note before typing, as a returning
// reader has them: more of the views are then on screen (the whole attention grid, the next-token
// list, the LayerNorm strips' top), where a first visit's notes push them below the fold.
//
// LIVE_BUILDS=/tmp/before,/tmp/after (directories of built pages: copies of web/dist) compares
// builds instead: each run types into every build in turn, alternating, so that a machine whose
// speed drifts during the bench drifts for all of them; it reports keystroke → redraw per build.
import { loadavg } from 'node:os';
import { launchProfile } from '../support/browser.mjs';
import { servePage } from '../web/page-server.mjs';
import { PHASES, startTrace } from './keystroke-trace.mjs';
import { benchEachModel } from './page-models.mjs';

const RUNS = Number(process.env.LIVE_RUNS ?? 3);
const THREADS = process.env.LIVE_THREADS ?? '2';
const TRACE = process.env.LIVE_TRACE === '1';
const NOTES_CLOSED = process.env.LIVE_NOTES === 'closed';
const KEYS = 40;
const RATE = 8;
const MODELS = (process.env.LIVE_MODELS ?? 'assets/gptlens-shakespeare,fixtures/gpt2-tiny-f32,assets/SmolLM2-135M-Instruct.Q4_1.gguf').split(',');
// About 64 tokens for SmolLM2's BPE (and a byte model's 64 bytes); the tiny GPT-2 reads at most
// 64 tokens in all, so it starts shorter to leave room for what is typed.
const PROMPTS = {
  default:
    'The history of the printing press begins in the fifteenth century, when Johannes Gutenberg combined movable metal type, oil-based ink and a wooden press adapted from those used for wine. Within fifty years presses were working in more than two hundred cities across Europe, and the',
  'assets/gptlens-shakespeare': 'ROMEO:\nBut soft, what light through yonder window breaks? It is th',
  'fixtures/gpt2-tiny-f32': 'The cat sat on',
};
const TYPED = ' and then the printer said that the work';
const STAGES = ['tokenize', 'forward', 'next-token', 'transfer', 'views', 'paint'];
const TARGETS = { 'assets/SmolLM2-135M-Instruct.Q4_1.gguf': { median: 50, p95: 80 }, tiny: { median: 8, p95: 16 } };

const quantile = (values, q) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? undefined : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
};
const ms = (value) => (value === undefined ? '–' : value.toFixed(1));

/** Counts the messages the page posts to Workers (the engine's), and collects long tasks and the
 * page's measures as they are made (the page clears its older ones). */
function instrument() {
  window.live = { messages: 0, longTasks: [], measures: [] };
  const post = Worker.prototype.postMessage;
  Worker.prototype.postMessage = function (...args) {
    window.live.messages++;
    return post.apply(this, args);
  };
  new PerformanceObserver((list) => window.live.longTasks.push(...list.getEntries().map((entry) => entry.duration))).observe({ type: 'longtask' });
  new PerformanceObserver((list) => {
    for (const { name, duration, detail } of list.getEntries()) if (name.startsWith('gptlens:')) window.live.measures.push({ name, duration, detail });
  }).observe({ type: 'measure' });
}

/** The page on `model` and `prompt`; `snapshot: false` loads a .gguf from its file even where a snapshot of its weights is kept. */
function address(url, model, prompt, snapshot = true) {
  return `${url}/?${new URLSearchParams({ model, prompt, threads: THREADS, ...(snapshot ? {} : { snapshot: 'off' }) })}`;
}

/**
 * Navigation → first probabilities painted, in ms (`ms`), and its parts: until the page asks for
 * the model (`boot`), the model's load (`load`; of it, `workerWait`: waiting for its Worker,
 * whose own start, `worker`, begins as the page opens), the prompt's first forward pass in the
 * Worker (`forward`, `tokens` computed), and the rest (encoding, the next token, the answer's way
 * back, the views and their paint).
 */
async function coldStart(page, url, model, snapshot = true) {
  await page.goto(address(url, model, PROMPTS[model] ?? PROMPTS.default, snapshot));
  await page.waitForFunction(() => performance.getEntriesByName('gptlens:first-probabilities').length > 0, null, { timeout: 300_000 });
  return page.evaluate(() => {
    const ms = performance.getEntriesByName('gptlens:first-probabilities')[0].startTime;
    const load = performance.getEntriesByName('gptlens:load')[0];
    const forward = performance.getEntriesByName('gptlens:stage:forward')[0];
    const worker = performance.getEntriesByName('gptlens:worker-start')[0];
    const workerWait = load && worker ? Math.max(0, worker.startTime + worker.duration - load.startTime) : undefined;
    const boot = load?.startTime;
    const rest = load && forward ? ms - load.startTime - load.duration - forward.duration : undefined;
    const snapshot = load?.detail?.snapshot;
    return { ms, boot, load: load?.duration, worker: worker?.duration, workerWait, forward: forward?.duration, tokens: forward?.detail?.computed, rest, snapshot };
  });
}

/** Types into the page; with `traced`, under Chromium's tracing, and the keystrokes' frames come back too. */
async function typingRun(page, url, model, traced = false) {
  await page.goto(address(url, model, PROMPTS[model] ?? PROMPTS.default));
  await page.getByTestId('candidate').first().waitFor({ timeout: 300_000 });
  // Closed notes stay closed (the page remembers them) for the context's later pages.
  const openNote = page.locator('.howto-close:visible').first();
  while (NOTES_CLOSED && (await openNote.count()) > 0) await openNote.click();
  // Closing a note scrolls to it and moves the focus to its panel's "?": back to the top.
  if (NOTES_CLOSED) await page.evaluate(() => window.scrollTo(0, 0));
  const box = page.getByTestId('prompt');
  await box.click();
  await box.press('Control+End'); // the end of the text (End alone ends the line the click landed on)
  await page.waitForTimeout(500);
  await page.evaluate(() => {
    window.live.messages = 0;
    window.live.longTasks.length = 0;
    window.live.measures.length = 0;
  });
  const stopTrace = traced ? await startTrace(page) : undefined;
  const started = performance.now();
  for (let key = 0; key < KEYS; key++) {
    const wait = started + (key * 1000) / RATE - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    await page.keyboard.type(TYPED[key]);
  }
  await page.waitForTimeout(1500); // the last keystrokes' redraws
  const frames = await stopTrace?.();
  const typed = await page.evaluate((stages) => {
    const { measures, messages, longTasks } = window.live;
    const durations = (name) => measures.filter((entry) => entry.name === name).map((entry) => entry.duration);
    const forward = measures.filter((entry) => entry.name === 'gptlens:stage:forward');
    return {
      redraws: durations('gptlens:keystroke→redraw'),
      stages: Object.fromEntries(stages.map((stage) => [stage, durations(`gptlens:stage:${stage}`)])),
      paintParts: measures.filter((entry) => entry.name === 'gptlens:stage:paint').map((entry) => entry.detail),
      tokens: forward.at(-1)?.detail?.tokens,
      computed: forward.map((entry) => entry.detail?.computed),
      messages,
      longTasks,
    };
  }, STAGES);
  return { ...typed, frames };
}

/**
 * The floor under every figure: keystroke → next paint measured the same way (input event, then
 * the task after the next animation frame) in a bare text box of the same page, with no work at
 * all. No redraw can beat it; at 60 frames a second it is about half a frame plus the browser's
 * own work for the keystroke.
 */
async function floorRun(page) {
  await page.evaluate(() => {
    const box = document.createElement('textarea');
    box.id = 'bench-floor';
    box.style.cssText = 'position:fixed;left:0;top:0;width:120px;height:24px;z-index:99';
    window.floor = [];
    box.addEventListener('input', () => {
      const start = performance.now();
      requestAnimationFrame(() => {
        const frame = performance.now();
        setTimeout(() => {
          const now = performance.now();
          window.floor.push({ ms: now - start, renderMs: now - frame });
        }, 0);
      });
    });
    document.body.append(box);
    box.focus();
  });
  const started = performance.now();
  for (let key = 0; key < KEYS; key++) {
    const wait = started + (key * 1000) / RATE - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    await page.keyboard.type('x');
  }
  await page.waitForTimeout(300);
  return page.evaluate(() => window.floor);
}

/** Loads the page with snapshots on and waits until it has written the snapshot of the model's weights. */
async function writeSnapshot(page, url, model) {
  await coldStart(page, url, model);
  await page.waitForFunction(() => performance.getEntriesByName('gptlens:snapshot-kept').length > 0, null, { timeout: 300_000 });
}

/** A cold start from a warm HTTP cache with the snapshot of the model's weights kept: the page must load it from there. */
async function fromSnapshot(page, url, model) {
  const start = await coldStart(page, url, model);
  if (start.snapshot !== 'restored') throw new Error(`${model}: the page did not load the snapshot it had written (its load says ${start.snapshot})`);
  return start;
}

/**
 * A page in a fresh browser profile, with the page's instruments: its HTTP cache on disk, as a
 * person's browser has (an incognito context kept no 98 MB model: see `launchProfile`).
 */
async function freshPage() {
  const profile = await launchProfile({ viewport: { width: 1280, height: 800 } });
  await profile.context.addInitScript(instrument);
  return { page: await profile.context.newPage(), close: profile.close };
}

async function benchModel(_browser, url, model) {
  const cold = [];
  const warm = [];
  const restored = [];
  const runs = [];
  for (let run = 0; run < RUNS; run++) {
    // A fresh profile has an empty HTTP cache: its first navigation is a cold start, the next a warm one.
    const { page, close } = await freshPage();
    cold.push(await coldStart(page, url, model, false));
    // With a snapshot to compare, it is written first: then each measured start, from the file
    // (warm HTTP cache) and from the snapshot, follows another load of the page.
    const gguf = model.endsWith('.gguf');
    if (gguf) await writeSnapshot(page, url, model);
    warm.push(await coldStart(page, url, model, false));
    if (gguf) restored.push(await fromSnapshot(page, url, model));
    const typing = await typingRun(page, url, model);
    const floor = await floorRun(page);
    runs.push({ load: loadavg()[0], ...typing, floor: floor.map((f) => f.ms), floorRender: floor.map((f) => f.renderMs) });
    await close();
  }
  let traced;
  if (TRACE) {
    const { page, close } = await freshPage();
    traced = (await typingRun(page, url, model, true)).frames;
    await close();
  }
  return { model, cold, warm, restored, runs, traced };
}

function report({ model, cold, warm, restored, runs, traced }) {
  const target = TARGETS[model] ?? TARGETS.tiny;
  const redraws = runs.flatMap((run) => run.redraws);
  const median = quantile(redraws, 0.5);
  const p95 = quantile(redraws, 0.95);
  const verdict = (value, limit) => (value === undefined ? '–' : value <= limit ? `met (≤ ${limit})` : `**not met** (target ≤ ${limit})`);
  const lines = [
    `### ${model}`,
    '',
    `${runs.length} runs × ${KEYS} keystrokes at ${RATE}/s (${runs[0]?.tokens ?? '?'} tokens at the end), ${THREADS} threads.`,
    '',
    '| figure | pooled median | pooled p95 | per-run medians | target |',
    '|---|--:|--:|---|---|',
    `| keystroke → every view redrawn (ms) | ${ms(median)} | ${ms(p95)} | ${runs.map((run) => ms(quantile(run.redraws, 0.5))).join(' · ')} | median ${verdict(median, target.median)}, p95 ${verdict(p95, target.p95)} |`,
  ];
  for (const stage of STAGES) {
    const values = runs.flatMap((run) => run.stages[stage]);
    const budget = { tokenize: 1, 'next-token': 1, views: 6 }[stage];
    lines.push(`| stage: ${stage} (ms) | ${ms(quantile(values, 0.5))} | ${ms(quantile(values, 0.95))} | ${runs.map((run) => ms(quantile(run.stages[stage], 0.5))).join(' · ')} | ${budget === undefined ? '' : `median ${verdict(quantile(values, 0.5), budget)}`} |`);
  }
  // The paint stage in two: the wait for the browser's next frame, then that frame's work.
  const paintPart = (key) => (run) => run.paintParts.map((detail) => detail?.[key]).filter((value) => value !== undefined);
  for (const [label, values] of [
    ['paint: waiting for the next frame', paintPart('frameWaitMs')],
    ["paint: the frame's own work (style, layout, paint)", paintPart('renderMs')],
    ["floor: the frame's own work for the bare text box", (run) => run.floorRender],
  ]) {
    const all = runs.flatMap(values);
    lines.push(`| ${label} (ms) | ${ms(quantile(all, 0.5))} | ${ms(quantile(all, 0.95))} | ${runs.map((run) => ms(quantile(values(run), 0.5))).join(' · ')} | |`);
  }
  const redrawCount = runs.reduce((sum, run) => sum + run.redraws.length, 0);
  const messages = runs.reduce((sum, run) => sum + run.messages, 0);
  const computed = runs.flatMap((run) => run.computed.filter((value) => value !== undefined));
  const longTasks = runs.flatMap((run) => run.longTasks);
  const [coldMs, warmMs, restoredMs] = [cold, warm, restored].map((starts) => starts.map((start) => start.ms));
  lines.push(
    `| floor: keystroke → next paint with no work (ms) | ${ms(quantile(runs.flatMap((run) => run.floor), 0.5))} | ${ms(quantile(runs.flatMap((run) => run.floor), 0.95))} | ${runs.map((run) => ms(quantile(run.floor, 0.5))).join(' · ')} | |`,
    `| cold start, empty HTTP cache (ms) | ${ms(quantile(coldMs, 0.5))} | | ${coldMs.map(ms).join(' · ')} | |`,
    `| cold start, warm HTTP cache (ms) | ${ms(quantile(warmMs, 0.5))} | | ${warmMs.map(ms).join(' · ')} | ${model.includes('SmolLM2') ? `median ${verdict(quantile(warmMs, 0.5), 1000)}` : ''} |`,
    ...(restoredMs.length === 0
      ? []
      : [
          `| cold start, warm HTTP cache and the weights' snapshot kept (ms) | ${ms(quantile(restoredMs, 0.5))} | | ${restoredMs.map(ms).join(' · ')} | ${model.includes('SmolLM2') ? `median ${verdict(quantile(restoredMs, 0.5), 1000)}` : ''} |`,
          `| — of it, the model loaded from the snapshot (ms) | ${ms(quantile(restored.map((start) => start.load), 0.5))} | | ${restored.map((start) => ms(start.load)).join(' · ')} | |`,
        ]),
    ...[
      ['until the page asks for the model', 'boot'],
      ['the model loaded (its Worker started, the file read into the weights, the views built)', 'load'],
      ['of the load: waiting for its Worker', 'workerWait'],
      ["its Worker's start, begun as the page opens (the wasm module, the thread pool)", 'worker'],
      [`the prompt's first forward pass (${warm[0]?.tokens ?? '?'} positions)`, 'forward'],
      ['the rest (encoding, next token, the answer back, views, paint)', 'rest'],
    ].map(([label, part]) => {
      const parts = warm.map((start) => start[part]).filter((value) => value !== undefined);
      return `| — ${label} (ms) | ${ms(quantile(parts, 0.5))} | | ${parts.map(ms).join(' · ')} | |`;
    }),
    '',
    `Redraws: ${redrawCount} for ${runs.length * KEYS} keystrokes (coalesced keystrokes share one); page → Worker messages per redraw: ${(messages / Math.max(1, redrawCount)).toFixed(1)}; ` +
      `positions computed per forward pass: median ${quantile(computed, 0.5) ?? '–'}, most ${computed.length ? Math.max(...computed) : '–'}; ` +
      `main-thread long tasks while typing: ${longTasks.length}${longTasks.length ? `, longest ${ms(Math.max(...longTasks))} ms` : ''}; load (1 min) at each run: ${runs.map((run) => run.load.toFixed(2)).join(' · ')}.`,
    '',
  );
  const moved = floorMoved(runs.map((run) => quantile(run.floor, 0.5)));
  if (moved) lines.push(moved, '');
  if (traced) lines.push(...traceLines(traced));
  return lines.join('\n');
}

/** LIVE_TRACE's run: each part of the keystroke's frame, its median over the keystrokes. */
function traceLines(frames) {
  const median = (values) => ms(quantile(values, 0.5));
  const lines = [
    `Traced (LIVE_TRACE=1: one more run, tracing on, so every part is slower than above): the keystroke's frame, median over ${frames.length} keystrokes (ms).`,
    '',
    '| part | median |',
    '|---|--:|',
    `| keystroke → its frame begins | ${median(frames.map((frame) => frame.toFrame))} |`,
    `| **the frame** | **${median(frames.map((frame) => frame.frame))}** |`,
    ...PHASES.map(([label], i) => `| — ${label} | ${median(frames.map((frame) => frame.phases[i]))} |`),
    `| after the frame, until the page's measure of the paint ends | ${median(frames.map((frame) => frame.afterFrame))} |`,
  ];
  // The tasks after the frame, by where Chromium posted them, the busiest first.
  const sources = new Map();
  for (const frame of frames) for (const [source, took] of frame.after) sources.set(source, [...(sources.get(source) ?? []), took]);
  const total = (took) => took.reduce((sum, ms) => sum + ms, 0);
  const busiest = [...sources].sort((a, b) => total(b[1]) - total(a[1])).slice(0, 5);
  for (const [source, took] of busiest) lines.push(`| — a task from \`${source}\` (in ${took.length} of ${frames.length}) | ${median(took)} |`);
  lines.push(
    '',
    "Tasks are named by where Chromium posted them. Seen so far: `EnqueueEvent`, the keystroke's `selectionchange`; `FormControlDidChange`, Chromium's autofill tracking of the edited field (it lays out what changed); `DOMTimer`, the page's measure itself; `PostMessageToWorkerObject`, the Worker's note for an answer the frame already took.",
    '',
  );
  return lines;
}

/** How much the floor may move between runs of one model before the report says so. */
const FLOOR_DRIFT = 0.25;

/**
 * A warning when the floor's per-run medians differ by more than FLOOR_DRIFT: the same page doing
 * nothing took longer, so the machine's speed changed between runs (other load, a slower spell),
 * and the runs' figures differ by that much for reasons of their own. (LIVE_BUILDS runs measure no
 * floor: there the builds' alternation is what answers drift.)
 */
function floorMoved(perRun) {
  const floors = perRun.filter((floor) => floor !== undefined && floor > 0);
  if (floors.length < 2) return undefined;
  const [low, high] = [Math.min(...floors), Math.max(...floors)];
  if (high <= low * (1 + FLOOR_DRIFT)) return undefined;
  return `**The floor moved ${Math.round((high / low - 1) * 100)} % between runs** (${floors.map(ms).join(' · ')} ms): the machine's speed changed during the bench, and the runs' figures moved with it; compare them with care.`;
}

const BUILDS = process.env.LIVE_BUILDS?.split(',');

/** LIVE_BUILDS: each run opens every build in turn in a fresh profile (an empty-cache start,
 * then a warm-cache one, measured) and types into it. */
async function compareBuilds(_browser, _url, model) {
  const servers = await Promise.all(BUILDS.map((outDir) => servePage({ limitSeconds: 24 * 3600, outDir })));
  const runs = BUILDS.map(() => []);
  try {
    for (let run = 0; run < RUNS; run++) {
      for (const [i, server] of servers.entries()) {
        const { page, close } = await freshPage();
        await coldStart(page, server.url, model, false);
        const warm = await coldStart(page, server.url, model, false);
        runs[i].push({ load: loadavg()[0], warm, ...(await typingRun(page, server.url, model)) });
        await close();
      }
    }
  } finally {
    await Promise.all(servers.map((server) => server.close()));
  }
  return { model, runs };
}

function compareReport({ model, runs }) {
  const lines = [
    `### ${model}`,
    '',
    `${RUNS} runs × ${KEYS} keystrokes at ${RATE}/s per build, alternating, ${THREADS} threads.`,
    '',
    "| build | keystroke → redraw: pooled median | pooled p95 | per-run medians | forward · views · the frame's own work (pooled medians) | cold start, warm cache: median (min–max) | of it: the load · the first pass (medians) | load at each run |",
    '|---|--:|--:|---|---|---|---|---|',
  ];
  BUILDS.forEach((build, i) => {
    const redraws = runs[i].flatMap((run) => run.redraws);
    const stage = (name) => ms(quantile(runs[i].flatMap((run) => run.stages[name]), 0.5));
    const frameWork = ms(quantile(runs[i].flatMap((run) => run.paintParts.map((detail) => detail?.renderMs).filter((value) => value !== undefined)), 0.5));
    const starts = (part) => runs[i].map((run) => run.warm[part]).filter((value) => value !== undefined);
    const warm = (part) => ms(quantile(starts(part), 0.5));
    lines.push(
      `| ${build} | ${ms(quantile(redraws, 0.5))} | ${ms(quantile(redraws, 0.95))} | ${runs[i].map((run) => ms(quantile(run.redraws, 0.5))).join(' · ')} | ${stage('forward')} · ${stage('views')} · ${frameWork} | ${warm('ms')} (${ms(Math.min(...starts('ms')))}–${ms(Math.max(...starts('ms')))}) | ${warm('load')} · ${warm('forward')} | ${runs[i].map((run) => run.load.toFixed(2)).join(' · ')} |`,
    );
  });
  lines.push('');
  return lines.join('\n');
}

const notes = NOTES_CLOSED ? ', every note closed' : '';
await benchEachModel(
  BUILDS
    ? { title: `npm run bench:live (LIVE_BUILDS: builds compared${notes})`, models: MODELS, output: 'bench-live-builds.md', measure: compareBuilds, report: compareReport }
    : { title: `npm run bench:live${notes}`, models: MODELS, output: 'bench-live.md', measure: benchModel, report },
);
