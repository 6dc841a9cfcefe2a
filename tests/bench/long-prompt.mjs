// `npm run bench:long`: a long prompt in the built page, as a reader who pastes a chapter would.
// Pastes a LONG_TOKENS-token prompt (default 4,096) into the page on SmolLM2, waits for every view,
// then opens another head, types at the end, and reports the time of each and the memory it
// took: the engine Worker's WebAssembly memory (the page's own diagnostics) and the renderer
// process (the page and its Workers, from /proc). Then, in Node, a whole-context run with capture
// off through the package. A bench, not a test: it prints a Markdown report (also written to
// tests/output/long-prompt.md).
//
//   LONG_TOKENS=4096  LONG_MODEL=assets/SmolLM2-135M-Instruct.Q4_1.gguf  LONG_THREADS=2
import { readFileSync, readdirSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { engineMemoryBytes, init, Model } from 'gptlens';
import { launchChromium } from '../support/browser.mjs';
import { cpuName, sourceVersion } from '../support/machine.mjs';
import { servePage } from '../web/page-server.mjs';

const repo = fileURLToPath(new URL('../..', import.meta.url));
const TOKENS = Number(process.env.LONG_TOKENS ?? 4096);
const MODEL = process.env.LONG_MODEL ?? 'assets/SmolLM2-135M-Instruct.Q4_1.gguf';
const THREADS = Number(process.env.LONG_THREADS ?? 2);
const file = `${repo}/${MODEL.replace(/^assets\//, 'assets/models/')}`;

/** Resident memory (MiB) of Chromium's renderer processes: the page and all its Workers. */
function rendererMiB() {
  let kib = 0;
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('--type=renderer')) continue;
      kib += Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
    } catch {
      // the process ended while we looked
    }
  }
  return kib / 1024;
}

/** Shakespeare, repeated until it is `count` tokens of `model`, then cut to exactly that. */
function textOfTokens(model, count) {
  const corpus = readFileSync(`${repo}/assets/data/shakespeare.txt`, 'utf8').slice(0, 200_000);
  const ids = model.encode(corpus);
  let text = model.decode(ids.slice(0, count + 8));
  while (model.encode(text).length > count) text = text.slice(0, -1);
  return text;
}

await init({ threads: 1 });
const model = Model.load({ 'model.gguf': new Uint8Array(await readFile(file)) });
const text = textOfTokens(model, TOKENS);
const t = model.encode(text).length;

const lines = [`# npm run bench:long — ${new Date().toISOString()}`, '', `Machine: ${cpus().length} cores (${cpuName()}), load ${loadavg().map((l) => l.toFixed(2)).join(' ')} at the start; the source of ${sourceVersion()}. Model ${MODEL}, ${THREADS} threads.`, ''];

const server = await servePage({ limitSeconds: 3600 });
const browser = await launchChromium();
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await page.goto(`${server.url}/?${new URLSearchParams({ model: MODEL, prompt: 'The', threads: String(THREADS) })}`);
  await page.getByTestId('candidate').first().waitFor({ timeout: 300_000 });
  const before = rendererMiB();
  const field = async (name) => (await page.locator(`[data-field=${name}]`).innerText()).split('\n')[0];
  const detail = async (name) => (await page.locator(`[data-field=${name}]`).innerText()).split('\n').slice(1).join(' ');
  const settled = (n) => page.waitForFunction((n) => document.querySelectorAll('[data-testid=tokens] .chip').length === n && !document.querySelector('[data-testid=attention-detail] .empty-note'), n, { timeout: 1_800_000, polling: 500 });

  let started = performance.now();
  await page.getByTestId('prompt').fill(text);
  await settled(t);
  const pasteSeconds = (performance.now() - started) / 1000;
  await page.waitForTimeout(1500); // the diagnostics' memory reading
  const engineAfterPaste = await field('memory');
  const rendererAfterPaste = rendererMiB();
  const grid = await page.locator('[data-testid=attention-grid] canvas').evaluateAll((canvases) => canvases.filter((c) => c.width > 1).length);

  // Another head: remade whole in the Worker from the kept queries.
  started = performance.now();
  await page.locator('[data-testid=attention-grid] button[title^="Layer 20, head 3 "]').click();
  await page.waitForFunction(() => document.querySelector('#detail-title')?.textContent === 'Layer 20 · Head 3' && !document.querySelector('[data-testid=attention-detail] .empty-note'), null, { timeout: 300_000 });
  const headSeconds = (performance.now() - started) / 1000;

  // Typing at the end: only the last bin is recomputed.
  const box = page.getByTestId('prompt');
  await box.focus();
  await box.press('Control+End');
  const keys = [];
  console.log(`pasted in ${pasteSeconds.toFixed(1)} s; engine ${engineAfterPaste}; renderer ${rendererAfterPaste.toFixed(0)} MiB; another head in ${headSeconds.toFixed(1)} s`);
  for (const key of ' and') {
    const before = await page.locator('[data-field=forward]').innerText();
    started = performance.now();
    await page.keyboard.type(key);
    // The next forward pass done and drawn (the diagnostics show each pass's time).
    await page
      .waitForFunction((before) => document.querySelector('[data-field=forward]')?.innerText !== before, before, { timeout: 60_000, polling: 50 })
      .catch(async (error) => {
        const shown = await page.evaluate(() => ({ error: document.querySelector('[data-testid=prompt-error]')?.textContent, chips: document.querySelectorAll('[data-testid=tokens] .chip').length, active: document.activeElement?.outerHTML.slice(0, 80) }));
        throw new Error(`no new forward pass after ${JSON.stringify(key)}: ${JSON.stringify(shown)}`, { cause: error });
      });
    keys.push(performance.now() - started);
    console.log(`key ${JSON.stringify(key)}: ${(keys.at(-1) / 1000).toFixed(2)} s; ${await field('forward')}`);
  }
  const forward = await field('forward');
  const lastForward = await detail('forward');
  await page.waitForTimeout(1500);
  const engineAtEnd = await field('memory');
  const rendererAtEnd = rendererMiB();
  lines.push(
    `## The page: a ${t}-token prompt pasted`,
    '',
    '| what | figure |',
    '|---|---|',
    `| paste → every view drawn | ${pasteSeconds.toFixed(1)} s |`,
    `| thumbnails painted (pooled maps) | ${grid} |`,
    `| engine memory after the paste (the Worker's wasm memory) | ${engineAfterPaste} |`,
    `| renderer RSS (page + Workers): before the paste → after | ${before.toFixed(0)} → ${rendererAfterPaste.toFixed(0)} MiB |`,
    `| opening another head (remade whole from kept queries) | ${headSeconds.toFixed(1)} s |`,
    `| keystrokes at the end, keystroke → views | ${keys.map((ms) => `${(ms / 1000).toFixed(2)} s`).join(', ')} |`,
    `| last forward (diagnostics) | ${forward} (${lastForward}) |`,
    `| engine memory at the end · renderer RSS | ${engineAtEnd} · ${rendererAtEnd.toFixed(0)} MiB |`,
    '',
  );
  await page.close();
} finally {
  await browser.close();
  await server.close();
}

// The whole context with capture off, through the package in Node (one thread; LONG_WHOLE=0 skips it).
if (process.env.LONG_WHOLE !== '0') {
const context = model.info().contextLength;
const ids = model.encode(readFileSync(`${repo}/assets/data/shakespeare.txt`, 'utf8').slice(0, 400_000)).slice(0, context);
const started = performance.now();
const trace = model.run(ids, []);
lines.push(
  `## The package: the whole context (${ids.length} tokens), capture off, in Node`,
  '',
  `Ran in ${((performance.now() - started) / 1000).toFixed(1)} s; next-token logits finite: ${Array.from(trace.probs(ids.length - 1, 1)).every(Number.isFinite)}; wasm memory ${(engineMemoryBytes() / 2 ** 20).toFixed(0)} MiB.`,
);
}
lines.push('', `Load at the end: ${loadavg().map((l) => l.toFixed(2)).join(' ')}.`);
console.log(lines.join('\n'));
await mkdir(`${repo}/tests/output`, { recursive: true });
await writeFile(`${repo}/tests/output/long-prompt.md`, `${lines.join('\n')}\n`);
console.log('\nwritten to tests/output/long-prompt.md');
