// The packed npm package as a user installs it: `import … from 'gptlens'` in Node, the fixture
// model loaded from disk, results compared with the PyTorch reference. run.sh copies this folder
// into a fresh project that has only the tarball installed.
import assert from 'node:assert/strict';
import { createReadStream, existsSync, readFileSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { backend, coalesceLatest, cosine, createWorkerClient, init, Model, startWorkerClient, Trainer } from 'gptlens';
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
  const { hooks, standardHooks } = info;
  assert.equal(standardHooks.length, 2 * 6 + 3);
  assert.ok(standardHooks.includes('blocks.1.attn.hook_pattern') && standardHooks.includes('logits'));
  assert.equal(hooks.length, standardHooks.length + 2 * 7 + 1, 'every hook: the standard set, pooled maps and six activations per layer, the lens');
  assert.deepEqual(hooks.slice(0, standardHooks.length), standardHooks);
  assert.ok(hooks.includes('blocks.1.attn.hook_result') && hooks.includes('blocks.1.attn.hook_pattern.pooled') && hooks.includes('lens.logits'));
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

test('long prompts: pooled maps and a head remade from kept queries are PyTorch\'s attention; bad arguments are typed errors', () => {
  const { nLayer, nHead } = model.info();
  const session = model.session();
  assert.throws(() => session.headPattern(0, 0), /keep_queries\(true\)/);
  assert.throws(() => session.keepQueries(1), TypeError);
  session.keepQueries(true);
  const pooled = Array.from({ length: nLayer }, (_, l) => `blocks.${l}.attn.hook_pattern.pooled`);
  const trace = session.run(referenceTokens, pooled);
  assert.deepEqual(trace.names(), [...pooled].sort());
  const t = referenceTokens.length;
  for (let l = 0; l < nLayer; l++) {
    const whole = reference.tensors[`blocks.${l}.attn.hook_pattern`];
    // Up to 128 tokens a pooled map's bins are single positions: the whole map.
    assertClose(`blocks.${l}.attn.hook_pattern`, trace.tensor(pooled[l]), whole);
    for (let h = 0; h < nHead; h++) {
      const head = session.headPattern(l, h);
      assertClose(`blocks.${l}.attn.hook_pattern`, { shape: [1, ...head.shape], data: head.data }, { shape: [1, t, t], data: whole.data.subarray(h * t * t, (h + 1) * t * t) });
    }
  }
  assert.throws(() => session.headPattern(nLayer, 0), RangeError);
  assert.throws(() => session.headPattern(0, 1.5), RangeError);
  assert.throws(() => session.headPattern(0, -1), RangeError);
  trace.free();
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

// Validation at the boundary: the wasm glue would coerce (NaN → 0, 2^40 → 0, -5 → 2^32 − 5,
// 'x' → 0); the package throws a TypeError (wrong type) or RangeError (out of range) naming the
// argument and the valid range instead, and nothing reaches the engine.
const TOKEN = /must be an integer in \[0, 513\)/;
const badTokens = [
  [NaN, RangeError, /not NaN/], [2 ** 40, RangeError, /not 1099511627776/], [-1, RangeError, /not -1/],
  [1.5, RangeError, /not 1\.5/], [513, RangeError, /not 513/], [2 ** 32, RangeError, /not 4294967296/],
  [Infinity, RangeError, /not Infinity/], ['3', TypeError, /not "3"/], [3n, TypeError, /not 3n/], [undefined, TypeError, /not undefined/],
];

test('token ids: step and stepAsync take an integer in [0, vocab), never a coerced one', async () => {
  const session = model.session();
  session.run(referenceTokens, []);
  for (const [token, type, shown] of badTokens) {
    assert.throws(() => session.step(token), (e) => e instanceof type && /^token /.test(e.message) && TOKEN.test(e.message) && shown.test(e.message), `step(${String(token)})`);
    await assert.rejects(session.stepAsync(token), (e) => e instanceof type && TOKEN.test(e.message), `stepAsync(${String(token)})`);
  }
  assert.equal(session.tokens().length, referenceTokens.length, 'no bad step ran a token');
  session.step(512);
  assert.equal(session.tokens().at(-1), 512);
  session.free();
});

test('token ids: run, runAsync, decode and tokenStrings take arrays or typed arrays of valid ids', async () => {
  const session = model.session();
  for (const [token, type, shown] of badTokens) {
    const tokens = [1, 2, token];
    const named = (e) => e instanceof type && /^tokens\[2\] /.test(e.message) && TOKEN.test(e.message) && shown.test(e.message);
    assert.throws(() => model.run(tokens, []), named, `run([…, ${String(token)}])`);
    assert.throws(() => session.run(tokens, []), named);
    await assert.rejects(model.runAsync(tokens, []), named);
    await assert.rejects(session.runAsync(tokens, []), named);
    assert.throws(() => model.decode(tokens), (e) => e instanceof type && /^ids\[2\] /.test(e.message));
    assert.throws(() => model.tokenStrings(tokens), (e) => e instanceof type && /^ids\[2\] /.test(e.message));
  }
  assert.throws(() => model.run(['x'], []), { name: 'TypeError', message: /^tokens\[0\] must be an integer in \[0, 513\), not "x"$/ });
  assert.throws(() => model.run(new Float64Array([3, NaN]), []), { name: 'RangeError', message: /^tokens\[1\] must be an integer in \[0, 513\), not NaN$/ });
  assert.throws(() => model.run(new Int32Array([-5]), []), { name: 'RangeError', message: /not -5/ });
  assert.throws(() => model.run('hello', []), { name: 'TypeError', message: /^tokens must be a Uint32Array or an array of integers in \[0, 513\), not "hello"$/ });
  assert.throws(() => model.run(undefined, []), { name: 'TypeError', message: /^tokens must be/ });
  assert.throws(() => model.run(referenceTokens, 'logits'), { name: 'TypeError', message: /^capture must be an array/ });
  assert.throws(() => model.encode(42), { name: 'TypeError', message: /^text must be a string, not 42$/ });
  assert.equal(session.tokens().length, 0, 'no bad run ran anything');
  // Valid ids in any array form give the same run.
  const expected = model.run(referenceTokens, ['logits']).tensor('logits').data;
  for (const tokens of [[...referenceTokens], Int32Array.from(referenceTokens), Float64Array.from(referenceTokens), Uint16Array.from(referenceTokens)]) {
    assert.deepEqual(model.run(tokens, ['logits']).tensor('logits').data, expected, tokens.constructor.name);
  }
  assert.equal(model.decode([...referenceTokens]), reference.metadata.prompt);
  session.free();
});

test('topK(k): an integer ≥ 1, clamped to the vocabulary size above it', () => {
  const trace = model.run(referenceTokens, []);
  for (const [k, type] of [[-5, RangeError], [0, RangeError], [1.5, RangeError], [NaN, RangeError], [-Infinity, RangeError], ['3', TypeError], [undefined, TypeError]]) {
    assert.throws(() => trace.topK(k), (e) => e instanceof type && /^k must be an integer ≥ 1 \(values above 513 are clamped to 513\), not /.test(e.message), `topK(${String(k)})`);
  }
  assert.equal(trace.topK(1).length, 1);
  assert.equal(trace.topK(513).length, 513);
  assert.deepEqual(trace.topK(2 ** 32), trace.topK(513), 'topK(2^32) is every token, not none');
  assert.deepEqual(trace.topK(Number.MAX_SAFE_INTEGER), trace.topK(513));
  assert.equal(trace.topK(10, { temperature: 1, topK: 3 }).length, 3);
  trace.free();
});

test('temperatures and positions: probs(pos, temperature) checks both', () => {
  const trace = model.run(referenceTokens, ['logits']);
  const T = referenceTokens.length;
  for (const [t, type] of [[-1, RangeError], [NaN, RangeError], [Infinity, RangeError], [1e39, RangeError], ['1', TypeError], [undefined, TypeError]]) {
    assert.throws(() => trace.probs(0, t), (e) => e instanceof type && /^temperature must be a finite number ≥ 0, not /.test(e.message), `temperature ${String(t)}`);
  }
  for (const [pos, type] of [[-1, RangeError], [T, RangeError], [0.5, RangeError], [NaN, RangeError], [2 ** 32, RangeError], ['0', TypeError]]) {
    assert.throws(() => trace.probs(pos, 1), (e) => e instanceof type && e.message.startsWith(`pos must be an integer in [0, ${T}), not `), `pos ${String(pos)}`);
  }
  assert.equal(trace.probs(T - 1, 0).length, 513);
  assert.equal(trace.probs(0, 0.5).length, 513);
  trace.free();
});

test('sampling parameters and seeds: typed errors for every field, in sampleNext and topK alike', async () => {
  const session = model.session();
  session.run(referenceTokens, []);
  const trace = model.run(referenceTokens, []);
  const bad = [
    [{ temperature: NaN }, RangeError, /^params\.temperature must be a finite number ≥ 0, not NaN$/],
    [{ temperature: -1 }, RangeError, /^params\.temperature must be a finite number ≥ 0, not -1$/],
    [{ temperature: Infinity }, RangeError, /^params\.temperature must be a finite number ≥ 0/],
    [{}, TypeError, /^params\.temperature must be a finite number ≥ 0, not undefined$/],
    [{ temperature: '1' }, TypeError, /^params\.temperature must be/],
    [{ temperature: 1, topK: 0 }, RangeError, /^params\.topK must be an integer ≥ 1 \(values above 513 are clamped to 513\), not 0$/],
    [{ temperature: 1, topK: -5 }, RangeError, /^params\.topK must be an integer ≥ 1/],
    [{ temperature: 1, topK: 2.5 }, RangeError, /^params\.topK must be an integer ≥ 1/],
    [{ temperature: 1, topK: '2' }, TypeError, /^params\.topK must be an integer ≥ 1/],
    [{ temperature: 1, topP: 0 }, RangeError, /^params\.topP must be a number in \(0, 1\], not 0$/],
    [{ temperature: 1, topP: 1.5 }, RangeError, /^params\.topP must be a number in \(0, 1\], not 1\.5$/],
    [{ temperature: 1, topP: NaN }, RangeError, /^params\.topP must be a number in \(0, 1\]/],
    [{ temperature: 1, topP: -0.5 }, RangeError, /^params\.topP must be a number in \(0, 1\]/],
    [{ temperature: 1, topP: '0.5' }, TypeError, /^params\.topP must be a number in \(0, 1\]/],
    [null, TypeError, /^params must be an object \{ temperature, topK\?, topP\? \}, not null$/],
    [0.7, TypeError, /^params must be an object/],
  ];
  for (const [params, type, message] of bad) {
    const expected = (e) => e instanceof type && message.test(e.message);
    assert.throws(() => session.sampleNext(params), expected, `sampleNext(${JSON.stringify(params)})`);
    await assert.rejects(session.sampleNextAsync(params), expected);
    if (params !== null) assert.throws(() => trace.topK(5, params), expected, `topK(5, ${JSON.stringify(params)})`);
  }
  for (const [seed, type] of [[NaN, RangeError], [-1, RangeError], [1.5, RangeError], [2 ** 53, RangeError], [Infinity, RangeError], ['1', TypeError], [1n, TypeError]]) {
    assert.throws(() => session.sampleNext({ temperature: 1 }, seed), (e) => e instanceof type && /^seed must be an integer in \[0, 2\^53 − 1\], not /.test(e.message), `seed ${String(seed)}`);
    await assert.rejects(session.sampleNextAsync({ temperature: 1 }, seed), (e) => e instanceof type && /^seed /.test(e.message));
  }
  assert.equal(session.tokens().length, referenceTokens.length, 'no bad call sampled a token');
  // Valid edges: topK above the vocabulary is clamped (no filter), topP 1, the largest seed.
  const a = session.sampleNext({ temperature: 1, topK: 2 ** 40, topP: 1 }, Number.MAX_SAFE_INTEGER);
  assert.ok(Number.isInteger(a) && a >= 0 && a < 513);
  assert.equal(trace.topK(513, null).length, 513, 'null params are the defaults, like undefined');
  assert.equal(session.tokens().length, referenceTokens.length + 1);
  trace.free();
  session.free();
});

/**
 * A Worker stand-in: answers init and load like the engine's worker, records every other request.
 * `refuse` names requests it answers with an error instead.
 */
function fakeWorker(info = { ...model.info() }, { refuse = [], restored = false, held = [] } = {}) {
  const posted = [];
  const given = [];
  const listeners = [];
  /** Answers to the `held` operations (and those after them), kept back until `answerHeld()`. */
  const withheld = [];
  return {
    posted,
    given,
    answerHeld() {
      withheld.splice(0).forEach((answer) => answer());
    },
    addEventListener(type, listener) {
      if (type === 'message') listeners.push(listener);
    },
    postMessage({ id, op, args, release, reply }) {
      // A piece is moved to the worker, which gives a buffer back (kept in `given`): recorded as sent.
      const piece = op === 'loadGgufPiece' ? { args: [args[0].slice()], buffer: args[0].buffer } : { args };
      posted.push({ op, ...piece, ...(release ? { release } : {}), ...(reply ? { reply } : {}) });
      if (op === 'loadGgufPiece') given.push(new Uint8Array(args[0].buffer.byteLength));
      const result = {
        init: backend(),
        load: { info, backend: { backend: 'cpu', requested: 'cpu', reason: 'cpu' } },
        loadGgufEnd: { info, backend: { backend: 'cpu', requested: 'cpu', reason: 'cpu' } },
        restoreSnapshot: restored ? { info, backend: { backend: 'cpu', requested: 'cpu', reason: 'cpu' } } : { missed: 'no snapshot is kept for this file' },
        listSnapshots: { entries: [], usedBytes: 1 << 20, quotaBytes: 1 << 30 },
        openSession: 1,
        run: { id: 2, tokens: Uint32Array.from(referenceTokens), computed: referenceTokens.length, tensors: {} },
        sessionRunPrompt: {
          trace: { id: 5, tokens: Uint32Array.from(referenceTokens), computed: 1, tensors: {} },
          labels: [],
          next: undefined,
          opened: undefined,
          timings: { tokenize: 0, forward: 0, next: 0 },
        },
        loadGgufPiece: given.at(-1),
        embed: new Float32Array(info.dModel),
        trainerCreate: { id: 3, paramCount: 7664, recipe: { steps: 30, batch: 4 } },
        trainerTrain: [],
        trainerUseModel: { info: { ...info, vocabSize: 256, name: 'trained in the page' }, backend: { backend: 'cpu', requested: 'cpu', reason: 'cpu' } },
      }[op];
      const data = refuse.includes(op) ? { id, op, ok: false, error: { name: 'Error', message: `${op} refused` } } : { id, op, ok: true, result };
      const answer = () => listeners.forEach((listener) => listener({ data }));
      // Answered in order, as the worker does: behind a held answer, every later one waits too.
      if (held.includes(op) || withheld.length > 0) withheld.push(answer);
      else queueMicrotask(answer);
    },
    terminate() {},
  };
}

/** Lets every answer, read and post that can happen without outside help happen. */
async function settled() {
  for (let i = 0; i < 20; i++) await new Promise(setImmediate);
}

test('the worker client asks without waiting where the worker answers in order: its start, and a streamed load\'s beginning', async () => {
  const worker = fakeWorker(undefined, { held: ['init', 'loadGgufBegin'] });
  let client;
  const started = createWorkerClient({ worker }).then((made) => (client = made));
  await settled();
  assert.deepEqual(worker.posted.map(({ op }) => op), ['init', 'crashFlag'], 'the crash flag is asked for before init is answered');
  assert.equal(client, undefined, 'not started until init is answered');
  worker.answerHeld();
  await started;
  const file = new Uint8Array((4 << 20) + 100).fill(7);
  const loaded = client.loadGguf(new Blob([file]).stream(), file.length);
  await settled();
  assert.deepEqual(worker.posted.map(({ op }) => op).slice(2), ['loadGgufBegin', 'loadGgufPiece'], 'the first batch goes before the beginning is answered');
  worker.answerHeld();
  await loaded;
  assert.deepEqual(worker.posted.map(({ op }) => op).slice(2), ['loadGgufBegin', 'loadGgufPiece', 'loadGgufPiece', 'loadGgufEnd']);

  // A beginning the worker refuses is the load's error (not the first batch's), and the load is cancelled.
  const refusingWorker = fakeWorker(undefined, { refuse: ['loadGgufBegin'] });
  const refusing = await createWorkerClient({ worker: refusingWorker });
  await assert.rejects(refusing.loadGguf(new Blob([file]).stream(), file.length), { message: 'loadGgufBegin refused' });
  assert.equal(refusingWorker.posted.at(-1).op, 'loadGgufCancel');
  // A start the worker refuses is the client's error.
  await assert.rejects(createWorkerClient({ worker: fakeWorker(undefined, { refuse: ['init', 'crashFlag'] }) }), { message: 'init refused' });
});

test('startWorkerClient hands out the client at once: a load asked for before the start is answered after it', async () => {
  const file = new Uint8Array((4 << 20) + 100).fill(7);
  const worker = fakeWorker(undefined, { held: ['init'] });
  const { client, started } = startWorkerClient({ worker });
  assert.throws(() => client.backend(), /has not started yet/);
  const loaded = client.loadGguf(new Blob([file]).stream(), file.length);
  await settled();
  assert.deepEqual(worker.posted.map(({ op }) => op), ['init', 'crashFlag', 'loadGgufBegin', 'loadGgufPiece'], 'the load is asked for before init is answered');
  worker.answerHeld();
  assert.deepEqual(await started, backend());
  assert.deepEqual(client.backend(), backend());
  assert.equal((await loaded).vocabSize, model.info().vocabSize);

  // A start that fails: `started` says why (a worker whose start failed refuses what follows too).
  const failing = startWorkerClient({ worker: fakeWorker(undefined, { refuse: ['init', 'crashFlag', 'loadGgufBegin'] }) });
  const asked = failing.client.loadGguf(new Blob([file]).stream(), file.length);
  await assert.rejects(failing.started, { message: 'init refused' });
  await assert.rejects(asked, { message: 'loadGgufBegin refused' });
  assert.throws(() => failing.client.backend(), /has not started yet/);
});

test('the worker client streams a .gguf with one batch in the worker while it reads the next; a bad batch stops the load and cancels it', async () => {
  const batch = 4 << 20;
  const file = new Blob([new Uint8Array(2 * batch + 12345)]);
  const streamed = async (failAt) => {
    const worker = fakeWorker();
    const answer = worker.postMessage.bind(worker);
    const listeners = [];
    const listen = worker.addEventListener.bind(worker);
    worker.addEventListener = (type, listener) => (type === 'message' && listeners.push(listener), listen(type, listener));
    let pieces = 0;
    /** Requests posted while an earlier batch was still unanswered. */
    let ahead = 0;
    let unanswered = 0;
    worker.postMessage = (message, transfer) => {
      if (message.op !== 'loadGgufPiece') return answer(message, transfer);
      worker.posted.push({ op: message.op, bytes: message.args[0].byteLength });
      if (unanswered > 0) ahead++;
      unanswered++;
      const ok = ++pieces !== failAt;
      setTimeout(() => {
        unanswered--;
        const data = ok ? { id: message.id, op: message.op, ok, result: undefined } : { id: message.id, op: message.op, ok, error: { name: 'Error', message: 'not a valid GGUF file: a bad batch' } };
        listeners.forEach((listener) => listener({ data }));
      }, 50);
    };
    const engine = await createWorkerClient({ worker });
    const progress = [];
    const loading = engine.loadGguf(file.stream(), file.size, { onProgress: (bytes) => progress.push(bytes) });
    return { loading, worker, progress, ahead: () => ahead };
  };

  // Sizes, order and progress: the test below. Here: the overlap, and a failure in the middle of it.
  const good = await streamed(0);
  await good.loading;
  assert.ok(good.ahead() > 0, 'a batch went to the worker before the previous one was answered');
  assert.equal(good.progress.at(-1), file.size);

  const bad = await streamed(1);
  await assert.rejects(bad.loading, /a bad batch/);
  const badOps = bad.worker.posted.map(({ op }) => op);
  assert.ok(badOps.includes('loadGgufCancel'), 'the partial model is let go');
  assert.ok(!badOps.includes('loadGgufEnd'));
  assert.ok(badOps.filter((op) => op === 'loadGgufPiece').length <= 2, 'at most one batch beyond the bad one was sent');
});

test('the worker client checks the same arguments before posting anything to the worker', async () => {
  const worker = fakeWorker();
  const engine = await createWorkerClient({ worker });
  await assert.rejects(engine.run([1, 2]), /no model loaded: call load\(\) first/);
  await engine.load(files);
  const session = await engine.session();
  const trace = await engine.run([...referenceTokens], []);
  const before = worker.posted.length;
  for (const [token, type] of badTokens) {
    await assert.rejects(session.step(token), (e) => e instanceof type && /^token must be an integer in \[0, 513\)/.test(e.message), `step(${String(token)})`);
    await assert.rejects(session.run([1, token]), (e) => e instanceof type && /^tokens\[1\] must be an integer in \[0, 513\)/.test(e.message));
    await assert.rejects(engine.run([token]), (e) => e instanceof type && /^tokens\[0\] /.test(e.message));
    await assert.rejects(engine.decode([token]), (e) => e instanceof type && /^ids\[0\] /.test(e.message));
    await assert.rejects(engine.tokenStrings([token]), (e) => e instanceof type && /^ids\[0\] /.test(e.message));
  }
  await assert.rejects(engine.run(['x']), { name: 'TypeError', message: /^tokens\[0\] must be an integer in \[0, 513\), not "x"$/ });
  await assert.rejects(engine.encode(null), { name: 'TypeError', message: /^text must be a string/ });
  await assert.rejects(trace.topK(-5), { name: 'RangeError', message: /^k must be an integer ≥ 1/ });
  await assert.rejects(trace.topK(1, { temperature: 1, topP: 2 }), { name: 'RangeError', message: /^params\.topP must be a number in \(0, 1\]/ });
  await assert.rejects(trace.probs(referenceTokens.length, 1), { name: 'RangeError', message: `pos must be an integer in [0, ${referenceTokens.length}), not ${referenceTokens.length}` });
  await assert.rejects(trace.probs(0, NaN), { name: 'RangeError', message: /^temperature must be a finite number ≥ 0, not NaN$/ });
  await assert.rejects(session.sampleNext({ temperature: -1 }), { name: 'RangeError', message: /^params\.temperature / });
  await assert.rejects(session.sampleNext({ temperature: 1, topK: 0 }), { name: 'RangeError', message: /^params\.topK / });
  await assert.rejects(session.sampleNext({ temperature: 1 }, 1.5), { name: 'RangeError', message: /^seed must be an integer in \[0, 2\^53 − 1\], not 1\.5$/ });
  assert.equal(worker.posted.length, before, 'no bad call reached the worker');
  // Valid calls go through, converted: ids as a Uint32Array, topK clamped to the vocabulary.
  await trace.topK(2 ** 32, { temperature: 1, topK: 2 ** 40 });
  await session.step(512);
  await engine.run([1, 2, 3]);
  const sent = worker.posted.slice(before);
  assert.deepEqual(sent.map(({ op }) => op), ['traceTopK', 'sessionStep', 'run']);
  assert.deepEqual(sent[0].args, [2, 513, { temperature: 1, topK: 513 }]);
  assert.deepEqual(sent[1].args, [1, 512]);
  assert.ok(sent[2].args[0] instanceof Uint32Array);
  engine.terminate();
});

test('answers in shared memory (reply.js) come back as sent: typed arrays, NaN, infinities, undefined in arrays; too big or a Map go by message; each is read once; a nearly full buffer grows before it overflows', async () => {
  // Internal to the package (not in its exports): imported by file, beside its entry point.
  const { ReplyBuffer, writeReply } = await import(new URL('./reply.js', import.meta.resolve('gptlens')).href);
  const replies = ReplyBuffer.create();
  const answer = {
    floats: new Float32Array(70_000).map((_, i) => i / 7),
    odd: [1, NaN, undefined, -Infinity, { bytes: new Uint8Array([1, 2, 3]) }],
    left: undefined,
    text: 'the "cat"\n',
    nothing: null,
    flag: true,
    ids: new Uint32Array([1, 2, 2 ** 32 - 1]),
    deep: { list: [{ p: 0.5, q: Infinity }] },
  };
  const expect = (id) => replies.expect(id).buffer;
  assert.equal(writeReply(expect(1), 1, answer), false, '0.28 MB: more than the first buffer');
  assert.equal(replies.awaited, undefined, 'the page stops waiting at once');
  assert.equal(writeReply(expect(2), 2, answer), true, 'the next buffer is larger');
  assert.ok(answer.floats instanceof Float32Array && answer.odd[4].bytes instanceof Uint8Array, 'the Worker\'s answer is left as it was');
  const taken = replies.take();
  assert.equal(taken.id, 2);
  const { left, ...sent } = answer;
  assert.deepEqual(taken.result, sent);
  assert.ok(!('left' in taken.result), 'an undefined property is left out, as by message');
  assert.equal(replies.take(), undefined, 'read once');
  assert.equal(writeReply(expect(3), 3, NaN), true);
  assert.ok(Number.isNaN(replies.take().result));
  assert.equal(writeReply(expect(4), 4, { kept: new Map() }), false, 'a Map goes by message');
  assert.equal(writeReply(expect(5), 5, { tensor: Object.freeze({ data: new Float32Array(2) }) }), false, 'a typed array in a frozen object goes by message');
  assert.equal(writeReply(expect(6), 5, 1), false, 'an answer the page no longer expects goes by message');
  assert.equal(replies.awaited, 6);
  // A live prompt's answers grow with it: one that nearly fills its buffer asks for a larger one
  // before an answer outgrows it (and goes by message, a frame late).
  const growing = ReplyBuffer.create();
  const first = growing.expect(1).buffer;
  const nearlyFull = new Float32Array(Math.floor((first.byteLength * 0.85) / 4)).map((_, i) => i);
  assert.equal(writeReply(first, 1, nearlyFull), true, '85 % of the first buffer fits');
  assert.deepEqual(growing.take().result, nearlyFull, 'and reads back as written');
  const second = growing.expect(2).buffer;
  assert.ok(second.byteLength >= 2 * nearlyFull.byteLength, `filling 85 % of it, the answer asked for room to grow (${second.byteLength} bytes)`);
  assert.equal(writeReply(second, 2, nearlyFull), true);
  growing.take();
  assert.equal(growing.expect(3).buffer, second, 'half full, the buffer is kept');
});

test('large answers read from shared memory land in memory of their own, made while the page was idle: never the shared buffer, never an earlier answer\'s', async () => {
  const { ReplyBuffer, writeReply } = await import(new URL('./reply.js', import.meta.resolve('gptlens')).href);
  const replies = ReplyBuffer.create(8 << 20);
  const answerOf = (seed) => ({ maps: [0, 1, 2].map((m) => new Float32Array(40_000).map((_, i) => seed + m + i / 8)), ids: new Uint32Array([seed, 7]) });
  const idle = () => new Promise((resolve) => setTimeout(resolve, 20));
  const answers = [];
  for (let id = 1; id <= 4; id++) {
    assert.equal(writeReply(replies.expect(id).buffer, id, answerOf(id)), true);
    const { result } = replies.take();
    assert.deepEqual(result, answerOf(id), `answer ${id} reads back as written`);
    answers.push(result);
    await idle();
  }
  const buffers = answers.map(({ maps }) => maps[0].buffer);
  for (const [i, { maps, ids }] of answers.entries()) {
    assert.ok(!(maps[0].buffer instanceof SharedArrayBuffer), `answer ${i + 1}: not a view of the shared buffer`);
    if (i === 0) continue;
    // From the second on, each answer's arrays are views of the spare made after the one before.
    assert.ok(maps.every((map) => map.buffer === buffers[i]) && ids.buffer === buffers[i], `answer ${i + 1}: one spare for all its arrays`);
    assert.ok(buffers[i].byteLength >= 3 * 160_000, `answer ${i + 1}: a spare that holds it`);
    assert.notEqual(buffers[i], buffers[i - 1], `answer ${i + 1}: a spare of its own`);
  }
  // Later answers wrote nowhere near an earlier one: it still holds what it was sent.
  assert.deepEqual(answers[1], answerOf(2));
  assert.deepEqual(answers[2], answerOf(3));
  // A small answer is copied into new arrays of its own, as before.
  assert.equal(writeReply(replies.expect(5).buffer, 5, { ids: new Uint32Array([1, 2]) }), true);
  const small = replies.take().result;
  assert.equal(small.ids.buffer.byteLength, 8);
});

test('the worker client takes waitable answers from shared memory: in the waiting task, by the note, or before its next request; each once, and an overtaken one by message', async () => {
  const { writeReply } = await import(new URL('./reply.js', import.meta.resolve('gptlens')).href);
  // The fake worker of the tests above, holding waitable requests until this test answers them.
  const base = fakeWorker();
  const listeners = [];
  const held = new Map();
  const deliver = (data) => queueMicrotask(() => listeners.forEach((listener) => listener({ data })));
  const answerTo = (id) => ({
    trace: { id, tokens: Uint32Array.of(1, 2), computed: 2, tensors: { logits: { shape: [2, 2], data: Float32Array.of(id, NaN, -Infinity, 0.5) } } },
    labels: [`answer ${id}`, undefined],
    next: undefined,
    opened: undefined,
    timings: { tokenize: 0, forward: 0, next: 0 },
  });
  const worker = {
    ...base,
    addEventListener(type, listener) {
      if (type === 'message') listeners.push(listener);
      base.addEventListener(type, listener);
    },
    postMessage(request) {
      if (!request.reply) return base.postMessage(request);
      held.set(request.id, request);
    },
  };
  /** Writes request `id`'s answer to shared memory (true when the client still expected it there), with its note or not. */
  const write = (id, note) => {
    const request = held.get(id);
    const written = writeReply(request.reply, id, answerTo(id));
    if (written && note) deliver({ id, op: request.op, shared: true });
    return written;
  };
  const post = (id) => deliver({ id, op: 'sessionRunPrompt', ok: true, result: answerTo(id) });
  const engine = await createWorkerClient({ worker });
  await engine.load(files);
  const session = await engine.session();
  const ask = () => {
    const call = { settled: false };
    call.answer = session.runPrompt('The cat', {}, { waitable: true });
    void call.answer.then(() => (call.settled = true));
    call.id = [...held.keys()].at(-1);
    return call;
  };
  const ticks = async () => {
    for (let tick = 0; tick < 20; tick++) await null;
  };
  const check = async (call) => {
    const { trace, labels } = await call.answer;
    assert.deepEqual(labels, [`answer ${call.id}`, undefined]);
    assert.deepEqual(Array.from(trace.tensor('logits').data), [call.id, NaN, -Infinity, 0.5]);
  };

  // Written before the wait: settled by it, in this task (only promise callbacks run before the check).
  const a = ask();
  assert.equal(write(a.id, false), true);
  assert.equal(engine.waitForAnswer(5), true);
  await ticks();
  assert.equal(a.settled, true);
  await check(a);
  // Written with its note and not waited for: the note settles it.
  const b = ask();
  write(b.id, true);
  await check(b);
  // Written but not yet read when the next call is made: read before the buffer is promised again.
  const c = ask();
  write(c.id, false);
  const d = ask();
  await ticks();
  assert.equal(c.settled, true);
  await check(c);
  write(d.id, true);
  await check(d);
  // Taken by a wait before its note arrives: the note finds nothing left, and nothing is settled twice.
  const e = ask();
  write(e.id, true);
  assert.equal(engine.waitForAnswer(5), true);
  await check(e);
  await ticks();
  // Not there in time: the wait gives up (and a second wait returns false), the note settles it later.
  const f = ask();
  assert.equal(engine.waitForAnswer(1), false);
  assert.equal(engine.waitForAnswer(1), false);
  write(f.id, true);
  await check(f);
  // Overtaken by a later call: no longer expected in shared memory, so the Worker posts it.
  const g = ask();
  const h = ask();
  assert.equal(write(g.id, true), false);
  post(g.id);
  await check(g);
  assert.equal(write(h.id, true), true);
  await check(h);
  assert.equal(engine.waitForAnswer(5), false, 'nothing due');
  engine.terminate();
});

test('the worker client frees released traces with its next request, or after a second on its own', async () => {
  const worker = fakeWorker();
  const engine = await createWorkerClient({ worker });
  await engine.load(files);
  const session = await engine.session();
  const { trace } = await session.runPrompt('The cat', {});
  const before = worker.posted.length;
  await trace.release();
  assert.equal(worker.posted.length, before, 'no message of its own');
  // Kept alive to the end: this fake worker numbers every trace 5, and a collected one would be released again.
  const second = await session.runPrompt('The cat sat', {});
  assert.deepEqual(worker.posted.slice(before).map(({ op, release }) => [op, release]), [['sessionRunPrompt', [5]]]);
  const again = await session.runPrompt('The cat sat on', {});
  await again.trace.release();
  await new Promise((resolve) => setTimeout(resolve, 1200));
  assert.deepEqual(worker.posted.slice(before + 2).map(({ op, release }) => [op, release]), [['releaseTraces', [5]]]);
  assert.equal(second.trace.computed, 1);
  engine.terminate();
});

test('the worker client checks runPrompt\'s input and query before posting: one message when they are right', async () => {
  const worker = fakeWorker();
  const engine = await createWorkerClient({ worker });
  await engine.load(files);
  const session = await engine.session();
  const before = worker.posted.length;
  const bad = [
    [['x'], {}, 'TypeError', /^input\[0\] must be an integer in \[0, 513\), not "x"$/],
    [[513], {}, 'RangeError', /^input\[0\] must be an integer in \[0, 513\)/],
    [42, {}, 'TypeError', /^input must be a Uint32Array or an array of integers/],
    ['a', null, 'TypeError', /^query must be an object \{ capture\?, pooledPast\?, open\?, next\? \}, not null$/],
    ['a', { capture: 'logits' }, 'TypeError', /^query\.capture must be an array of hook names/],
    ['a', { pooledPast: -1 }, 'RangeError', /^query\.pooledPast must be an integer in \[0, 2\^53 − 1\), not -1$/],
    ['a', { pooledPast: 1.5 }, 'RangeError', /^query\.pooledPast /],
    ['a', { open: { layer: 2, head: 0 } }, 'RangeError', /^query\.open\.layer must be an integer in \[0, 2\), not 2$/],
    ['a', { open: { layer: 0, head: -1 } }, 'RangeError', /^query\.open\.head must be an integer in \[0, 4\), not -1$/],
    ['a', { next: { k: 0 } }, 'RangeError', /^query\.next\.k must be an integer ≥ 1/],
    ['a', { next: { k: 3, sampling: { temperature: -1 } } }, 'RangeError', /^query\.next\.sampling\.temperature /],
    ['a', { next: { k: 3, survivors: NaN } }, 'RangeError', /^query\.next\.survivors must be an integer ≥ 1/],
    ['a', { next: { k: 3, kept: 'no' } }, 'TypeError', /^query\.next\.kept must be true or false, not "no"$/],
  ];
  for (const [input, query, name, message] of bad) {
    await assert.rejects(session.runPrompt(input, query), { name, message }, `runPrompt(${JSON.stringify(input)}, ${JSON.stringify(query)})`);
  }
  await assert.rejects(session.runPrompt('a', {}, { waitable: 'yes' }), { name: 'TypeError', message: 'waitable must be true or false, not "yes"' });
  assert.equal(worker.posted.length, before, 'no bad call reached the worker');
  // A waitable answer the Worker did not write to shared memory (this fake never does) comes by
  // message: the wait gives up after its milliseconds and the call still settles.
  const waited = session.runPrompt('The cat', {}, { waitable: true });
  engine.waitForAnswer(5);
  assert.equal((await waited).trace.computed, 1);
  assert.ok(worker.posted.at(-1).reply instanceof SharedArrayBuffer, 'the shared buffer went with the request');
  assert.throws(() => engine.waitForAnswer(60), { name: 'RangeError', message: 'ms must be a number of milliseconds in [0, 50], not 60' });
  const answer = await session.runPrompt('The cat', { capture: ['logits'], pooledPast: 100, open: { layer: 1, head: 3 }, next: { k: 2 ** 40, sampling: { temperature: 1, topK: 2 ** 40 }, survivors: 2 ** 40 } });
  const sent = worker.posted.slice(before + 1);
  assert.deepEqual(sent.map(({ op }) => op), ['sessionRunPrompt'], 'one message');
  assert.deepEqual(sent[0].args, [1, 'The cat', { capture: ['logits'], pooledPast: 100, open: { layer: 1, head: 3 }, next: { k: 513, sampling: { temperature: 1, topK: 513 }, survivors: 513 } }]);
  assert.equal(answer.trace.computed, 1);
  engine.terminate();
});

const ggufPath = join(process.env.GPTLENS_FIXTURES, 'llama-tiny-q', 'model.gguf');
const ggufBytes = new Uint8Array(await readFile(ggufPath));

test('a .gguf loaded as it arrives (a Node stream, a web ReadableStream) is the model loaded whole', async () => {
  const whole = Model.load({ 'model.gguf': ggufBytes });
  const tokens = [1, 5, 9, 2, 7];
  const logits = (m) => m.run(tokens, ['logits']).tensor('logits').data;
  const progress = [];
  const fromNode = await Model.loadGguf(createReadStream(ggufPath, { highWaterMark: 4093 }), ggufBytes.length, {
    onProgress: (read) => progress.push(read),
  });
  const fromWeb = await Model.loadGguf(new Blob([ggufBytes]).stream(), ggufBytes.length);
  for (const streamed of [fromNode, fromWeb]) {
    assert.deepEqual(streamed.info(), whole.info());
    assert.deepEqual(logits(streamed), logits(whole));
    assert.deepEqual(streamed.encode('Hello world'), whole.encode('Hello world'));
    streamed.free();
  }
  assert.ok(progress.length > 100 && progress.at(-1) === ggufBytes.length, `progress ${progress.length} × up to ${progress.at(-1)}`);
  whole.free();
});

test('a streamed .gguf that is not GGUF, ends early, runs over or has a bad size is an Error', async () => {
  const stream = (bytes) => new Blob([bytes]).stream();
  await assert.rejects(Model.loadGguf(stream(new TextEncoder().encode('{"not": "gguf"}')), 15), /not "GGUF"/);
  const half = ggufBytes.subarray(0, ggufBytes.length >> 1);
  await assert.rejects(Model.loadGguf(stream(half), ggufBytes.length), new RegExp(`ended after ${half.length} of its ${ggufBytes.length} bytes`));
  await assert.rejects(Model.loadGguf(stream(ggufBytes), ggufBytes.length - 1), /more bytes arrived than the/);
  for (const size of [-1, 1.5, NaN, 2 ** 60]) {
    await assert.rejects(Model.loadGguf(stream(ggufBytes), size), { name: 'RangeError', message: /^fileBytes must be an integer in \[0, 2\^53\)/ });
  }
  await assert.rejects(Model.loadGguf(stream(ggufBytes), '12'), { name: 'TypeError' });
  // The engine is fine afterwards.
  assert.equal(model.run([1, 2, 3], []).computed, 3);
});

test('the worker client sends a streamed .gguf in batches of at most 4 MiB, in order', async () => {
  const big = new Uint8Array(9 * 2 ** 20 + 12345).map((_, i) => (i * 31) & 0xff);
  /** Pieces of 1 MiB − 1 bytes and smaller, so batches straddle them. */
  const sizes = [...Array(12).keys()].map((i) => [1 << 20, 1000, 65536][i % 3] - 1);
  const cuts = (function* () {
    for (let at = 0, i = 0; at < big.length; at += sizes[i % sizes.length], i++) yield big.subarray(at, at + sizes[i % sizes.length]);
  })();
  const pieces = [...cuts];
  const sources = {
    // A byte stream is read straight into the batches ("BYOB"), in reads of the stream's choosing.
    'a Blob': () => new Blob([big]).stream(),
    'a byte stream answering in small reads': () => {
      let at = 0;
      return new ReadableStream({
        type: 'bytes',
        pull(controller) {
          // Without a reader that brings its own buffer, a byte stream with no chunk size of its
          // own has no request here: the batch would be copied.
          assert.ok(controller.byobRequest, 'a byte stream is read into the batch');
          const view = controller.byobRequest.view;
          const n = Math.min(view.byteLength, 777_777, big.length - at);
          view.set(big.subarray(at, at + n));
          at += n;
          controller.byobRequest.respond(n);
          if (at === big.length) controller.close();
        },
      });
    },
    // Anything else is copied into them.
    'a stream of pieces': () => new ReadableStream({ start: (controller) => (pieces.forEach((piece) => controller.enqueue(piece.slice())), controller.close()) }),
    'an async iterable': () => (async function* () { yield* pieces; })(),
  };
  for (const [name, source] of Object.entries(sources)) {
    const worker = fakeWorker();
    const engine = await createWorkerClient({ worker });
    const progress = [];
    await engine.loadGguf(source(), big.length, { onProgress: (sent) => progress.push(sent) });
    const ops = worker.posted.map(({ op }) => op);
    assert.deepEqual(ops, ['init', 'crashFlag', 'loadGgufBegin', 'loadGgufPiece', 'loadGgufPiece', 'loadGgufPiece', 'loadGgufEnd'], name);
    assert.deepEqual(worker.posted[2].args, [big.length, undefined], 'no snapshot key');
    const sent = worker.posted.filter(({ op }) => op === 'loadGgufPiece');
    const batches = sent.map(({ args }) => args[0]);
    assert.deepEqual(batches.map((p) => p.length), [4 << 20, 4 << 20, big.length - (8 << 20)], name);
    // The buffer given back for the first batch carried the third: a byte stream's read moved it
    // into the stream and back (so it is detached here), anything else was copied into it.
    const read = name === 'a Blob' || name.startsWith('a byte stream');
    const reused = read ? worker.given[0].buffer.byteLength === 0 : sent[2].buffer === worker.given[0].buffer;
    assert.ok(reused, `${name}: the third batch was not ${read ? 'read' : 'copied'} into the buffer given back`);
    const joined = new Uint8Array(big.length);
    batches.reduce((at, p) => (joined.set(p, at), at + p.length), 0);
    assert.deepEqual(joined, big, name);
    assert.deepEqual(progress, [4 << 20, 8 << 20, big.length], name);
    await assert.rejects(engine.loadGguf(source(), -3), { name: 'RangeError' });
    engine.terminate();
  }
});

test('a streamed .gguf the worker refuses cancels its source, whatever kind it is', async () => {
  const piece = new Uint8Array(1 << 20).fill(7);
  const kinds = {
    'a byte stream': (cancelled) =>
      new ReadableStream({
        type: 'bytes',
        pull(controller) {
          controller.byobRequest.view.fill(7);
          controller.byobRequest.respond(controller.byobRequest.view.byteLength);
        },
        cancel: () => cancelled.push(true),
      }),
    'a stream of pieces': (cancelled) => new ReadableStream({ pull: (controller) => controller.enqueue(piece.slice()), cancel: () => cancelled.push(true) }),
    'an async iterable': (cancelled) =>
      (async function* () {
        try {
          for (;;) yield piece.slice();
        } finally {
          cancelled.push(true);
        }
      })(),
  };
  for (const [name, source] of Object.entries(kinds)) {
    const engine = await createWorkerClient({ worker: fakeWorker(undefined, { refuse: ['loadGgufPiece'] }) });
    const cancelled = [];
    const pieces = source(cancelled);
    await assert.rejects(engine.loadGguf(pieces, 64 << 20), /loadGgufPiece refused/, name);
    assert.deepEqual(cancelled, [true], `${name}: the source was left open`);
    if (pieces instanceof ReadableStream) assert.equal(pieces.locked, false, name);
    engine.terminate();
  }
});

test('with a snapshot key the worker client asks for the snapshot first: restored, the source is cancelled unread; else the file goes with the key; a bad key is refused before posting; snapshots are listed and deleted by id, bad ids refused before posting', async () => {
  const file = new Uint8Array(5 << 20).fill(3);
  const source = (log) =>
    new ReadableStream({
      pull(controller) {
        log.push('read');
        controller.enqueue(file.slice());
        controller.close();
      },
      cancel: () => log.push('cancelled'),
    }, { highWaterMark: 0 });
  const key = 'http://127.0.0.1/model.gguf\n"5-1"\n5242880';

  const restoring = fakeWorker(undefined, { restored: true });
  const restored = await createWorkerClient({ worker: restoring });
  const log = [];
  assert.equal((await restored.loadGguf(source(log), file.length, { snapshotKey: key })).dModel, model.info().dModel);
  assert.deepEqual(restoring.posted.map(({ op }) => op).slice(2), ['restoreSnapshot']);
  assert.deepEqual(restoring.posted[2].args, [key, 'cpu']);
  assert.deepEqual(log, ['cancelled'], 'the file is never read');
  assert.deepEqual(restored.backendInfo(), { backend: 'cpu', requested: 'cpu', reason: 'cpu' }, 'the restored model is the client’s');

  const missing = fakeWorker();
  const loaded = await createWorkerClient({ worker: missing });
  const read = [];
  await loaded.loadGguf(source(read), file.length, { snapshotKey: key });
  assert.deepEqual(missing.posted.map(({ op }) => op).slice(2), ['restoreSnapshot', 'loadGgufBegin', 'loadGgufPiece', 'loadGgufPiece', 'loadGgufEnd']);
  assert.deepEqual(missing.posted[3].args, [file.length, key]);
  assert.deepEqual(read, ['read']);

  for (const bad of ['', 'x'.repeat(4097), 7]) {
    const worker = fakeWorker();
    const engine = await createWorkerClient({ worker });
    await assert.rejects(engine.loadGguf(source([]), file.length, { snapshotKey: bad }), TypeError);
    assert.deepEqual(worker.posted.map(({ op }) => op), ['init', 'crashFlag'], 'nothing posted for a bad key');
  }

  const managing = fakeWorker();
  const manager = await createWorkerClient({ worker: managing });
  assert.deepEqual(await manager.listSnapshots(), { entries: [], usedBytes: 1 << 20, quotaBytes: 1 << 30 });
  const id = `${'0123456789abcdef'.repeat(2)}.snapshot`;
  await manager.deleteSnapshots([id]);
  for (const bad of [id, [`../${id}`], [id.toUpperCase()], ['a.snapshot'], [7], Array(1001).fill(id)]) {
    await assert.rejects(manager.deleteSnapshots(bad), TypeError, `refused: ${String(bad).slice(0, 60)}`);
  }
  assert.deepEqual(managing.posted.slice(2), [{ op: 'listSnapshots', args: [] }, { op: 'deleteSnapshots', args: [[id]] }], 'bad ids are refused before posting');
});

test('head detectors: the default sequence and every head’s scores are PyTorch’s', () => {
  const expected = JSON.parse(readFileSync(join(process.env.GPTLENS_FIXTURES, 'instruments', 'heads.json'), 'utf8'))['gpt2-tiny-f32'];
  const tokens = model.repeatedRandomTokens();
  assert.deepEqual([...tokens], expected.repeated.tokens);
  for (const [kind, sequence] of [['repeated', tokens], ['prompt', referenceTokens]]) {
    const trace = model.run(sequence, model.info().hooks.filter((name) => name.endsWith('attn.hook_pattern')));
    const scores = model.headScores(trace);
    for (const [js, py] of [['previousToken', 'previous_token'], ['firstToken', 'first_token'], ['duplicateToken', 'duplicate_token'], ['induction', 'induction']]) {
      const worst = Math.max(...scores[js].flat().map((score, i) => Math.abs(score - expected[kind][py].flat()[i])));
      assert.ok(worst <= 2e-5, `${kind} ${js}: off by ${worst}`);
    }
    trace.free();
  }
  const partial = model.run([1, 2, 3], ['blocks.0.attn.hook_pattern']);
  assert.throws(() => model.headScores(partial), /blocks\.1\.attn\.hook_pattern/);
  assert.throws(() => model.repeatedRandomTokens(-1), { name: 'RangeError' });
  assert.notDeepEqual([...model.repeatedRandomTokens(1)], [...tokens]);
});

const instruments = JSON.parse(readFileSync(join(process.env.GPTLENS_FIXTURES, 'instruments', 'patching.json'), 'utf8'))['gpt2-tiny-f32'];
const hooksReference = parseSafetensors(await readFile(join(process.env.GPTLENS_FIXTURES, 'instruments', 'hooks-gpt2-tiny-f32.safetensors')));
const worstOf = (got, want) => Math.max(...want.flat().map((w, i) => Math.abs(got.flat()[i] - w)));

test('the activation hooks and the logit lens are PyTorch’s', () => {
  const names = Object.keys(hooksReference.tensors).filter((name) => !['tokens', 'ablated.logits', 'mean_ablated.logits'].includes(name));
  const trace = model.run(Uint32Array.from(hooksReference.tensors.tokens.data), names);
  for (const name of names) {
    const want = hooksReference.tensors[name];
    const largest = Math.max(...want.data.map(Math.abs));
    const limit = name.endsWith('logits') ? 1e-4 : 1e-5 * (1 + largest);
    const got = trace.tensor(name);
    assert.deepEqual(got.shape, want.shape, name);
    const worst = Math.max(...want.data.map((w, i) => Math.abs(got.data[i] - w)));
    assert.ok(worst <= limit, `${name}: off by ${worst}`);
  }
  trace.free();
});

test('model.patch: activation patching is PyTorch’s, with a progress report per run', () => {
  const reports = [];
  const scores = model.patch(
    { clean: instruments.patching.clean, corrupt: instruments.patching.corrupt, answer: instruments.patching.answer, wrong: instruments.patching.wrong },
    { onProgress: (done, total) => reports.push([done, total]) },
  );
  const tolerance = 3e-4 / Math.abs(instruments.patching.clean_diff - instruments.patching.corrupt_diff);
  assert.ok(Math.abs(scores.cleanDiff - instruments.patching.clean_diff) <= 1e-4);
  assert.ok(worstOf(scores.residPre, instruments.patching.resid_pre) <= tolerance);
  assert.ok(worstOf(scores.heads, instruments.patching.heads) <= tolerance);
  const total = 2 + 2 * (instruments.patching.clean.length + 4);
  assert.deepEqual(reports, Array.from({ length: total }, (_, i) => [i + 1, total]));
  assert.throws(() => model.patch({ clean: [1, 2], corrupt: [1], answer: 0, wrong: 1 }), /same length/);
  let calls = 0;
  const request = { clean: instruments.patching.clean, corrupt: instruments.patching.corrupt, answer: instruments.patching.answer, wrong: instruments.patching.wrong };
  assert.throws(() => model.patch(request, { onProgress: () => ++calls < 3 }), /cancelled after 3 of/);
  assert.equal(calls, 3, 'false from onProgress stops the sweep there');
  assert.throws(() => model.patch({ clean: [1], corrupt: [2], answer: 600, wrong: 1 }), { name: 'RangeError' });
});

test('model.attribution is PyTorch’s and sums to the logit difference; model.logitLens reads the lens', () => {
  const want = instruments.attribution;
  const a = model.attribution(want.tokens);
  assert.deepEqual([a.answer, a.wrong], [want.answer, want.wrong]);
  for (const [js, py] of [['heads', 'heads'], ['mlps', 'mlps'], ['attnBias', 'attn_bias']]) assert.ok(worstOf(a[js], want[py]) <= 1e-4, js);
  for (const [js, py] of [['embed', 'embed'], ['posEmbed', 'pos_embed'], ['finalBias', 'final_bias'], ['logitDiff', 'logit_diff']]) assert.ok(Math.abs(a[js] - want[py]) <= 1e-4, js);
  assert.ok(Math.abs(a.total - a.logitDiff) <= 1e-4);
  const tokens = Uint32Array.from(hooksReference.tensors.tokens.data);
  const lens = model.logitLens(tokens, { first: 2, k: 2, target: 7 });
  const [layers, t, vocab] = hooksReference.tensors['lens.logits'].shape;
  assert.equal(lens.top.length, layers);
  for (let l = 0; l < layers; l++) {
    for (let p = 2; p < t; p++) {
      const row = hooksReference.tensors['lens.logits'].data.subarray((l * t + p) * vocab, (l * t + p + 1) * vocab);
      const max = Math.max(...row);
      const sum = row.reduce((s, x) => s + Math.exp(x - max), 0);
      const prob = (id) => Math.exp(row[id] - max) / sum;
      assert.ok(Math.abs(lens.top[l][p - 2][0].prob - prob(lens.top[l][p - 2][0].id)) <= 1e-5);
      assert.ok(Math.abs(lens.targetProb[l][p - 2] - prob(7)) <= 1e-5);
    }
  }
  assert.throws(() => model.logitLens(tokens, { first: 99 }), { name: 'RangeError' });
  assert.throws(() => model.attribution(tokens, { ablate: [[0, 'x']] }), { name: 'TypeError' });
});

test('session.setAblation zeroes heads like PyTorch; [] undoes it; bad heads are errors', () => {
  const expected = JSON.parse(readFileSync(join(process.env.GPTLENS_FIXTURES, 'instruments', 'ablation.json'), 'utf8'))['gpt2-tiny-f32'];
  const session = model.session();
  const close = (got, want) => Math.max(...want.map((w, i) => Math.abs(got[i] - w)));
  session.setAblation(expected.ablated);
  session.run(expected.tokens, []);
  assert.ok(close(session.lastLogits(), expected.ablated_last_logits) <= 1e-4);
  session.setAblation([]);
  const clean = session.run(expected.tokens, []);
  assert.equal(clean.computed, expected.tokens.length, 'a change of ablation recomputes everything');
  assert.ok(close(session.lastLogits(), expected.clean_last_logits) <= 1e-4);
  assert.throws(() => session.setAblation([[5, 0]]), /head 5\.0 does not exist/);
  assert.throws(() => session.setAblation('0.1'), { name: 'TypeError' });
  assert.throws(() => session.setAblation([[0, -1]]), { name: 'RangeError' });
  // Heads and MLPs together, as make_hooks.py ablated them ("1.3,0.mlp").
  const ablated = hooksReference.tensors['ablated.logits'];
  session.setAblation([[1, 3], [0, 'mlp']]);
  session.run(Uint32Array.from(hooksReference.tensors.tokens.data), []);
  const vocab = ablated.shape[1];
  assert.ok(close(session.lastLogits(), [...ablated.data.subarray(ablated.data.length - vocab)]) <= 1e-4);
  // The same units replaced by their means over the prompt's positions.
  const meanAblated = hooksReference.tensors['mean_ablated.logits'];
  session.setAblation([[1, 3], [0, 'mlp']], { with: 'mean' });
  session.run(Uint32Array.from(hooksReference.tensors.tokens.data), []);
  assert.ok(close(session.lastLogits(), [...meanAblated.data.subarray(meanAblated.data.length - vocab)]) <= 1e-4);
  assert.throws(() => session.setAblation([[1, 3]], { with: 'median' }), { name: 'TypeError' });
  assert.throws(() => session.setAblation([[9, 'mlp']]), /MLP 9\.mlp does not exist/);
  session.free();
});

// --- Encoders: bidirectional attention, post-LN, sentence embeddings.

const encoderDir = join(process.env.GPTLENS_FIXTURES, 'encoder', 'variants', 'post-gelu-sinusoidal-bidirectional');
const loadDir = async (dir, names) => Model.load(Object.fromEntries(await Promise.all(names.map(async (name) => [name, new Uint8Array(await readFile(join(dir, name)))]))));
const norm = (v) => Math.sqrt(v.reduce((sum, x) => sum + x * x, 0));

test('an encoder fixture: its info, full attention maps, unit embeddings, and no next token', async () => {
  const encoder = await loadDir(encoderDir, ['config.json', 'model.safetensors']);
  const info = encoder.info();
  assert.deepEqual(
    { attention: info.attention, normPlacement: info.normPlacement, positions: info.positions, hasHead: info.hasHead, hasTokenizer: info.hasTokenizer },
    { attention: 'bidirectional', normPlacement: 'post', positions: 'sinusoidal', hasHead: true, hasTokenizer: false },
  );
  assert.ok(!info.standardHooks.includes('ln_final.hook_scale'), 'post-LN: no final norm');
  const tokens = [3, 14, 15, 9, 26, 5];
  const t = tokens.length;
  const trace = encoder.run(tokens);
  const { shape, data } = trace.tensor('blocks.0.attn.hook_pattern');
  assert.deepEqual(shape, [info.nHead, t, t]);
  let above = 0;
  for (let h = 0; h < info.nHead; h++) {
    for (let q = 0; q < t; q++) {
      let row = 0;
      for (let k = 0; k < t; k++) row += data[(h * t + q) * t + k];
      assert.ok(Math.abs(row - 1) < 1e-5, `head ${h} query ${q}: the row sums to ${row}`);
      for (let k = q + 1; k < t; k++) above = Math.max(above, data[(h * t + q) * t + k]);
    }
  }
  assert.ok(data[1] > 0 && above > 0.01, `weights above the diagonal: [0,0,1] = ${data[1]}, largest ${above}`);
  // Every run recomputes every position (no prefix reuse: the future changes the past).
  const session = encoder.session();
  session.run(tokens, []);
  assert.equal(session.run([...tokens, 7], []).computed, t + 1);

  const embedding = encoder.embed(tokens);
  assert.ok(embedding instanceof Float32Array && embedding.length === info.dModel);
  assert.ok(Math.abs(norm(embedding) - 1) < 1e-5, `unit length, not ${norm(embedding)}`);
  assert.deepEqual(session.embed(tokens), embedding, 'Session.embed is Model.embed');
  assert.ok(Math.abs(cosine(embedding, embedding) - 1) < 1e-6);
  assert.ok(cosine(embedding, encoder.embed([1, 2])) < 1 - 1e-4);

  // Checked where they enter, like every other argument.
  assert.throws(() => encoder.embed([]), { name: 'RangeError', message: /^input must hold at least one token id/ });
  assert.throws(() => encoder.embed([1, info.vocabSize]), { name: 'RangeError', message: new RegExp(`^input\\[1\\] must be an integer in \\[0, ${info.vocabSize}\\)`) });
  assert.throws(() => encoder.embed([1.5]), { name: 'RangeError' });
  assert.throws(() => encoder.embed(null), { name: 'TypeError', message: /^input must be a string, a Uint32Array or an array/ });
  assert.throws(() => session.embed([]), { name: 'RangeError' });
  assert.throws(() => cosine([1, 2], [1]), { name: 'RangeError' });
  assert.throws(() => cosine([0, 0], [1, 0]), { name: 'RangeError' });
  assert.throws(() => encoder.embed('text'), /tokenizer/, 'no tokenizer: text cannot be embedded');

  // An encoder does not generate.
  assert.throws(() => session.step(1), /encoder/);
  assert.throws(() => session.sampleNext({ temperature: 0 }), /encoder/);
  await assert.rejects(session.stepAsync(1), /encoder/);
  assert.equal(encoder.run(tokens, []).computed, t, 'still usable afterwards');
  trace.free();
  session.free();
  encoder.free();
});

test('the worker client embeds in one message, checked first; refuses next-token questions for an encoder', async () => {
  const info = { ...model.info(), hasHead: false, attention: 'bidirectional', architecture: 'bert', standardHooks: [], hooks: [] };
  const worker = fakeWorker(info);
  const engine = await createWorkerClient({ worker });
  await engine.load(files);
  const before = worker.posted.length;
  await assert.rejects(engine.embed([]), { name: 'RangeError', message: /^input must hold at least one token id/ });
  await assert.rejects(engine.embed([513]), { name: 'RangeError' });
  await assert.rejects(engine.embed({}), { name: 'TypeError' });
  await assert.rejects(engine.logitLens([1, 2]), /encoder without a language-model head/);
  await assert.rejects(engine.attribution([1, 2]), /encoder without a language-model head/);
  const session = await engine.session();
  const trace = await engine.run([1, 2, 3], []);
  const runs = worker.posted.length;
  await assert.rejects(trace.topK(3), /topK needs next-token logits/);
  await assert.rejects(trace.probs(0, 1), /encoder/);
  await assert.rejects(session.step(1), /encoder/);
  await assert.rejects(session.sampleNext({ temperature: 0 }), /encoder/);
  assert.equal(worker.posted.length, runs, 'no refused call reached the worker');
  assert.equal(runs - before, 2, 'only the session and the run');
  const vector = await engine.embed([5, 6, 7]);
  assert.ok(vector instanceof Float32Array && vector.length === info.dModel);
  await engine.embed('A sentence.');
  const sent = worker.posted.slice(runs);
  assert.deepEqual(sent.map(({ op }) => op), ['embed', 'embed'], 'one message each');
  assert.ok(sent[0].args[0] instanceof Uint32Array);
  assert.deepEqual([...sent[0].args[0]], [5, 6, 7]);
  assert.equal(sent[1].args[0], 'A sentence.');
  engine.terminate();
});

const minilmDir = process.env.GPTLENS_MODELS ? join(process.env.GPTLENS_MODELS, 'all-MiniLM-L6-v2') : join(process.env.GPTLENS_FIXTURES, '..', '..', 'assets', 'models', 'all-MiniLM-L6-v2');
const minilmFiles = ['config.json', 'model.safetensors', 'tokenizer.json'];
const haveMinilm = minilmFiles.every((name) => existsSync(join(minilmDir, name)));

test('all-MiniLM-L6-v2: embeddings whose cosine similarities are sentence-transformers\' (1e-5)', async (t) => {
  if (!haveMinilm) {
    const reason = `${minilmDir} is absent (bash scripts/fetch-minilm.sh fetches it)`;
    console.log(`SKIPPED MiniLM: ${reason}`);
    return t.skip(reason);
  }
  const minilm = await loadDir(minilmDir, minilmFiles);
  const info = minilm.info();
  assert.deepEqual(
    { architecture: info.architecture, attention: info.attention, normPlacement: info.normPlacement, positions: info.positions, hasHead: info.hasHead, dModel: info.dModel },
    { architecture: 'bert', attention: 'bidirectional', normPlacement: 'post', positions: 'learned', hasHead: false, dModel: 384 },
  );
  assert.ok(!info.standardHooks.includes('logits') && !info.standardHooks.some((hook) => hook.startsWith('ln_final')));
  const fixture = join(process.env.GPTLENS_FIXTURES, 'encoder', 'minilm');
  const sentences = JSON.parse(await readFile(join(fixture, 'sentences.json'), 'utf8'));
  const reference = parseSafetensors(await readFile(join(fixture, 'reference.safetensors'))).tensors.cosine;
  const n = sentences.length;
  assert.deepEqual(reference.shape, [n, n]);
  const embeddings = sentences.map(({ text, ids }) => {
    assert.deepEqual([...minilm.encode(text)], ids, `the tokens of ${JSON.stringify(text)}`);
    const fromIds = minilm.embed(ids);
    assert.deepEqual(minilm.embed(text), fromIds, 'text and its ids embed alike');
    assert.ok(Math.abs(norm(fromIds) - 1) < 1e-5);
    return fromIds;
  });
  let worst = 0;
  for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) worst = Math.max(worst, Math.abs(cosine(embeddings[i], embeddings[j]) - reference.data[i * n + j]));
  assert.ok(worst <= 1e-5, `cosine similarities off by ${worst}`);
  const trace = minilm.run(sentences[0].ids);
  assert.throws(() => trace.topK(3), /topK needs next-token logits, and this bert model is an encoder without a language-model head/);
  assert.throws(() => trace.probs(0, 1), /encoder/);
  assert.throws(() => minilm.logitLens(sentences[0].ids), /encoder/);
  assert.equal(minilm.session().lastLogits().length, 0);
  trace.free();
  minilm.free();
});

const TINY_SHAPE = { nLayer: 1, nHead: 2, dModel: 16, nCtx: 16 };
const SENTENCE = 'The quick brown fox jumps over the lazy dog. ';

test('Trainer: 30 steps on a repeated sentence lower the loss; files() loads back as the same model', () => {
  const trainer = new Trainer(TINY_SHAPE, { batch: 4, steps: 30, warmup: 0, lr: 1e-2, evalEvery: 10, evalBatches: 2 });
  assert.equal(trainer.paramCount(), 7664);
  assert.deepEqual({ steps: trainer.recipe().steps, batch: trainer.recipe().batch }, { steps: 30, batch: 4 });
  assert.throws(() => trainer.train(1), /setText/, 'no text yet');
  trainer.setText(SENTENCE.repeat(20), 0.1);
  const first = trainer.train(10);
  const rest = trainer.train(100); // stops at recipe.steps
  const progress = [...first, ...rest];
  assert.deepEqual(progress.map(({ step }) => step), Array.from({ length: 30 }, (_, i) => i + 1));
  assert.deepEqual(trainer.train(5), [], 'nothing past recipe.steps');
  const early = progress.slice(0, 3).reduce((sum, { loss }) => sum + loss, 0) / 3;
  const late = progress.slice(-3).reduce((sum, { loss }) => sum + loss, 0) / 3;
  assert.ok(late < early - 0.5, `the loss went from ${early} to ${late}`);
  assert.ok(progress.every(({ tokensPerSecond }) => tokensPerSecond > 0));
  const state = trainer.state();
  assert.equal(state.step, 30);
  assert.deepEqual(state.losses, progress.map(({ loss }) => loss));
  assert.deepEqual(state.valLosses.map(([step]) => step), [10, 20, 30]);
  assert.deepEqual(progress.filter(({ valLoss }) => typeof valLoss === 'number').map(({ step, valLoss }) => [step, valLoss]), state.valLosses);

  const trained = trainer.model();
  const info = trained.info();
  assert.deepEqual([info.architecture, info.nLayer, info.nHead, info.dModel, info.contextLength, info.vocabSize, info.hasTokenizer], ['gpt2', 1, 2, 16, 16, 256, true]);
  assert.equal(info.name, 'trained in the page');
  const files = trainer.files();
  assert.deepEqual(Object.keys(files).sort(), ['config.json', 'model.safetensors']);
  assert.equal(JSON.parse(new TextDecoder().decode(files['config.json'])).n_embd, 16);
  const loaded = Model.load(files);
  const ids = trained.encode('The quick brown');
  assert.deepEqual([...ids], [...new TextEncoder().encode('The quick brown')], 'the byte tokenizer');
  assert.deepEqual(loaded.run(ids, ['logits']).tensor('logits').data, trained.run(ids, ['logits']).tensor('logits').data);
  trained.free();
  loaded.free();
  trainer.free();
});

test('Trainer: bad shapes, recipes, texts and step counts are TypeErrors and RangeErrors', () => {
  const bad = [
    [() => new Trainer(), TypeError, /^shape must be an object/],
    [() => new Trainer({ ...TINY_SHAPE, nLayer: 0 }), RangeError, /^shape\.nLayer must be an integer in \[1, 1024\], not 0$/],
    [() => new Trainer({ ...TINY_SHAPE, nHead: 1.5 }), RangeError, /^shape\.nHead /],
    [() => new Trainer({ ...TINY_SHAPE, dModel: '16' }), TypeError, /^shape\.dModel /],
    [() => new Trainer({ ...TINY_SHAPE, nCtx: 1025 }), RangeError, /^shape\.nCtx must be an integer in \[1, 1024\]/],
    [() => new Trainer({ ...TINY_SHAPE, nHead: 3 }), RangeError, /^shape\.dModel \(16\) must be a multiple of shape\.nHead \(3\)$/],
    [() => new Trainer({ ...TINY_SHAPE, sinusoidal: 1 }), TypeError, /^shape\.sinusoidal /],
    [() => new Trainer(TINY_SHAPE, 5), TypeError, /^recipe must be an object/],
    [() => new Trainer(TINY_SHAPE, { steps: 0 }), RangeError, /^recipe\.steps /],
    [() => new Trainer(TINY_SHAPE, { batch: NaN }), RangeError, /^recipe\.batch /],
    [() => new Trainer(TINY_SHAPE, { lr: -1 }), RangeError, /^recipe\.lr must be a finite number > 0/],
    [() => new Trainer(TINY_SHAPE, { lr: 'fast' }), TypeError, /^recipe\.lr /],
    [() => new Trainer(TINY_SHAPE, { adamw: { beta2: 1 } }), RangeError, /^recipe\.adamw\.beta2 /],
  ];
  for (const [make, type, message] of bad) assert.throws(make, (e) => e instanceof type && message.test(e.message), String(make));
  const trainer = new Trainer(TINY_SHAPE, { batch: 2, steps: 5 });
  for (const [call, type, message] of [
    [() => trainer.setText(''), RangeError, /^text must not be empty$/],
    [() => trainer.setText(new Uint8Array()), RangeError, /^text must not be empty$/],
    [() => trainer.setText([1, 2, 3]), TypeError, /^text must be a string or a Uint8Array/],
    [() => trainer.setText(SENTENCE.repeat(10), 1), RangeError, /^valFraction must be a number in \[0, 1\), not 1$/],
    [() => trainer.setText(SENTENCE.repeat(10), -0.1), RangeError, /^valFraction /],
    [() => trainer.setText(SENTENCE.repeat(10), '0.1'), TypeError, /^valFraction /],
    [() => trainer.train(0), RangeError, /^steps must be an integer in \[1, 2\^32\), not 0$/],
    [() => trainer.train(2.5), RangeError, /^steps /],
    [() => trainer.train('5'), TypeError, /^steps /],
  ]) assert.throws(call, (e) => e instanceof type && message.test(e.message), String(call));
  // A text too short for the context is the engine's Error; the trainer stays usable.
  assert.throws(() => trainer.setText('short'), /needs more than one block of 16/);
  trainer.setText(new TextEncoder().encode(SENTENCE.repeat(10)), 0);
  assert.equal(trainer.train(5).length, 5);
  trainer.free();
});

test('the worker client trainer checks its arguments before posting; useModel makes the trained model the client\'s', async () => {
  const worker = fakeWorker();
  const engine = await createWorkerClient({ worker });
  await assert.rejects(engine.trainer({ ...TINY_SHAPE, nHead: 3 }), RangeError);
  await assert.rejects(engine.trainer(TINY_SHAPE, { steps: -1 }), RangeError);
  assert.equal(worker.posted.filter(({ op }) => op.startsWith('trainer')).length, 0, 'no bad call reached the worker');
  const trainer = await engine.trainer(TINY_SHAPE, { steps: 30, batch: 4 });
  assert.equal(trainer.paramCount, 7664);
  const before = worker.posted.length;
  await assert.rejects(trainer.setText(''), RangeError);
  await assert.rejects(trainer.setText('x'.repeat(100), 2), RangeError);
  await assert.rejects(trainer.train(0), RangeError);
  assert.equal(worker.posted.length, before, 'no bad call reached the worker');
  await trainer.setText('héllo '.repeat(10), 0.2);
  await trainer.train(3);
  await assert.rejects(engine.run([1]), /no model loaded/);
  const info = await trainer.useModel();
  assert.equal(info.name, 'trained in the page');
  await engine.run([255]); // checked against the trained model's vocabulary (256)
  await assert.rejects(engine.run([256]), RangeError);
  const sent = worker.posted.slice(before);
  assert.deepEqual(sent.map(({ op }) => op), ['trainerSetText', 'trainerTrain', 'trainerUseModel', 'run']);
  assert.deepEqual([...sent[0].args[1].subarray(0, 3)], [104, 195, 169], 'the text as UTF-8');
  assert.equal(sent[0].args[2], 0.2);
  assert.deepEqual(sent[1].args, [3, 3]);
  engine.terminate();
});

const smollm2 = join(minilmDir, '..', 'SmolLM2-135M-Instruct.Q4_1.gguf');

test('a model whose whole context does not fit in WebAssembly loads with the positions that do, and says so', async (t) => {
  if (!existsSync(smollm2)) {
    const reason = `${smollm2} is absent (bash scripts/fetch-smollm.sh fetches it)`;
    console.log(`SKIPPED context cut: ${reason}`);
    return t.skip(reason);
  }
  // SmolLM2 claiming a million positions: its f32 KV cache at that context would be 45 GiB.
  const bytes = new Uint8Array(readFileSync(smollm2));
  const key = new TextEncoder().encode('llama.context_length');
  const needle = [...new Uint8Array(new BigUint64Array([BigInt(key.length)]).buffer), ...key, 4, 0, 0, 0];
  const at = bytes.findIndex((_, i) => needle.every((byte, j) => bytes[i + j] === byte));
  assert.ok(at > 0, 'the file has llama.context_length');
  new DataView(bytes.buffer).setUint32(at + needle.length, 2 ** 20, true);
  const model = await Model.loadGguf([bytes], bytes.byteLength);
  const { contextLength, contextCut } = model.info();
  assert.ok(contextLength < 2 ** 20 && contextLength >= 8192 && contextLength % 256 === 0, `cut to ${contextLength}`);
  assert.match(contextCut, new RegExp(`cut from 1048576 to ${contextLength} positions.*WebAssembly's 4 GiB`));
  const session = model.session();
  await assert.rejects(session.runAsync(new Uint32Array(contextLength + 1).fill(1), []), /do not fit in the model's context of/);
  await session.runAsync(Uint32Array.from([1, 2, 3]), []);
  assert.equal(session.tokens().length, 3);
  model.free();
});
