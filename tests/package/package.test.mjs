// The packed npm package as a user installs it: `import … from 'gptlens'` in Node, the fixture
// model loaded from disk, results compared with the PyTorch reference. run.sh copies this folder
// into a fresh project that has only the tarball installed.
import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { backend, coalesceLatest, init, Model } from 'gptlens';
import { parseSafetensors } from '../support/safetensors.mjs';

const fixture = join(process.env.GPTLENS_FIXTURES, 'gpt2-tiny-f32');
const files = Object.fromEntries(
  await Promise.all((await readdir(fixture)).filter((name) => name !== 'reference.safetensors')
    .map(async (name) => [name, new Uint8Array(await readFile(join(fixture, name)))])),
);
const reference = parseSafetensors(await readFile(join(fixture, 'reference.safetensors')));
const referenceTokens = Uint32Array.from(reference.tensors.tokens.data);

// The tolerances of the Rust parity tests (tests/fixtures/README.md): logits absolute, attention
// absolute, LayerNorm scales relative, everything else absolute like the logits.
function tolerance(name) {
  if (name.endsWith('attn.hook_pattern')) return { absolute: 1e-5 };
  if (name.endsWith('hook_scale')) return { relative: 1e-5 };
  return { absolute: 1e-4 };
}

function assertClose(name, actual, expected) {
  assert.deepEqual(actual.shape, expected.shape, `${name}: shape`);
  const { absolute, relative } = tolerance(name);
  let worst = 0;
  for (let i = 0; i < expected.data.length; i++) {
    const error = Math.abs(actual.data[i] - expected.data[i]) / (relative ? Math.abs(expected.data[i]) : 1);
    worst = Math.max(worst, Number.isNaN(error) ? Infinity : error);
  }
  assert.ok(worst <= (absolute ?? relative), `${name}: off by ${worst}`);
}

await init();
const model = Model.load(files);

test('the package loads the single-thread build in Node and describes the fixture model', () => {
  assert.deepEqual(backend(), {
    simd: true,
    threads: 1,
    reason: 'single-thread: Node.js (the threaded build needs browser Web Workers)',
  });
  const info = model.info();
  const expected = { architecture: 'gpt2', nLayer: 2, nHead: 4, dModel: 64, dFf: 256, vocabSize: 513, contextLength: 64, nParams: 137024, hasTokenizer: true };
  assert.deepEqual(Object.fromEntries(Object.keys(expected).map((key) => [key, info[key]])), expected);
  const { hooks } = info;
  assert.equal(hooks.length, 2 * 6 + 3);
  assert.ok(hooks.includes('blocks.1.attn.hook_pattern') && hooks.includes('logits'));
});

test('the fixture prompt gives the reference tokens, logits and hooks', () => {
  const tokens = model.encode(reference.metadata.prompt);
  assert.deepEqual(tokens, referenceTokens);
  assert.equal(model.decode(tokens), reference.metadata.prompt);
  const trace = model.run(tokens);
  const compared = Object.keys(reference.tensors).filter((name) => trace.names().includes(name));
  assert.ok(compared.includes('logits') && compared.length >= 10, `compared only ${compared}`);
  for (const name of compared) assertClose(name, trace.tensor(name), reference.tensors[name]);
  const exported = parseSafetensors(trace.toSafetensors());
  assert.deepEqual(exported.tensors.tokens.data, [...referenceTokens]);
  assert.deepEqual(exported.tensors.logits.data, trace.tensor('logits').data);
  trace.free();
});

test('a session reuses its prefix and decodes the reference greedy tokens', () => {
  const session = model.session();
  assert.equal(session.run(referenceTokens, ['logits']).computed, referenceTokens.length);
  const greedy = [];
  for (const _ of reference.tensors.greedy.data) greedy.push(session.sampleNext({ temperature: 0 }));
  assert.deepEqual(greedy, reference.tensors.greedy.data);
  assert.deepEqual([...session.tokens()], [...referenceTokens, ...greedy]);
  const extended = Uint32Array.from([...referenceTokens, greedy[0], 7]);
  const trace = session.run(extended, ['logits']);
  assert.equal(trace.computed, 1, 'all but the last token come from the cache');
  assert.deepEqual(trace.tensor('logits').shape, [extended.length, 513]);
  session.free();
});

test('bad input is an Error that says what is wrong, and the model stays usable', () => {
  assert.throws(() => Model.load({}), /config\.json/);
  assert.throws(() => model.run(new Uint32Array([1, 513])), /513/);
  assert.throws(() => model.run(referenceTokens, ['blocks.9.attn.hook_pattern']), /blocks\.9\.attn\.hook_pattern/);
  assert.equal(model.run(referenceTokens, []).tokens().length, referenceTokens.length);
});

test('coalesceLatest runs the call in flight and then only the newest one', async () => {
  const started = [];
  const slowEcho = coalesceLatest(async (text) => {
    started.push(text);
    await new Promise((done) => setTimeout(done, 10));
    return text.toUpperCase();
  });
  const results = await Promise.all(['a', 'ab', 'abc', 'abcd'].map((text) => slowEcho(text)));
  assert.deepEqual(results, ['A', undefined, undefined, 'ABCD']);
  assert.deepEqual(started, ['a', 'abcd']);
});

test('backends in Node: auto runs on the CPU and says why, webgpu fails clearly, the CPU is the default', async () => {
  assert.equal(model.backend(), 'cpu');
  assert.deepEqual(model.backendInfo(), { backend: 'cpu', requested: 'cpu', reason: 'cpu: the CPU was asked for' });
  const auto = await Model.load(files, { backend: 'auto' });
  assert.equal(auto.backend(), 'cpu');
  assert.deepEqual(auto.backendInfo(), {
    backend: 'cpu',
    requested: 'auto',
    reason: 'cpu: no usable WebGPU: navigator.gpu is undefined (Node.js has no WebGPU)',
  });
  auto.free();
  await assert.rejects(Model.load(files, { backend: 'webgpu' }), /^Error: WebGPU was asked for, but navigator\.gpu is undefined \(Node\.js has no WebGPU\)$/);
  await assert.rejects(Model.load(files, { backend: 'gpu' }), /backend must be 'auto', 'cpu' or 'webgpu', not "gpu"/);
  await assert.rejects(model.useBackend('webgpu'), /WebGPU was asked for/);
  assert.equal(model.backend(), 'cpu', 'a failed switch leaves the model where it was');
});

test('the async methods give what the sync ones give on the CPU', async () => {
  const onCpu = await Model.load(files, { backend: 'cpu' });
  const sync = model.run(referenceTokens, ['logits', 'blocks.0.attn.hook_pattern']);
  const async_ = await onCpu.runAsync(referenceTokens, ['logits', 'blocks.0.attn.hook_pattern']);
  assert.deepEqual(async_.tensor('logits').data, sync.tensor('logits').data);
  assert.deepEqual(async_.tensor('blocks.0.attn.hook_pattern').data, sync.tensor('blocks.0.attn.hook_pattern').data);
  const session = onCpu.session();
  assert.equal(session.backend(), 'cpu');
  assert.equal((await session.runAsync(referenceTokens, [])).computed, referenceTokens.length);
  const greedy = [];
  for (const _ of reference.tensors.greedy.data) greedy.push(await session.sampleNextAsync({ temperature: 0 }));
  assert.deepEqual(greedy, reference.tensors.greedy.data);
  await session.stepAsync(7);
  assert.equal(session.tokens().length, referenceTokens.length + greedy.length + 1);
  await assert.rejects(session.stepAsync(513), /513/);
  await assert.rejects(session.sampleNextAsync({ temperature: -1 }), /temperature/);
  session.free();
  onCpu.free();
});
