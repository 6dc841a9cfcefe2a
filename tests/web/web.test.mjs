// The live page (web/) as a person uses it, in headless Chromium on the built page served by Vite
// with COOP/COEP: load the fixture model, type a prompt key by key, and check each view against
// the engine itself (the npm package called directly in Node). Saves screenshots of every view,
// wide and narrow, dark and light, under tests/output/web/, and prints the measured
// keystroke → redraw times (the fixture's, and SmolLM2's when assets/models has it). Chromium runs
// with --enable-unsafe-webgpu (SwiftShader's software adapter): `?backend=webgpu` draws every view
// from the GPU, and without it the page stays on the CPU and says why. A missing adapter skips
// those tests, or fails them under REQUIRE_GPU=1.
import assert from 'node:assert/strict';
import { existsSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { cosine, init, Model } from 'gptlens';
import { launchChromium, skipOrFail } from '../support/browser.mjs';
import { createRequire } from 'node:module';
import { servePage } from './page-server.mjs';
import { allocateSafetensors, parseSafetensors } from '../support/safetensors.mjs';

const repo = fileURLToPath(new URL('../..', import.meta.url));
const shots = `${repo}/tests/output/web`;
const FIXTURE = 'fixtures/gpt2-tiny-f32';
const SMOLLM = 'assets/SmolLM2-135M-Instruct.Q4_1.gguf';
const PROMPT = 'When Mary and John went to the store, John gave a drink to';
const SIZES = { wide: { width: 1280, height: 800 }, narrow: { width: 420, height: 900 } };

const axeSource = await readFile(createRequire(import.meta.url).resolve('axe-core/axe.min.js', { paths: [`${repo}/web`] }), 'utf8');

let server;
let browser;
let engine; // the package in Node, on the same fixture files
before(async () => {
  [server, browser] = await Promise.all([servePage(), launchChromium(), mkdir(shots, { recursive: true })]);
  const dir = `${repo}/tests/fixtures/gpt2-tiny-f32`;
  const names = ['config.json', 'model.safetensors', 'tokenizer.json'];
  const bytes = await Promise.all(names.map((name) => readFile(`${dir}/${name}`)));
  await init();
  engine = Model.load(Object.fromEntries(names.map((name, i) => [name, new Uint8Array(bytes[i])])));
});
after(() => Promise.all([browser?.close(), server?.close()]));

/** Every Content-Security-Policy violation any page of these tests caused (checked by the last test). */
const violations = [];

/** Records the page's CSP violations: the `securitypolicyviolation` events, and the console's
 * reports of them (workers' violations reach only the console). Awaited before the page is opened:
 * Playwright prepares an init script before it sends it, so a navigation sent meanwhile can come
 * first and run without it (the watch was then blind, and a test reading it failed). */
function watchPolicy(page) {
  page.on('console', (message) => {
    if (/Content.Security.Policy/i.test(message.text())) violations.push(`${page.url()}: ${message.text()}`);
  });
  return page.addInitScript(() => {
    window.cspViolations = [];
    document.addEventListener('securitypolicyviolation', (event) => {
      window.cspViolations.push(`${event.effectiveDirective} blocked ${event.blockedURI || 'inline'}`);
    });
  });
}

/** The page's own record of CSP violations, also added to `violations`. */
async function pageViolations(page) {
  const seen = await page.evaluate(() => window.cspViolations);
  assert.ok(Array.isArray(seen), 'the page is watched for CSP violations');
  violations.push(...seen.map((text) => `${page.url()}: ${text}`));
  return seen;
}

/** Opens the page on `model` with `prompt` already in the box (`init` runs before the page's own
 * scripts); resolves once every view shows it. */
async function openPage({ model = FIXTURE, prompt = '', theme = 'dark', size = SIZES.wide, backend, threads, init } = {}) {
  const page = await browser.newPage({ viewport: size });
  await watchPolicy(page);
  if (init) await page.addInitScript(init);
  page.on('pageerror', (error) => console.error(`[page] ${error.message}`));
  page.on('console', (message) => message.type() === 'error' && console.error(`[page] ${message.text()}`));
  const query = new URLSearchParams({ model, theme, prompt, ...(backend ? { backend } : {}), ...(threads ? { threads } : {}) });
  await page.goto(`${server.url}/?${query}`);
  await page.locator('[data-field=model]').waitFor({ timeout: 180_000 });
  if (prompt) await page.locator('[data-testid=candidate]').first().waitFor();
  return page;
}

/** The LayerNorm panel's text, once drawn (below the fold, it is drawn after the keystroke's frame). */
async function layernormText(page) {
  await viewsSettled(page);
  return page.getByTestId('layernorm').innerText();
}

/** A diagnostics field's text, once the views left for later (the panel is below the fold) are drawn. */
async function field(page, name) {
  await viewsSettled(page);
  return page.locator(`[data-field=${name}]`).innerText();
}
const chipIds = (page) => page.locator('[data-testid=tokens] .chip-id').allInnerTexts();

/** Types `text` one key at a time, like a person, and waits until the chips show its tokens. */
async function typePrompt(page, text, expectedIds) {
  const box = page.getByTestId('prompt');
  await box.click();
  await box.press('End');
  await box.pressSequentially(text, { delay: 20 });
  await untilChipsAre(page, expectedIds);
  await viewsSettled(page);
}

/**
 * Waits until the page shows exactly the tokens `ids`. A chip count is not enough while typing:
 * two prefixes of a word can have as many tokens as the whole, and an earlier keystroke's answer
 * would pass for the last one's.
 */
function untilChipsAre(page, ids) {
  return page.waitForFunction(
    (ids) => [...document.querySelectorAll('[data-testid=tokens] .chip-id')].map((chip) => chip.textContent).join() === ids,
    [...ids].join(),
  );
}

/** Waits until the prompt box no longer holds `text`: a step's or a candidate's text reaches it
 * after the chips (and the undo record with it). */
function untilPromptLeaves(page, text) {
  return page.waitForFunction((text) => document.querySelector('[data-testid=prompt]').value !== text, text);
}

/** Waits for the views the page left for later (off screen while typing went on) to be drawn. */
function viewsSettled(page) {
  return page.waitForFunction(() => window.gptlensViewsWaiting === 0);
}

/**
 * From now on, when each keystroke's views have been drawn (the page measures that stage right
 * after), records for every element `selectors` match its top, whether it is on screen and whether
 * it waits to be drawn (`data-stale`): read back as `window.staleness`, one list per keystroke.
 */
function recordStaleness(page, selectors) {
  return page.evaluate((selectors) => {
    window.staleness = [];
    const measure = performance.measure.bind(performance);
    performance.measure = (name, ...rest) => {
      if (name === 'gptlens:stage:views') {
        window.staleness.push(
          selectors.flatMap((selector) =>
            [...document.querySelectorAll(selector)].map((element) => {
              const { top, bottom } = element.getBoundingClientRect();
              return { selector, top, onScreen: bottom > 0 && top < innerHeight, stale: element.hasAttribute('data-stale') };
            }),
          ),
        );
      }
      return measure(name, ...rest);
    };
  }, selectors);
}

/**
 * Per head of the attention grid (in grid order), its thumbnail as the page drew it: its side in
 * map pixels (one per token pair, or per pooled block), how many of them are painted, and the
 * cell's side in canvas pixels. Read from the grid's one canvas, sampling the middle of each map
 * pixel inside the head's cell; unpainted pixels (a causal map's masked half) show the map
 * background. The grid is scrolled into view first: the page paints only the heads on screen.
 */
async function gridCanvases(page) {
  await page.getByTestId('attention-grid').scrollIntoViewIfNeeded();
  // Heads that came into view are painted with the next frame (their IntersectionObserver report).
  await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
  return page.getByTestId('attention-grid').evaluate((grid) => {
    const canvas = grid.querySelector('canvas.grid-canvas');
    const scale = canvas.width / canvas.getBoundingClientRect().width;
    const { data, width } = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height);
    const background = getComputedStyle(document.documentElement).getPropertyValue('--map-bg').trim();
    const [r, g, b] = [1, 3, 5].map((at) => Number.parseInt(background.slice(at, at + 2), 16));
    return [...grid.querySelectorAll('button.head')].map((button) => {
      const size = Number(button.dataset.pixels ?? 0);
      const side = button.offsetWidth * scale;
      let painted = 0;
      for (let row = 0; row < size; row++) {
        for (let column = 0; column < size; column++) {
          const x = Math.floor(button.offsetLeft * scale + ((column + 0.5) * side) / size);
          const y = Math.floor(button.offsetTop * scale + ((row + 0.5) * side) / size);
          const at = (y * width + x) * 4;
          if (data[at + 3] > 0 && (data[at] !== r || data[at + 1] !== g || data[at + 2] !== b)) painted++;
        }
      }
      return { width: size, height: size, painted, side: Math.round(side) };
    });
  });
}

async function candidates(page) {
  await viewsSettled(page); // below the fold, the list is drawn after the keystroke's frame
  return page.getByTestId('candidate').evaluateAll((rows) =>
    rows.map((row) => ({ id: Number(row.dataset.id), prob: Number(row.dataset.prob), sampled: Number(row.dataset.sampled) })),
  );
}

/** Waits until the page's most likely next token is the one `probs` (a run of the package) ranks first. */
function untilFirstCandidateIs(page, probs) {
  const top = probs.indexOf(Math.max(...probs));
  return page.waitForFunction(
    ([id, prob]) => {
      const first = document.querySelector('[data-testid=candidate]');
      return first !== null && Number(first.dataset.id) === id && Math.abs(Number(first.dataset.prob) - prob) <= 1e-6;
    },
    [top, probs[top]],
  );
}

test('typing a prompt shows its tokens, a map per head, and the next token', async () => {
  const page = await openPage();
  const tokens = engine.encode(PROMPT);
  await typePrompt(page, PROMPT, [...tokens]);
  const { nLayer, nHead } = engine.info();
  const canvases = await gridCanvases(page);
  assert.equal(canvases.length, nLayer * nHead, 'one map per layer × head');
  for (const [i, canvas] of canvases.entries()) {
    assert.equal(canvas.width, tokens.length, `map ${i} has one pixel per token`);
    // The causal triangle, diagonal included, is painted; the masked part shows the map background.
    assert.equal(canvas.painted, (tokens.length * (tokens.length + 1)) / 2, `map ${i} is painted`);
  }
  assert.match(await page.getByTestId('prompt').inputValue(), /drink to$/);
  assert.match(await layernormText(page), /through the depth/);
  assert.equal(await page.getByTestId('candidate').count(), 12);
  await page.close();
});

test('a first visit opens gptlens’s own Shakespeare model from the repository: every view at once, nothing fetched from elsewhere', async () => {
  const dir = `${repo}/assets/models/gptlens-shakespeare`;
  const shipped = Model.load({
    'config.json': new Uint8Array(await readFile(`${dir}/config.json`)),
    'model.safetensors': new Uint8Array(await readFile(`${dir}/model.safetensors`)),
  });
  const page = await browser.newPage({ viewport: SIZES.wide });
  await watchPolicy(page);
  const elsewhere = [];
  page.on('request', (request) => {
    if (new URL(request.url()).origin !== new URL(server.url).origin) elsewhere.push(request.url());
  });
  await page.goto(server.url);
  await page.locator('[data-testid=candidate]').first().waitFor({ timeout: 120_000 });
  assert.match(await field(page, 'model'), /gptlens-shakespeare/);
  const prompt = await page.getByTestId('prompt').inputValue();
  assert.match(prompt, /^Romeo:\nBut soft/, 'a byte-level model opens on a scene to continue');
  const tokens = shipped.encode(prompt);
  assert.equal(tokens.length, new TextEncoder().encode(prompt).length, 'one token per byte');
  const { nLayer, nHead } = shipped.info();
  const canvases = await gridCanvases(page);
  assert.equal(canvases.length, nLayer * nHead);
  for (const canvas of canvases) assert.equal(canvas.painted, (canvas.width * (canvas.width + 1)) / 2);
  assert.match(await layernormText(page), /through the depth/);
  const trace = shipped.run(tokens, []);
  const shown = await candidates(page);
  const expected = trace.topK(shown.length);
  assert.deepEqual(shown.map(({ id }) => id), expected.map(({ id }) => id), 'the package’s next bytes, in its order');
  for (const [i, { prob }] of shown.entries()) assert.ok(Math.abs(prob - expected[i].prob) <= 1e-5);
  // After “Juliet:” and a new line, a speech begins: a capital letter is the likeliest byte.
  assert.match(String.fromCharCode(shown[0].id), /[A-Z]/);
  // The other models stay one choice away.
  const listed = await page.getByTestId('model-select').locator('option').allInnerTexts();
  if (existsSync(`${repo}/assets/models/SmolLM2-135M-Instruct.Q4_1.gguf`)) assert.ok(listed.some((name) => /SmolLM2/.test(name)), listed.join('; '));
  assert.deepEqual(elsewhere, [], 'no request left the page’s origin');
  // The cold start's parts, as npm run bench:live reads them: the Worker's start begun before the
  // page asked for the model (as it opened) and over within the model's load, the load over
  // before the first probabilities are painted.
  await page.waitForFunction(() => performance.getEntriesByName('gptlens:first-probabilities').length > 0);
  const part = await page.evaluate(() =>
    Object.fromEntries(
      ['worker-start', 'load', 'first-probabilities'].map((name) => {
        const entries = performance.getEntriesByName(`gptlens:${name}`);
        const [entry] = entries;
        return [name, entry && { start: entry.startTime, end: entry.startTime + entry.duration, count: entries.length }];
      }),
    ),
  );
  const { 'worker-start': worker, load, 'first-probabilities': first } = part;
  assert.ok(worker && load && first, JSON.stringify(part));
  assert.ok(worker.start < load.start && worker.end <= load.end && load.end <= first.start, JSON.stringify(part));
  // One Worker started: the one begun as the page opened is the one the load ran on.
  assert.equal(worker.count, 1, JSON.stringify(part));
  trace.free();
  shipped.free();
  await page.close();
});

test('the probabilities shown sum to at most 1 and equal the engine’s', async () => {
  const page = await openPage({ prompt: PROMPT });
  const trace = engine.run(engine.encode(PROMPT), []);
  const shown = await candidates(page);
  const sum = shown.reduce((total, { prob }) => total + prob, 0);
  assert.ok(sum <= 1 + 1e-6, `shown probabilities sum to ${sum}`);
  const expected = trace.topK(shown.length);
  assert.deepEqual(shown.map(({ id }) => id), expected.map(({ id }) => id), 'the same tokens, in the same order');
  for (const [i, { prob }] of shown.entries()) assert.ok(Math.abs(prob - expected[i].prob) <= 1e-5, `candidate ${i}: ${prob} vs ${expected[i].prob}`);

  // Filters: temperature 0.5 and top-k 3 leave three tokens, renormalised as the engine does.
  await page.getByLabel('temperature').fill('0.5');
  await page.getByLabel('top-k').fill('3');
  await page.getByTestId('survivors').filter({ hasText: 'temperature 0.5, top-k 3: 3 of' }).waitFor();
  const filtered = await candidates(page);
  const kept = trace.topK(12, { temperature: 0.5, topK: 3 });
  assert.equal(filtered.filter(({ sampled }) => sampled > 0).length, 3);
  for (const [i, { sampled }] of filtered.slice(0, 3).entries()) assert.ok(Math.abs(sampled - kept[i].prob) <= 1e-5);
  assert.ok(filtered.reduce((total, { sampled }) => total + sampled, 0) <= 1 + 1e-6);
  assert.equal(await page.locator('.candidate.filtered').count(), 9, 'the other candidates are shown filtered out');
  // As drawn: each bar's length is the model's probability of its cell (at least a pixel), the
  // marker sits at the sampled probability and is not shown for a token filtered out (to a pixel).
  const drawn = await page.getByTestId('candidate').evaluateAll((rows) =>
    rows.map((row) => {
      const cell = row.querySelector('.candidate-bar').getBoundingClientRect();
      const bar = row.querySelector('.bar').getBoundingClientRect();
      const marker = row.querySelector('.marker');
      const at = marker.getBoundingClientRect();
      return { width: cell.width, bar: bar.width, marker: at.left + at.width / 2 - cell.left, shown: marker.checkVisibility() };
    }),
  );
  for (const [i, { width, bar, marker, shown: visible }] of drawn.entries()) {
    assert.ok(Math.abs(bar - Math.max(1, filtered[i].prob * width)) <= 1, `candidate ${i}: a bar of ${bar} px for ${filtered[i].prob} of ${width} px`);
    assert.equal(visible, filtered[i].sampled > 0, `candidate ${i}: the marker shows only for a token that can be sampled`);
    if (visible) assert.ok(Math.abs(marker - filtered[i].sampled * width) <= 1, `candidate ${i}: the marker at ${marker} px for ${filtered[i].sampled} of ${width} px`);
  }
  trace.free();
  await page.close();
});

test('a bad file shows a clear error and the previous model stays loaded', async () => {
  const page = await openPage({ prompt: 'The' });
  const files = page.getByTestId('model-files');
  await files.setInputFiles({ name: 'broken.gguf', mimeType: 'application/octet-stream', buffer: Buffer.from('GGUF but not really') });
  const error = page.getByTestId('model-error');
  await error.waitFor();
  assert.match(await error.innerText(), /Could not load broken\.gguf: .+ Still showing gpt2-tiny-f32\./);
  await page.screenshot({ path: `${shots}/load-error.png` });

  await files.setInputFiles({ name: 'model.safetensors', mimeType: 'application/octet-stream', buffer: Buffer.alloc(16) });
  await page.getByTestId('model-error').filter({ hasText: 'expected a .gguf file, or config.json with one .safetensors file' }).waitFor();

  assert.equal(await field(page, 'model'), 'gpt2-tiny-f32\ngpt2 · 2 layers × 4 heads · d 64 · vocab 513 · context 64');
  await typePrompt(page, ' tokenizer', [...engine.encode('The tokenizer')]); // the old model still answers
  await page.close();
});

test("a server's .gguf is kept in the browser once loaded (OPFS): the diagnostics say so, a reload loads it from there with the same probabilities, it is listed and deleted there, ?snapshot=off reads the file", async () => {
  const page = await openPage({ model: 'fixtures/llama-tiny-q', prompt: 'The cat sat' });
  /** Waits until the diagnostics' "saved copy" row matches `pattern` (the row is drawn once the views below the fold are). */
  const savedCopy = async (pattern) => {
    for (let waited = 0; ; waited += 250) {
      const text = await field(page, 'snapshot').catch(() => '');
      if (pattern.test(text)) return text;
      if (waited > 60_000) assert.fail(`the saved copy row says ${JSON.stringify(text)}, not ${pattern}`);
      await page.waitForTimeout(250);
    }
  };
  await savedCopy(/^not used \(no snapshot is kept for this file\); written\n/);
  const fromFile = await candidates(page);
  const loadDetail = () => page.evaluate(() => performance.getEntriesByName('gptlens:load')[0]?.detail);
  assert.deepEqual(await loadDetail(), { snapshot: 'writing' });

  await page.reload();
  await page.getByTestId('candidate').first().waitFor();
  await savedCopy(/^loaded from it\n/);
  assert.deepEqual(await loadDetail(), { snapshot: 'restored' });
  assert.deepEqual(await candidates(page), fromFile, 'the same candidates and probabilities as from the file');

  // Listed under the diagnostics, and deleted from there: the next load reads the file again.
  const saved = page.getByTestId('saved-models');
  await saved.locator('summary').click();
  const row = saved.getByTestId('saved-model').filter({ hasText: 'model.gguf' });
  await row.waitFor();
  assert.match(await row.innerText(), /^model\.gguf\n[\d.]+ [KM]B · saved .+ · the model shown\nDelete$/);
  const status = page.getByTestId('saved-status');
  assert.match(await status.innerText(), /^1 saved, [\d.]+ [KM]B\. This site stores .+ in all, of the .+ the browser lets it\.$/);
  assert.deepEqual(await axeViolations(page, 'saved models'), []);
  await saved.screenshot({ path: `${shots}/saved-models.png` });
  await row.getByRole('button', { name: 'Delete the saved copy of model.gguf' }).click();
  await status.filter({ hasText: /^Deleted the saved copy of model\.gguf\. None: / }).waitFor();
  assert.equal(await saved.getByTestId('saved-model').count(), 0);
  await savedCopy(/^deleted from this browser\n/);
  await page.reload();
  await page.getByTestId('candidate').first().waitFor();
  await savedCopy(/^not used \(no snapshot is kept for this file\); written\n/);

  await page.goto(page.url().replace('?', '?snapshot=off&'));
  await page.getByTestId('candidate').first().waitFor();
  assert.equal(await loadDetail(), null, 'no snapshot asked for');
  assert.deepEqual(await candidates(page), fromFile);
  assert.equal(await page.locator('[data-field=snapshot]').count(), 0, 'no saved copy row');
  await page.close();
});

test('a model loads from a URL and from dropped files; a URL that fails keeps the model', async () => {
  const page = await openPage({ prompt: 'The' });
  const url = page.getByTestId('model-url');
  await url.fill(`${server.url}/models/fixtures/llama-tiny-q/model.gguf`);
  await url.press('Enter');
  await page.locator('[data-field=model]').filter({ hasText: /^gptlens llama-tiny-q\s*llama · 2 layers × 4 heads \(2 key\/value\)/ }).waitFor();
  await page.getByTestId('candidate').first().waitFor();
  assert.equal((await gridCanvases(page)).length, 8);
  assert.match(await layernormText(page), /RMSNorm/);

  await url.fill(`${server.url}/models/fixtures/no-such-model.gguf`);
  await url.press('Enter');
  await page.getByTestId('model-error').filter({ hasText: /answered 404.* Still showing gptlens llama-tiny-q\./ }).waitFor();

  // Dropping a config.json + model.safetensors + tokenizer.json set anywhere on the page.
  await page.evaluate(async () => {
    const files = new DataTransfer();
    for (const name of ['config.json', 'model.safetensors', 'tokenizer.json']) {
      const bytes = await (await fetch(`/models/fixtures/gpt2-tiny-f32/${name}`)).blob();
      files.items.add(new File([bytes], name));
    }
    document.body.dispatchEvent(new DragEvent('drop', { dataTransfer: files, bubbles: true, cancelable: true }));
  });
  await page.locator('[data-field=model]').filter({ hasText: /^model\.safetensors\s*gpt2 · 2 layers/ }).waitFor();
  assert.equal(await page.getByTestId('model-error').isHidden(), true, 'a successful load clears the old error');
  await page.close();
});

const EXPECTED_HEADERS = {
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-embedder-policy': 'require-corp',
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
};

/** The serving headers of one response; `dev` allows the inline styles Vite's dev client injects. */
function assertServingHeaders(response, what, { dev = false } = {}) {
  const get = (name) => (typeof response.headers === 'function' ? response.headers()[name] : response.headers.get(name));
  for (const [name, value] of Object.entries(EXPECTED_HEADERS)) assert.equal(get(name), value, `${what}: ${name}`);
  const csp = get('content-security-policy');
  assert.ok(csp, `${what}: a Content-Security-Policy`);
  const directives = Object.fromEntries(csp.split(';').map((part) => part.trim().split(/\s+/)).map(([name, ...values]) => [name, values.join(' ')]));
  assert.deepEqual(directives, {
    'default-src': "'self'",
    'script-src': "'self' 'wasm-unsafe-eval'",
    'worker-src': "'self'",
    'connect-src': "'self' https: http:",
    'img-src': "'self' data:",
    'style-src': dev ? "'self' 'unsafe-inline'" : "'self'",
    'style-src-attr': "'unsafe-inline'",
    'object-src': "'none'",
    'base-uri': "'none'",
    'frame-ancestors': "'none'",
  }, `${what}: the policy`);
}

/**
 * Vite's dev server on web/ (the catalog mounted), on a free port, as `vite` runs it: in a child
 * process, since an in-process dev server leaves file watchers behind that keep this file's
 * process alive after the last test.
 */
async function devServer() {
  const { spawn } = await import('node:child_process');
  const probe = (await import('node:net')).createServer().listen(0, '127.0.0.1');
  await new Promise((done) => probe.once('listening', done));
  const { port } = probe.address();
  await new Promise((done) => probe.close(done));
  const vite = spawn(process.execPath, [`${repo}/node_modules/vite/bin/vite.js`, '--port', String(port), '--strictPort', '--logLevel', 'silent'], {
    cwd: `${repo}/web`,
    env: { ...process.env, GPTLENS_PORT: String(port) },
    stdio: 'ignore',
  });
  const url = `http://127.0.0.1:${port}`;
  for (let waited = 0; ; waited += 100) {
    if (vite.exitCode !== null) throw new Error(`the dev server exited with ${vite.exitCode}`);
    if (await fetch(`${url}/`).then((response) => response.arrayBuffer(), () => false)) break;
    if (waited > 30_000) throw new Error('the dev server did not answer within 30 s');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const close = () => new Promise((done) => {
    vite.once('exit', done);
    vite.kill();
  });
  return { url, close };
}

test('every response of both servers carries the CSP, nosniff, no framing, no referrer, and COOP/COEP', async () => {
  const index = await (await fetch(`${server.url}/`)).text();
  const script = index.match(/src="(\/assets\/index-[^"]+\.js)"/)[1];
  const main = await (await fetch(`${server.url}${script}`)).text();
  const worker = main.match(/\/assets\/worker-[^"]+\.js/)[0];
  const { readdir } = await import('node:fs/promises');
  const wasm = (await readdir(`${repo}/web/dist/assets`)).find((name) => name.endsWith('.wasm'));
  const preview = {
    page: '/',
    script,
    'worker script': worker,
    wasm: `/assets/${wasm}`,
    catalog: '/models/index.json',
    'model file': `/models/${FIXTURE}/config.json`,
    'catalog 404': '/models/fixtures/nothing.gguf',
    'page 404': '/assets/nothing.js',
  };
  for (const [what, path] of Object.entries(preview)) {
    const response = await fetch(`${server.url}${path}`);
    await response.arrayBuffer();
    if (!what.endsWith('404')) assert.equal(response.status, 200, `${what} ${path}`);
    assertServingHeaders(response, `preview ${what} ${path}`);
  }
  const dev = await devServer();
  try {
    for (const path of ['/', '/src/main.ts', '/src/engine.ts', '/models/index.json', `/models/${FIXTURE}/config.json`, '/models/fixtures/nothing.gguf']) {
      const response = await fetch(`${dev.url}${path}`);
      await response.arrayBuffer();
      assertServingHeaders(response, `dev ${path}`, { dev: true });
    }
  } finally {
    await dev.close();
  }
});

test('a malformed %-escape in the address answers 400 with a plain message, on both servers', async () => {
  const dev = await devServer();
  try {
    for (const base of [server.url, dev.url]) {
      for (const path of ['/%E0%A4%A', '/assets/%E0%A4%A.js', '/models/%E0%A4%A', '/models/fixtures/%zz.gguf', '/%']) {
        const response = await fetch(`${base}${path}`);
        const body = await response.text();
        assert.equal(response.status, 400, `${base}${path}`);
        assert.match(response.headers.get('content-type'), /^text\/plain/);
        assert.match(body, /malformed %-escape/);
        assert.doesNotMatch(body, /\bat |\/work|node_modules|Error|\.ts|\.js/, `no stack or path in ${JSON.stringify(body)}`);
        assert.equal(response.headers.get('x-content-type-options'), 'nosniff');
      }
    }
  } finally {
    await dev.close();
  }
});

test('the page loads and runs a model under its CSP without a violation; the policy is enforced', async () => {
  const page = await openPage({ prompt: PROMPT });
  const response = await page.request.get(page.url());
  assertServingHeaders(response, 'the page');
  await page.getByTestId('candidate').first().waitFor();
  assert.deepEqual(await pageViolations(page), [], 'no violation while loading and running');
  // An inline script is refused, and the refusal is seen: the watch above is not blind. The
  // console's report of this deliberate violation must not count against the last test.
  page.removeAllListeners('console');
  const ran = await page.evaluate(async () => {
    const script = document.createElement('script');
    script.textContent = 'window.inlineRan = true';
    document.head.append(script);
    await new Promise((resolve) => setTimeout(resolve, 100));
    return Boolean(window.inlineRan);
  });
  assert.equal(ran, false, 'inline script blocked');
  const seen = await page.evaluate(() => window.cspViolations.splice(0));
  assert.deepEqual(seen, ['script-src-elem blocked inline']);
  await page.close();
});

test('a URL that cannot be loaded says why: nothing answers, not found, not http(s), CORS', async () => {
  const { createServer } = await import('node:http');
  // A server elsewhere that answers but allows no other origin to read it.
  const noCors = createServer((request, response) => response.writeHead(200, { 'Content-Type': 'application/octet-stream' }).end('GGUF'));
  // A port that was free a moment ago: nothing listens there.
  const closed = createServer();
  await Promise.all([noCors, closed].map((s) => new Promise((done) => s.listen(0, '127.0.0.1', done))));
  const closedPort = closed.address().port;
  await new Promise((done) => closed.close(done));
  const page = await openPage({ prompt: 'The' });
  const url = page.getByTestId('model-url');
  const cases = [
    [`http://127.0.0.1:${closedPort}/model.gguf`, new RegExp(`could not fetch http://127\\.0\\.0\\.1:${closedPort}/model\\.gguf: nothing answers at http://127\\.0\\.0\\.1:${closedPort}\\b`)],
    [`${server.url}/models/fixtures/no-such-model.gguf`, /no-such-model\.gguf answered 404 \(not found\)/],
    [`http://127.0.0.1:${noCors.address().port}/model.gguf`, /the server at http:\/\/127\.0\.0\.1:\d+ does not allow this page to read it \(CORS\)/],
    ['file:///etc/passwd', /only http\(s\) URLs can be loaded, not file:/],
    ['data:application/octet-stream;base64,R0dVRg==', /only http\(s\) URLs can be loaded, not data:/],
    ['javascript:alert(1)', /only http\(s\) URLs can be loaded, not javascript:/],
  ];
  for (const [address, message] of cases) {
    await url.fill(address);
    await url.press('Enter');
    const error = page.getByTestId('model-error');
    await error.filter({ hasText: message }).waitFor({ timeout: 10_000 }).catch(async () => {
      assert.fail(`${address}: expected ${message}, got ${JSON.stringify(await error.innerText().catch(() => '(no error shown)'))}`);
    });
    assert.match(await error.innerText(), /Still showing gpt2-tiny-f32\./);
    assert.doesNotMatch(await error.innerText(), address.includes(String(closedPort)) || address.startsWith(server.url) ? /CORS/ : /^$/);
  }
  assert.deepEqual(await pageViolations(page), [], 'no CSP violation from a refused URL');
  await page.close();
  noCors.close();
});

test('the page runs the engine on threads when it is cross-origin isolated', async (t) => {
  if (!existsSync(`${repo}/crate/js/wasm/mt/gptlens_bg.wasm`)) {
    t.skip('no threaded wasm build (scripts/setup.sh found no nightly toolchain)');
    return;
  }
  const page = await openPage({ backend: 'cpu' });
  assert.equal(await page.evaluate(() => crossOriginIsolated), true);
  assert.match(await field(page, 'isolation'), /^yes/);
  const cores = await page.evaluate(() => navigator.hardwareConcurrency);
  const threads = await field(page, 'threads');
  if (cores < 2) assert.match(threads, /^1\n.*hardwareConcurrency is 1/);
  else assert.match(threads, new RegExp(`^${cores}\\nmulti-thread: ${cores} threads \\(page is crossOriginIsolated\\)`));
  await page.close();
});

test('?threads=1000 starts no more threads than the machine has, and says so', async (t) => {
  if (!existsSync(`${repo}/crate/js/wasm/mt/gptlens_bg.wasm`)) {
    t.skip('no threaded wasm build (scripts/setup.sh found no nightly toolchain)');
    return;
  }
  const page = await openPage({ backend: 'cpu', threads: '1000', prompt: 'The' });
  const cores = await page.evaluate(() => navigator.hardwareConcurrency);
  const threads = await field(page, 'threads');
  assert.match(threads, new RegExp(`^${cores}\\n.*; 1000 asked, this machine offers ${cores}`));
  await page.close();
});

for (const [threads, how, trap] of [
  ['1', 'microtask', 'RuntimeError: unreachable'],
  [undefined, 'microtask', 'RuntimeError: unreachable'],
  // A panic on a thread of the pool kills that thread alone: the engine's thread waits for it
  // forever, and the client notices the crash flag instead of an answer.
  [undefined, 'pool thread', 'RuntimeError: unreachable on a thread of its pool'],
]) {
  test(`a crashed engine (${threads ? 'single-thread' : 'threaded'} build, ${how}) is restarted, the model loaded again, the prompt re-run`, async (t) => {
    if (!threads && !existsSync(`${repo}/crate/js/wasm/mt/gptlens_bg.wasm`)) {
      t.skip('no threaded wasm build (scripts/setup.sh found no nightly toolchain)');
      return;
    }
    const page = await openPage({ prompt: 'The cat', threads });
    const messages = [];
    page.on('console', (message) => messages.push(message.text()));
    const engineWorker = page.workers().find((worker) => /\/assets\/worker-[^/]+\.js$/.test(worker.url()));
    assert.ok(engineWorker, `the engine's Worker among ${page.workers().map((worker) => worker.url())}`);
    // A real trap (a Rust panic → wasm `unreachable`) while the engine drives a Promise, as when a
    // run traps: the request as the package's client would post it.
    // Posted from a timer: on a pool thread the call never returns, and the evaluation must.
    await engineWorker.evaluate((how) => void setTimeout(() => self.dispatchEvent(new MessageEvent('message', { data: { id: -1, op: 'abortForTesting', args: [how] } }))), how);
    await typePrompt(page, ' sat', [...engine.encode('The cat sat')]);
    const notice = page.getByTestId('model-error');
    await notice.filter({ hasText: `The engine crashed (${trap}) and was restarted; gpt2-tiny-f32 was loaded again.` }).waitFor();
    assert.equal(await page.getByTestId('prompt').inputValue(), 'The cat sat');
    await page.getByTestId('candidate').first().waitFor();
    assert.equal(await page.getByTestId('prompt-error').isHidden(), true, 'no prompt error after the restart');
    assert.deepEqual(messages.filter((text) => /recursive use/.test(text)), []);
    await page.close();
  });
}

test('step appends one token, generate streams several, the views follow', async () => {
  const page = await openPage({ prompt: 'The' });
  const before = (await chipIds(page)).length;
  await page.getByTestId('step').click();
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid=tokens] .chip').length === n, before + 1);
  await page.getByLabel('Tokens to generate').fill('4');
  await page.getByTestId('generate').click();
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid=tokens] .chip').length === n, before + 5);
  await page.getByTestId('generate').filter({ hasText: 'Generate' }).waitFor();
  const canvases = await gridCanvases(page);
  assert.ok(canvases.every(({ width }) => width === before + 5), 'the attention maps grew with the tokens');
  // Clicking a candidate appends exactly that token.
  const first = (await candidates(page))[0];
  await page.getByTestId('candidate').first().click();
  await page.waitForFunction((id) => document.querySelector('[data-testid=tokens] li:last-child .chip-id')?.textContent === id, String(first.id));
  await page.close();
});

test('Generate → Stop → Generate at once: the second adds exactly the count asked, the stopped one nothing more', async () => {
  const page = await openPage({ prompt: 'The' });
  const chips = () => page.locator('[data-testid=tokens] .chip').count();
  const before = await chips();
  const count = page.getByLabel('Tokens to generate');
  // A first generation long enough that Stop always lands while it runs (on a loaded machine five
  // tokens of the tiny model could finish before the click, and the clicks would then mean
  // Generate and Stop) and short enough that both fit the context of 64; the count is read when
  // a generation starts, so the second asks for 5.
  await count.fill('50');
  const button = page.getByTestId('generate');
  await button.click();
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid=tokens] .chip').length > n, before);
  await count.fill('5');
  await button.filter({ hasText: 'Stop' }).click();
  await button.click(); // Generate again, while the stopped generation may still have a step in flight
  await button.filter({ hasText: 'Generate' }).waitFor();
  const total = await chips();
  // A stopped generation that resumed would go on adding tokens after the second one finished.
  await page.waitForTimeout(500);
  assert.equal(await chips(), total, 'nothing is added after the generation ends');
  assert.ok(total - before < 50 + 5, `${total - before} tokens: the first generation was stopped`);
  // Each generation is one undo unit: the second one took exactly 5 tokens, so Ctrl+Z gives back
  // the text of all but the last 5 (the page then encodes that text again; generated tokens need
  // not come back as the same ids, which is why the text is compared and not the chip count).
  const ids = (await chipIds(page)).map(Number);
  const beforeSecond = engine.decode(Uint32Array.from(ids.slice(0, total - 5)));
  await page.getByTestId('prompt').focus();
  await page.keyboard.press('Control+z');
  await page.waitForFunction((text) => document.querySelector('[data-testid=prompt]').value === text, beforeSecond);
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid=tokens] .chip').length === n, engine.encode(beforeSecond).length);
  await page.close();
});

test('Ctrl+Z undoes a step, a generation or an appended candidate as one unit, Ctrl+Shift+Z redoes it; typing keeps its own undo', async () => {
  const page = await openPage({ prompt: 'The' });
  const box = page.getByTestId('prompt');
  const showing = (n) => page.waitForFunction((n) => document.querySelectorAll('[data-testid=tokens] .chip').length === n, n);
  const holds = (text) => page.waitForFunction((text) => document.querySelector('[data-testid=prompt]').value === text, text);
  // A step or a candidate is recorded for undo when its text reaches the prompt box (after the
  // chips): wait for that before pressing Ctrl+Z.
  const leaves = (text) => untilPromptLeaves(page, text);
  const before = (await chipIds(page)).length;
  await page.getByLabel('Tokens to generate').fill('4');
  await page.getByTestId('generate').click();
  await showing(before + 4);
  await page.getByTestId('generate').filter({ hasText: 'Generate' }).waitFor();
  const generated = await box.inputValue();
  const generatedIds = await chipIds(page);
  assert.notEqual(generated, 'The');
  // The whole generation is one unit: one Ctrl+Z takes all four tokens back, Ctrl+Shift+Z returns them.
  await box.focus();
  await page.keyboard.press('Control+z');
  await holds('The');
  await showing(before);
  await page.screenshot({ path: `${shots}/undo-generation.png`, clip: { x: 0, y: 0, width: 1280, height: 420 } });
  await page.keyboard.press('Control+Shift+z');
  await holds(generated);
  await showing(before + 4);
  assert.deepEqual(await chipIds(page), generatedIds, 'the same tokens come back');
  // A step, and a clicked candidate (Cmd+Z, as on macOS).
  await page.getByTestId('step').click();
  await leaves(generated);
  await showing(before + 5);
  await box.focus();
  await page.keyboard.press('Meta+z');
  await holds(generated);
  await untilChipsAre(page, generatedIds);
  await page.getByTestId('candidate').first().click();
  await leaves(generated);
  await showing(before + 5);
  await box.focus();
  await page.keyboard.press('Control+z');
  await holds(generated);
  await showing(before + 4);
  // Typing is the box's own undo; once it is undone, Ctrl+Z reaches the generation again.
  await box.press('End');
  await box.pressSequentially(' x', { delay: 20 });
  await holds(`${generated} x`);
  await page.keyboard.press('Control+z');
  await leaves(`${generated} x`);
  const undoneTyping = await box.inputValue();
  assert.ok(`${generated} x`.startsWith(undoneTyping) && undoneTyping.startsWith(generated), `typing undone to “${undoneTyping}”`);
  if (undoneTyping === generated) {
    await page.keyboard.press('Control+z');
    await holds('The');
    await showing(before);
  }
  await page.close();
});

test('picking a query token highlights its row in every view', async () => {
  const page = await openPage({ prompt: PROMPT });
  await page.locator('[data-testid=tokens] .chip').nth(5).click();
  assert.equal(await page.locator('[data-testid=tokens] .chip[aria-pressed=true]').count(), 1);
  assert.ok(await page.getByTestId('attention-grid').evaluate((grid) => grid.classList.contains('has-query')));
  assert.equal(await page.getByTestId('attention-grid').evaluate((grid) => grid.style.getPropertyValue('--query')), '5');
  assert.match(await layernormText(page), /Token 5 /);
  await page.close();
});

/** The browser's WebGPU adapter on a page of the server, or why there is none. */
async function webgpuAdapter() {
  const page = await browser.newPage();
  await page.goto(`${server.url}/models/index.json`);
  const adapter = await page.evaluate(async () => {
    if (!navigator.gpu) return { missing: 'navigator.gpu is undefined' };
    const found = await navigator.gpu.requestAdapter({ powerPreference: 'high-performance' });
    return found ? { vendor: found.info.vendor, architecture: found.info.architecture, isFallbackAdapter: found.info.isFallbackAdapter } : { missing: 'requestAdapter() returned null' };
  });
  await page.close();
  return adapter;
}

/** Every canvas of the grid paints its causal triangle; the head's map and the strips are drawn. */
async function assertViewsDrawn(page, tokens) {
  const { nLayer, nHead } = engine.info();
  const canvases = await gridCanvases(page);
  assert.equal(canvases.length, nLayer * nHead, 'one map per layer × head');
  for (const [i, canvas] of canvases.entries()) {
    assert.equal(canvas.width, tokens, `map ${i} has one pixel per token`);
    assert.equal(canvas.painted, (tokens * (tokens + 1)) / 2, `map ${i} is painted`);
  }
  const detailPainted = await page.getByTestId('attention-detail').locator('canvas').first().evaluate((canvas) => {
    const { data } = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height);
    let painted = 0;
    for (let i = 3; i < data.length; i += 4) if (data[i] > 0) painted++;
    return painted;
  });
  assert.ok(detailPainted > 0, 'the head map is painted');
  assert.match(await layernormText(page), /through the depth/);
  assert.equal(await page.getByTestId('candidate').count(), 12);
}

/**
 * The page's candidates against the package on the CPU (in Node) on the tokens its chips show
 * (after a step, the text need not encode to them): the same ids, probabilities within 1e-4.
 */
async function assertProbabilitiesMatchCpu(page) {
  const tokens = Uint32Array.from(await chipIds(page), Number);
  const trace = engine.run(tokens, []);
  const expected = trace.probs(tokens.length - 1, 1);
  const top = trace.topK(12);
  trace.free();
  const shown = await candidates(page);
  assert.equal(shown.length, 12);
  assert.equal(shown[0].id, top[0].id, 'the same most probable token');
  for (const { id, prob } of shown) assert.ok(Math.abs(prob - expected[id]) <= 1e-4, `token ${id}: ${prob} on the page vs ${expected[id]} on the CPU`);
  assert.deepEqual(new Set(shown.map(({ id }) => id)), new Set(top.map(({ id }) => id)), 'the same 12 candidates');
}

test('?backend=webgpu: every view from the GPU, probabilities equal to the CPU, diagnostics name the adapter; the control switches live', async (t) => {
  const adapter = await webgpuAdapter();
  if (adapter.missing) return skipOrFail(t, `no WebGPU adapter in Chromium (${adapter.missing})`);
  const page = await openPage({ prompt: PROMPT, backend: 'webgpu' });
  const backend = await field(page, 'backend');
  assert.match(backend, /^WebGPU\n/);
  assert.match(backend, new RegExp(`WebGPU was asked for: ${adapter.vendor} ${adapter.architecture}`));
  const described = await field(page, 'adapter');
  assert.match(described, new RegExp(`^${adapter.vendor} ${adapter.architecture} · ${adapter.isFallbackAdapter ? 'fallback adapter \\(software\\)' : 'hardware adapter'}\n`));
  assert.match(described, new RegExp(`isFallbackAdapter ${adapter.isFallbackAdapter}`));
  assert.match(described, /max storage binding \d.* · max buffer \d.* · workgroup storage \d/);
  assert.match(await field(page, 'threads'), /^1\nsingle-thread: WebGPU was asked for/);
  const tokens = engine.encode(PROMPT);
  await assertViewsDrawn(page, tokens.length);
  await assertProbabilitiesMatchCpu(page);
  await page.getByTestId('diagnostics').screenshot({ path: `${shots}/webgpu-diagnostics.png` });

  // Step, generate and a clicked candidate, on the GPU.
  await page.getByTestId('step').click();
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid=tokens] .chip').length === n, tokens.length + 1);
  await page.getByLabel('Tokens to generate').fill('3');
  await page.getByTestId('generate').click();
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid=tokens] .chip').length === n, tokens.length + 4);
  await page.getByTestId('generate').filter({ hasText: 'Generate' }).waitFor();
  const first = (await candidates(page))[0];
  const generatedText = await page.getByTestId('prompt').inputValue();
  await page.getByTestId('candidate').first().click();
  await page.waitForFunction((id) => document.querySelector('[data-testid=tokens] li:last-child .chip-id')?.textContent === id, String(first.id));
  await untilPromptLeaves(page, generatedText);
  const text = await page.getByTestId('prompt').inputValue();
  await assertViewsDrawn(page, tokens.length + 5);
  await assertProbabilitiesMatchCpu(page);

  // Live switch to the CPU: the same prompt runs again there; the address follows.
  await page.getByTestId('backend-select').selectOption('cpu');
  await page.locator('[data-field=backend]').filter({ hasText: /^CPU\s*the CPU was asked for/ }).waitFor();
  await page.getByTestId('candidate').first().waitFor();
  assert.equal(await page.getByTestId('prompt').inputValue(), text);
  assert.match(page.url(), /backend=cpu/);
  // The text runs again, so its tokens are the text's encoding (a step's tokens may differ).
  await assertViewsDrawn(page, (await chipIds(page)).length);
  await assertProbabilitiesMatchCpu(page);
  // And back to WebGPU.
  await page.getByTestId('backend-select').selectOption('webgpu');
  await page.locator('[data-field=backend]').filter({ hasText: /^WebGPU/ }).waitFor();
  await page.getByTestId('candidate').first().waitFor();
  await assertProbabilitiesMatchCpu(page);
  await page.close();
});

test('without ?backend the page stays on the CPU on a software adapter and says why', async (t) => {
  const adapter = await webgpuAdapter();
  if (adapter.missing) return skipOrFail(t, `no WebGPU adapter in Chromium (${adapter.missing})`);
  if (!adapter.isFallbackAdapter) return t.skip(`the adapter (${adapter.vendor} ${adapter.architecture}) is hardware: auto takes it`);
  const page = await openPage({ prompt: 'The' });
  assert.equal(await page.getByTestId('backend-select').inputValue(), 'auto');
  const backend = await field(page, 'backend');
  assert.match(backend, new RegExp(`^CPU\\nthe only WebGPU adapter, ${adapter.vendor} ${adapter.architecture}, is a software fallback adapter: the CPU kernels are faster`));
  assert.match(await field(page, 'adapter'), new RegExp(`^${adapter.vendor} ${adapter.architecture} · fallback adapter \\(software\\)`));
  await assertProbabilitiesMatchCpu(page);
  await page.close();
});

/** axe-core's serious and critical violations on the page as it is (rule, impact, where). */
async function axeViolations(page, view) {
  // Evaluated, not added as an inline <script>: the page's CSP refuses inline scripts.
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(axeSource);
  const violations = await page.evaluate(async () => (await window.axe.run(document, { resultTypes: ['violations'] })).violations);
  return violations
    .filter(({ impact }) => impact === 'serious' || impact === 'critical')
    .map(({ id, impact, nodes }) => ({ view, id, impact, nodes: nodes.slice(0, 3).map((node) => `${node.target.join(' ')}: ${node.failureSummary?.split('\n')[1] ?? ''}`) }));
}

/** The smallest rectangle holding both boxes. */
function union(a, b) {
  const x = Math.min(a.x, b.x);
  const y = Math.min(a.y, b.y);
  return { x, y, width: Math.max(a.x + a.width, b.x + b.width) - x, height: Math.max(a.y + a.height, b.y + b.height) - y };
}

/** Every view of one page, as separate pictures, plus the whole page. */
async function screenshotViews(page, name) {
  await viewsSettled(page);
  await page.screenshot({ path: `${shots}/${name}-page.png`, fullPage: true });
  for (const view of ['prompt', 'tokens', 'attention-grid', 'attention-detail', 'layernorm', 'next-token', 'diagnostics']) {
    await page.getByTestId(view).screenshot({ path: `${shots}/${name}-${view}.png` });
  }
}

for (const theme of ['dark', 'light']) {
  for (const [sizeName, size] of Object.entries(SIZES)) {
    test(`screenshots: ${theme}, ${sizeName} (${size.width}×${size.height})`, async () => {
      const page = await openPage({ prompt: PROMPT, theme, size });
      await page.locator('[data-testid=tokens] .chip').nth(9).click();
      await page.getByLabel('top-p').fill('0.3');
      await page.getByTestId('survivors').filter({ hasText: 'top-p 0.3' }).waitFor();
      await screenshotViews(page, `${theme}-${sizeName}`);
      // The large map with the weight under the pointer, then the lines view.
      const map = page.getByTestId('attention-detail').locator('canvas');
      const { width, height } = await map.boundingBox();
      await map.hover({ position: { x: width * 0.6, y: height * 0.55 } });
      const tooltip = page.locator('.tooltip:not([hidden])');
      await tooltip.waitFor();
      await page.screenshot({ path: `${shots}/${theme}-${sizeName}-map-hover.png`, clip: union(await map.boundingBox(), await tooltip.boundingBox()) });
      await page.getByRole('tab', { name: 'Lines' }).click();
      await page.getByTestId('attention-detail').locator('canvas.lines').waitFor();
      await page.getByTestId('attention-detail').screenshot({ path: `${shots}/${theme}-${sizeName}-lines.png` });
      // Every view passes axe: map (above), lines, query row, table, norms as a table.
      const found = [await axeViolations(page, 'lines')];
      await page.getByRole('tab', { name: 'Query row' }).click();
      await page.getByTestId('query-row').waitFor();
      await page.getByTestId('attention-detail').screenshot({ path: `${shots}/${theme}-${sizeName}-query-row.png` });
      found.push(await axeViolations(page, 'query row'));
      await page.getByRole('tab', { name: 'Table' }).click();
      await page.getByTestId('norm-table-toggle').click();
      await page.getByTestId('norm-table').waitFor();
      await page.getByTestId('layernorm').screenshot({ path: `${shots}/${theme}-${sizeName}-norm-table.png` });
      found.push(await axeViolations(page, 'tables'));
      await page.getByRole('tab', { name: 'Map' }).click();
      found.push(await axeViolations(page, 'map'));
      const serious = found.flat();
      console.log(`axe, ${theme} ${sizeName}: ${serious.length} serious/critical violations over 4 views`);
      assert.deepEqual(serious, [], `axe: ${JSON.stringify(serious, null, 1)}`);
      await page.close();
    });
  }
}

/**
 * Picks `model` in the model list, types `text` key by key, and returns the page's measures. A
 * large model loads long enough to photograph its progress bar (`loadingShot`).
 */
async function measureTyping(model, text, { loadingShot = false } = {}) {
  // Whether each run the page asked for came with the shared buffer for its answer.
  const init = () => {
    window.runsShared = [];
    const post = Worker.prototype.postMessage;
    Worker.prototype.postMessage = function recorded(message, ...rest) {
      if (message?.op === 'sessionRunPrompt') window.runsShared.push(message.reply instanceof SharedArrayBuffer);
      return post.call(this, message, ...rest);
    };
  };
  const page = await openPage({ prompt: 'The', init });
  const name = model.split('/').pop();
  await page.getByTestId('model-select').selectOption(model);
  if (loadingShot) {
    await page.getByTestId('model-progress').waitFor();
    await page.locator('#status').screenshot({ path: `${shots}/loading-${name}.png` });
  }
  await page.getByTestId('model-progress').waitFor({ state: 'hidden', timeout: 180_000 });
  await page.locator('[data-field=forward]').waitFor();
  const box = page.getByTestId('prompt');
  await box.click();
  await box.press('End');
  await box.pressSequentially(text, { delay: 150 });
  await page.waitForFunction(() => performance.getEntriesByName('gptlens:keystroke→redraw').length > 0);
  await page.waitForTimeout(1500); // the last keystrokes' redraws
  const durations = await page.evaluate(() => performance.getEntriesByName('gptlens:keystroke→redraw').map(({ duration }) => duration));
  const stages = await field(page, 'stages');
  const size = await field(page, 'size');
  const runsShared = await page.evaluate(() => window.runsShared);
  await page.screenshot({ path: `${shots}/typing-${name}.png`, fullPage: true });
  await page.close();
  const sorted = [...durations].sort((a, b) => a - b);
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))].toFixed(1);
  return { count: sorted.length, median: at(0.5), p95: at(0.95), max: sorted.at(-1).toFixed(1), stages: stages.replace(/\n.*/s, ''), size, runsShared };
}

const TYPED = ' quick brown fox jumps over the lazy dog';

test('keystroke → redraw on the fixture model', async () => {
  const result = await measureTyping(FIXTURE, TYPED);
  console.log(`keystroke → redraw, gpt2-tiny-f32: median ${result.median} ms, p95 ${result.p95} ms, max ${result.max} ms over ${result.count} redraws; last: ${result.stages}`);
  assert.ok(result.count > 10, 'most keystrokes got their own redraw');
  assert.ok(Number(result.median) < 250, `median ${result.median} ms`);
});

test('a keystroke’s frame draws the views on screen; those off screen are drawn after it, and by the time the page settles', async () => {
  const page = await openPage({ prompt: 'The cat sat on' });
  const box = page.getByTestId('prompt');
  await box.click();
  await box.press('End');
  await viewsSettled(page);
  // The diagnostics must be farther than 200 px below the fold (else drawn right after the
  // keystroke's frame, not after a pause): a layout that moves them fails here, with its reason.
  const diagnosticsTop = await page.locator('#diagnostics-panel').evaluate((panel) => panel.getBoundingClientRect().top - innerHeight);
  assert.ok(diagnosticsTop > 200, `the diagnostics start ${diagnosticsTop} px below the fold`);
  // Which of the views that can wait are on screen, and which wait: when each keystroke's views
  // have been drawn (the page measures that stage right after), and when its redraw is measured,
  // after the frame (by then the diagnostics, updated after the views, wait too).
  await page.evaluate(() => {
    window.snapshots = [];
    const snapshot = (ids) =>
      ids.map((id) => {
        const panel = document.getElementById(id);
        const { top, bottom } = panel.getBoundingClientRect();
        return { id, onScreen: bottom > 0 && top < innerHeight, stale: panel.hasAttribute('data-stale') };
      });
    // And in what order a keystroke's views, its redraw's measure and the near view's draw come.
    window.order = [];
    const measure = performance.measure.bind(performance);
    performance.measure = (name, ...rest) => {
      if (name === 'gptlens:stage:views') {
        window.snapshots.push(snapshot(['detail-panel', 'layernorm-panel']));
        window.order.push(`views${document.getElementById('layernorm-panel').hasAttribute('data-stale') ? ', LayerNorm left' : ''}`);
      }
      if (name === 'gptlens:keystroke→redraw') {
        window.snapshots.push(snapshot(['diagnostics-panel']));
        window.order.push('redraw measured');
      }
      return measure(name, ...rest);
    };
    const layerNorm = document.getElementById('layernorm-panel');
    new MutationObserver(() => layerNorm.hasAttribute('data-stale') || window.order.push('LayerNorm drawn')).observe(layerNorm, { attributeFilter: ['data-stale'] });
  });
  await box.pressSequentially(' the', { delay: 150 });
  await untilChipsAre(page, engine.encode('The cat sat on the'));
  // The last keystroke's measure and the panels' draws come after its paint.
  await viewsSettled(page);
  const snapshots = await page.evaluate(() => window.snapshots);
  assert.ok(snapshots.length >= 4, `${snapshots.length} snapshots`);
  for (const { id, onScreen, stale } of snapshots.flat()) assert.equal(stale, !onScreen, `${id}: ${onScreen ? 'on screen, drawn in the frame' : 'off screen, left for later'}`);
  const kinds = new Set(snapshots.flat().map(({ id, onScreen }) => `${id} ${onScreen}`));
  for (const kind of ['detail-panel true', 'layernorm-panel false', 'diagnostics-panel false']) assert.ok(kinds.has(kind), `${kind} in ${[...kinds]}`);
  // A view just below the fold (the LayerNorm panel, within 200 px) is drawn right after the
  // frame that showed the keystroke — after its measure, before the next keystroke's views. An
  // idle callback often found no idle time here and ran at its timeout, near the next keystroke.
  const order = await page.evaluate(() => window.order);
  const left = order.flatMap((event, i) => (event === 'views, LayerNorm left' ? [i] : []));
  assert.ok(left.length >= 3, `the LayerNorm panel waited after ${left.length} keystrokes: ${order.join(' → ')}`);
  for (const i of left) {
    const next = order.indexOf('views, LayerNorm left', i + 1);
    assert.deepEqual(order.slice(i + 1, i + 3), ['redraw measured', 'LayerNorm drawn'], `${order.slice(i, next < 0 ? undefined : next).join(' → ')}`);
  }
  // Once the page settles, the views left for later show the last keystroke's run too.
  const ids = engine.encode('The cat sat on the');
  assert.match(await field(page, 'forward'), new RegExp(`of ${ids.length} tokens computed`));
  assert.equal(await page.locator('[data-stale]').count(), 0);
  await page.close();
});

/**
 * As soon as the chips are `ids` (in the frame that draws them, before the page can draw more):
 * whether the next-token list's last row waits to be drawn and the token it shows, then `action`
 * on it ('click' or 'focus'), and the same two after.
 */
function onLastRow(page, ids, action) {
  return page.evaluate(
    async ([ids, action]) => {
      const chips = () => [...document.querySelectorAll('[data-testid=tokens] .chip-id')].map((chip) => chip.textContent).join();
      while (chips() !== ids) await new Promise(requestAnimationFrame);
      const button = [...document.querySelectorAll('[data-testid=candidate]')].at(-1);
      const shown = () => ({ stale: button.parentElement.hasAttribute('data-stale'), id: Number(button.dataset.id) });
      const before = shown();
      if (action === 'click') button.click();
      else button.focus({ preventScroll: true });
      const after = shown();
      return { ...before, staleAfter: after.stale, idAfter: after.id };
    },
    [ids.join(), action],
  );
}

test('the next-token rows on screen are drawn in the keystroke’s frame, those below the fold after it; a click takes the row’s own token', async () => {
  const page = await openPage({ prompt: 'The cat sat on' });
  const ROWS = '#next-panel li:has(> button.candidate)';
  // The fold across the list's first row: that row on screen, the rest below, the last ones farther
  // than 200 px (those wait until typing pauses).
  const lastBelow = await page.evaluate((rows) => {
    const first = document.querySelector(rows).getBoundingClientRect();
    window.scrollBy(0, first.top + first.height / 2 - innerHeight);
    return [...document.querySelectorAll(rows)].at(-1).getBoundingClientRect().top - innerHeight;
  }, ROWS);
  assert.ok(lastBelow > 220, `the last row starts ${lastBelow} px below the fold`);
  const box = page.getByTestId('prompt');
  await box.focus({ preventScroll: true });
  await box.press('End');
  await viewsSettled(page);
  await recordStaleness(page, [ROWS]);
  await box.pressSequentially(' the', { delay: 150 });
  await untilChipsAre(page, engine.encode('The cat sat on the'));
  await viewsSettled(page);
  const snapshots = await page.evaluate(() => window.staleness);
  assert.ok(snapshots.length >= 3, `${snapshots.length} snapshots`);
  for (const rows of snapshots) {
    assert.equal(rows.length, 12);
    assert.equal(rows[0].top, snapshots[0][0].top, 'the list stays where it was while typing');
    assert.deepEqual(rows.map(({ onScreen }) => onScreen), [true, ...Array(11).fill(false)], 'the first row on screen, the others below the fold');
    rows.forEach(({ onScreen, stale }, i) => assert.equal(stale, !onScreen, `row ${i}: ${onScreen ? 'on screen, drawn in the frame' : 'below the fold, left for later'}`));
  }
  // Settled, every row shows the last keystroke's candidates, as the package computes them.
  assert.equal(await page.locator('[data-stale]').count(), 0);
  await assertProbabilitiesMatchCpu(page);
  // Typing again leaves the last row stale until typing pauses. Activated then (as assistive
  // technology can, off screen), it appends the token of the keystroke's run, not the one it showed.
  const tokens = engine.encode('The cat sat on th');
  const trace = engine.run(Uint32Array.from(tokens), []);
  const top = trace.topK(12);
  trace.free();
  await box.focus({ preventScroll: true });
  await page.keyboard.press('Backspace');
  const lastRow = await onLastRow(page, tokens, 'click');
  assert.equal(lastRow.stale, true, 'the last row was not drawn yet');
  assert.notEqual(lastRow.id, top[11].id, 'the last row still showed the keystroke before’s token');
  await untilChipsAre(page, [...tokens, top[11].id]);
  // Focus draws a waiting row at once: the token a screen reader names is the one it appends.
  await box.evaluate((prompt) => {
    prompt.value = 'The cat sat on the';
    prompt.dispatchEvent(new Event('input', { bubbles: true }));
  });
  await untilChipsAre(page, engine.encode('The cat sat on the'));
  await viewsSettled(page);
  await box.focus({ preventScroll: true });
  await page.keyboard.press('Backspace');
  const focused = await onLastRow(page, tokens, 'focus');
  assert.equal(focused.stale, true, 'the last row waited before it had the focus');
  assert.equal(focused.staleAfter, false, 'focus drew it');
  assert.equal(focused.idAfter, top[11].id, 'it names the token it appends');
  await page.close();
});

test('the LayerNorm panel’s head on screen is drawn in the keystroke’s frame, its strips and chart below the fold after it', async () => {
  const page = await openPage({ prompt: 'The cat sat on' });
  // The panel's top edge just above the fold: its head on screen, its body below.
  await page.evaluate(() => window.scrollBy(0, document.getElementById('layernorm-panel').getBoundingClientRect().top + 20 - innerHeight));
  const box = page.getByTestId('prompt');
  await box.focus({ preventScroll: true });
  await box.press('End');
  await viewsSettled(page);
  await recordStaleness(page, ['#layernorm-panel', '[data-testid=norm-strips]', '[data-testid=norm-chart]']);
  await box.pressSequentially(' the', { delay: 150 });
  const ids = engine.encode('The cat sat on the');
  await untilChipsAre(page, ids);
  await viewsSettled(page);
  const snapshots = await page.evaluate(() => window.staleness);
  assert.ok(snapshots.length >= 3, `${snapshots.length} snapshots`);
  for (const parts of snapshots) {
    assert.deepEqual(parts.map(({ onScreen }) => onScreen), [true, false, false], 'the head on screen, the strips and the chart below the fold');
    for (const { selector, onScreen, stale } of parts) assert.equal(stale, !onScreen, `${selector}: ${onScreen ? 'on screen, drawn in the frame' : 'below the fold, left for later'}`);
  }
  // Settled, the strips and the chart show the last keystroke's tokens.
  assert.equal(await page.locator('[data-stale]').count(), 0);
  assert.match(await page.locator('#layernorm-panel canvas').first().getAttribute('aria-label'), new RegExp(`of ${ids.length} tokens`));
  assert.match(await layernormText(page), new RegExp(`Token ${ids.length - 1} “·the” through the depth`));
  await page.close();
});

test('every control of the views has a form, the prompt box one of its own, and neither form submits', async () => {
  // Chromium's autofill looks over a changed text box's form, and over every control in no form,
  // after each keystroke's frame: a box in the views' form, or loose controls, cost ~0.5–1 ms there.
  const page = await openPage({ prompt: 'The cat sat on' });
  const owners = await page.evaluate(() => {
    const controls = [...document.querySelectorAll('#views :is(button, input, select, textarea, output, fieldset)')];
    const prompt = document.querySelector('[data-testid=prompt]');
    return { controls: controls.length, loose: controls.filter((control) => control.form === null).map((control) => control.outerHTML.slice(0, 80)), promptForm: [...prompt.form.elements].map((element) => element.dataset.testid) };
  });
  assert.ok(owners.controls > 50, `${owners.controls} controls`);
  assert.deepEqual(owners.loose, [], 'controls of the views in no form');
  assert.deepEqual(owners.promptForm, ['prompt'], 'the prompt box is alone in its form');
  // A button's default type submits its form, and a submitted form would load the page anew: the
  // page's own listeners cancel a submit before it reaches the document (where this one cancels
  // it anyway, so that a failure does not navigate away).
  const submitting = await page.evaluate(() => [...document.querySelectorAll('#views button')].filter((button) => button.type === 'submit').map((button) => button.outerHTML.slice(0, 80)));
  assert.deepEqual(submitting, [], 'buttons of the views that submit');
  const cancelled = await page.evaluate(() => {
    const seen = [];
    document.addEventListener('submit', (event) => {
      seen.push(`${event.target.id} ${event.defaultPrevented ? 'cancelled' : 'submitted'}`);
      event.preventDefault();
    });
    document.getElementById('views-controls').requestSubmit();
    document.getElementById('prompt-form').requestSubmit();
    return seen;
  });
  assert.deepEqual(cancelled, ['views-controls cancelled', 'prompt-form cancelled']);
  await page.close();
});

test('typing moves no panel: the head finder’s line keeps one height whatever the last token', async () => {
  // Before, the line wrapped for some last tokens and not others, and every panel under the grid
  // moved up and down by a line as one typed.
  const page = await openPage({ prompt: 'The cat sat on the mat and the dog sat on the log' });
  const box = page.getByTestId('prompt');
  await box.focus();
  await box.press('Control+End');
  const heights = new Set();
  for (const key of ' and then the printer said') {
    await page.keyboard.type(key);
    // Drawn: the chips are this text's tokens, and every view has caught up.
    await untilChipsAre(page, engine.encode(await box.inputValue()));
    await viewsSettled(page);
    heights.add(await page.locator('#grid-panel').evaluate((panel) => panel.getBoundingClientRect().height));
  }
  assert.equal(heights.size, 1, `the grid panel's heights while typing: ${[...heights].join(', ')}`);
  await page.close();
});

test('a model\'s first run and a typed character\'s answer through shared memory: the first keystroke\'s is waited for in its frame, not sent a frame late', async () => {
  // The page's runs as the Worker sees them: whether each came with the shared answer buffer, and its size.
  const init = () => {
    window.runRequests = [];
    const post = Worker.prototype.postMessage;
    Worker.prototype.postMessage = function recorded(message, ...rest) {
      if (message?.op === 'sessionRunPrompt') window.runRequests.push(message.reply?.byteLength ?? 0);
      return post.call(this, message, ...rest);
    };
  };
  const prompt = 'When Mary and John went to the store, John gave a drink to her and the cat sat on the';
  // Long enough that the first run's time per position says a keystroke's run is short even on a
  // slow machine (it would have to take 5 ms a position).
  assert.ok(engine.encode(prompt).length >= 20);
  const page = await openPage({ prompt, init });
  const box = page.getByTestId('prompt');
  await box.click();
  await box.press('Control+End'); // the end of the text (End alone ends the line the click landed on)
  await box.pressSequentially(' m');
  await untilChipsAre(page, engine.encode(`${prompt} m`));
  const [first, keystroke] = await page.evaluate(() => window.runRequests);
  // Before: the first run came by message, so the buffer (0.13 MB) learnt nothing, and the rule
  // "wait when the last run took 5 ms or less" left the first keystroke unwaited (the whole prompt's run is long).
  assert.ok(first > 0, 'the first run answers in shared memory (not waited for)');
  assert.ok(keystroke > 0, 'the first keystroke\'s answer is waited for in its frame');
  await page.close();
});

test('a keystroke rewrites only what changed: no attribute written again on every head, chip and option', async () => {
  const page = await openPage({ prompt: 'The cat sat on the mat and' });
  const heads = engine.info().nLayer * engine.info().nHead;
  const box = page.getByTestId('prompt');
  await box.click();
  await box.press('End');
  await viewsSettled(page);
  // Every attribute written and every child added or removed while typing, by what it was done to.
  await page.evaluate(() => {
    window.writes = {};
    const kind = (node) =>
      node.matches?.('button.head') ? 'head' : node.matches?.('span.badge') ? 'badge' : node.matches?.('button.chip') ? 'chip' : node.matches?.('[data-testid=finder-key]') ? 'finder' : node.closest?.('ol.candidates') ? 'candidates' : 'other';
    // A write that leaves things as they were: an attribute set to its value, a text set to itself.
    const unchanged = (record) =>
      record.type === 'attributes'
        ? record.oldValue === record.target.getAttribute(record.attributeName)
        : record.addedNodes.length > 0 && record.addedNodes.length === record.removedNodes.length && [...record.addedNodes].every((node, i) => node.isEqualNode(record.removedNodes[i]));
    new MutationObserver((records) => {
      for (const record of records) {
        const key = `${kind(record.target)} ${record.type === 'attributes' ? record.attributeName : record.type}`;
        window.writes[key] = (window.writes[key] ?? 0) + (record.type === 'childList' ? record.addedNodes.length + record.removedNodes.length : 1);
        if (unchanged(record)) window.writes.unchanged = [...(window.writes.unchanged ?? []), `${record.target.nodeName} ${key}`];
      }
    }).observe(document.body, { subtree: true, childList: true, attributes: true, attributeOldValue: true });
  });
  const typed = ' on the';
  await box.pressSequentially(typed, { delay: 60 });
  await untilChipsAre(page, engine.encode(`The cat sat on the mat and${typed}`));
  // Before: every head's name and badge, every chip's tab stop and every option of the head
  // finder's key list were written again on each keystroke.
  const writes = await page.evaluate(() => window.writes);
  assert.equal(writes['badge hidden'] ?? 0, 0, 'no badge is shown or hidden again');
  // Before: the next-token list was rebuilt (~15 nodes a row), and texts, tabs' aria-selected and
  // notes' hidden were written again unchanged on every keystroke.
  assert.equal(writes['candidates childList'] ?? 0, 0, 'the next-token rows are updated in place, not rebuilt');
  assert.deepEqual(writes.unchanged ?? [], [], 'nothing is written again unchanged');
  assert.ok((writes['chip tabindex'] ?? 0) <= 2 * typed.length, `tab stops set only on new chips (${writes['chip tabindex']} writes)`);
  assert.ok((writes['finder childList'] ?? 0) <= 2 * typed.length, `the head finder's options change in place (${writes['finder childList']} added or removed)`);
  // Each head's accessible name: the focused head's at once (none here: the prompt box has the
  // focus), every head's once typing pauses.
  assert.ok((writes['head aria-label'] ?? 0) <= 2 * heads, `${writes['head aria-label']} head names written for ${heads} heads`);
  const lastChip = await page.locator('[data-testid=tokens] .chip-text').last().innerText();
  await page.waitForFunction(
    (text) => [...document.querySelectorAll('button.head')].every((head) => head.getAttribute('aria-label').includes(`“${text}” attends most to`)),
    lastChip,
  );
  await page.close();
});

test('keystroke → redraw on SmolLM2-135M', async (t) => {
  if (!existsSync(`${repo}/assets/models/SmolLM2-135M-Instruct.Q4_1.gguf`)) {
    t.skip('assets/models has no SmolLM2-135M-Instruct.Q4_1.gguf (scripts/fetch-smollm.sh fetches it)');
    return;
  }
  const result = await measureTyping(SMOLLM, TYPED, { loadingShot: true });
  console.log(`keystroke → redraw, SmolLM2-135M: median ${result.median} ms, p95 ${result.p95} ms, max ${result.max} ms over ${result.count} redraws; last: ${result.stages}; ${result.size.replace('\n', ', ')}`);
  assert.ok(result.count > 0);
  // SmolLM2's runs are too long to wait for in a frame, and their answers still come in shared
  // memory (then by their note): by message the Worker copied every map into new memory.
  assert.ok(result.runsShared.length >= TYPED.length / 2 && result.runsShared.every(Boolean), `runs with the shared answer buffer: ${result.runsShared}`);
  assertHeldOnce(result.size, statSync(`${repo}/assets/models/SmolLM2-135M-Instruct.Q4_1.gguf`).size);
});

/**
 * The diagnostics' size line says the engine's memory after loading a `fileBytes` .gguf is about
 * the file's size: its pieces went into the weights as they arrived. Handed over whole, the file
 * and the weights were in memory together (file + weights ≥ 2 × file).
 */
function assertHeldOnce(size, fileBytes) {
  const mb = Number(/engine memory ([\d.]+) MB/.exec(size)?.[1]);
  const ratio = (mb * 2 ** 20) / fileBytes;
  console.log(`engine memory after loading: ${mb} MB for a ${(fileBytes / 2 ** 20).toFixed(0)} MB file (${ratio.toFixed(2)}×)`);
  assert.ok(ratio < 1.5, `engine memory ${mb} MB is ${ratio.toFixed(2)}× the ${fileBytes} B file`);
}

/** The id of the element that has the keyboard focus (data-testid, aria-label or tag). */
const focused = (page) =>
  page.evaluate(() => {
    const element = document.activeElement;
    return element?.dataset.testid ?? element?.getAttribute('aria-label') ?? element?.tagName.toLowerCase();
  });

/** Presses Tab until `predicate(focused element)` holds; returns how many presses it took. */
async function tabUntil(page, predicate, limit = 60) {
  for (let presses = 1; presses <= limit; presses++) {
    await page.keyboard.press('Tab');
    if (await page.evaluate(predicate)) return presses;
  }
  throw new Error(`not reached in ${limit} Tab presses (focus on ${await focused(page)})`);
}

test('keyboard only: skip link, type, arrow to a head, open it, append a candidate', async () => {
  const page = await openPage();
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Skip to the views');
  await page.screenshot({ path: `${shots}/keyboard-skip-link.png`, clip: { x: 0, y: 0, width: 640, height: 120 } });
  await page.keyboard.press('Enter');
  const toPrompt = await tabUntil(page, () => document.activeElement?.dataset.testid === 'prompt');
  assert.ok(toPrompt <= 4, `the prompt is ${toPrompt} Tab presses after the skip link`);
  await page.keyboard.type(PROMPT, { delay: 10 });
  const tokens = engine.encode(PROMPT);
  await untilChipsAre(page, tokens);
  // The chips are one Tab stop; arrow keys move between them; Enter picks one.
  await tabUntil(page, () => document.activeElement?.classList.contains('chip'));
  await page.keyboard.press('End');
  await page.keyboard.press('ArrowLeft');
  await page.keyboard.press('Enter');
  await page.locator(`[data-testid=tokens] .chip[data-pos="${tokens.length - 2}"][aria-pressed=true]`).waitFor();
  // The grid is one Tab stop too: arrows move, Enter opens the head.
  const toGrid = await tabUntil(page, () => document.activeElement?.classList.contains('head'));
  assert.ok(toGrid <= 40, `the grid is ${toGrid} Tab presses after the chips`);
  await page.keyboard.press('ArrowRight');
  await page.keyboard.press('ArrowDown');
  await page.keyboard.press('Enter');
  await page.locator('#detail-title').filter({ hasText: 'Layer 1 · Head 1' }).waitFor();
  assert.match(await page.getByTestId('announce-head').textContent(), /^Layer 1, head 1: query \d+ “.+” attends most to \d+ “.+” \(\d/);
  await page.getByTestId('attention-grid').screenshot({ path: `${shots}/keyboard-grid-focus.png` });
  // The next-token candidates are buttons: Tab to the first, Down to the second, Enter appends it.
  await tabUntil(page, () => document.activeElement?.dataset.testid === 'candidate', 80);
  await page.keyboard.press('ArrowDown');
  const second = (await candidates(page))[1];
  assert.match(await page.evaluate(() => document.activeElement.textContent), /^Append .+, id \d+.*, model \d.*%, (sampled \d.*%|filtered out —)$/);
  await page.getByTestId('next-token').screenshot({ path: `${shots}/keyboard-candidate-focus.png` });
  await page.keyboard.press('Enter');
  await page.waitForFunction((id) => document.querySelector('[data-testid=tokens] li:last-child .chip-id')?.textContent === id, String(second.id));
  assert.equal(await focused(page), 'candidate', 'the focus stays on the candidates after appending');
  await page.getByTestId('announce-prediction').filter({ hasText: /^Top prediction after “.*”: “.*”, \d/ }).waitFor();
  await page.close();
});

test("the head finder's keys follow the prompt's tokens through every edit", async () => {
  const page = await openPage({ prompt: PROMPT });
  // The key list against the chips: "(pick a key)", then "k “token”" for each token.
  const assertKeysAreTheTokens = async (when) => {
    await viewsSettled(page);
    const chips = await page.locator('[data-testid=tokens] .chip-text').allInnerTexts();
    const keys = await page.getByTestId('finder-key').locator('option').allTextContents();
    assert.deepEqual(keys, ['(pick a key)', ...chips.map((text, k) => `${k} “${text}”`)], when);
  };
  await assertKeysAreTheTokens('at first');
  await typePrompt(page, ' Mary', [...engine.encode(`${PROMPT} Mary`)]);
  await assertKeysAreTheTokens('after typing');
  // A token in the middle changes: its key changes in place, with those after it.
  const changed = PROMPT.replace('the store', 'a market');
  await page.getByTestId('prompt').fill(changed);
  await untilChipsAre(page, engine.encode(changed));
  await assertKeysAreTheTokens('after a change in the middle');
  await page.getByTestId('prompt').fill('When Mary');
  await untilChipsAre(page, engine.encode('When Mary'));
  await assertKeysAreTheTokens('after shortening');
  await page.close();
});

test('the address follows every change and a link restores the state exactly', async () => {
  const page = await openPage({ prompt: PROMPT });
  await page.getByTestId('detectors').selectOption('repeated');
  await page.getByTestId('detector-status').filter({ hasText: 'scored on' }).waitFor();
  await page.getByTestId('highlight-induction').click();
  await page.locator('[data-testid=tokens] .chip').nth(7).click();
  await page.getByTestId('finder-key').selectOption('3');
  await page.getByTestId('attention-grid').locator('button.head').nth(6).click(); // layer 1, head 2
  await page.getByRole('tab', { name: 'Query row' }).click();
  await page.getByLabel('temperature').fill('0.7');
  await page.getByLabel('top-k').fill('5');
  await page.getByTestId('attention-scale').selectOption('sqrt');
  await page.locator('#theme-toggle').click();
  await page.waitForFunction(() => new URL(location.href).searchParams.get('theme') === 'light');
  const url = new URL(page.url());
  const expected = { model: FIXTURE, prompt: PROMPT, q: '7', head: '1.2', view: 'row', temp: '0.7', topk: '5', scale: 'sqrt', theme: 'light', backend: 'auto', detect: 'repeated', highlight: 'ind', key: '3' };
  for (const [name, value] of Object.entries(expected)) assert.equal(url.searchParams.get(name), value, `?${name}=`);
  // Typing replaces the history entry (no new one per keystroke) once the typing pauses.
  const length = await page.evaluate(() => history.length);
  await typePrompt(page, ' Mary', [...engine.encode(`${PROMPT} Mary`)]);
  await page.waitForFunction(() => new URL(location.href).searchParams.get('prompt').endsWith('Mary'));
  assert.equal(await page.evaluate(() => history.length), length);

  const copy = await browser.newPage({ viewport: SIZES.wide });
  await copy.goto(page.url());
  await copy.getByTestId('candidate').first().waitFor({ timeout: 60_000 });
  assert.equal(await copy.getByTestId('prompt').inputValue(), `${PROMPT} Mary`);
  assert.equal(await copy.locator('[data-testid=tokens] .chip[aria-pressed=true]').getAttribute('data-pos'), '7');
  assert.equal(await copy.locator('#detail-title').textContent(), 'Layer 1 · Head 2');
  assert.equal(await copy.getByRole('tab', { name: 'Query row' }).getAttribute('aria-selected'), 'true');
  await copy.getByTestId('query-row').filter({ hasText: 'Query 7' }).waitFor();
  assert.equal(await copy.getByLabel('temperature').inputValue(), '0.7');
  assert.equal(await copy.getByLabel('top-k').inputValue(), '5');
  assert.equal(await copy.getByTestId('attention-scale').inputValue(), 'sqrt');
  assert.equal(await copy.evaluate(() => document.documentElement.dataset.theme), 'light');
  assert.equal(await copy.getByTestId('detectors').inputValue(), 'repeated');
  assert.equal(await copy.getByTestId('highlight-induction').getAttribute('aria-pressed'), 'true');
  assert.equal(await copy.getByTestId('finder-key').inputValue(), '3');
  await copy.getByTestId('detector-status').filter({ hasText: 'scored on' }).waitFor();
  assert.deepEqual(await candidates(copy), await candidates(page), 'the same candidates under the same settings');
  assert.equal(copy.url(), page.url());
  await copy.close();
  await page.close();
});

test('a ?model= that does not exist says so and offers the list', async () => {
  const page = await openPage({ model: 'fixtures/no-such-model' });
  const notice = page.getByTestId('missing-model');
  await notice.filter({ hasText: 'This server has no model “fixtures/no-such-model”.' }).waitFor();
  await page.locator('#status').screenshot({ path: `${shots}/missing-model.png` });
  await notice.getByRole('button', { name: FIXTURE, exact: true }).click();
  await page.locator('[data-field=model]').filter({ hasText: /^gpt2-tiny-f32/ }).waitFor();
  assert.equal(await notice.isHidden(), true);
  await page.close();
});

test('explanations: how to read each panel, the sink, example prompts', async () => {
  const page = await openPage({ prompt: 'The' });
  for (const id of ['prompt', 'grid', 'detail', 'norms', 'next']) assert.equal(await page.getByTestId(`howto-${id}`).isVisible(), true, `how to read ${id}`);
  await page.getByTestId('howto-detail').screenshot({ path: `${shots}/howto-detail.png` });
  assert.match(await page.getByTestId('scale-note').textContent(), /first token.*left out/);
  // Dismissed, it stays dismissed (after a reload too); the "?" brings it back.
  await page.getByTestId('howto-grid').getByRole('button', { name: 'Hide how to read this' }).click();
  await page.reload();
  await page.getByTestId('candidate').first().waitFor();
  assert.equal(await page.getByTestId('howto-grid').isHidden(), true);
  await page.locator('#grid-panel').getByRole('button', { name: 'How to read this' }).click();
  assert.equal(await page.getByTestId('howto-grid').isVisible(), true);
  // An example prompt, one click away.
  await page.getByTestId('example').filter({ hasText: 'Factual recall' }).click();
  await page.waitForFunction((ids) => [...document.querySelectorAll('[data-testid=tokens] .chip-id')].map((chip) => chip.textContent).join() === ids, [...engine.encode('The Eiffel Tower is located in the city of')].join());
  assert.match(await layernormText(page), /scale\s+√\(var x \+ ε\)/, 'LayerNorm formula for a GPT-2 model');
  await page.locator('#prompt-panel').screenshot({ path: `${shots}/example-prompt.png` });
  await page.close();
});

test('export: the trace as safetensors, the numbers as CSV, a view as PNG', async () => {
  const page = await openPage({ prompt: PROMPT });
  const save = async (click) => {
    const [download] = await Promise.all([page.waitForEvent('download'), click()]);
    return { name: download.suggestedFilename(), bytes: await readFile(await download.path()) };
  };
  const trace = await save(() => page.getByTestId('export-trace').click());
  assert.match(trace.name, /\.safetensors$/);
  const headerLength = Number(trace.bytes.readBigUInt64LE(0));
  const header = JSON.parse(trace.bytes.subarray(8, 8 + headerLength).toString());
  const t = engine.encode(PROMPT).length;
  assert.deepEqual(header['blocks.1.attn.hook_pattern'].shape, [4, t, t]);
  const csv = await save(() => page.locator('#detail-panel').getByRole('button', { name: /as CSV/ }).click());
  const lines = csv.bytes.toString().trim().split('\n');
  assert.equal(lines.length, t + 1, 'a header and one line per query');
  assert.ok(lines[1].split(',').slice(2).filter(Boolean).length === 1 && Number(lines[1].split(',')[2]) === 1, 'the first query reads only itself');
  const next = await save(() => page.locator('#next-panel').getByRole('button', { name: /as CSV/ }).click());
  assert.match(next.bytes.toString(), /^rank,id,token,model_probability,sampled_probability\n1,/);
  const png = await save(() => page.locator('#detail-panel').getByRole('button', { name: /as PNG/ }).click());
  assert.equal(png.bytes.subarray(1, 4).toString(), 'PNG');
  const grid = await save(() => page.locator('#grid-panel').getByRole('button', { name: /as PNG/ }).click());
  assert.equal(grid.bytes.subarray(1, 4).toString(), 'PNG');
  // The LayerNorm strip's canvas keeps room to grow with the prompt, hidden by its box (it takes
  // no pointer either): the PNG is the strip as drawn.
  const stripCanvas = page.locator('#layernorm-panel canvas').first();
  await stripCanvas.scrollIntoViewIfNeeded();
  await viewsSettled(page);
  const stripShown = () =>
    stripCanvas.evaluate((canvas) => {
      const box = canvas.parentElement.getBoundingClientRect();
      return {
        width: Math.round(box.width * devicePixelRatio),
        height: Math.round(box.height * devicePixelRatio),
        backing: [canvas.width, canvas.height],
        roomBelow: canvas.getBoundingClientRect().bottom > box.bottom + 2,
        belowHits: document.elementFromPoint(box.left + 4, box.bottom + 2) === canvas,
      };
    });
  const before = await stripShown();
  assert.ok(before.roomBelow && before.backing[1] > before.height, `room below the strip: a ${before.backing.join('×')} canvas for ${before.width}×${before.height}`);
  assert.equal(before.belowHits, false, 'the room is clipped: a point in it is not the canvas');
  const strip = await save(() => page.locator('#layernorm-panel').getByRole('button', { name: /as PNG/ }).click());
  assert.deepEqual([strip.bytes.readUInt32BE(16), strip.bytes.readUInt32BE(20)], [before.width, before.height], 'the PNG is the strip as shown');
  // Past 24 tokens the rows share the strip's 336 px: a token changes neither the box nor the canvas.
  const typed = async (key) => {
    await page.keyboard.type(key);
    await untilChipsAre(page, engine.encode(await page.getByTestId('prompt').inputValue()));
    await viewsSettled(page);
    return stripShown();
  };
  await page.getByTestId('prompt').press('End');
  assert.ok(engine.encode(PROMPT).length > 24);
  const longer = await typed(' the');
  assert.deepEqual([longer.height, longer.backing], [before.height, before.backing], 'a long prompt\'s strip keeps its height');
  // Up to 24 tokens the strip gains a 14 px row a token: into the room its canvas kept.
  await page.getByTestId('prompt').fill('The cat');
  const short = await typed(' sat');
  const grown = await typed(' on');
  assert.ok(grown.height > short.height, `the strip grew: ${short.height} → ${grown.height} px`);
  assert.deepEqual(grown.backing, short.backing, 'into the room it kept: the same canvas');
  const svg = await save(() => page.locator('#layernorm-panel').getByRole('button', { name: /as SVG/ }).click());
  assert.match(svg.bytes.toString(), /^<svg[^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"/);
  await page.close();
});

/**
 * A folder `gpt2-deep-16` (in a fresh temporary directory) holding the GPT-2 fixture stretched to
 * 16 layers (its two layers repeated, the copies' outputs zeroed), its config without a `_name_or_path`, and its tokenizer:
 * a model named only by its folder, whose attention grid is taller than its scroll box.
 */
async function deepGpt2Folder() {
  const source = `${repo}/tests/fixtures/gpt2-tiny-f32`;
  const { tensors } = parseSafetensors(await readFile(`${source}/model.safetensors`));
  const layers = 16;
  const entries = [];
  for (const [name, tensor] of Object.entries(tensors)) {
    const match = /^h\.(\d+)\.(.*)$/.exec(name);
    if (!match) entries.push({ name, tensor });
    else for (let layer = Number(match[1]); layer < layers; layer += 2) entries.push({ name: `h.${layer}.${match[2]}`, tensor });
  }
  const { file, regions } = allocateSafetensors(entries.map(({ name, tensor }) => ({ name, dtype: 'F32', shape: tensor.shape, byteLength: tensor.data.byteLength })));
  // Layers past the first two write nothing (output projections left zero): random weights
  // stacked 16 deep would blow the residual stream up; their attention is still computed.
  for (const { name, tensor } of entries) if (!/^h\.([2-9]|1\d)\..*c_proj/.test(name)) regions[name].set(new Uint8Array(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength));
  const config = JSON.parse(await readFile(`${source}/config.json`, 'utf8'));
  delete config._name_or_path;
  const folder = `${await mkdtemp(`${tmpdir()}/gptlens-web-`)}/gpt2-deep-16`;
  await mkdir(folder);
  await Promise.all([
    writeFile(`${folder}/model.safetensors`, file),
    writeFile(`${folder}/config.json`, JSON.stringify({ ...config, n_layer: layers })),
    writeFile(`${folder}/tokenizer.json`, await readFile(`${source}/tokenizer.json`)),
  ]);
  return folder;
}

test('a model opened from files is named by itself (GGUF general.name) or its folder; the grid’s labels stay in view while it scrolls', async () => {
  const page = await openPage({ prompt: PROMPT });
  // A GGUF: its own name, not “model.gguf”.
  await page.getByTestId('model-files').setInputFiles(`${repo}/tests/fixtures/llama-tiny-q/model.gguf`);
  await page.locator('[data-field=model]').filter({ hasText: /^gptlens llama-tiny-q\s*llama · 2 layers/ }).waitFor();
  assert.match(await page.getByTestId('model-select').locator('option:checked').textContent(), /^gptlens llama-tiny-q · /);

  // A folder (config.json without a name, weights, tokenizer): the folder's name.
  const folder = await deepGpt2Folder();
  try {
    await page.getByTestId('model-folder').setInputFiles(folder);
    await page.locator('[data-field=model]').filter({ hasText: /^gpt2-deep-16\s*gpt2 · 16 layers × 4 heads/ }).waitFor();
  } finally {
    await rm(`${folder}/..`, { recursive: true, force: true });
  }
  await page.getByTestId('candidate').first().waitFor();

  // 16 layers overflow the grid's scroll box: scrolled, the head labels stay on top and each
  // visible layer's label stays beside its row, in view and not covered.
  const grid = page.getByTestId('attention-grid');
  const scroller = grid.locator('xpath=..');
  const inView = () =>
    scroller.evaluate((box) => {
      const frame = box.getBoundingClientRect();
      const onTop = (label) => {
        const rect = label.getBoundingClientRect();
        const hit = document.elementFromPoint(rect.x + rect.width / 2, rect.y + rect.height / 2);
        return { text: label.textContent, top: rect.top, bottom: rect.bottom, left: rect.left, right: rect.right, onTop: hit === label || label.contains(hit) };
      };
      const heads = [...box.querySelectorAll('.head-label')].map(onTop);
      const rows = [...box.querySelectorAll('.grid-row:not(.grid-head)')].filter((row) => {
        const head = row.querySelector('button.head').getBoundingClientRect();
        return head.top >= frame.top + 30 && head.bottom <= frame.bottom;
      });
      const layers = rows.map((row) => onTop(row.querySelector('.layer-label')));
      return { frame: { top: frame.top, bottom: frame.bottom, left: frame.left, right: frame.right }, scrolled: box.scrollTop, overflow: box.scrollHeight - box.clientHeight, heads, layers };
    });
  const check = (state, what) => {
    assert.equal(state.heads.length, 4);
    for (const label of [...state.heads, ...state.layers]) {
      assert.ok(label.top >= state.frame.top - 1 && label.bottom <= state.frame.bottom + 1, `${what}: ${label.text} is inside the scroll box vertically`);
      assert.ok(label.left >= state.frame.left - 1 && label.right <= state.frame.right + 1, `${what}: ${label.text} is inside the scroll box horizontally`);
      assert.ok(label.onTop, `${what}: ${label.text} is not covered`);
    }
    assert.ok(state.layers.length >= 2, `${what}: ${state.layers.length} layer rows in view`);
  };
  await scroller.evaluate((box) => box.scrollIntoView({ block: 'start' }));
  const top = await inView();
  assert.ok(top.frame.bottom <= SIZES.wide.height, 'the whole scroll box is on screen');
  assert.ok(top.overflow > 400, `the grid overflows its box by ${top.overflow} px`);
  check(top, 'unscrolled');
  await scroller.evaluate((box) => box.scrollBy(0, 700));
  const middle = await inView();
  assert.ok(middle.scrolled >= 600, `scrolled ${middle.scrolled} px`);
  check(middle, 'scrolled');
  const { frame } = middle;
  await page.screenshot({ path: `${shots}/grid-sticky-labels.png`, clip: { x: frame.left - 8, y: frame.top - 8, width: frame.right - frame.left + 16, height: frame.bottom - frame.top + 16 } });
  assert.ok(middle.heads.every((label) => label.top <= middle.frame.top + 4), 'the head labels stuck to the top of the box');
  await scroller.evaluate((box) => box.scrollTo(0, box.scrollHeight));
  const bottom = await inView();
  check(bottom, 'scrolled to the end');
  assert.ok(bottom.layers.some((label) => label.text === 'L15'), 'the last layer is labelled');
  await page.close();
});

/**
 * The tiny LLaMA fixture's GGUF (RoPE: no position weights, so its context is only a number) with
 * its llama.context_length patched from 64 to `context`.
 */
async function longContextLlama(context) {
  const bytes = new Uint8Array(await readFile(`${repo}/tests/fixtures/llama-tiny-q/model.gguf`));
  const key = new TextEncoder().encode('llama.context_length');
  const at = bytes.findIndex((_, i) => key.every((byte, j) => bytes[i + j] === byte));
  const view = new DataView(bytes.buffer);
  assert.ok(view.getUint32(at + key.length, true) === 4 && view.getUint32(at + key.length + 4, true) === 64, 'the GGUF layout the patch expects');
  view.setUint32(at + key.length + 4, context, true);
  return bytes;
}

/** `longContextLlama(context)` dropped onto the page. */
async function dropLongContextLlama(page, context = 1024) {
  const bytes = await longContextLlama(context);
  await page.evaluate((base64) => {
    const files = new DataTransfer();
    files.items.add(new File([Uint8Array.from(atob(base64), (c) => c.charCodeAt(0))], 'llama-long.gguf'));
    document.body.dispatchEvent(new DragEvent('drop', { dataTransfer: files, bubbles: true, cancelable: true }));
  }, Buffer.from(bytes).toString('base64'));
  await page.locator('[data-field=model]').filter({ hasText: new RegExp(`context ${context}`) }).waitFor();
}

/** Words of a text whose encoding by `model` is exactly `count` tokens. */
function textOfTokens(model, count) {
  const words = [];
  const pool = 'the quick brown fox jumps over a lazy dog while Mary and John walk to the store and talk about numbers'.split(' ');
  for (let i = 0; model.encode(words.join(' ')).length < count; i++) words.push(pool[i % pool.length] + (i % 7 === 0 ? ',' : ''));
  let text = words.join(' ');
  while (model.encode(text).length > count) text = text.slice(0, -1);
  return text;
}

test('a 512-token prompt: max-pooled thumbnails, a zoomable map with legible labels, the query row', async () => {
  const page = await openPage({ prompt: 'The' });
  await dropLongContextLlama(page);
  await init();
  const gguf = await readFile(`${repo}/tests/fixtures/llama-tiny-q/model.gguf`);
  const llama = Model.load({ 'model.gguf': new Uint8Array(gguf) });
  const text = textOfTokens(llama, 512);
  const t = llama.encode(text).length;
  llama.free?.();
  assert.equal(t, 512);
  await page.getByTestId('prompt').fill(text);
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid=tokens] .chip').length === n, t, { timeout: 60_000 });
  await page.getByTestId('candidate').first().waitFor();
  assert.match(await layernormText(page), /scale\s+√\(mean x² \+ ε\)/, 'the RMSNorm formula');

  // Thumbnails: max-pooled to at most 96 pixels and at most the cell's side (blocks of 6 × 6 in an
  // 86-pixel thumbnail for a cell of 96 or more), every block of the causal triangle painted.
  const thumbs = await gridCanvases(page);
  assert.equal(thumbs.length, 8);
  for (const canvas of thumbs) {
    const side = Math.ceil(512 / Math.ceil(512 / Math.min(96, canvas.side)));
    assert.equal(canvas.width, side);
    assert.equal(canvas.painted, (side * (side + 1)) / 2);
  }
  await page.getByTestId('attention-grid').screenshot({ path: `${shots}/long-512-grid.png` });

  const map = page.getByTestId('attention-map');
  const labels = () => map.evaluate((canvas) => ({ labels: canvas.drawnLabels, zoom: canvas.zoomLevel }));
  const assertLegible = ({ labels: drawn }, what) => {
    for (const axis of ['row', 'col']) {
      const boxes = drawn.filter((label) => label.axis === axis).sort((a, b) => (axis === 'row' ? a.y - b.y : a.x - b.x));
      assert.ok(boxes.length >= 8, `${what}: ${boxes.length} ${axis} labels`);
      for (const box of boxes) assert.ok((axis === 'row' ? box.height : box.width) >= 11, 'labels are drawn at 11 px');
      for (let i = 1; i < boxes.length; i++) {
        const [a, b] = [boxes[i - 1], boxes[i]];
        const apart = axis === 'row' ? b.y >= a.y + a.height : b.x >= a.x + a.width;
        assert.ok(apart, `${what}: ${axis} labels ${a.index} and ${b.index} overlap`);
      }
    }
  };
  const fitted = await labels();
  assertLegible(fitted, 'fitted');
  await page.getByTestId('attention-detail').screenshot({ path: `${shots}/long-512-map-fit.png` });
  // Zoom with the keyboard, then the wheel; pan with the arrows. More labels, still apart.
  await map.focus();
  for (let i = 0; i < 4; i++) await page.keyboard.press('+');
  await page.keyboard.press('ArrowDown');
  const box = await map.boundingBox();
  await page.mouse.move(box.x + box.width * 0.7, box.y + box.width * 0.7);
  await page.mouse.wheel(0, -400);
  const zoomed = await labels();
  assert.ok(zoomed.zoom > 5, `zoomed to ${zoomed.zoom}`);
  assertLegible(zoomed, 'zoomed');
  const rows = (state) => state.labels.filter((label) => label.axis === 'row');
  const spacing = (state) => rows(state)[1].index - rows(state)[0].index;
  assert.ok(spacing(zoomed) < spacing(fitted), `zoomed labels every ${spacing(zoomed)} rows, fitted every ${spacing(fitted)}`);
  assert.ok(rows(zoomed)[0].index > 0, 'panned away from the first row');
  await page.getByTestId('attention-detail').screenshot({ path: `${shots}/long-512-map-zoomed.png` });
  await page.keyboard.press('0');
  assert.equal((await labels()).zoom, 1);

  // A pinch: two pointers moving apart zoom in about the point between them, together zoom out.
  const pinch = (from, to) =>
    map.evaluate((canvas, [from, to]) => {
      const rect = canvas.getBoundingClientRect();
      const [cx, cy] = [rect.x + rect.width * 0.6, rect.y + rect.width * 0.4];
      const send = (type, id, dx) =>
        canvas.dispatchEvent(new PointerEvent(type, { pointerId: id, pointerType: 'touch', isPrimary: id === 1, clientX: cx + dx, clientY: cy, bubbles: true, cancelable: true }));
      send('pointerdown', 1, -from);
      send('pointerdown', 2, from);
      for (let i = 1; i <= 5; i++) {
        const spread = from + ((to - from) * i) / 5;
        send('pointermove', 1, -spread);
        send('pointermove', 2, spread);
      }
      send('pointerup', 1, -to);
      send('pointerup', 2, to);
      return canvas.zoomLevel;
    }, [from, to]);
  const pinched = await pinch(20, 80);
  assert.ok(Math.abs(pinched - 4) < 0.01, `pinched from 40 to 160 px apart: zoom ${pinched}`);
  assertLegible(await labels(), 'pinched');
  const unpinched = await pinch(80, 40);
  assert.ok(Math.abs(unpinched - 2) < 0.01, `pinched back to 80 px apart: zoom ${unpinched}`);
  await page.keyboard.press('0');

  // Narrow, the fitted map has more tokens than pixels: it is max-pooled like the thumbnails, so
  // each of the strongest weights still shows at full strength somewhere in its footprint.
  await page.setViewportSize(SIZES.narrow);
  await page.waitForFunction(() => document.querySelector('[data-testid=attention-map]')?.cellGeometry?.cell < 1);
  const pooled = await map.evaluate((canvas) => {
    const { left, top, cell, factor, ratio } = canvas.cellGeometry;
    const source = canvas.cellImage.getContext('2d').getImageData(0, 0, canvas.cellImage.width, canvas.cellImage.height);
    const shown = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height);
    const light = (data, i) => 0.2126 * data[i] + 0.7152 * data[i + 1] + 0.0722 * data[i + 2];
    const t = source.width;
    const cells = [];
    for (let q = 1; q < t; q++) for (let k = 1; k <= q; k++) cells.push({ q, k, l: light(source.data, (q * t + k) * 4) });
    cells.sort((a, b) => b.l - a.l);
    const missing = [];
    for (const { q, k, l } of cells.slice(0, 200)) {
      // The device pixels the cell covers, and one more each side.
      const [x0, y0] = [Math.floor((left + k * cell) * ratio) - 1, Math.floor((top + q * cell) * ratio) - 1];
      const [x1, y1] = [Math.ceil((left + (k + 1) * cell) * ratio) + 1, Math.ceil((top + (q + 1) * cell) * ratio) + 1];
      let best = 0;
      for (let y = Math.max(0, y0); y < Math.min(shown.height, y1); y++) {
        for (let x = Math.max(0, x0); x < Math.min(shown.width, x1); x++) best = Math.max(best, light(shown.data, (y * shown.width + x) * 4));
      }
      if (best < l - 2) missing.push({ q, k, l, best });
    }
    return { factor, cell, t, missing };
  });
  assert.equal(pooled.t, 512);
  assert.ok(pooled.cell < 1 && pooled.factor >= 2, `${pooled.cell} px per token, pooled ${pooled.factor}×`);
  assert.deepEqual(pooled.missing, [], `every one of the 200 strongest weights shows at ${pooled.factor}× pooling`);
  assertLegible(await labels(), 'narrow');
  await page.getByTestId('attention-detail').screenshot({ path: `${shots}/long-512-map-narrow-pooled.png` });
  await page.setViewportSize(SIZES.wide);

  // The query row: the last token's weight on all 512 keys, labelled.
  await page.getByRole('tab', { name: 'Query row' }).click();
  // Drawn with the next frame if the resize above left the panel's visibility not yet reported.
  await page.getByTestId('query-row').locator('tbody tr').nth(511).waitFor();
  assert.equal(await page.getByTestId('query-row').locator('tbody tr').count(), 512);
  await page.getByTestId('attention-detail').screenshot({ path: `${shots}/long-512-query-row.png` });
  await page.close();
});

test('a prompt too long for every head’s whole map: pooled thumbnails, the opened head whole from kept queries, only the last bin recomputed', async () => {
  const page = await openPage({ prompt: 'The' });
  await dropLongContextLlama(page, 4096);
  await init();
  const llama = Model.load({ 'model.gguf': await longContextLlama(4096) });
  const text = textOfTokens(llama, 2000);
  const tokens = llama.encode(text);
  const t = tokens.length;
  assert.equal(t, 2000);
  await page.getByTestId('prompt').fill(text);
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid=tokens] .chip').length === n, t, { timeout: 120_000 });
  await page.getByTestId('attention-map').waitFor();

  // 8 heads × 2000² weights would be 128 MB: the engine pools them to bins of 16 (125 a side),
  // and the thumbnails pool those to at most 96 px and the cell's side (63 px in a cell of 63 or
  // more), every cell of the causal triangle painted.
  const thumbs = await gridCanvases(page);
  assert.equal(thumbs.length, 8);
  for (const canvas of thumbs) {
    const side = Math.ceil(125 / Math.ceil(125 / Math.min(96, canvas.side)));
    assert.deepEqual([canvas.width, canvas.painted], [side, (side * (side + 1)) / 2]);
  }
  await page.getByTestId('attention-grid').screenshot({ path: `${shots}/long-2000-pooled-grid.png` });

  // Opening a head brings its whole map, remade in the engine from the queries it kept: the last
  // query's strongest key is the one the package's own remade map has.
  await page.locator('[data-testid=attention-grid] button[title^="Layer 1, head 2 "]').click();
  const map = page.getByTestId('attention-map');
  // Named at once by the head and the length, and in full (its strongest weights) after the paint.
  await page.waitForFunction(() => /layer 1, head 2, 2000 tokens .*reads most/.test(document.querySelector('[data-testid=attention-map]')?.getAttribute('aria-label') ?? ''));
  const shown = Number(/reads most (\d+) /.exec(await map.getAttribute('aria-label'))[1]);
  const session = llama.session();
  session.keepQueries(true);
  session.run(tokens, ['blocks.0.attn.hook_pattern.pooled', 'blocks.1.attn.hook_pattern.pooled']);
  const row = session.headPattern(1, 2).data.subarray((t - 1) * t, t * t);
  assert.equal(shown, row.indexOf(Math.max(...row)), 'the strongest key of the last query');
  await page.getByTestId('attention-detail').screenshot({ path: `${shots}/long-2000-opened-head.png` });

  // The head finder needs every whole map, and says so.
  assert.ok(await page.evaluate(() => [...document.querySelectorAll('option')].some((option) => option.textContent.includes('pooled maps only'))));

  // Typing at the end recomputes the last bin of 16 and the new token, not the prompt.
  const box = page.getByTestId('prompt');
  await box.focus();
  await box.press('Control+End');
  await page.keyboard.type(' x');
  await page.waitForFunction((n) => document.querySelectorAll('[data-testid=tokens] .chip').length > n, t);
  // The diagnostics are below the fold: drawn once the page has settled.
  await page.waitForFunction(() => /of 200[1-9] tokens computed/.test(document.querySelector('[data-field=forward]')?.textContent ?? ''));
  const [, computed, total] = /(\d+) of (\d+) tokens computed/.exec(await field(page, 'forward')).map(Number);
  assert.ok(total > 2000 && computed <= 16 + (total - 2000), `${computed} of ${total} tokens computed`);
  assert.match(await field(page, 'memory'), /^[\d.]+ [KMG]B\n.*WebAssembly memory/s);

  // A short prompt again: every whole map, thumbnails one pixel per token.
  await box.fill('The cat sat');
  await page.waitForFunction(() => document.querySelectorAll('[data-testid=tokens] .chip').length < 10);
  await page.waitForFunction(() => Number(document.querySelector('[data-testid=attention-grid] button.head').dataset.pixels) < 10);
  const chips = await page.locator('[data-testid=tokens] .chip').count();
  assert.equal((await gridCanvases(page))[0].width, chips);
  session.free?.();
  llama.free?.();
  await page.close();
});

test('“Wrap as chat” wraps once (SmolLM2-135M)', async (t) => {
  if (!existsSync(`${repo}/assets/models/SmolLM2-135M-Instruct.Q4_1.gguf`)) {
    t.skip('assets/models has no SmolLM2-135M-Instruct.Q4_1.gguf (scripts/fetch-smollm.sh fetches it)');
    return;
  }
  const page = await openPage({ model: SMOLLM, prompt: 'What is the capital of France?' });
  const wrap = page.getByTestId('wrap-chat');
  assert.equal(await wrap.isEnabled(), true);
  await wrap.click();
  await page.waitForFunction(() => document.querySelector('[data-testid=prompt]').value.includes('<|im_start|>user'));
  const wrapped = await page.getByTestId('prompt').inputValue();
  assert.equal(wrapped.split('<|im_start|>user').length, 2, 'one user turn');
  await page.waitForFunction(() => document.querySelector('[data-testid=wrap-chat]').disabled);
  await wrap.click({ force: true });
  await page.waitForTimeout(300);
  assert.equal(await page.getByTestId('prompt').inputValue(), wrapped, 'a second wrap changes nothing');
  await page.close();
});

test('Gemma-3-270M (fetched on request): listed with its terms, its tokens, a map per head, the next token', async (t) => {
  const file = 'gemma-3-270m-q4_k_m.gguf';
  if (!existsSync(`${repo}/assets/models/${file}`)) {
    t.skip(`assets/models has no ${file} (npm run fetch:gemma fetches it, under the Gemma Terms of Use)`);
    return;
  }
  const page = await openPage({ model: `assets/${file}`, prompt: 'The capital of France is' });
  const option = page.locator(`option[value="assets/${file}"]`);
  assert.match(await option.innerText(), /Gemma Terms of Use/, 'the list names the terms');
  // transformers' ids for this prompt (tests/fixtures/gemma3-270m: BOS, then SentencePiece).
  assert.deepEqual(await chipIds(page), ['2', '818', '5279', '529', '7001', '563']);
  const canvases = await gridCanvases(page);
  assert.equal(canvases.length, 18 * 4, 'one map per layer × head');
  assert.ok(canvases.slice(0, 8).every((canvas) => canvas.painted === 21), 'the causal triangles are painted');
  const top = (await candidates(page)).slice(0, 3).map((candidate) => candidate.id);
  assert.deepEqual(top, [506, 496, 9079], 'transformers’ top three: “ the”, “ a”, “ Paris”');
  assert.match(await layernormText(page), /RMSNorm/);
  const size = await field(page, 'size');
  console.log(`Gemma-3-270M in the page: ${(await field(page, 'model')).replace(/\n/g, ' ')}; ${(await field(page, 'stages')).replace(/\n/g, ' ')}; ${size.replace(/\n/g, ' ')}`);
  assertHeldOnce(size, statSync(`${repo}/assets/models/${file}`).size);
  await page.close();
});

/** The JSON the open instrument's download button saves. */
async function instrumentJson(page) {
  const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: /numbers as JSON/ }).click()]);
  return JSON.parse(await readFile(await download.path(), 'utf8'));
}

/** Largest |a − b| over the numbers of two records of the same shape. */
function largestGap(a, b) {
  if (typeof a === 'number') return Math.abs(a - b);
  if (Array.isArray(a)) return Math.max(0, ...a.map((x, i) => largestGap(x, b[i])));
  if (a && typeof a === 'object') return Math.max(0, ...Object.keys(a).map((key) => largestGap(a[key], b[key])));
  return a === b ? 0 : Infinity;
}

test('instruments: the page’s logit lens, attribution and patching are the package’s numbers; the state is in the address', async () => {
  const clean = 'The cat sat on the mat';
  const corrupt = 'The dog sat on the mat';
  const page = await openPage({ prompt: clean });
  const tokens = engine.encode(clean);
  const t = tokens.length;
  // Logit lens: the last 10 positions, 3 tokens each, every layer and the output.
  await page.getByTestId('instrument-lens').click();
  await page.locator('[data-testid=lens-table] td').first().waitFor();
  assert.equal(await page.locator('[data-testid=lens-table] tbody tr').count(), 2 + 1, 'a row per layer and the output');
  const lens = await instrumentJson(page);
  const expectedLens = engine.logitLens(tokens, { first: Math.max(0, t - 10), k: 3 });
  assert.ok(largestGap(lens, expectedLens) <= 1e-6, `lens: ${largestGap(lens, expectedLens)}`);
  // Clicking a cell follows its top token: the address names it, the colours are its probability.
  await page.locator('[data-testid=lens-table] tbody tr:last-child td').last().click();
  await page.waitForURL(/[?&]target=\d+/);
  const target = Number(new URL(page.url()).searchParams.get('target'));
  await page.getByTestId('lens-target').filter({ hasText: 'picked' }).waitFor();
  const followed = await instrumentJson(page);
  assert.equal(followed.target, target);
  assert.ok(largestGap(followed.targetProb, engine.logitLens(tokens, { first: Math.max(0, t - 10), k: 3, target }).targetProb) <= 1e-6);
  // Attribution at the last position: top token minus the second, parts summing to the difference.
  await page.getByTestId('instrument-attribution').click();
  await page.getByTestId('dla-summary').filter({ hasText: 'sum to' }).waitFor();
  const attribution = await instrumentJson(page);
  const expectedAttribution = engine.attribution(tokens);
  assert.ok(largestGap(attribution, expectedAttribution) <= 1e-5, `attribution: ${largestGap(attribution, expectedAttribution)}`);
  assert.ok(Math.abs(attribution.total - attribution.logitDiff) <= 1e-4);
  assert.equal(await page.locator('[data-testid=dla-table] tbody tr').count(), 2);
  // Patching: the IOI pair is too long apart in this tiny vocabulary, and the page says so.
  await page.getByTestId('instrument-patching').click();
  await page.getByTestId('ioi-preset').click();
  await page.getByTestId('patch-summary').filter({ hasText: 'needs the same number of tokens' }).waitFor();
  await page.getByTestId('prompt').fill(clean);
  await page.getByTestId('compare-prompt').fill(corrupt);
  await untilChipsAre(page, engine.encode(clean));
  await page.getByTestId('run-patching').click();
  await page.locator('[data-testid=patch-heads-table] td').first().waitFor();
  const patched = await instrumentJson(page);
  const cleanIds = engine.encode(clean);
  const corruptIds = engine.encode(corrupt);
  const [answer, second] = engine.run(cleanIds, []).topK(2).map(({ id }) => id);
  const corruptTop = engine.run(corruptIds, []).topK(1)[0].id;
  const expectedPatch = engine.patch({ clean: cleanIds, corrupt: corruptIds, answer, wrong: corruptTop === answer ? second : corruptTop });
  assert.ok(largestGap(patched, expectedPatch) <= 1e-5, `patching: ${largestGap(patched, expectedPatch)}`);
  assert.equal(await page.locator('[data-testid=patch-resid-table] tbody tr').count(), 2);
  assert.equal(await page.locator('[data-testid=patch-resid-table] tbody tr:first-child td').count(), t);
  const [csvDownload] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: /numbers as CSV/ }).click()]);
  const csv = (await readFile(await csvDownload.path(), 'utf8')).trim().split('\n');
  assert.equal(csv[0], 'sweep,layer,position_or_head,score');
  assert.equal(csv.length, 1 + 2 * t + 2 * 4);
  // The address keeps the open instrument and the corrupted prompt: a link reopens them.
  await page.waitForURL(/inst=patch/);
  const url = new URL(page.url());
  assert.equal(url.searchParams.get('compare'), corrupt);
  const copy = await browser.newPage({ viewport: SIZES.wide });
  await copy.goto(url.href);
  await copy.getByTestId('compare-prompt').waitFor();
  assert.equal(await copy.getByTestId('compare-prompt').inputValue(), corrupt);
  assert.equal(await copy.getByTestId('instrument-patching').getAttribute('aria-pressed'), 'true');
  assert.deepEqual(await axeViolations(page, 'instruments'), []);
  await page.getByTestId('instruments').screenshot({ path: `${shots}/instruments-patching.png` });
  await Promise.all([page.close(), copy.close()]);
});

test('instruments on SmolLM2: the IOI pair’s patching maps find the heads that move “ Mary”', async (t) => {
  if (!existsSync(`${repo}/assets/models/SmolLM2-135M-Instruct.Q4_1.gguf`)) {
    t.skip('assets/models has no SmolLM2-135M-Instruct.Q4_1.gguf (scripts/fetch-smollm.sh fetches it)');
    return;
  }
  const page = await openPage({ model: SMOLLM, prompt: 'Hello' });
  await page.getByTestId('instrument-patching').click();
  // A new prompt stops a sweep in progress: the worker is free for it within a run or two.
  await page.getByTestId('ioi-preset').click();
  await page.getByTestId('instrument-status').filter({ hasText: /patching: \d+ of/ }).waitFor({ timeout: 120_000 });
  const typed = Date.now();
  await page.getByTestId('prompt').fill('The capital of France is');
  await page.getByTestId('instrument-status').filter({ hasText: 'patching stopped' }).waitFor();
  await page.locator('[data-testid=tokens] .chip', { hasText: 'France' }).first().waitFor({ timeout: 20_000 });
  console.log(`a new prompt during patching: its tokens on screen ${Date.now() - typed} ms later`);
  // The same for the logit lens: reading it takes seconds on SmolLM2; a new prompt stops it and
  // the lens of the new prompt follows.
  await page.getByTestId('instrument-lens').click();
  // Under load the France prompt's own run can hold the worker for a while before the lens starts
  // (and on a quiet machine the lens may be read before this looks): either state will do.
  await Promise.race([
    page.getByTestId('instrument-status').filter({ hasText: 'computing' }).waitFor({ timeout: 120_000 }),
    page.locator('[data-testid=lens-table] th', { hasText: 'France' }).first().waitFor({ timeout: 120_000 }),
  ]);
  const retyped = Date.now();
  await page.getByTestId('prompt').fill('The capital of Spain is');
  await page.locator('[data-testid=tokens] .chip', { hasText: 'Spain' }).first().waitFor({ timeout: 20_000 });
  const chipsAfter = Date.now() - retyped;
  await page.locator('[data-testid=lens-table] th', { hasText: 'Spain' }).first().waitFor({ timeout: 60_000 });
  console.log(`a new prompt while the lens is read: its tokens on screen ${chipsAfter} ms later, its lens ${Date.now() - retyped} ms later`);
  await page.getByTestId('instrument-patching').click();
  const started = Date.now();
  await page.getByTestId('ioi-preset').click();
  await page.locator('[data-testid=patch-heads-table] td').first().waitFor({ timeout: 300_000 });
  const seconds = (Date.now() - started) / 1000;
  const scores = await instrumentJson(page);
  assert.match(await page.getByTestId('patch-summary').innerText(), /logit\[“·Mary”\] − logit\[“·John”\]: clean 6\.1\d*, corrupted -5\.4\d*/);
  // The clean second “John” (position 9) carries the answer in the residual up to layer 19; by
  // layer 24 the last position does; head 23.3 moves most of it.
  const t9 = scores.residPre.map((row) => row[9]);
  const last = scores.residPre.map((row) => row.at(-1));
  assert.ok(t9.slice(0, 20).every((s) => s > 0.9) && last.slice(24).every((s) => s > 0.9), `${t9} / ${last}`);
  const heads = scores.heads.flatMap((row, layer) => row.map((score, head) => ({ name: `${layer}.${head}`, score }))).sort((a, b) => b.score - a.score);
  assert.equal(heads[0].name, '23.3');
  assert.ok(heads[0].score > 0.5, `${heads[0].score}`);
  console.log(`IOI patching on SmolLM2 in the page: ${seconds.toFixed(1)} s; strongest heads ${heads.slice(0, 5).map(({ name, score }) => `${name} ${score.toFixed(3)}`).join(', ')}`);
  await page.close();
});

test('head detectors: PyTorch’s scores on the repeated sequence, badges, one-click induction heads, a sortable table, scores on the prompt', async () => {
  const expected = JSON.parse(await readFile(`${repo}/tests/fixtures/instruments/heads.json`, 'utf8'))['gpt2-tiny-f32'].repeated;
  const page = await openPage({ prompt: 'The cat sat on the mat. The cat' });
  await page.getByTestId('detectors').selectOption('repeated');
  await page.getByTestId('detector-status').filter({ hasText: `scored on ${expected.tokens.length / 2} random tokens (seed 0), twice` }).waitFor();
  await page.locator('.head-scores-details summary').click();
  const kinds = [['previousToken', 'previous_token'], ['firstToken', 'first_token'], ['duplicateToken', 'duplicate_token'], ['induction', 'induction']];
  // The table, in head order, equals PyTorch's scores (to the 3 decimals it shows).
  await page.locator('.head-scores th button[data-sort=head]').click();
  const rows = await page.locator('[data-testid=head-scores-table] tbody tr').evaluateAll((trs) => trs.map((tr) => [tr.dataset.head, ...[...tr.querySelectorAll('td')].map((td) => Number(td.textContent))]));
  assert.equal(rows.length, 2 * 4);
  for (const [head, ...scores] of rows) {
    const [layer, h] = head.split('.').map(Number);
    kinds.forEach(([, py], i) => assert.ok(Math.abs(scores[i] - expected[py][layer][h]) <= 6e-4, `L${layer} H${h} ${py}: ${scores[i]} vs ${expected[py][layer][h]}`));
  }
  // The same numbers as CSV, unrounded.
  const [download] = await Promise.all([page.waitForEvent('download'), page.getByTestId('head-scores-csv').click()]);
  const csv = (await readFile(await download.path(), 'utf8')).trim().split('\n').map((line) => line.split(','));
  assert.deepEqual(csv[0], ['layer', 'head', 'previousToken', 'firstToken', 'duplicateToken', 'induction']);
  for (const [layer, h, ...scores] of csv.slice(1).map((row) => row.map(Number))) {
    kinds.forEach(([, py], i) => assert.ok(Math.abs(scores[i] - expected[py][layer][h]) <= 2e-5, `CSV L${layer} H${h} ${py}`));
  }
  // Sorted by induction, strongest first.
  await page.locator('.head-scores th button[data-sort=induction]').click();
  const induction = await page.locator('[data-testid=head-scores-table] tbody tr td:nth-of-type(4)').allInnerTexts();
  assert.deepEqual(induction.map(Number), [...induction.map(Number)].sort((a, b) => b - a));
  // Badges: exactly the heads whose best score reaches 0.4.
  const badged = expected.induction.flatMap((row, l) => row.map((_, h) => kinds.some(([, py]) => expected[py][l][h] >= 0.4))).filter(Boolean).length;
  assert.equal(await page.locator('.head .badge:not([hidden])').count(), badged);
  // One click on "Induction" highlights and opens the strongest induction head.
  await page.getByTestId('highlight-induction').click();
  const flat = expected.induction.flatMap((row, l) => row.map((score, h) => ({ l, h, score })));
  const best = flat.reduce((a, b) => (b.score > a.score ? b : a));
  await page.locator(`[data-testid=attention-grid] button.head.selected[aria-label^="Layer ${best.l} head ${best.h}"]`).waitFor();
  assert.equal(await page.getByTestId('highlight-induction').getAttribute('aria-pressed'), 'true');
  await page.screenshot({ path: `${shots}/head-detectors.png`, fullPage: true });
  const serious = await axeViolations(page, 'head detectors');
  assert.deepEqual(serious, [], JSON.stringify(serious, null, 1));
  // On the prompt: scored again as it changes.
  await page.getByTestId('detectors').selectOption('prompt');
  const tokens = (await chipIds(page)).length;
  await page.getByTestId('detector-status').filter({ hasText: `the prompt's ${tokens} tokens` }).waitFor();
  const box = page.getByTestId('prompt');
  await box.click();
  await box.press('End');
  await box.pressSequentially(' sat', { delay: 20 });
  const grown = engine.encode('The cat sat on the mat. The cat sat');
  await untilChipsAre(page, grown);
  const now = grown.length;
  await page.getByTestId('detector-status').filter({ hasText: `the prompt's ${now} tokens` }).waitFor();
  assert.equal(await page.locator('[data-testid=head-scores-table] tbody tr').count(), 2 * 4);
  await page.close();
});

test('head finder: every head ranked by the weight the picked token gives a key; Shift+click on the map picks both', async () => {
  const page = await openPage({ prompt: 'The cat sat on the mat. The cat' });
  const t = (await chipIds(page)).length;
  await page.getByTestId('finder-key').selectOption('1');
  const ranked = page.locator('[data-testid=finder-ranking] button');
  await ranked.first().waitFor();
  const entries = await ranked.evaluateAll((buttons) => buttons.map((b) => ({ head: b.dataset.head, percent: parseFloat(b.textContent.split(' ').at(-1)) })));
  assert.equal(entries.length, 5);
  assert.deepEqual(entries.map((e) => e.percent), [...entries.map((e) => e.percent)].sort((a, b) => b - a), 'strongest first');
  assert.equal(await page.locator('[data-testid=attention-grid] button.head.lit').count(), 5);
  // The top head's weight is the one its query row shows for that key.
  await ranked.first().click();
  await page.getByRole('tab', { name: 'Query row' }).click();
  const weightShown = Number(await page.locator('[data-testid=query-row] tbody tr').nth(1).locator('td').nth(2).innerText());
  assert.ok(Math.abs(weightShown * 100 - entries[0].percent) <= 0.1, `${weightShown} vs ${entries[0].percent}%`);
  // Shift+click a map cell: query = its row, key = its column.
  await page.getByRole('tab', { name: 'Map' }).click();
  const map = page.getByTestId('attention-map');
  await page.getByRole('button', { name: 'Fit the whole map' }).click();
  // Find the cell (query 3, key 2) by hovering: its tooltip names the cell under the pointer.
  const box = await map.boundingBox();
  const cellAt = async (x, y) => {
    await map.hover({ position: { x, y } });
    const tip = page.locator('.tooltip');
    const m = (await tip.isVisible()) && /query (\d+) .*→ key (\d+) /.exec(await tip.innerText());
    return m ? [Number(m[1]), Number(m[2])] : undefined;
  };
  let spot;
  for (let y = 2; y < box.height && !spot; y += 3) {
    if ((await cellAt(box.width / 2, y))?.[0] !== 3) continue;
    for (let x = 2; x < box.width && !spot; x += 3) if ((await cellAt(x, y))?.[1] === 2) spot = { x, y };
  }
  assert.ok(spot, 'the cell (3, 2) is on the map');
  await map.click({ modifiers: ['Shift'], position: spot });
  assert.equal(await page.getByTestId('finder-key').inputValue(), '2');
  assert.equal(await page.locator('[data-testid=tokens] .chip[aria-pressed=true]').getAttribute('data-pos'), '3');
  // Shift+click a chip: that token is the key.
  await page.locator('[data-testid=tokens] .chip').nth(1).click({ modifiers: ['Shift'] });
  assert.equal(await page.getByTestId('finder-key').inputValue(), '1');
  await page.close();
});

test('ablation: Ablate zeroes the open head, every view follows, the next token shows before → after as the package computes it; the address keeps it; Clear undoes it', async () => {
  const page = await openPage({ prompt: PROMPT });
  const clean = await candidates(page);
  const grid = page.getByTestId('attention-grid');
  for (const index of [1, 7]) {
    await grid.locator('button.head').nth(index).click(); // L0 H1, then L1 H3
    await page.getByTestId('ablate-head').click();
  }
  await page.getByTestId('ablated-heads').filter({ hasText: 'L0 H1, L1 H3' }).waitFor();
  await page.locator('[data-testid=candidate] .candidate-prob', { hasText: '→' }).first().waitFor();
  assert.equal(await grid.locator('button.head.ablated').count(), 2);
  assert.equal(await page.getByTestId('ablate-head').getAttribute('aria-pressed'), 'true');
  // The package's ablated session, on the same tokens.
  const session = engine.session();
  session.setAblation([[0, 1], [1, 3]]);
  const trace = session.run(engine.encode(PROMPT), []);
  const probs = trace.probs(engine.encode(PROMPT).length - 1, 1);
  // The list names both heads as soon as the second is clicked, while the first ablation's
  // answer may still be the one on screen: wait for the answer of both.
  await untilFirstCandidateIs(page, probs);
  const ablated = await candidates(page);
  assert.ok(ablated.every(({ id, prob }) => Math.abs(prob - probs[id]) <= 1e-6), 'the page’s probabilities are the ablated run’s');
  assert.notDeepEqual(ablated.map(({ id }) => id), [], 'candidates shown');
  const shown = (await page.locator('[data-testid=candidate] .candidate-prob').first().innerText()).split('\n').at(-1);
  const cleanProb = clean.find(({ id }) => id === ablated[0].id)?.prob;
  if (cleanProb !== undefined) assert.ok(shown.startsWith(`${(cleanProb * 100).toFixed(cleanProb >= 0.1 ? 1 : 2)}%`), `${shown} starts with the clean ${cleanProb}`);
  trace.free();
  session.free();
  await page.waitForFunction(() => new URL(location.href).searchParams.get('ablate') === '0.1,1.3');
  // A link restores the ablation.
  const copy = await browser.newPage({ viewport: SIZES.wide });
  await copy.goto(page.url());
  await copy.getByTestId('ablated-heads').filter({ hasText: 'L0 H1, L1 H3' }).waitFor({ timeout: 60_000 });
  await copy.locator('[data-testid=candidate] .candidate-prob', { hasText: '→' }).first().waitFor();
  assert.deepEqual((await candidates(copy)).map(({ id }) => id), ablated.map(({ id }) => id));
  await copy.close();
  // The MLP of layer 0 too, and every unit replaced by its mean over the prompt: the package's
  // mean-ablated session's probabilities; the address says so.
  await page.getByTestId('ablate-mlp-layer').selectOption('0');
  await page.getByTestId('ablate-mlp').click();
  await page.getByTestId('ablated-heads').filter({ hasText: 'L0 H1, L0 MLP, L1 H3' }).waitFor();
  await page.getByTestId('ablate-with').selectOption('mean');
  await page.waitForFunction(() => new URL(location.href).searchParams.get('ablate_with') === 'mean' && new URL(location.href).searchParams.get('ablate') === '0.1,0.mlp,1.3');
  const meanSession = engine.session();
  meanSession.setAblation([[0, 1], [0, 'mlp'], [1, 3]], { with: 'mean' });
  const meanProbs = meanSession.run(engine.encode(PROMPT), []).probs(engine.encode(PROMPT).length - 1, 1);
  meanSession.free();
  await untilFirstCandidateIs(page, meanProbs);
  const meaned = await candidates(page);
  assert.ok(meaned.every(({ id, prob }) => Math.abs(prob - meanProbs[id]) <= 1e-6), 'the page’s probabilities are the mean-ablated run’s');
  await page.getByTestId('ablate-with').selectOption('zero');
  // From the grid: Alt+click ablates a head, X on the focused head brings it back.
  await grid.locator('button.head').nth(2).click({ modifiers: ['Alt'] });
  await page.getByTestId('ablated-heads').filter({ hasText: 'L0 H1, L0 H2, L0 MLP, L1 H3' }).waitFor();
  assert.match(await grid.locator('button.head').nth(2).getAttribute('aria-label'), /^Layer 0 head 2, ablated: /);
  await grid.locator('button.head').nth(2).focus();
  await page.keyboard.press('x');
  await page.getByTestId('ablated-heads').filter({ hasText: 'L0 H1, L0 MLP, L1 H3' }).waitFor();
  // Clear: the clean run again.
  await page.getByTestId('clear-ablation').click();
  // The answers for the edits above may still arrive after the click: wait for the clean run's
  // candidates themselves, not only for the arrows to go.
  await page.waitForFunction(
    (clean) => {
      const rows = [...document.querySelectorAll('[data-testid=candidate]')];
      return rows.length === clean.length && rows.every((row, i) => Number(row.dataset.id) === clean[i].id && Number(row.dataset.prob) === clean[i].prob);
    },
    clean,
  );
  assert.deepEqual(await candidates(page), clean);
  assert.ok(!(await page.locator('[data-testid=candidate] .candidate-prob').allInnerTexts()).some((text) => text.includes('→')), 'no before → after');
  assert.equal(await grid.locator('button.head.ablated').count(), 0);
  await page.screenshot({ path: `${shots}/ablation-cleared.png` });
  await page.close();
});

const MINILM = 'assets/all-MiniLM-L6-v2';
const MINILM_DIR = `${repo}/assets/models/all-MiniLM-L6-v2`;

test('an encoder (all-MiniLM-L6-v2): full attention maps, post-LN strips, live sentence similarity instead of the next token', async (t) => {
  const names = ['config.json', 'model.safetensors', 'tokenizer.json'];
  if (!names.every((name) => existsSync(`${MINILM_DIR}/${name}`))) {
    const reason = `${MINILM_DIR} is absent (bash scripts/fetch-minilm.sh fetches it)`;
    console.log(`SKIPPED encoder page test: ${reason}`);
    return t.skip(reason);
  }
  const bytes = await Promise.all(names.map((name) => readFile(`${MINILM_DIR}/${name}`)));
  const minilm = Model.load(Object.fromEntries(names.map((name, i) => [name, new Uint8Array(bytes[i])])));
  const { nLayer, nHead } = minilm.info();
  const prompt = 'A man is playing a guitar.';
  const second = 'A man plays a guitar on stage.';
  const tokens = minilm.encode(prompt);
  const n = tokens.length;

  // The query-row view of query 0: its weight on every key, those after it included.
  const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
  await watchPolicy(page);
  page.on('pageerror', (error) => console.error(`[page] ${error.message}`));
  await page.goto(`${server.url}/?${new URLSearchParams({ model: MINILM, theme: 'dark', prompt: '', view: 'row', q: '0' })}`);
  await page.locator('[data-field=model]').filter({ hasText: /all-MiniLM-L6-v2 \(encoder\)/ }).waitFor({ timeout: 180_000 });
  assert.equal(await page.getByTestId('next-token').isHidden(), true, 'no next-token panel for an encoder');
  assert.equal(await page.getByTestId('similarity').isVisible(), true);
  assert.equal(await page.getByTestId('second-sentence').inputValue(), second, 'the second sentence is prefilled');
  await typePrompt(page, prompt, [...tokens]);

  // Every thumbnail is the full square: all t × t cells painted, not the causal triangle.
  const canvases = await gridCanvases(page);
  assert.equal(canvases.length, nLayer * nHead);
  for (const [i, canvas] of canvases.entries()) {
    assert.equal(canvas.width, n, `map ${i}: one pixel per token`);
    assert.equal(canvas.painted, n * n, `map ${i}: the full map is painted`);
  }
  // Query 0 reads every key: its row lists all of them, with the package's weights.
  const pattern = minilm.run(tokens, ['blocks.0.attn.hook_pattern']).tensor('blocks.0.attn.hook_pattern').data;
  const row = await page.getByTestId('query-row').locator('tbody tr').evaluateAll((rows) => rows.map((tr) => Number(tr.children[2].textContent)));
  assert.equal(row.length, n, 'query 0 reads all keys');
  assert.ok(row[1] > 0 && row.slice(1).reduce((a, b) => a + b, 0) > 0.01, `weights above the diagonal: ${row}`);
  for (let k = 0; k < n; k++) assert.ok(Math.abs(row[k] - pattern[k]) <= 1e-4, `key ${k}: ${row[k]} vs ${pattern[k]}`);
  assert.match(await layernormText(page), /post-LN/);
  assert.match(await page.getByTestId('instruments').innerText(), /is an encoder: it has no language-model head/);

  /** Waits until the similarity figure shows these two texts, and returns it with the ranked list. */
  const shown = async (a, b) => {
    const figure = page.getByTestId('similarity-score');
    await page.waitForFunction(([p, s]) => {
      const element = document.querySelector('[data-testid=similarity-score]');
      return element?.dataset.prompt === p && element.dataset.second === s && element.dataset.score !== '';
    }, [a, b]);
    const ranked = await page.getByTestId('similarity-item').evaluateAll((items) => items.map((item) => Number(item.dataset.score)));
    return { score: Number(await figure.getAttribute('data-score')), text: await figure.innerText(), ranked };
  };
  const expected = (a, b) => cosine(minilm.embed(a), minilm.embed(b));
  let now = await shown(prompt, second);
  assert.ok(Math.abs(now.score - expected(prompt, second)) <= 1e-4, `similarity ${now.score} vs the package's ${expected(prompt, second)}`);
  assert.equal(now.text, now.score.toFixed(4));
  assert.equal(now.ranked.length, 6);
  for (let i = 1; i < now.ranked.length; i++) assert.ok(now.ranked[i - 1] >= now.ranked[i], `ranked descending: ${now.ranked}`);
  assert.equal(await page.getByTestId('similarity-score').getAttribute('aria-live'), 'polite');
  await page.getByTestId('similarity').screenshot({ path: `${shots}/encoder-similarity-panel.png` });
  // The README's picture (assets/screenshots/encoder-similarity.png): the top of the page, notes closed.
  await page.evaluate(() => document.querySelectorAll('.howto:not([hidden]) .howto-close').forEach((button) => button.click()));
  await page.evaluate(() => scrollTo(0, 0));
  await page.screenshot({ path: `${shots}/encoder-similarity.png` });

  // Typing in the second box updates the figure live; the address keeps the second sentence.
  const box = page.getByTestId('second-sentence');
  await box.click();
  await box.press('End');
  await box.pressSequentially(' Loudly!', { delay: 20 });
  now = await shown(prompt, `${second} Loudly!`);
  assert.ok(Math.abs(now.score - expected(prompt, `${second} Loudly!`)) <= 1e-4);
  await page.waitForFunction((text) => new URL(location.href).searchParams.get('second') === text, `${second} Loudly!`);
  // A ranked sentence, chosen with the keyboard, becomes the second sentence.
  const first = page.getByTestId('similarity-item').first().locator('button');
  const top = await first.locator('.similarity-text').innerText();
  await first.focus();
  await page.keyboard.press('Enter');
  now = await shown(prompt, top);
  assert.ok(Math.abs(now.score - expected(prompt, top)) <= 1e-4);
  assert.equal(await box.inputValue(), top);
  const serious = await axeViolations(page, 'encoder');
  assert.deepEqual(serious, [], JSON.stringify(serious, null, 1));
  minilm.free();
  await page.close();
});

test('the model list names the encoder, or says why it is unavailable', async () => {
  const catalog = await (await fetch(`${server.url}/models/index.json`)).json();
  const entry = catalog.models.find((model) => model.id === MINILM);
  assert.ok(entry, 'all-MiniLM-L6-v2 is listed');
  assert.equal(entry.name, 'all-MiniLM-L6-v2 (encoder)');
  assert.equal(entry.encoder, true);
  if (existsSync(`${MINILM_DIR}/model.safetensors`)) assert.equal(entry.unavailable, undefined);
  else assert.match(entry.unavailable, /fetch-minilm\.sh/);
});

/** The Train panel's state: phase, steps done, tokens/s, and the loss curve's numbers. */
function trainState(page) {
  return page.getByTestId('train').evaluate((panel) => {
    const chart = panel.querySelector('[data-testid=train-chart]');
    return {
      phase: panel.dataset.phase,
      steps: Number(panel.dataset.steps ?? 0),
      tokensPerSecond: Number(panel.dataset.tokensPerSecond ?? 0),
      points: Number(chart.dataset.points ?? 0),
      valPoints: Number(chart.dataset.valPoints ?? 0),
      firstLoss: Number(chart.dataset.firstLoss),
      lastLoss: Number(chart.dataset.lastLoss),
    };
  });
}

/** Waits until the Train panel is in `phase`. */
function trainPhase(page, phase, timeout = 300_000) {
  return page.waitForFunction((wanted) => document.querySelector('[data-testid=train]')?.dataset.phase === wanted, phase, { timeout });
}

test('train in the page: Tiny learns Hamlet, pauses and resumes, the views follow the trained model, Download loads back', async () => {
  const page = await openPage({ prompt: PROMPT });
  const panel = page.getByTestId('train');
  await page.getByTestId('train-toggle').click();
  // The full corpus is offered when the server has it (assets/data, fetched by setup).
  const corpus = existsSync(`${repo}/assets/data/shakespeare.txt`);
  await page.waitForFunction((wanted) => Boolean(document.querySelector('[data-testid=train-text] option[value=shakespeare]')) === wanted, corpus);
  // The shipped model's shape brings its recipe (assets/models/gptlens-shakespeare/training.json).
  await page.getByLabel('Shape', { exact: true }).selectOption('shipped');
  const shipped = JSON.parse(await readFile(`${repo}/assets/models/gptlens-shakespeare/training.json`, 'utf8'));
  assert.deepEqual(
    await Promise.all(['Steps', 'Batch', 'Learning rate'].map((label) => page.getByLabel(label, { exact: true }).inputValue())),
    [shipped.recipe.steps, shipped.recipe.batch, shipped.recipe.lr].map(String),
  );
  await page.getByLabel('Shape', { exact: true }).selectOption('tiny');
  await page.getByLabel('Batch', { exact: true }).fill('12');
  await page.getByLabel('Learning rate', { exact: true }).fill('0.001');
  await page.getByLabel('Steps', { exact: true }).fill('40');
  await page.getByTestId('train-start').click();
  // Pause once a few steps are done: the model of that moment becomes the page's.
  await page.waitForFunction(() => Number(document.querySelector('[data-testid=train]')?.dataset.steps ?? 0) >= 3, null, { timeout: 120_000 });
  await page.getByTestId('train-start').click();
  await trainPhase(page, 'paused');
  const paused = await trainState(page);
  assert.ok(paused.steps >= 3 && paused.steps < 40, `paused at step ${paused.steps}`);
  await page.waitForFunction((step) => document.querySelector('[data-field=model]')?.textContent?.startsWith(`trained in the page · step ${step}`), paused.steps);
  assert.equal(await page.getByTestId('train-start').innerText(), 'Resume');
  assert.match(await page.getByTestId('train-announce').innerText(), /^Paused: Step \d+ \/ 40/);
  assert.equal(await page.getByLabel('Shape', { exact: true }).isDisabled(), true, 'the settings wait for Reset');
  // Resume from the keyboard.
  await page.getByTestId('train-start').focus();
  await page.keyboard.press('Enter');
  await trainPhase(page, 'done');
  const done = await trainState(page);
  assert.equal(done.steps, 40);
  assert.equal(done.points, 40, 'a training loss per step on the curve');
  assert.ok(done.valPoints >= 4, `${done.valPoints} validation points`);
  assert.ok(done.lastLoss < done.firstLoss - 0.5, `the loss went from ${done.firstLoss} to ${done.lastLoss}`);
  assert.match(await page.getByTestId('train-figure').innerText(), /^Step 40 \/ 40 · loss \d\.\d{3} · validation \d\.\d{3} \(step 40\) · [\d,]+ tokens\/s$/);
  assert.match(await page.getByTestId('train-chart').getAttribute('aria-label'), /^Loss curve over 40 steps: training loss from /);
  // The views show the trained model: 2 layers × 2 heads, one pixel per byte of the prompt.
  await page.waitForFunction(() => document.querySelector('[data-field=model]')?.textContent?.startsWith('trained in the page · step 40'));
  assert.match(await field(page, 'model'), /gpt2 · 2 layers × 2 heads · d 64 · vocab 256 · context 64/);
  const bytes = new TextEncoder().encode(PROMPT);
  // The page paints the heads on screen: the grid is scrolled into view (the panel above was in it).
  await page.getByTestId('attention-grid').scrollIntoViewIfNeeded();
  await page.waitForFunction((n) => {
    const heads = [...document.querySelectorAll('[data-testid=attention-grid] button.head')];
    return heads.length === 4 && heads.every((head) => Number(head.dataset.pixels) === n);
  }, bytes.length);
  assert.deepEqual((await chipIds(page)).map(Number), [...bytes], 'the byte tokenizer');
  const shown = await candidates(page);
  assert.equal(shown.length, 12);
  const threads = (await field(page, 'threads')).split('\n')[0];
  console.log(`browser training throughput, Tiny (2×2×64, context 64, batch 12, ${threads} threads): ${Math.round(done.tokensPerSecond)} tokens/s over 40 steps (validation included)`);
  assert.deepEqual(await axeViolations(page, 'train'), []);
  await panel.screenshot({ path: `${shots}/train-panel.png` });

  // Download: config.json + model.safetensors, which Model.load reads and "Open files…" opens.
  const downloads = [];
  page.on('download', (download) => downloads.push(download));
  await page.getByTestId('train-download').click();
  for (let waited = 0; downloads.length < 2 && waited < 10_000; waited += 100) await new Promise((resolve) => setTimeout(resolve, 100));
  assert.deepEqual(downloads.map((download) => download.suggestedFilename()).sort(), ['config.json', 'model.safetensors']);
  const folder = await mkdtemp(`${tmpdir()}/gptlens-trained-`);
  const paths = [];
  for (const download of downloads) {
    paths.push(`${folder}/${download.suggestedFilename()}`);
    await download.saveAs(paths.at(-1));
  }
  const files = Object.fromEntries(await Promise.all(paths.map(async (path) => [path.split('/').pop(), new Uint8Array(await readFile(path))])));
  const trained = Model.load(files);
  const expected = trained.run(trained.encode(PROMPT), []).topK(12);
  assert.deepEqual(shown.map(({ id }) => id), expected.map(({ id }) => id), 'the page’s candidates are the downloaded model’s');
  for (const [i, { prob }] of shown.entries()) assert.ok(Math.abs(prob - expected[i].prob) <= 1e-5, `candidate ${i}: ${prob} vs ${expected[i].prob}`);
  trained.free();
  await page.getByTestId('model-files').setInputFiles(paths);
  // The downloaded config.json names it (`_name_or_path`), as a model opened from files is named.
  await page.waitForFunction(() => document.querySelector('[data-field=model]')?.textContent?.startsWith('trained by gptlens'));
  await page.waitForFunction((ids) => [...document.querySelectorAll('[data-testid=candidate]')].map((row) => row.dataset.id).join() === ids, expected.map(({ id }) => id).join());
  await rm(folder, { recursive: true, force: true });

  // Small, for its throughput: Reset, 10 steps.
  await page.getByTestId('train-reset').click();
  await trainPhase(page, 'idle');
  assert.equal((await trainState(page)).points, 0);
  await page.getByLabel('Shape', { exact: true }).selectOption('small');
  await page.getByLabel('Steps', { exact: true }).fill('10');
  await page.getByTestId('train-start').click();
  await trainPhase(page, 'done');
  const small = await trainState(page);
  assert.equal(small.steps, 10);
  console.log(`browser training throughput, Small (4×4×128, context 64, batch 12, ${threads} threads): ${Math.round(small.tokensPerSecond)} tokens/s over 10 steps (validation included)`);
  await page.waitForFunction(() => document.querySelector('[data-field=model]')?.textContent?.startsWith('trained in the page · step 10'));
  assert.equal(await panel.getAttribute('data-phase'), 'done');

  // A text of one's own, too short for the context: the panel says why and stays ready.
  await page.getByTestId('train-reset').click();
  await trainPhase(page, 'idle');
  await page.getByTestId('train-file').setInputFiles({ name: 'short.txt', mimeType: 'text/plain', buffer: Buffer.from('Too short to learn.') });
  assert.match(await page.getByLabel('Text', { exact: true }).locator('option:checked').innerText(), /^short\.txt · 19 B$/);
  await page.getByTestId('train-start').click();
  await page.getByTestId('train-error').waitFor();
  assert.match(await page.getByTestId('train-error').innerText(), /^Training stopped: short\.txt cannot be learned: the training part has 18 bytes: it needs more than one block of 64\.$/);
  await trainPhase(page, 'idle');
  assert.equal(await page.getByLabel('Shape', { exact: true }).isDisabled(), false);
  await page.close();
});

test('no page of these tests broke the Content-Security-Policy', () => {
  assert.deepEqual(violations, []);
});
