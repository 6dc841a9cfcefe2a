// `npm run soak`: types into the built page for a long time, as a person who never stops would,
// and reports whether it stays flat: memory every 1,000 keystrokes, main-thread long tasks, and
// keystroke → redraw (the page's own `gptlens:keystroke→redraw` measures). A bench, not a test:
// it asserts nothing and prints a Markdown report (also written to tests/output/soak.md).
//
//   SOAK_KEYS=10000 (keystrokes per model)  SOAK_RATE=20 (keys per second)
//   SOAK_MODELS=fixtures/gpt2-tiny-f32,assets/SmolLM2-135M-Instruct.Q4_1.gguf
//
// Memory is what the operating system gives Chromium's renderer process, which hosts the page and
// its Workers (the engine's wasm memory included): the resident set of every `--type=renderer`
// process, read from /proc, as it is and again after a full garbage collection of the page and the
// engine's Worker (V8 collects lazily: between collections garbage counts too). The page's own JS
// heap comes from `performance.memory`; the engine's wasm memory from the page's diagnostics.
import { readFileSync, readdirSync } from 'node:fs';
import { benchEachModel } from './page-models.mjs';

const KEYS = Number(process.env.SOAK_KEYS ?? 10_000);
const RATE = Number(process.env.SOAK_RATE ?? 20);
const MODELS = (process.env.SOAK_MODELS ?? 'fixtures/gpt2-tiny-f32,assets/SmolLM2-135M-Instruct.Q4_1.gguf').split(',');
const PROMPT = 'When Mary and John went to the store, John gave a drink to';
// Typed and taken back in turn, so the prompt stays near its starting length however long the run.
const WORD = ' Mary';

/** Resident memory (MiB) of Chromium's renderer processes: the page and all its Workers. */
function rendererMiB() {
  let kib = 0;
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      const command = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (!command.includes('--type=renderer')) continue;
      kib += Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
    } catch {
      // the process ended while we looked
    }
  }
  return kib / 1024;
}

/**
 * A function that runs a full garbage collection in the page and in the engine's Worker (through
 * the DevTools protocol) and waits for the memory to settle: what the renderer holds then is what
 * the page and the engine keep, not garbage V8 has not collected yet.
 */
async function garbageCollector(browser, page) {
  const pageSession = await page.context().newCDPSession(page);
  const browserSession = await browser.newBrowserCDPSession();
  const { targetInfos } = await browserSession.send('Target.getTargets');
  const worker = targetInfos.find((target) => target.type === 'worker' && /\/assets\/worker-/.test(target.url));
  const { sessionId } = await browserSession.send('Target.attachToTarget', { targetId: worker.targetId, flatten: false });
  const answered = new Map();
  browserSession.on('Target.receivedMessageFromTarget', ({ message }) => {
    const { id } = JSON.parse(message);
    if (id) answered.get(id)?.();
  });
  let nextId = 1;
  const inWorker = (method) =>
    new Promise((resolve) => {
      const id = nextId++;
      answered.set(id, resolve);
      void browserSession.send('Target.sendMessageToTarget', { sessionId, message: JSON.stringify({ id, method }) });
    });
  return async () => {
    await pageSession.send('HeapProfiler.collectGarbage');
    await Promise.race([inWorker('HeapProfiler.collectGarbage'), new Promise((resolve) => setTimeout(resolve, 5000))]);
    await new Promise((resolve) => setTimeout(resolve, 1000));
  };
}

const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
const ms = (value) => (value === undefined ? '–' : value.toFixed(1));

async function soak(browser, url, model) {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  // Collected as they happen: long tasks, and every keystroke → redraw measure.
  await page.addInitScript(() => {
    window.soak = { longTasks: [], frames: [], redraws: [] };
    new PerformanceObserver((list) => window.soak.longTasks.push(...list.getEntries().map(({ startTime, duration }) => ({ startTime, duration })))).observe({ type: 'longtask' });
    new PerformanceObserver((list) => {
      for (const { startTime, duration, scripts } of list.getEntries()) {
        if (duration <= 50) continue;
        const ran = scripts.map((script) => ({
          what: `${script.invoker} ${script.sourceFunctionName || ''} ${(script.sourceURL || '').replace(/^.*\//, '')}`.trim(),
          duration: script.duration,
        }));
        window.soak.frames.push({ startTime, duration, scripts: ran.sort((a, b) => b.duration - a.duration).slice(0, 3) });
      }
    }).observe({ type: 'long-animation-frame' });
    new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) if (entry.name === 'gptlens:keystroke→redraw') window.soak.redraws.push(entry.duration);
    }).observe({ type: 'measure' });
  });
  await page.goto(`${url}/?${new URLSearchParams({ model, prompt: PROMPT, ...(process.env.SOAK_THREADS ? { threads: process.env.SOAK_THREADS } : {}) })}`);
  await page.getByTestId('candidate').first().waitFor({ timeout: 300_000 });
  const collect = await garbageCollector(browser, page);
  const box = page.getByTestId('prompt');
  await box.click();
  await box.press('Control+End');
  const samples = [];
  const sample = async (keys) => {
    const { heap, longTasks, frames, redraws } = await page.evaluate(() => ({
      heap: performance.memory ? performance.memory.usedJSHeapSize / 2 ** 20 : undefined,
      longTasks: window.soak.longTasks.splice(0),
      frames: window.soak.frames.splice(0),
      redraws: window.soak.redraws.splice(0),
    }));
    // The engine's own WebAssembly memory, as the page's diagnostics show it (read once a second).
    const engine = (await page.locator('[data-field=memory]').innerText().catch(() => '–')).split('\n')[0];
    const renderer = rendererMiB();
    const from = await page.evaluate(() => performance.now());
    await collect();
    const collection = { from, to: await page.evaluate(() => performance.now()) };
    samples.push({ keys, renderer, collected: rendererMiB(), engine, heap, longTasks, frames, collection, redraws, at: performance.now() });
  };
  await sample(0);
  let started = performance.now();
  for (let key = 1; key <= KEYS; key++) {
    // Keystroke k is due at k / RATE seconds: a page that falls behind makes typing late, not slower.
    const due = started + (key * 1000) / RATE;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    const position = (key - 1) % (2 * WORD.length);
    await (position < WORD.length ? page.keyboard.type(WORD[position]) : page.keyboard.press('Backspace'));
    if (key % 1000 === 0) {
      // The schedule waits for the sample (and its garbage collections): no burst of late keys after it.
      const sampling = performance.now();
      await sample(key);
      started += performance.now() - sampling;
    }
  }
  const typingSeconds = (performance.now() - started) / 1000; // the samples' pauses left out
  await page.waitForTimeout(2000); // the last keystrokes' redraws
  await sample(KEYS);
  await page.close();
  return { model, typingSeconds, samples };
}

/** Whether a task overlaps one of the bench's own garbage collections. */
const duringCollection = (samples, { startTime, duration }) =>
  samples.some(({ collection: { from, to } }) => startTime < to && startTime + duration > from);

/** What ran in a long task: the scripts of the long animation frame that holds it. */
function attribution(samples, { startTime, duration }) {
  const frame = samples.flatMap(({ frames }) => frames).find((f) => f.startTime <= startTime + 1 && startTime + duration <= f.startTime + f.duration + 1);
  if (!frame) return 'no long animation frame recorded around it';
  const scripts = frame.scripts.map(({ what, duration }) => `${what} ${duration.toFixed(0)} ms`).join('; ');
  return `in a frame of ${frame.duration.toFixed(0)} ms: ${scripts || 'no script (style, layout, paint or the browser)'}`;
}

function report({ model, typingSeconds, samples }) {
  // Tasks the page made, and those that overlap the bench's own collections.
  const pageTasks = (longTasks) => longTasks.filter((task) => !duringCollection(samples, task));
  const lines = [`### ${model}`, '', `${KEYS} keystrokes at ${RATE}/s: typed in ${typingSeconds.toFixed(0)} s (expected ${(KEYS / RATE).toFixed(0)} s).`, ''];
  lines.push('| keystrokes | renderer RSS MiB | after a full GC | engine wasm memory | page JS heap MiB | long tasks | longest ms | redraws | median ms | p95 ms |', '|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|');
  for (const { keys, renderer, collected, engine, heap, longTasks, redraws } of samples) {
    const sorted = [...redraws].sort((a, b) => a - b);
    const durations = pageTasks(longTasks).map(({ duration }) => duration);
    lines.push(`| ${keys} | ${renderer.toFixed(0)} | ${collected.toFixed(0)} | ${engine} | ${heap === undefined ? '–' : heap.toFixed(1)} | ${durations.length} | ${ms(Math.max(0, ...durations))} | ${redraws.length} | ${ms(quantile(sorted, 0.5))} | ${ms(quantile(sorted, 0.95))} |`);
  }
  // Warm-up: the first 1,000 keystrokes; growth is measured from there to the end.
  const warm = samples.find(({ keys }) => keys >= 1000) ?? samples[0];
  const last = samples.at(-1);
  const tasks = samples.flatMap(({ keys, longTasks }) => longTasks.map((task) => ({ ...task, keys })));
  const all = pageTasks(tasks).map(({ duration }) => duration);
  const bench = tasks.filter((task) => duringCollection(samples, task)).map(({ duration }) => duration);
  const redraws = samples.flatMap(({ redraws }) => redraws).sort((a, b) => a - b);
  lines.push(
    '',
    `Renderer memory after warm-up: ${warm.renderer.toFixed(0)} → ${last.renderer.toFixed(0)} MiB (${(((last.renderer - warm.renderer) / warm.renderer) * 100).toFixed(1)} %) as it is; ` +
      `${warm.collected.toFixed(0)} → ${last.collected.toFixed(0)} MiB (${(((last.collected - warm.collected) / warm.collected) * 100).toFixed(1)} %) after a full garbage collection of the page and the engine's Worker; ` +
      `long tasks: ${all.length}, longest ${ms(Math.max(0, ...all))} ms (and ${bench.length} during the bench's own garbage collections${bench.length ? `, longest ${ms(Math.max(...bench))} ms` : ''}); ` +
      `keystroke → redraw over the run: median ${ms(quantile(redraws, 0.5))} ms, p95 ${ms(quantile(redraws, 0.95))} ms.`,
    '',
  );
  // What ran in each of the page's long tasks (the row is the sample that read it).
  for (const task of pageTasks(tasks)) lines.push(`- ${task.duration.toFixed(0)} ms, read at ${task.keys} keystrokes, ${attribution(samples, task)}`);
  if (all.length > 0) lines.push('');
  return lines.join('\n');
}

await benchEachModel({ title: 'npm run soak', models: MODELS, output: 'soak.md', measure: soak, report });
