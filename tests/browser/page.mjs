// Runs in the test page: the package's worker client on the fixture model, as a web page uses it.
import { createWorkerClient, init, Model } from '/pkg/dist/index.js';

const FIXTURE = '/tests/fixtures/gpt2-tiny-f32/';

async function fixtureFiles() {
  const names = ['config.json', 'model.safetensors', 'tokenizer.json'];
  const bytes = await Promise.all(names.map(async (name) => new Uint8Array(await (await fetch(FIXTURE + name)).arrayBuffer())));
  return Object.fromEntries(names.map((name, i) => [name, bytes[i]]));
}

/** Starts a worker client with `options`, runs `tokens` with every hook, returns what the test checks. */
export async function runFixture(options, tokens) {
  const engine = await createWorkerClient(options);
  try {
    await engine.load(await fixtureFiles());
    const trace = await engine.run(Uint32Array.from(tokens));
    const session = await engine.session();
    await session.run(Uint32Array.from(tokens), []);
    const reused = await session.run(Uint32Array.from([...tokens, 7]), []);
    return {
      backend: engine.backend(),
      crossOriginIsolated,
      logits: Array.from(trace.tensor('logits').data),
      pattern: Array.from(trace.tensor('blocks.1.attn.hook_pattern').data),
      top: await trace.topK(3),
      reusedComputed: reused.computed,
    };
  } finally {
    engine.terminate();
  }
}

/** The direct API on the page's main thread, asked for 2 threads (which it must decline). */
export async function runFixtureOnMainThread(tokens) {
  const backend = await init({ threads: 2 });
  const model = Model.load(await fixtureFiles());
  const trace = model.run(Uint32Array.from(tokens), ['logits']);
  return { backend, logits: Array.from(trace.tensor('logits').data) };
}
