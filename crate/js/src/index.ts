// gptlens: a GPT engine in WebAssembly that shows its work.
//
//   Direct (Node, or a browser Worker of your own):
//     await init(); const model = Model.load(files); const trace = model.run(model.encode(text));
//   From a page (engine in a module Worker, threads when the page is cross-origin isolated):
//     const engine = await createWorkerClient(); await engine.load(files); const trace = await engine.run(ids);
export { init, backend } from './backend.js';
export { Model, Session, Trace } from './model.js';
export { createWorkerClient, GptlensWorker, WorkerSession, WorkerTrace, type WorkerClientOptions } from './client.js';
export { coalesceLatest } from './coalesce.js';
export type { Backend, HookName, InitOptions, ModelFiles, ModelInfo, SamplingParams, Tensor, TokenProb } from './types.js';
