// The messages between GptlensWorker (page side) and worker.ts (the engine's module Worker).
// One table lists every operation with its arguments and result; the request and response
// unions are derived from it, so both sides are checked against the same definition.
import type {
  AblationUnit,
  Attribution,
  AttributionOptions,
  Backend,
  BackendChoice,
  BackendInfo,
  HeadScores,
  HookName,
  InitOptions,
  LogitLens,
  LogitLensOptions,
  ModelFiles,
  ModelInfo,
  NextQuery,
  PatchScores,
  PromptNext,
  PromptQuery,
  PromptTimings,
  SamplingParams,
  Snapshots,
  SnapshotState,
  Tensor,
  TokenProb,
  TrainProgress,
  TrainRecipe,
  TrainShape,
  TrainState,
} from './types.js';

/** A trace as it crosses to the page: its tensors are transferred, the worker keeps the rest under `id`. */
export interface TraceData {
  id: number;
  tokens: Uint32Array;
  computed: number;
  tensors: Partial<Record<HookName, Tensor>>;
}

/** The answer to `sessionRunPrompt`: the run, every token's string, and what the query asked for. */
export interface PromptData {
  trace: TraceData;
  labels: string[] | undefined;
  next: PromptNext | undefined;
  opened: Tensor | undefined;
  timings: PromptTimings;
}

type SessionId = number;
type TraceId = number;
type TrainerId = number;
type Capture = readonly HookName[] | undefined;

export interface Operations {
  init: { args: [options: InitOptions]; result: Backend };
  load: { args: [files: ModelFiles, backend: BackendChoice]; result: { info: ModelInfo; backend: BackendInfo } };
  /** A .gguf loaded as it arrives: `loadGgufBegin`, its pieces in order, `loadGgufEnd`. */
  /** `snapshotKey`: keep a snapshot of the weights under it once loaded (`snapshot.ts`). */
  loadGgufBegin: { args: [fileBytes: number, snapshotKey: string | undefined]; result: void };
  /** The result is the piece's whole buffer, given back to carry a later piece. */
  loadGgufPiece: { args: [piece: Uint8Array]; result: Uint8Array };
  loadGgufEnd: { args: [backend: BackendChoice]; result: { info: ModelInfo; backend: BackendInfo } };
  loadGgufCancel: { args: []; result: void };
  /** The model of the snapshot kept under `key`, or why there is none (`missed`). */
  restoreSnapshot: { args: [key: string, backend: BackendChoice]; result: { info: ModelInfo; backend: BackendInfo } | { missed: string } };
  snapshotState: { args: []; result: SnapshotState };
  listSnapshots: { args: []; result: Snapshots };
  deleteSnapshots: { args: [ids: string[]]; result: void };
  /** Bytes of the engine's WebAssembly memory (it grows, never shrinks). */
  engineMemory: { args: []; result: number };
  useBackend: { args: [backend: BackendChoice]; result: BackendInfo };
  info: { args: []; result: ModelInfo };
  chatPrompt: { args: [userText: string]; result: string };
  encode: { args: [text: string]; result: Uint32Array };
  decode: { args: [ids: Uint32Array]; result: string };
  tokenStrings: { args: [ids: Uint32Array]; result: string[] };
  run: { args: [tokens: Uint32Array, capture: Capture]; result: TraceData };
  /** The sentence embedding of text or token ids (`Model.embed`), transferred. */
  embed: { args: [input: string | Uint32Array]; result: Float32Array };
  openSession: { args: []; result: SessionId };
  sessionRun: { args: [session: SessionId, tokens: Uint32Array, capture: Capture]; result: TraceData };
  /** Encodes (a string), runs and answers `query`: a live view's one message per edit. */
  sessionRunPrompt: { args: [session: SessionId, input: string | Uint32Array, query: PromptQuery]; result: PromptData };
  sessionStep: { args: [session: SessionId, token: number]; result: void };
  sessionSampleNext: { args: [session: SessionId, params: SamplingParams, seed: number | undefined]; result: number };
  sessionTokens: { args: [session: SessionId]; result: Uint32Array };
  sessionLastLogits: { args: [session: SessionId]; result: Float32Array };
  sessionReset: { args: [session: SessionId]; result: void };
  sessionKeepQueries: { args: [session: SessionId, keep: boolean]; result: void };
  sessionHeadPattern: { args: [session: SessionId, layer: number, head: number]; result: Tensor };
  sessionSetAblation: { args: [session: SessionId, units: AblationUnit[], mean: boolean]; result: void };
  closeSession: { args: [session: SessionId]; result: void };
  traceProbs: { args: [trace: TraceId, pos: number, temperature: number]; result: Float32Array };
  traceTopK: { args: [trace: TraceId, k: number, params: SamplingParams | undefined]; result: TokenProb[] };
  traceNext: { args: [trace: TraceId, next: NextQuery]; result: PromptNext };
  traceSafetensors: { args: [trace: TraceId]; result: Uint8Array };
  traceHeadScores: { args: [trace: TraceId]; result: HeadScores };
  repeatedRandomTokens: { args: [seed: number]; result: Uint32Array };
  /** Sends `progress` messages for its id while it runs; stops when `cancel[0]` (shared memory) becomes 1. */
  patch: { args: [clean: Uint32Array, corrupt: Uint32Array, answer: number, wrong: number, cancel: Int32Array | undefined]; result: PatchScores };
  /** Stops when `cancel[0]` (shared memory) becomes 1. */
  logitLens: { args: [tokens: Uint32Array, options: Omit<LogitLensOptions, 'onProgress'>, cancel: Int32Array | undefined]; result: LogitLens };
  attribution: { args: [tokens: Uint32Array, options: AttributionOptions]; result: Attribution };
  /** Nothing but the request's `release` list: sent when no other request has carried it for a second. */
  releaseTraces: { args: []; result: void };
  /** A Trainer in the worker (see `Trainer`), kept under its id until `trainerFree`. */
  trainerCreate: { args: [shape: TrainShape, recipe: Partial<TrainRecipe> | undefined]; result: { id: TrainerId; paramCount: number; recipe: TrainRecipe } };
  trainerSetText: { args: [trainer: TrainerId, bytes: Uint8Array, valFraction: number]; result: void };
  trainerTrain: { args: [trainer: TrainerId, steps: number]; result: TrainProgress[] };
  trainerState: { args: [trainer: TrainerId]; result: TrainState };
  trainerFiles: { args: [trainer: TrainerId]; result: ModelFiles };
  /** The trainer's model as it is now becomes the worker's model; earlier sessions and traces keep the model they had. */
  trainerUseModel: { args: [trainer: TrainerId, backend: BackendChoice]; result: { info: ModelInfo; backend: BackendInfo } };
  trainerFree: { args: [trainer: TrainerId]; result: void };
  /** Tests only: crashes the engine on purpose (see `abortForTesting`). */
  abortForTesting: { args: [how: 'now' | 'microtask' | 'pool thread']; result: void };
  /** The engine's crash flag, shared (threaded build), for the client to watch; see `crashFlag`. */
  crashFlag: { args: []; result: Int32Array | undefined };
}

export type Operation = keyof Operations;
export type Args<K extends Operation> = Operations[K]['args'];
export type Result<K extends Operation> = Operations[K]['result'];

/**
 * `release`: traces the page let go of, freed before the operation runs (they ride along, so
 * letting go costs no message of its own). `reply`: shared memory for the answer (see reply.ts);
 * it comes by message when it cannot go there.
 */
export type Request = { [K in Operation]: { id: number; op: K; args: Args<K>; release?: TraceId[]; reply?: SharedArrayBuffer } }[Operation];

export type Response =
  | { [K in Operation]: { id: number; op: K; ok: true; result: Result<K> } }[Operation]
  | { id: number; op: Operation; ok: false; error: { name: string; message: string } }
  /** A long request's progress, before its answer. */
  | { id: number; op: Operation; progress: [done: number, total: number] }
  /** The answer is in the request's `reply` memory. */
  | { id: number; op: Operation; shared: true };

/**
 * The buffers in a message that can move instead of being copied: those a typed array owns whole.
 * A view into a larger buffer (wasm memory, a SharedArrayBuffer) is copied, never detached.
 */
export function transferables(value: unknown, found: Transferable[] = []): Transferable[] {
  if (ArrayBuffer.isView(value)) {
    const { buffer } = value;
    if (buffer instanceof ArrayBuffer && buffer.byteLength === value.byteLength && !found.includes(buffer)) {
      found.push(buffer);
    }
  } else if (Array.isArray(value)) {
    value.forEach((item) => transferables(item, found));
  } else if (value !== null && typeof value === 'object') {
    Object.values(value).forEach((item) => transferables(item, found));
  }
  return found;
}
