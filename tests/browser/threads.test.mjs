// The packed package in headless Chromium: the threaded build on a cross-origin-isolated page,
// the single-thread fallback elsewhere, and the same logits from both, bit for bit.
// Needs `npm run pack` first (scripts/test.sh does it).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { launchChromium, openPage, serve } from '../support/browser.mjs';
import { parseSafetensors } from '../support/safetensors.mjs';

const repo = fileURLToPath(new URL('../..', import.meta.url));
// The files of the packed tarball (`npm run pack`), so a file missing from the package fails here.
const { version } = JSON.parse(await readFile(`${repo}/crate/js/package.json`, 'utf8'));
const unpacked = await mkdtemp(join(tmpdir(), 'gptlens-'));
execFileSync('tar', ['-xzf', `${repo}/dist/gptlens-${version}.tgz`, '-C', unpacked]);
const routes = { '/pkg/': join(unpacked, 'package'), '/tests/': `${repo}/tests` };
const reference = parseSafetensors(await readFile(`${repo}/tests/fixtures/gpt2-tiny-f32/reference.safetensors`));
const tokens = reference.tensors.tokens.data;

const [isolated, plain, browser] = await Promise.all([
  serve(routes, { isolated: true }),
  serve(routes, { isolated: false }),
  launchChromium(),
]);
after(() => Promise.all([browser.close(), isolated.close(), plain.close(), rm(unpacked, { recursive: true })]));

/** Calls `run` of page.mjs in a fresh page of `server` with `args`; also lists the workers it started. */
async function inPage(server, run, ...args) {
  const page = await openPage(browser, `${server.url}/tests/browser/index.html`);
  const workers = [];
  page.on('worker', (worker) => workers.push(new URL(worker.url()).pathname.replace(/.*\//, '')));
  try {
    const result = await page.evaluate(
      ([run, args]) => import('/tests/browser/page.mjs').then((page) => page[run](...args)),
      [run, args],
    );
    return { ...result, workers: workers.sort() };
  } finally {
    await page.close();
  }
}

const [threaded, singleOnIsolated, fallback, mainThread] = await Promise.all([
  inPage(isolated, 'runFixture', { threads: 2 }, tokens),
  inPage(isolated, 'runFixture', { threads: 1 }, tokens),
  inPage(plain, 'runFixture', {}, tokens),
  inPage(isolated, 'runFixtureOnMainThread', tokens),
]);

const bits = (values) => new Uint32Array(Float32Array.from(values).buffer);

test('a cross-origin-isolated page runs the threaded build on 2 threads', () => {
  assert.equal(threaded.crossOriginIsolated, true);
  assert.deepEqual(threaded.backend, { simd: true, threads: 2, reason: 'multi-thread: 2 threads (page is crossOriginIsolated)' });
  // The engine's worker, and wasm-bindgen-rayon's two thread workers it started.
  assert.deepEqual(threaded.workers, ['worker.js', 'workerHelpers.js', 'workerHelpers.js']);
  assert.equal(threaded.reusedComputed, 1, 'a session run reuses the cached prefix');
});

test('the threaded build computes the same logits and attention as the single-thread build, bit for bit', () => {
  assert.equal(singleOnIsolated.backend.threads, 1);
  assert.deepEqual(singleOnIsolated.workers, ['worker.js']);
  assert.deepEqual(bits(threaded.logits), bits(singleOnIsolated.logits));
  assert.deepEqual(bits(threaded.pattern), bits(singleOnIsolated.pattern));
  assert.deepEqual(threaded.top, singleOnIsolated.top);
});

test('browser logits match the PyTorch reference within 1e-4', () => {
  const expected = reference.tensors.logits.data;
  const worst = threaded.logits.reduce((max, value, i) => Math.max(max, Math.abs(value - expected[i])), 0);
  assert.ok(worst <= 1e-4, `off by ${worst}`);
});

test('a page that is not cross-origin isolated falls back to single-thread and says why', () => {
  assert.equal(fallback.crossOriginIsolated, false);
  assert.equal(fallback.backend.threads, 1);
  assert.match(fallback.backend.reason, /^single-thread: page is not crossOriginIsolated/);
  assert.deepEqual(bits(fallback.logits), bits(threaded.logits));
});

test("the direct API on a page's main thread runs single-thread, says why, and computes the same logits", () => {
  assert.equal(mainThread.backend.threads, 1);
  assert.match(mainThread.backend.reason, /^single-thread: running on the page's main thread/);
  assert.deepEqual(mainThread.workers, []);
  assert.deepEqual(bits(mainThread.logits), bits(threaded.logits));
});
