// A crashed engine in Node: a wasm trap (here forced with abortForTesting, a Rust panic, as a
// bug would cause) makes every later call on every object throw EngineCrashedError naming the
// trap — never wasm-bindgen's "recursive use of an object detected", never a hang. Its own file,
// so its own process: the crash is for good.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { abortForTesting, EngineCrashedError, init, Model } from 'gptlens';

const fixture = join(process.env.GPTLENS_FIXTURES, 'gpt2-tiny-f32');
const files = Object.fromEntries(
  await Promise.all(['config.json', 'model.safetensors', 'tokenizer.json'].map(async (name) => [name, new Uint8Array(await readFile(join(fixture, name)))])),
);

test('after a trap, every object of the engine reports the crash, and free() still works', async () => {
  await init();
  const model = Model.load(files);
  const session = model.session();
  const trace = session.run(model.encode('The cat'));
  // A trap while a run is in progress, the way a bug in the engine would strike.
  await assert.rejects(abortForTesting(), (error) => error instanceof EngineCrashedError && /RuntimeError: unreachable/.test(error.message));
  const crashed = (error) => error instanceof EngineCrashedError && /the engine crashed \(RuntimeError: unreachable\)/.test(error.message);
  assert.throws(() => model.encode('The'), crashed);
  assert.throws(() => session.run([1, 2]), crashed);
  await assert.rejects(session.runAsync([1, 2]), crashed);
  assert.throws(() => session.step(3), crashed);
  assert.throws(() => trace.topK(3), crashed);
  assert.throws(() => trace.computed, crashed);
  assert.throws(() => Model.load(files), crashed);
  // Nothing to release any more, and no error for trying.
  trace.free();
  session.free();
  model.free();
});
