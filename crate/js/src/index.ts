// gptlens: a GPT engine in WebAssembly that shows its work.
//
//   Direct (Node, or a browser Worker of your own):
//     await init(); const model = Model.load(files); const trace = model.run(model.encode(text));
//     const big = await Model.loadGguf(response.body, size); // a .gguf as it downloads, held once
//   On WebGPU when there is a GPU (async methods):
//     await init({ backend: 'auto' }); const model = await Model.load(files, { backend: 'auto' });
//     const trace = await model.runAsync(model.encode(text)); model.backendInfo().reason;
//   From a page (engine in a module Worker, threads when the page is cross-origin isolated):
//     const engine = await createWorkerClient(); await engine.load(files); const trace = await engine.run(ids);
//   Training a byte-level model on a text (a few steps per call):
//     const trainer = new Trainer({ nLayer: 2, nHead: 2, dModel: 64, nCtx: 64 }, { steps: 200 });
//     trainer.setText(text); trainer.train(20); trainer.model(); Model.load(trainer.files());
//   Encoders (all-MiniLM-L6-v2): sentence embeddings, compared by cosine similarity:
//     cosine(model.embed('A man plays a guitar.'), model.embed('Someone is playing music.'))
export { init, backend, engineMemoryBytes, abortForTesting } from './backend.js';
export { EngineCrashedError } from './crash.js';
export { GgufLoader, Model, Session, Trace } from './model.js';
export { Trainer } from './train.js';
export { createWorkerClient, startWorkerClient, GptlensWorker, WorkerSession, WorkerTrace, WorkerTrainer, type PromptAnswer, type RunPromptOptions, type StartingWorkerClient, type WorkerClientOptions } from './client.js';
export { coalesceLatest } from './coalesce.js';
export { cosine } from './embedding.js';
export type {
  AblateWith,
  AblationUnit,
  AdapterInfo,
  Attribution,
  AttributionOptions,
  Backend,
  BackendChoice,
  BackendInfo,
  GpuAdapterInfo,
  HeadScores,
  HookName,
  InitOptions,
  LoadOptions,
  LogitLens,
  LogitLensOptions,
  ModelFiles,
  ModelInfo,
  NextQuery,
  PatchRequest,
  PatchScores,
  PromptNext,
  PromptQuery,
  PromptTimings,
  SamplingParams,
  SnapshotEntry,
  Snapshots,
  SnapshotState,
  Tensor,
  TokenProb,
  TrainAdamW,
  TrainProgress,
  TrainRecipe,
  TrainShape,
  TrainState,
} from './types.js';
