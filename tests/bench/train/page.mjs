// Runs in the bench page (`npm run bench:train`'s browser half): the package's worker client trains
// the same shape, batch and recipe as crate/examples/bench_train.rs — a fresh seeded model, untimed
// warm-up steps, then timed steps in one call — on the text at `textUrl`, as the page's Train panel does.
import { createWorkerClient } from '/pkg/dist/index.js';

export async function trainBench({ threads, steps, warmup, textUrl }) {
  const text = new Uint8Array(await (await fetch(textUrl)).arrayBuffer());
  const engine = await createWorkerClient({ threads });
  try {
    const { threads: running } = engine.backend();
    const shape = { nLayer: 4, nHead: 4, dModel: 128, nCtx: 64 };
    const trainer = await engine.trainer(shape, { steps: warmup + steps, batch: 12, evalEvery: 1_000_000 });
    // No held-out part: nothing is evaluated, as in the native half.
    await trainer.setText(text, 0);
    await trainer.train(warmup);
    const started = performance.now();
    await trainer.train(steps);
    const seconds = (performance.now() - started) / 1000;
    await trainer.free();
    return { engine: 'gptlens wasm (Chromium)', threads: running, tokensPerSecond: (steps * 12 * 64) / seconds };
  } finally {
    engine.terminate();
  }
}
