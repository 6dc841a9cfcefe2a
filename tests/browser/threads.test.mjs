// The packed package in headless Chromium: the threaded build on a cross-origin-isolated page,
// the single-thread fallback elsewhere, and the same logits from both, bit for bit; the WebGPU
// backend (SwiftShader here: Chromium runs with --enable-unsafe-webgpu) against the CPU, through
// the worker client and the direct API, and `auto` declining the software adapter with its reason.
// A missing adapter skips the WebGPU tests, or fails them under REQUIRE_GPU=1.
// Needs `npm run pack` first (scripts/test.sh does it).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { launchChromium, openPage, serve, skipOrFail } from '../support/browser.mjs';
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
const prompted = await inPage(isolated, 'runPromptFixture', { threads: 2 }, tokens);
const streamedGguf = await inPage(isolated, 'runGgufStreamed', { threads: 2 }, [1, 5, 9, 2, 7]);
const snapshots = {
  threaded: await inPage(isolated, 'runGgufSnapshot', { threads: 2 }, [1, 5, 9, 2, 7]),
  single: await inPage(isolated, 'runGgufSnapshot', { threads: 1 }, [1, 5, 9, 2, 7]),
};
// After the CPU runs: SwiftShader on 2 shared cores is slow, and the pages above time nothing.
const adapter = await inPage(isolated, 'webgpuAdapter');
const [onWebGpu, auto, direct] = await Promise.all([
  inPage(isolated, 'runFixture', { threads: 2, backend: 'webgpu' }, tokens),
  inPage(isolated, 'runFixture', { threads: 2, backend: 'auto' }, tokens),
  inPage(isolated, 'runFixtureDirectOnWebGpu', tokens),
]);

const bits = (values) => new Uint32Array(Float32Array.from(values).buffer);

test('a cross-origin-isolated page runs the threaded build on 2 threads', () => {
  assert.equal(threaded.error, undefined);
  assert.equal(threaded.crossOriginIsolated, true);
  assert.deepEqual(threaded.backendInfo, { backend: 'cpu', requested: 'cpu', reason: 'cpu: the CPU was asked for' });
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
  // A pass large enough for the threaded build's team (the reference prompt's runs alone).
  assert.equal(threaded.wholeContextLogits.length, 64 * 513);
  assert.deepEqual(bits(threaded.wholeContextLogits), bits(singleOnIsolated.wholeContextLogits));
});

test('browser logits match the PyTorch reference within 1e-4', () => {
  const expected = reference.tensors.logits.data;
  const worst = threaded.logits.reduce((max, value, i) => Math.max(max, Math.abs(value - expected[i])), 0);
  assert.ok(worst <= 1e-4, `off by ${worst}`);
});

test("a .gguf streamed from a fetch's body through the worker client is the model loaded whole", () => {
  assert.equal(streamedGguf.error, undefined);
  assert.equal(streamedGguf.byteStream, true, "a fetch's body is a byte stream, read straight into the batches");
  assert.deepEqual(streamedGguf.info[0], streamedGguf.info[1]);
  assert.equal(streamedGguf.logits[0].length, 5 * streamedGguf.info[0].vocabSize);
  assert.deepEqual(bits(streamedGguf.logits[0]), bits(streamedGguf.logits[1]));
});

test('a .gguf loaded with a snapshot key is written to OPFS and loaded back from it, bit for bit; a snapshot cut short is refused and written again; listed and deleted', () => {
  for (const [build, { error, loads, length, cut, deleted, again }] of Object.entries(snapshots)) {
    assert.equal(error, undefined, build);
    const states = loads.map(({ loaded, settled }) => [loaded.state, settled.state]);
    assert.deepEqual(states, [['writing', 'kept'], ['restored', 'restored'], ['writing', 'kept'], ['restored', 'restored'], ['writing', 'kept']], build);
    assert.match(loads[0].loaded.missed, /no snapshot is kept/, build);
    assert.match(loads[2].loaded.missed, new RegExp(`it is ${length - 1} bytes long; its prefix says ${length}`), build);
    assert.match(loads[4].loaded.missed, /no snapshot is kept/, `${build}: deleted, it is not there to load`);
    assert.deepEqual(loads.map(({ body }) => body), [
      { read: true, cancelled: false },
      { read: false, cancelled: true },
      { read: true, cancelled: false },
      { read: false, cancelled: true },
      { read: true, cancelled: false },
    ], `${build}: a restored load cancels the file's body unread`);
    for (const { listed } of loads) {
      const { id, written, ...entry } = listed.entry;
      assert.match(id, /^[0-9a-f]{32}\.snapshot$/, build);
      assert.ok(written > Date.now() - 600_000 && written <= Date.now(), `${build}: written ${written}`);
      assert.deepEqual(entry, { key: entry.key, bytes: length, unusable: undefined, current: true }, `${build}: listed, usable, the worker's own`);
      assert.ok(listed.sorted, `${build}: newest first`);
      assert.ok(listed.quotaBytes > 0 && listed.usedBytes >= length, `${build}: the origin's storage ${listed.usedBytes} of ${listed.quotaBytes}`);
    }
    assert.equal(cut.entry.bytes, length - 1, build);
    assert.equal(cut.entry.current, false, `${build}: another worker's snapshot`);
    assert.match(cut.entry.unusable, new RegExp(`it is ${length - 1} bytes long; its prefix says ${length}`), `${build}: listed as cut short`);
    assert.deepEqual([again.state, again.missed], ['writing', 'no snapshot is kept for this file'], `${build}: loaded again while written, the first write stopped and left nothing`);
    assert.deepEqual(deleted.map(({ state, listed, files }) => [state.state, listed.entry, files]), [
      ['deleted', undefined, { snapshot: false, key: false }],
      ['deleted', undefined, { snapshot: false, key: false }],
    ], `${build}: deleted, restored or while being written, with its key; the model's state says so`);
    assert.equal(loads[0].logits.length, 5 * loads[0].vocab, build);
    for (const { logits } of loads.slice(1)) assert.deepEqual(bits(logits), bits(loads[0].logits), `${build}: the same logits, bit for bit`);
  }
  assert.deepEqual(bits(snapshots.single.loads[0].logits), bits(snapshots.threaded.loads[0].logits));
});

test('session.runPrompt answers in one message what encode, run, topK and tokenStrings answer one message each', () => {
  assert.equal(prompted.error, undefined);
  const [first, ...edits] = prompted.steps;
  assert.deepEqual(first.tokens[0], [...tokens], 'the fixture prompt encodes to the reference tokens');
  for (const step of prompted.steps) {
    assert.deepEqual(step.tokens[0], step.tokens[1]);
    assert.deepEqual(step.computed[0], step.computed[1], 'the same prefix reuse');
    assert.deepEqual(step.labels[0], step.labels[1]);
    assert.deepEqual(step.top[0], step.top[1]);
    assert.deepEqual(step.topLabels[0], step.topLabels[1]);
    assert.deepEqual(step.kept[0], step.kept[1]);
    // Each candidate's probability under the sampling settings is the kept list's, absent where
    // the settings filter it out; the count is the list's length; `kept: false` leaves the list out.
    const keptProb = new Map(step.kept[1].map(({ id, prob }) => [id, prob]));
    assert.deepEqual(step.sampled, step.top[1].map(({ id }) => keptProb.get(id)));
    assert.equal(step.survivors, step.kept[1].length);
    assert.deepEqual(step.unlisted, { top: step.topWhole, survivors: step.survivors, hasKept: false });
    assert.deepEqual(step.nextOfTrace[1], step.nextOfTrace[0], 'a trace answers `next` as the run did');
    for (const [mine, theirs] of step.tensors) assert.deepEqual(bits(mine), bits(theirs));
    for (const stage of ['tokenize', 'forward', 'next']) assert.ok(step.timings[stage] >= 0, stage);
  }
  assert.ok(edits.every((step) => step.computed[0] < step.tokens[0].length), 'an edit at the end recomputes only the end');
  assert.ok(prompted.steps.some((step) => step.sampled.includes(undefined)), 'top-p filters out one of the candidates somewhere');
  // Three survivors for five candidates: the last two have no sampled probability. Settings that
  // filter nothing: each candidate's sampled probability is its own, and every token survives.
  const { capped, plain } = prompted.edges;
  assert.deepEqual(capped.top.map(({ sampled }) => sampled), [...capped.top.slice(0, 3).map(({ prob }) => prob), undefined, undefined]);
  assert.equal(capped.survivors, 3);
  assert.deepEqual(plain.top.map(({ sampled }) => sampled), plain.top.map(({ prob }) => prob));
  assert.equal(plain.survivors, 513, 'the fixture’s whole vocabulary, under the default 1,000');
  const expected = reference.tensors.logits.data;
  const worst = prompted.logits.reduce((max, value, i) => Math.max(max, Math.abs(value - expected[i])), 0);
  assert.ok(worst <= 1e-4, `PyTorch's logits: off by ${worst}`);
  assert.deepEqual(prompted.messages, ['sessionRunPrompt'], 'one message to the Worker');
  assert.deepEqual(prompted.pooledNames, ['blocks.0.attn.hook_pattern.pooled', 'blocks.1.attn.hook_pattern.pooled']);
  assert.deepEqual(bits(prompted.opened[0]), bits(prompted.opened[1]), 'the opened head whole, the bits of hook_pattern');
  assert.match(prompted.tooLong, /^RangeError: The prompt is \d+ tokens; this model reads at most 64\.$/);
});

test('runPrompt\'s waitable answers settle in the task that waits for them, the same answers as by message', () => {
  assert.equal(prompted.error, undefined);
  prompted.waitable.forEach((answer, i) => {
    const step = prompted.steps[i];
    assert.equal(answer.settled, true, `edit ${i}: settled by waitForAnswer, before any message`);
    assert.deepEqual(answer.tokens, step.tokens[0]);
    assert.deepEqual(answer.labels, step.labels[0]);
    assert.deepEqual(answer.next.top, step.topWhole, 'candidates, labels and sampled probabilities');
    assert.equal(answer.next.survivors, step.survivors);
    if (i === 2) assert.equal(answer.next.hasKept, false, 'asked without the kept list: none in shared memory either');
    else assert.deepEqual(answer.next.kept, step.kept[0]);
    answer.tensors.forEach((tensor, hook) => assert.deepEqual(bits(tensor), bits(step.tensors[hook][0])));
  });
  assert.deepEqual(prompted.tooBig, [false, true, true], 'too big for the buffer: by message; a larger buffer goes with the next');
  assert.deepEqual(prompted.badWait, [
    'RangeError: ms must be a number of milliseconds in [0, 50], not NaN',
    'RangeError: ms must be a number of milliseconds in [0, 50], not -1',
    'RangeError: ms must be a number of milliseconds in [0, 50], not 51',
    'TypeError: ms must be a number of milliseconds in [0, 50], not "5"',
  ]);
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

const maxDiff = (a, b) => a.reduce((max, value, i) => Math.max(max, Math.abs(value - b[i])), 0);

/** The WebGPU tests need an adapter: without one they skip, or fail under REQUIRE_GPU=1. */
function needAdapter(t) {
  if (adapter.missing) {
    skipOrFail(t, `no WebGPU adapter in Chromium (${adapter.missing})`);
    return false;
  }
  return true;
}

test('backend webgpu: the worker runs the single-thread build on the adapter, and says so', (t) => {
  if (!needAdapter(t)) return;
  assert.equal(onWebGpu.error, undefined);
  assert.deepEqual(onWebGpu.backend, { simd: true, threads: 1, reason: 'single-thread: WebGPU was asked for (the threaded build has no WebGPU)' });
  assert.deepEqual(onWebGpu.workers, ['worker.js'], 'no thread workers: the GPU does the work');
  const { backend, requested, reason, adapter: used } = onWebGpu.backendInfo;
  assert.equal(backend, 'webgpu');
  assert.equal(requested, 'webgpu');
  assert.equal(used.vendor, adapter.vendor);
  assert.equal(used.architecture, adapter.architecture);
  assert.equal(used.isFallbackAdapter, adapter.isFallbackAdapter);
  assert.equal(used.backend, 'BrowserWebGpu');
  for (const limit of ['maxStorageBufferBindingSize', 'maxBufferSize', 'maxComputeWorkgroupStorageSize']) {
    assert.ok(used[limit] > 0, `${limit}: ${used[limit]}`);
  }
  assert.match(reason, new RegExp(`^webgpu: WebGPU was asked for: ${adapter.vendor} ${adapter.architecture}`));
  if (adapter.isFallbackAdapter) assert.match(reason, /a software fallback adapter$/);
});

test('backend webgpu computes what the CPU computes: logits 1e-4, attention and norms 2e-5, the same greedy tokens', (t) => {
  if (!needAdapter(t)) return;
  assert.equal(onWebGpu.error, undefined);
  assert.ok(maxDiff(onWebGpu.logits, threaded.logits) <= 1e-4, `logits off by ${maxDiff(onWebGpu.logits, threaded.logits)}`);
  assert.ok(maxDiff(onWebGpu.pattern, threaded.pattern) <= 2e-5, `attention off by ${maxDiff(onWebGpu.pattern, threaded.pattern)}`);
  assert.ok(maxDiff(onWebGpu.scale, threaded.scale) <= 2e-5 * Math.max(1, ...threaded.scale), 'ln1 scale');
  assert.deepEqual(onWebGpu.top.map(({ id }) => id), threaded.top.map(({ id }) => id));
  assert.equal(onWebGpu.reusedComputed, 1, 'a session on the GPU reuses the cached prefix');
  assert.deepEqual(onWebGpu.greedy, threaded.greedy);
  assert.ok(maxDiff(onWebGpu.stepped, threaded.stepped) <= 1e-4, 'logits after a step');
  const expected = reference.tensors.logits.data;
  assert.ok(maxDiff(onWebGpu.logits, expected) <= 1e-4, 'and the PyTorch reference');
});

test('backend auto declines a software fallback adapter: the CPU on threads, and the reason', (t) => {
  if (!needAdapter(t)) return;
  assert.equal(auto.error, undefined);
  if (!adapter.isFallbackAdapter) {
    assert.equal(auto.backendInfo.backend, 'webgpu', 'a hardware adapter is taken');
    assert.match(auto.backendInfo.reason, /^webgpu: a hardware WebGPU adapter is available/);
    return;
  }
  assert.equal(auto.backendInfo.backend, 'cpu');
  assert.equal(auto.backendInfo.requested, 'auto');
  assert.match(auto.backendInfo.reason, /^cpu: the only WebGPU adapter, .+, is a software fallback adapter: the CPU kernels are faster/);
  assert.equal(auto.backendInfo.adapter.isFallbackAdapter, true);
  assert.equal(auto.backend.threads, 2, 'the threaded build, since the GPU is not used');
  assert.deepEqual(bits(auto.logits), bits(threaded.logits));
});

test('the direct API on WebGPU: runAsync, the async session methods, clear errors, and back to the CPU', (t) => {
  if (!needAdapter(t)) return;
  assert.equal(direct.error, undefined);
  assert.equal(direct.backend, 'webgpu');
  assert.equal(direct.sessionBackend, 'webgpu');
  assert.equal(direct.backendInfo.adapter.architecture, adapter.architecture);
  assert.ok(direct.names, 'the same hooks');
  for (const [name, worst] of Object.entries(direct.worst)) {
    // Each backend is within 1e-4 (logits) / 1e-5 (the rest) of PyTorch: within twice that of each other.
    assert.ok(worst <= (name === 'logits' ? 1e-4 : 2e-5), `${name} off by ${worst}`);
  }
  assert.deepEqual(direct.top[0].map(({ id }) => id), direct.top[1].map(({ id }) => id));
  assert.match(direct.syncError, /runs asynchronously: use runAsync/);
  assert.match(direct.overlapping, /busy .*await it before the next call/);
  assert.deepEqual(direct.greedy[0], direct.greedy[1]);
  assert.ok(direct.stepped <= 1e-4, `logits after stepAsync off by ${direct.stepped}`);
  assert.deepEqual(direct.afterSwitch, ['cpu', 'cpu', 'cpu: the CPU was asked for']);
});
