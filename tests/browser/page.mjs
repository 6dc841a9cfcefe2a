// Runs in the test page: the package's worker client on the fixture model, as a web page uses it,
// and the direct API on the page's main thread.
import { createWorkerClient, init, Model } from '/pkg/dist/index.js';

const FIXTURE = '/tests/fixtures/gpt2-tiny-f32/';

async function fixtureFiles() {
  const names = ['config.json', 'model.safetensors', 'tokenizer.json'];
  const bytes = await Promise.all(names.map(async (name) => new Uint8Array(await (await fetch(FIXTURE + name)).arrayBuffer())));
  return Object.fromEntries(names.map((name, i) => [name, bytes[i]]));
}

/** What the browser's WebGPU offers here: the adapter's info, or why there is none. */
export async function webgpuAdapter() {
  if (!navigator.gpu) return { missing: 'navigator.gpu is undefined' };
  const adapter = await navigator.gpu.requestAdapter({ powerPreference: 'high-performance' });
  if (!adapter) return { missing: 'navigator.gpu.requestAdapter() returned null' };
  const { vendor, architecture, isFallbackAdapter } = adapter.info;
  return { vendor, architecture, isFallbackAdapter };
}

/**
 * Starts a worker client with `options`, runs `tokens` with every hook, then a session (prefix
 * reuse, greedy sampling, a step); returns what the tests check, or the error's message.
 */
export async function runFixture(options, tokens) {
  let engine;
  try {
    engine = await createWorkerClient(options);
    await engine.load(await fixtureFiles());
    const trace = await engine.run(Uint32Array.from(tokens));
    // The whole context (64 tokens, ~9 M multiply-adds): enough for a 2-thread engine to run the
    // pass as a team; the reference prompt's pass is small enough to run alone.
    const whole = await engine.run(Uint32Array.from({ length: 64 }, (_, i) => (i * 37 + 11) % 513), ['logits']);
    const session = await engine.session();
    await session.run(Uint32Array.from(tokens), []);
    const reused = await session.run(Uint32Array.from([...tokens, 7]), []);
    const greedy = [];
    for (let i = 0; i < 3; i++) greedy.push(await session.sampleNext({ temperature: 0 }));
    await session.step(5);
    return {
      backend: engine.backend(),
      backendInfo: engine.backendInfo(),
      crossOriginIsolated,
      logits: Array.from(trace.tensor('logits').data),
      pattern: Array.from(trace.tensor('blocks.1.attn.hook_pattern').data),
      wholeContextLogits: Array.from(whole.tensor('logits').data),
      scale: Array.from(trace.tensor('blocks.0.ln1.hook_scale').data),
      top: await trace.topK(3),
      reusedComputed: reused.computed,
      greedy,
      stepped: Array.from(await session.lastLogits()),
    };
  } catch (error) {
    return { error: error.message };
  } finally {
    engine?.terminate();
  }
}

/** The direct API on the page's main thread, asked for 2 threads (which it must decline). */
export async function runFixtureOnMainThread(tokens) {
  const backend = await init({ threads: 2 });
  const model = Model.load(await fixtureFiles());
  const trace = model.run(Uint32Array.from(tokens), ['logits']);
  return { backend, logits: Array.from(trace.tensor('logits').data) };
}

/**
 * The direct API on WebGPU, on the page's main thread, beside the same model on the CPU: a run,
 * a session's async methods, and the errors of a sync call and of overlapping calls.
 */
export async function runFixtureDirectOnWebGpu(tokens) {
  try {
    await init({ backend: 'webgpu' });
    const files = await fixtureFiles();
    const ids = Uint32Array.from(tokens);
    const gpu = await Model.load(files, { backend: 'webgpu' });
    const cpu = Model.load(files);
    const [gpuTrace, cpuTrace] = [await gpu.runAsync(ids), cpu.run(ids)];
    let syncError;
    try {
      gpu.run(ids, []);
    } catch (error) {
      syncError = error.message;
    }
    const session = gpu.session();
    const first = session.runAsync(ids, ['logits']);
    const overlapping = await session.runAsync(ids, []).then(() => 'resolved', (error) => error.message);
    await first;
    const greedy = [];
    for (let i = 0; i < 4; i++) greedy.push(await session.sampleNextAsync({ temperature: 0 }));
    await session.stepAsync(5);
    const cpuSession = cpu.session();
    cpuSession.run(ids, ['logits']);
    const cpuGreedy = [];
    for (let i = 0; i < 4; i++) cpuGreedy.push(cpuSession.sampleNext({ temperature: 0 }));
    cpuSession.step(5);
    const maxDiff = (a, b) => a.reduce((max, value, i) => Math.max(max, Math.abs(value - b[i])), 0);
    // Absolute below 1, relative above (norms of the residual stream are large).
    const scaledDiff = (a, b) => a.reduce((max, value, i) => Math.max(max, Math.abs(value - b[i]) / Math.max(1, Math.abs(b[i]))), 0);
    const worst = Object.fromEntries(cpuTrace.names().map((name) => [name, scaledDiff(gpuTrace.tensor(name).data, cpuTrace.tensor(name).data)]));
    const [backend, backendInfo] = [gpu.backend(), gpu.backendInfo()];
    // Back to the CPU: sessions made afterwards run there, synchronously.
    await gpu.useBackend('cpu');
    const backAgain = gpu.session();
    backAgain.run(ids, []);
    return {
      backend,
      backendInfo,
      sessionBackend: session.backend(),
      names: gpuTrace.names().length === cpuTrace.names().length,
      worst,
      top: [gpuTrace.topK(5), cpuTrace.topK(5)],
      syncError,
      overlapping,
      greedy: [greedy, cpuGreedy],
      stepped: maxDiff(session.lastLogits(), cpuSession.lastLogits()),
      afterSwitch: [gpu.backend(), backAgain.backend(), gpu.backendInfo().reason],
    };
  } catch (error) {
    return { error: error.message };
  }
}

/**
 * A .gguf through the worker client as the page loads one: a fetch's body streamed in (read
 * straight into the batches it sends, a fetch's body being a byte stream), beside the same file
 * loaded whole. Returns both runs' logits, or the error's message.
 */
export async function runGgufStreamed(options, tokens) {
  const url = '/tests/fixtures/llama-tiny-q/model.gguf';
  const engines = [];
  try {
    const file = new Uint8Array(await (await fetch(url)).arrayBuffer());
    const streamed = await createWorkerClient(options);
    engines.push(streamed);
    const response = await fetch(url);
    const byteStream = await fetch(url).then(({ body }) => {
      const reader = body.getReader({ mode: 'byob' });
      return reader.cancel().then(() => true);
    }, () => false);
    await streamed.loadGguf(response.body, file.byteLength);
    const whole = await createWorkerClient(options);
    engines.push(whole);
    await whole.load({ 'model.gguf': file });
    const logits = async (engine) => Array.from((await engine.run(Uint32Array.from(tokens), ['logits'])).tensor('logits').data);
    return { byteStream, info: [await streamed.info(), await whole.info()], logits: [await logits(streamed), await logits(whole)] };
  } catch (error) {
    return { error: error.message };
  } finally {
    engines.forEach((engine) => engine.terminate());
  }
}

/**
 * The quantized .gguf fixture loaded through the worker client with a snapshot key, five times,
 * each in a fresh worker: from the file (the snapshot is then written), from the snapshot (the
 * body is cancelled, never read), from the file again once the snapshot was cut short here (it is
 * refused and written anew), from the new snapshot, which is then deleted, and from the file again,
 * its snapshot loaded again while being written (`again`: the state then) and deleted while being
 * written. Returns each load's snapshot state, logits, whether its body was read and what
 * `listSnapshots` said of this key's snapshot (`listed`: after the load; `cut`: once cut short,
 * from another worker; `deleted`: after each deletion), or the error's message.
 */
export async function runGgufSnapshot(options, tokens) {
  const url = '/tests/fixtures/llama-tiny-q/model.gguf';
  const key = `${location.origin}${url} test ${crypto.randomUUID()}`;
  const file = new Uint8Array(await (await fetch(url)).arrayBuffer());
  const loads = [];
  /** This key's snapshot in `engine.listSnapshots()`, and the origin's storage figures. */
  const listed = async (engine) => {
    const { entries, usedBytes, quotaBytes } = await engine.listSnapshots();
    return { entry: entries.find((entry) => entry.key === key), usedBytes, quotaBytes, sorted: entries.every((entry, i) => i === 0 || entries[i - 1].written >= entry.written) };
  };
  const deleted = [];
  /** Deletes this key's snapshot through `engine`: the state and the list after. */
  const remove = async (engine, id) => {
    await engine.deleteSnapshots([id]);
    const folder = await (await navigator.storage.getDirectory()).getDirectoryHandle('gptlens-snapshots');
    const kept = (file) => folder.getFileHandle(file).then(() => true, () => false);
    const files = { snapshot: await kept(id), key: await kept(id.replace(/\.snapshot$/, '.key')) };
    deleted.push({ state: await engine.snapshotState(), listed: await listed(engine), files });
  };
  async function load(after = async () => {}) {
    const engine = await createWorkerClient(options);
    try {
      const body = { read: false, cancelled: false };
      const stream = new ReadableStream(
        {
          pull(controller) {
            body.read = true;
            controller.enqueue(file.slice());
            controller.close();
          },
          cancel() {
            body.cancelled = true;
          },
        },
        { highWaterMark: 0 },
      );
      await engine.loadGguf(stream, file.byteLength, { snapshotKey: key });
      const loaded = await engine.snapshotState();
      const logits = Array.from((await engine.run(Uint32Array.from(tokens), ['logits'])).tensor('logits').data);
      // Polled slowly: the snapshot is written only once the worker has had no request for a while.
      let settled = await engine.snapshotState();
      for (let waited = 0; settled.state === 'writing' && waited < 20000; waited += 500) {
        await new Promise((resolve) => setTimeout(resolve, 500));
        settled = await engine.snapshotState();
      }
      loads.push({ loaded, settled, logits, body, vocab: (await engine.info()).vocabSize, listed: await listed(engine) });
      await after(engine);
    } finally {
      engine.terminate();
    }
  }
  try {
    await load();
    await load();
    const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(key)));
    const name = `${Array.from(digest.subarray(0, 16), (byte) => byte.toString(16).padStart(2, '0')).join('')}.snapshot`;
    const snapshot = await (await (await navigator.storage.getDirectory()).getDirectoryHandle('gptlens-snapshots')).getFileHandle(name);
    const length = (await snapshot.getFile()).size;
    const writable = await snapshot.createWritable({ keepExistingData: true });
    await writable.truncate(length - 1);
    await writable.close();
    const lister = await createWorkerClient(options);
    const cut = await listed(lister).finally(() => lister.terminate());
    await load();
    await load(async (engine) => remove(engine, loads.at(-1).listed.entry.id));
    // Loaded again while its snapshot is written (the first write stops and closes the file before
    // the second load looks for it), then deleted while being written: nothing of it is left.
    const writing = await createWorkerClient(options);
    let again;
    try {
      await writing.loadGguf(new Blob([file]).stream(), file.byteLength, { snapshotKey: key });
      await writing.loadGguf(new Blob([file]).stream(), file.byteLength, { snapshotKey: key });
      again = await writing.snapshotState();
      await remove(writing, name);
    } finally {
      writing.terminate();
    }
    await load();
    return { loads, length, cut, deleted, again };
  } catch (error) {
    return { error: error.message, loads };
  }
}

/**
 * `session.runPrompt` on the fixture through the worker client, beside what the same questions
 * asked one message each give on a second session: a prompt decoded from `tokens` and then edited
 * at its end (prefix reuse), a long run pooled past 4 tokens with a head opened whole, and a
 * prompt past the context. Returns what the tests compare, or the error's message.
 */
export async function runPromptFixture(options, tokens) {
  let engine;
  try {
    engine = await createWorkerClient(options);
    const info = await engine.load(await fixtureFiles());
    const capture = info.hooks.filter((hook) => /\.(hook_pattern|hook_scale|hook_mean)$/.test(hook));
    const live = await engine.session();
    const chained = await engine.session();
    const text = await engine.decode(Uint32Array.from(tokens));
    const sampling = { temperature: 0.8, topP: 0.9 };
    const steps = [];
    for (const edit of [text, `${text} the`, `${text} they`]) {
      const answer = await live.runPrompt(edit, { capture, next: { k: 5, sampling, survivors: 50 } });
      const ids = await engine.encode(edit);
      const trace = await chained.run(ids, capture);
      // The same question without the kept tokens' list (the text is cached: nothing recomputed).
      const unlisted = await live.runPrompt(edit, { next: { k: 5, sampling, survivors: 50, kept: false } });
      steps.push({
        unlisted: { top: unlisted.next.top, survivors: unlisted.next.survivors, hasKept: 'kept' in unlisted.next },
        survivors: answer.next.survivors,
        sampled: answer.next.top.map(({ sampled }) => sampled),
        topWhole: answer.next.top,
        // The same question of the other session's trace (WorkerTrace.next, as after new settings).
        nextOfTrace: [answer.next, await trace.next({ k: 5, sampling, survivors: 50 })],
        tokens: [Array.from(answer.trace.tokens()), Array.from(ids)],
        computed: [answer.trace.computed, trace.computed],
        labels: [answer.labels, await engine.tokenStrings(ids)],
        top: [answer.next.top.map(({ id, prob }) => ({ id, prob })), await trace.topK(5)],
        topLabels: [answer.next.top.map(({ label }) => label), await engine.tokenStrings((await trace.topK(5)).map(({ id }) => id))],
        kept: [answer.next.kept, await trace.topK(50, sampling)],
        tensors: capture.map((hook) => [Array.from(answer.trace.tensor(hook).data), Array.from(trace.tensor(hook).data)]),
        timings: answer.timings,
      });
    }
    // One message to the Worker for all of it (traces let go of ride along with it, or go on their own after a second).
    const post = Worker.prototype.postMessage;
    const messages = [];
    Worker.prototype.postMessage = function count(...args) {
      if (args[0]?.op !== 'releaseTraces') messages.push(args[0]?.op);
      return post.apply(this, args);
    };
    const logits = Array.from((await live.runPrompt(text, { next: { k: 3 } })).trace.tensor('logits').data);
    Worker.prototype.postMessage = post;
    // Fewer survivors than candidates, and settings that filter nothing (the answer's shortcut).
    const capped = (await live.runPrompt(text, { next: { k: 5, survivors: 3 } })).next;
    const plain = (await live.runPrompt(text, { next: { k: 5, sampling: { temperature: 1 } } })).next;
    const edges = { capped: { top: capped.top, survivors: capped.survivors }, plain: { top: plain.top, survivors: plain.survivors } };
    // Past 4 tokens the maps come pooled and head 1.2 whole, from the queries the session kept.
    const pooled = await live.runPrompt(text, { capture, pooledPast: 4, open: { layer: 1, head: 2 } });
    const whole = await chained.run(Uint32Array.from(tokens), ['blocks.1.attn.hook_pattern']);
    const t = tokens.length;
    const head = Array.from(whole.tensor('blocks.1.attn.hook_pattern').data.subarray(2 * t * t, 3 * t * t));
    const tooLong = await live.runPrompt(text.repeat(20), { capture }).then(() => 'no error', (error) => `${error.name}: ${error.message}`);
    // Waitable answers, on a third session: the same answers, settled by waitForAnswer in this
    // task (only promise callbacks run between, never a message); one too big for the shared
    // buffer (every hook of a 64-token prompt, 0.26 MB) comes by message, and the next fits.
    const waited = await engine.session();
    const replyBytes = [];
    const waitFor = async (input, query) => {
      let settled = false;
      const post = Worker.prototype.postMessage;
      Worker.prototype.postMessage = function sized(...args) {
        if (args[0]?.reply) replyBytes.push(args[0].reply.byteLength);
        return post.apply(this, args);
      };
      const asked = waited.runPrompt(input, query, { waitable: true });
      Worker.prototype.postMessage = post;
      void asked.then(() => (settled = true));
      engine.waitForAnswer(50);
      for (let tick = 0; tick < 20; tick++) await null;
      const inThisTask = settled;
      const answer = await asked;
      const next = answer.next && { top: answer.next.top, survivors: answer.next.survivors, hasKept: 'kept' in answer.next, kept: answer.next.kept };
      return { settled: inThisTask, tokens: Array.from(answer.trace.tokens()), next, labels: answer.labels, tensors: capture.map((hook) => Array.from(answer.trace.tensor(hook)?.data ?? [])) };
    };
    const waitable = [];
    // The last edit asks as the page does, without the kept list.
    for (const [i, edit] of [text, `${text} the`, `${text} they`].entries()) {
      waitable.push(await waitFor(edit, { capture, next: { k: 5, sampling, survivors: 50, ...(i === 2 ? { kept: false } : {}) } }));
    }
    const long = Uint32Array.from({ length: 64 }, (_, i) => tokens[i % tokens.length]);
    const tooBig = [];
    for (let run = 0; run < 2; run++) {
      await waited.reset();
      tooBig.push((await waitFor(long, {})).settled);
    }
    tooBig.push(replyBytes.at(-1) > replyBytes.at(-2));
    const badWait = [NaN, -1, 51, '5'].map((ms) => {
      try {
        engine.waitForAnswer(ms);
        return 'no error';
      } catch (error) {
        return `${error.name}: ${error.message}`;
      }
    });
    return {
      waitable,
      edges,
      tooBig,
      badWait,
      steps,
      logits,
      pooledNames: pooled.trace.names().filter((name) => name.includes('pattern')),
      opened: [Array.from(pooled.opened.data), head],
      tooLong,
      messages,
    };
  } catch (error) {
    return { error: `${error.message}\n${error.stack}` };
  } finally {
    engine?.terminate();
  }
}
