// The gptlens side of `npm run bench:peers` in Chromium: a module Worker (threads need one) that
// drives the package's direct API — init({threads}), Model.load({'model.gguf': bytes}),
// session.run(tokens, []) for prefill, sampleNext({temperature: 0}) per decode step — and times
// each phase here, so no page↔worker messaging lands inside a measurement.
import { init, Model } from '/pkg/dist/index.js';

let model;
let backend;

const ops = {
  async setup({ threads, bytes, prompt }) {
    backend = await init({ threads });
    const started = performance.now();
    model = Model.load({ 'model.gguf': bytes });
    const loadMs = performance.now() - started;
    return { backend, loadMs, info: model.info(), promptTokens: Array.from(model.encode(prompt)) };
  },

  /** One fresh session: prefill `tokens` (no capture), then `decode` greedy steps. */
  run({ tokens, decode }) {
    const session = model.session();
    try {
      let started = performance.now();
      session.run(Uint32Array.from(tokens), []).free();
      const prefillMs = performance.now() - started;
      const generated = [];
      started = performance.now();
      for (let step = 0; step < decode; step++) generated.push(session.sampleNext({ temperature: 0 }));
      const decodeMs = performance.now() - started;
      return { prefillMs, decodeMs, prefillTokens: tokens.length, decodeSteps: decode, generated, text: model.decode(Uint32Array.from(generated)) };
    } finally {
      session.free();
    }
  },
};

self.onmessage = async ({ data: { id, op, args } }) => {
  try {
    self.postMessage({ id, ok: true, result: await ops[op](args) });
  } catch (error) {
    self.postMessage({ id, ok: false, error: error instanceof Error ? `${error.message}\n${error.stack}` : String(error) });
  }
};
