// The engine's module Worker: owns the wasm instance (and, in the threaded build, rayon's pool,
// whose waits would freeze a page's main thread; in the single-thread build, the WebGPU device).
// Requests run one at a time, in arrival order, through the async methods that work on both
// backends.
import { abortForTesting, crashFlag, engineMemoryBytes, init } from './backend.js';
import { asEngineFailure, EngineCrashedError } from './crash.js';
import { GgufLoader, Model, Session, Trace, tokenProbs } from './model.js';
import { declineReply, writeReply } from './reply.js';
import { deleteSnapshots, keepSnapshot, listSnapshots, noSnapshot, restoreSnapshot, snapshotState } from './snapshot.js';
import { Trainer } from './train.js';
import { transferables, type Args, type Operation, type PromptData, type Request, type Response, type Result, type TraceData } from './protocol.js';
import type { HookName, ModelInfo, NextQuery, PromptNext, PromptQuery } from './types.js';

interface WorkerScope {
  postMessage(message: Response, transfer: Transferable[]): void;
  addEventListener(type: 'message', listener: (event: MessageEvent<Request>) => void): void;
  addEventListener(type: 'error', listener: (event: ErrorEvent) => void): void;
  addEventListener(type: 'unhandledrejection', listener: (event: PromiseRejectionEvent) => void): void;
}
const scope = globalThis as unknown as WorkerScope;

let model: Model | undefined;
/** A .gguf on its way in, piece by piece; the current model stays until it is complete. */
let incoming: GgufLoader | undefined;
/** The key to keep a snapshot of the incoming model under, if any. */
let incomingKey: string | undefined;
const sessions = new Map<number, Session>();
const traces = new Map<number, Trace>();
const trainers = new Map<number, Trainer>();
let nextId = 1;

function loadedModel(): Model {
  if (!model) throw new Error('no model loaded: call load() first');
  return model;
}

function found<T>(map: Map<number, T>, id: number, what: string): T {
  const item = map.get(id);
  if (!item) throw new Error(`${what} ${id} does not exist (closed, released, or from a model that was replaced)`);
  return item;
}

/**
 * Keeps the trace for later questions (probs, topK, export) and sends its tensors over: copies,
 * or with `viewed`, views of the engine's memory (`tensorView`: see `Lent`).
 */
function share(trace: Trace, viewed = false): TraceData {
  const id = nextId++;
  traces.set(id, trace);
  // Everything that allocates in the engine first, the views last.
  const { computed } = trace;
  const tokens = trace.tokens();
  const names = trace.names();
  const tensors: TraceData['tensors'] = {};
  for (const name of names) tensors[name] = viewed ? trace.raw.tensorView(name) : trace.tensor(name);
  // Each view's name is passed into the engine's memory, which may grow then: the views made before
  // are empty after that in the single-thread build. Rare; then they are copies.
  if (viewed && !names.every((name) => tensors[name]!.data.length === tensors[name]!.shape.reduce((a, b) => a * b, 1))) {
    for (const name of names) tensors[name] = trace.tensor(name);
  }
  return { id, tokens, computed, tensors };
}

/**
 * A result that holds views of the engine's memory, good until the engine next allocates: the
 * answer written to shared memory copies its tensors straight from there (one copy, where a new
 * array per tensor first cost a 106-token prompt's answer 0.4 ms, as much as its forward pass). By
 * message it is `owned` first: a view would carry the whole memory with it. Made as a request's
 * last step, so nothing runs in the engine before it is read.
 */
class Lent<T> {
  constructor(
    readonly value: T,
    readonly owned: () => T,
  ) {}
}

/** Each model's info, asked once (it lists every hook: not free to build on every keystroke). */
const infos = new WeakMap<Model, ModelInfo>();

function infoOf(current: Model): ModelInfo {
  let info = infos.get(current);
  if (!info) {
    info = current.info();
    infos.set(current, info);
  }
  return info;
}

/**
 * `sessionRunPrompt`: encodes `input` with the Worker's model (a string; token ids run as they
 * are), runs it through the session, and answers the query from the same trace, so a live view
 * needs one message per edit instead of a chain of round trips.
 */
async function runPrompt(session: Session, input: string | Uint32Array, query: PromptQuery): Promise<Lent<PromptData>> {
  const current = loadedModel();
  const info = infoOf(current);
  let mark = performance.now();
  const lap = () => {
    const now = performance.now();
    const elapsed = now - mark;
    mark = now;
    return elapsed;
  };
  const tokens = typeof input === 'string' ? current.encode(input) : input;
  if (tokens.length > info.contextLength) throw new RangeError(`The prompt is ${tokens.length} tokens; this model reads at most ${info.contextLength}.`);
  const labels = info.hasTokenizer ? current.tokenStrings(tokens) : undefined;
  const tokenize = lap();
  const pooled = query.pooledPast !== undefined && tokens.length > query.pooledPast;
  const capture = pooled ? query.capture?.map((hook) => (/^blocks\.\d+\.attn\.hook_pattern$/.test(hook) ? (`${hook}.pooled` as HookName) : hook)) : query.capture;
  const keep = pooled && query.open !== undefined && session.backend() === 'cpu';
  session.keepQueries(keep);
  const trace = await session.runAsync(tokens, capture);
  const opened = keep && query.open ? session.headPattern(query.open.layer, query.open.head) : undefined;
  const forward = lap();
  const next = query.next && answerNext(current, trace, query.next);
  const timings = { tokenize, forward, next: lap() };
  const answer = { trace: share(trace, true), labels, next, opened, timings };
  const owned = () => {
    const tensors: TraceData['tensors'] = {};
    for (const [name, tensor] of Object.entries(answer.trace.tensors)) tensors[name as HookName] = { shape: tensor!.shape, data: tensor!.data.slice() };
    return { ...answer, trace: { ...answer.trace, tensors } };
  };
  return new Lent(answer, owned);
}

/** The next token's candidates after `trace` (`PromptNext`): what `next` asks of a prompt's run or of a kept trace. */
function answerNext(current: Model, trace: Trace, { k, sampling, survivors = 1000, kept: listKept = true }: NextQuery): PromptNext {
  // As flat pairs: the kept tokens become objects only for a caller that wants their list.
  const kept = trace.topKFlat(survivors, sampling);
  // Each topK ranks the whole vocabulary: once is enough when the settings filter nothing.
  const unfiltered = sampling === undefined || (sampling.temperature === 1 && sampling.topK === undefined && sampling.topP === undefined);
  const top = unfiltered && survivors >= k ? kept.subarray(0, 2 * k) : trace.topKFlat(k);
  const ids = Array.from({ length: top.length / 2 }, (_, i) => top[2 * i]!);
  const strings = infoOf(current).hasTokenizer ? current.tokenStrings(ids) : undefined;
  return {
    top: ids.map((id, i) => {
      const candidate = { id, prob: top[2 * i + 1]!, label: strings?.[i] };
      const sampled = sampledProbability(kept, id, i);
      return sampled === undefined ? candidate : { ...candidate, sampled };
    }),
    survivors: kept.length / 2,
    ...(listKept ? { kept: tokenProbs(kept) } : {}),
  };
}

/**
 * The probability of `id` among the `[id, prob, …]` pairs `sampling` keeps, or undefined when it
 * is not there. Temperature keeps the order, so the candidate ranked `rank` at temperature 1 is
 * usually at the same place among those kept; the rest are looked for.
 */
function sampledProbability(kept: Float64Array, id: number, rank: number): number | undefined {
  if (kept[2 * rank] === id) return kept[2 * rank + 1];
  for (let at = 0; at < kept.length; at += 2) if (kept[at] === id) return kept[at + 1];
  return undefined;
}

function dropIncoming(): void {
  incoming?.free();
  incoming = undefined;
}

function forgetModel(): void {
  for (const item of [...sessions.values(), ...traces.values()]) item.free();
  sessions.clear();
  traces.clear();
  model?.free();
  model = undefined;
}

/**
 * The `onProgress` of a long request: sends each step to the page as a `progress` message, and
 * stops the computation once the page has set the shared `cancel` flag.
 */
function reporter(op: Operation, cancel: Int32Array | undefined): (done: number, total: number) => boolean {
  const id = inFlight;
  return (done, total) => {
    scope.postMessage({ id, op, progress: [done, total] }, []);
    return cancel === undefined || Atomics.load(cancel, 0) === 0;
  };
}

type Handlers = { [K in Operation]: (...args: Args<K>) => Result<K> | Lent<Result<K>> | Promise<Result<K> | Lent<Result<K>>> };

const handlers: Handlers = {
  init: (options) => init(options),
  // Parse first, swap after: a file that fails to load leaves the current model in place.
  load: async (files, backend) => {
    const next = await Model.load(files, { backend });
    forgetModel();
    model = next;
    noSnapshot();
    return { info: model.info(), backend: model.backendInfo() };
  },
  loadGgufBegin: (fileBytes, snapshotKey) => {
    dropIncoming();
    incoming = new GgufLoader(fileBytes, snapshotKey !== undefined);
    incomingKey = snapshotKey;
  },
  loadGgufCancel: () => dropIncoming(),
  loadGgufPiece: (piece) => {
    if (!incoming) throw new Error('no .gguf is being loaded: call loadGgufBegin first');
    try {
      incoming.push(piece);
    } catch (error) {
      dropIncoming();
      throw error;
    }
    // Its whole buffer goes back, to carry a later batch: a fresh 4 MiB buffer for each one cost
    // the page's main thread its zeroing and first touch.
    return new Uint8Array(piece.buffer);
  },
  loadGgufEnd: async (backend) => {
    const loader = incoming;
    incoming = undefined;
    if (!loader) throw new Error('no .gguf is being loaded: call loadGgufBegin first');
    try {
      const next = await loader.finish({ backend });
      forgetModel();
      model = next;
      if (incomingKey === undefined) noSnapshot();
      else keepSnapshot(next, incomingKey, () => model === next, quietFor);
      return { info: model.info(), backend: model.backendInfo() };
    } finally {
      loader.free();
    }
  },
  restoreSnapshot: async (key, backend) => {
    const restored = await restoreSnapshot(key, { backend });
    if (typeof restored === 'string') return { missed: restored };
    forgetModel();
    model = restored;
    return { info: model.info(), backend: model.backendInfo() };
  },
  snapshotState: () => snapshotState(),
  listSnapshots: () => listSnapshots(),
  deleteSnapshots: (ids) => deleteSnapshots(ids),
  engineMemory: () => engineMemoryBytes(),
  useBackend: (backend) => loadedModel().useBackend(backend),
  info: () => loadedModel().info(),
  chatPrompt: (userText) => loadedModel().chatPrompt(userText),
  encode: (text) => loadedModel().encode(text),
  decode: (ids) => loadedModel().decode(ids),
  tokenStrings: (ids) => loadedModel().tokenStrings(ids),
  run: async (tokens, capture) => share(await loadedModel().runAsync(tokens, capture)),
  embed: (input) => loadedModel().embed(input),
  openSession: () => {
    const id = nextId++;
    sessions.set(id, loadedModel().session());
    return id;
  },
  sessionRun: async (session, tokens, capture) => share(await found(sessions, session, 'session').runAsync(tokens, capture)),
  sessionRunPrompt: (session, input, query) => runPrompt(found(sessions, session, 'session'), input, query),
  sessionStep: (session, token) => found(sessions, session, 'session').stepAsync(token),
  sessionSampleNext: (session, params, seed) => found(sessions, session, 'session').sampleNextAsync(params, seed),
  sessionTokens: (session) => found(sessions, session, 'session').tokens(),
  sessionLastLogits: (session) => found(sessions, session, 'session').lastLogits(),
  sessionReset: (session) => found(sessions, session, 'session').reset(),
  sessionKeepQueries: (session, keep) => found(sessions, session, 'session').keepQueries(keep),
  sessionHeadPattern: (session, layer, head) => found(sessions, session, 'session').headPattern(layer, head),
  sessionSetAblation: (session, units, mean) => found(sessions, session, 'session').setAblation(units, { with: mean ? 'mean' : 'zero' }),
  closeSession: (session) => {
    sessions.get(session)?.free();
    sessions.delete(session);
  },
  traceProbs: (trace, pos, temperature) => found(traces, trace, 'trace').probs(pos, temperature),
  traceTopK: (trace, k, params) => found(traces, trace, 'trace').topK(k, params),
  traceNext: (trace, next) => answerNext(loadedModel(), found(traces, trace, 'trace'), next),
  traceSafetensors: (trace) => found(traces, trace, 'trace').toSafetensors(),
  traceHeadScores: (trace) => loadedModel().headScores(found(traces, trace, 'trace')),
  repeatedRandomTokens: (seed) => loadedModel().repeatedRandomTokens(seed),
  patch: (clean, corrupt, answer, wrong, cancel) => loadedModel().patch({ clean, corrupt, answer, wrong }, { onProgress: reporter('patch', cancel) }),
  logitLens: (tokens, options, cancel) => loadedModel().logitLens(tokens, { ...options, onProgress: reporter('logitLens', cancel) }),
  attribution: (tokens, options) => loadedModel().attribution(tokens, options),
  releaseTraces: () => {},
  trainerCreate: (shape, recipe) => {
    const trainer = new Trainer(shape, recipe);
    const id = nextId++;
    trainers.set(id, trainer);
    return { id, paramCount: trainer.paramCount(), recipe: trainer.recipe() };
  },
  trainerSetText: (trainer, bytes, valFraction) => found(trainers, trainer, 'trainer').setText(bytes, valFraction),
  trainerTrain: (trainer, steps) => found(trainers, trainer, 'trainer').train(steps),
  trainerState: (trainer) => found(trainers, trainer, 'trainer').state(),
  trainerFiles: (trainer) => found(trainers, trainer, 'trainer').files(),
  // The sessions and traces of the previous model stay: each holds the weights it ran on, so a
  // page's views keep answering until they move to the new model (and close the old session).
  trainerUseModel: async (trainer, backend) => {
    const next = await found(trainers, trainer, 'trainer').model({ backend });
    model?.free();
    model = next;
    noSnapshot();
    return { info: model.info(), backend: model.backendInfo() };
  },
  trainerFree: (trainer) => {
    trainers.get(trainer)?.free();
    trainers.delete(trainer);
  },
  abortForTesting: (how) => abortForTesting(how),
  crashFlag: () => crashFlag(),
};

/**
 * Fails the request in flight. A trap while the engine drives a Promise (the async runs) escapes
 * every `catch`: it reaches this worker's global error handlers, and without them the request
 * would never be answered and every later one would queue behind it.
 */
let failInFlight: ((error: unknown) => void) | undefined;
/** The id of the request being handled (requests run one at a time). */
let inFlight = 0;

function onUncaught(error: unknown, event: Event): void {
  const failure = asEngineFailure(error);
  if (!(failure instanceof EngineCrashedError)) return;
  event.preventDefault();
  failInFlight?.(failure);
}
scope.addEventListener('error', (event) => onUncaught(event.error, event));
scope.addEventListener('unhandledrejection', (event) => onUncaught(event.reason, event));

async function handle({ id, op, args, release = [], reply }: Request): Promise<void> {
  for (const trace of release) {
    traces.get(trace)?.free();
    traces.delete(trace);
  }
  try {
    const run = handlers[op] as (...args: unknown[]) => unknown;
    inFlight = id;
    const crashed = new Promise<never>((_, reject) => (failInFlight = reject));
    const result = await Promise.race([run(...args), crashed]);
    if (reply && writeReply(reply, id, result instanceof Lent ? result.value : result)) {
      scope.postMessage({ id, op, shared: true }, []);
    } else {
      const sent: unknown = result instanceof Lent ? result.owned() : result;
      scope.postMessage({ id, op, ok: true, result: sent } as Response, transferables(sent));
    }
  } catch (error) {
    if (reply) declineReply(reply, id);
    const { name, message } = error instanceof Error ? error : new Error(String(error));
    scope.postMessage({ id, op, ok: false, error: { name, message } }, []);
  }
}

let queue = Promise.resolve();
/** Requests received and not yet answered, and when the last was answered: see `quietFor`. */
let pending = 0;
let lastAnswered = 0;
scope.addEventListener('message', (event) => {
  pending += 1;
  queue = queue
    .then(() => handle(event.data))
    .finally(() => {
      pending -= 1;
      lastAnswered = performance.now();
    });
});

/** How long the worker has had no request: 0 while one waits or runs (a snapshot is written when quiet). */
function quietFor(): number {
  return pending > 0 ? 0 : performance.now() - lastAnswered;
}
