// The page side of the engine's Worker: the API of Model / Session / Trace with Promises.
// Tensors arrive as transferred typed arrays. The worker holds each session and trace until it
// is closed or released here; garbage collection of the handle does that too, later.
import * as check from './check.js';
import { EngineCrashedError } from './crash.js';
import { letGo, readBatches, type Pieces } from './pieces.js';
import { ReplyBuffer, type Taken } from './reply.js';
import { transferables, type Args, type Operation, type Request, type Response, type Result, type TraceData } from './protocol.js';
import type {
  AblateWith,
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
  PatchRequest,
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

/** `WorkerSession.runPrompt`'s answer: one edit of a prompt, everything a live view draws. */
export interface PromptAnswer {
  trace: WorkerTrace;
  /** Every token's string (`tokenStrings`); undefined for a model without a tokenizer. */
  labels: string[] | undefined;
  /** What `query.next` asked for. */
  next: PromptNext | undefined;
  /** `query.open`'s head whole, `[T, T]`, when the run was pooled (CPU). */
  opened: Tensor | undefined;
  /** Where the Worker's time went. */
  timings: PromptTimings;
}

/** How `WorkerSession.runPrompt` gets its answer. */
export interface RunPromptOptions {
  /**
   * The answer may be waited for, blocked, with `GptlensWorker.waitForAnswer` (default false).
   * A page that asks on a keystroke and waits in the keystroke's own animation frame draws a
   * short run's answer in that frame; answered by message, it is painted a frame later. Needs
   * shared memory (a cross-origin isolated page, or Node); without it, or for an answer that
   * does not fit it, the answer comes by message as usual.
   */
  waitable?: boolean | undefined;
}

/**
 * `threads` as in `init`; `backend` is where loaded models run (default `cpu`): `webgpu` (and
 * `auto` with a hardware adapter) start the worker on the single-thread build, the one with WebGPU.
 */
export interface WorkerClientOptions extends InitOptions {
  /**
   * A Worker already running this package's `gptlens/worker` entry, for bundler setups that
   * construct workers their own way. Default: a module Worker from `new URL('./worker.js', import.meta.url)`.
   */
  worker?: Worker;
}

/** Starts the engine in a module Worker and resolves once its wasm build is running. */
export async function createWorkerClient(options: WorkerClientOptions = {}): Promise<GptlensWorker> {
  const { client, started } = startWorkerClient(options);
  await started;
  return client;
}

/** A worker client handed out before its worker has started (`startWorkerClient`). */
export interface StartingWorkerClient {
  /** Usable at once: its requests wait in the worker, in order, for the start. */
  client: GptlensWorker;
  /** The start: the build that runs and why, or why none could (the worker is then terminated). */
  started: Promise<Backend>;
}

/**
 * `createWorkerClient` without waiting: the client comes at once, so that a page can ask for its
 * model while the worker is still starting (the wasm module, the thread pool) rather than when it
 * hears of the start, which its own busy thread may hear late. Requests made before the start are
 * answered after it, and fail if it fails; `started` then says why. `backend()` throws until then.
 */
export function startWorkerClient(options: WorkerClientOptions = {}): StartingWorkerClient {
  const { worker, ...init } = options;
  const connection = new Connection(worker ?? new Worker(new URL('./worker.js', import.meta.url), { type: 'module' }));
  // Both asked at once, as every request may be: the worker answers in order.
  const starting = connection.call('init', init);
  const flag = connection.call('crashFlag');
  flag.catch(() => {}); // fails only when init did, whose error is the one `started` gives
  const client = new GptlensWorker(connection, starting, init.backend ?? 'cpu');
  const started = starting.then(async (running) => {
    connection.watch(await flag);
    return running;
  });
  started.catch(() => connection.terminate());
  return { client, started };
}

/** Requests and their responses, matched by id; worker-side objects released when their handles are collected. */
class Connection {
  private readonly pending = new Map<
    number,
    { resolve(value: unknown): void; reject(error: Error): void; progress?: ((done: number, total: number) => void) | undefined }
  >();
  private nextId = 1;
  readonly releaseTrace = new FinalizationRegistry<number>((id) => this.releaseLater(id));
  readonly closeSession = new FinalizationRegistry<number>((id) => this.call('closeSession', id).catch(() => {}));
  readonly freeTrainer = new FinalizationRegistry<number>((id) => this.call('trainerFree', id).catch(() => {}));

  /** Set once the engine crashed on a thread of its pool: every call fails with it at once. */
  private crashed: EngineCrashedError | undefined;
  private watching: ReturnType<typeof setInterval> | undefined;

  constructor(private readonly worker: Worker) {
    worker.addEventListener('message', (event: MessageEvent<Response>) => this.settle(event.data));
    worker.addEventListener('error', (event) => this.failAll(new Error(`gptlens worker failed: ${event.message}`)));
  }

  call<K extends Operation>(op: K, ...args: Args<K>): Promise<Result<K>> {
    return this.request(op, args, []);
  }

  /** Shared memory for answers (see `callShared`); made at the first such call, undefined where there is none. */
  private replies: ReplyBuffer | undefined | null = null;

  /**
   * `call`, with the answer written to shared memory where there is some, so that `waitForAnswer`
   * can settle it in the task that waits (otherwise it settles when its note arrives).
   */
  callShared<K extends Operation>(op: K, ...args: Args<K>): Promise<Result<K>> {
    if (this.replies === null) this.replies = ReplyBuffer.create();
    return this.request(op, args, [], undefined, this.replies);
  }

  /** Blocks this thread up to `ms` for the answer of the latest `callShared`, if it is still due;
   * an answer that comes in time settles now. True when it did. */
  waitForAnswer(ms: number): boolean {
    if (!this.replies) return false;
    // Written already (often: the pass is shorter than the wait for the frame), or on its way.
    const id = this.replies.awaited;
    if (id !== undefined && this.pending.has(id)) this.replies.wait(ms);
    return this.settleTaken(this.replies.take());
  }

  /** Settles the request an answer read from shared memory answers; true when one was. */
  private settleTaken(taken: Taken | undefined): boolean {
    if (!taken) return false;
    this.settle({ id: taken.id, ok: true, result: taken.result });
    return true;
  }

  /** Traces let go of, to be freed in the worker: they go with the next request (one per keystroke, in a live page). */
  private released: number[] = [];
  private releaseTimer: ReturnType<typeof setTimeout> | undefined;

  /** Frees trace `id` in the worker with the next request, or within a second when none comes. */
  releaseLater(id: number): void {
    this.released.push(id);
    if (this.releaseTimer !== undefined) return;
    this.releaseTimer = setTimeout(() => void this.call('releaseTraces').catch(() => {}), 1000);
    // Node: a pending release alone does not keep the process alive.
    (this.releaseTimer as { unref?: () => void }).unref?.();
  }

  request<K extends Operation>(
    op: K,
    args: Args<K>,
    transfer: Transferable[],
    progress?: (done: number, total: number) => void,
    replies?: ReplyBuffer,
  ): Promise<Result<K>> {
    const id = this.nextId++;
    if (this.crashed) return Promise.reject(this.crashed);
    clearTimeout(this.releaseTimer);
    this.releaseTimer = undefined;
    const release = this.released.splice(0);
    return new Promise<Result<K>>((resolve, reject) => {
      const request = { id, op, args } as Request;
      if (release.length > 0) request.release = release;
      if (replies) {
        const { buffer, taken } = replies.expect(id);
        request.reply = buffer;
        this.settleTaken(taken);
      }
      // Throwing here (a DataCloneError) rejects this promise with nothing left pending; the
      // releases wait for the next request.
      try {
        this.worker.postMessage(request, transfer);
      } catch (error) {
        this.released.push(...release);
        throw error;
      }
      this.pending.set(id, { resolve: resolve as (value: unknown) => void, reject, progress });
    });
  }

  /**
   * Watches the engine's crash flag (threaded build): a panic on a thread of its pool kills that
   * thread's Web Worker alone, and the engine's thread, waiting for it, would never answer again.
   * While requests are pending the flag is read every 100 ms; once raised, they and every later
   * call fail with EngineCrashedError, as a trap on the engine's own thread does.
   */
  watch(flag: Int32Array | undefined): void {
    if (!flag) return;
    this.watching = setInterval(() => {
      if (this.pending.size === 0 || Atomics.load(flag, 0) === 0) return;
      this.crashed = new EngineCrashedError(
        'the engine crashed (RuntimeError: unreachable on a thread of its pool) and cannot be used any more; start it again (a new Worker) and load the model again',
      );
      clearInterval(this.watching);
      this.failAll(this.crashed);
    }, 100);
    // Node: the watch alone does not keep the process alive.
    (this.watching as { unref?: () => void }).unref?.();
  }

  terminate(): void {
    clearInterval(this.watching);
    clearTimeout(this.releaseTimer);
    this.worker.terminate();
    this.failAll(new Error('the gptlens worker was terminated'));
  }

  private settle(response: Response | { id: number; ok: true; result: unknown }): void {
    if ('shared' in response) {
      this.settleTaken(this.replies?.take());
      return;
    }
    const pending = this.pending.get(response.id);
    if (!pending) return;
    if ('progress' in response) {
      pending.progress?.(...response.progress);
      return;
    }
    this.pending.delete(response.id);
    if (response.ok) {
      pending.resolve(response.result);
    } else {
      // The engine's crash keeps its class across the message, so callers can test for it.
      const error = response.error.name === 'EngineCrashedError' ? new EngineCrashedError(response.error.message) : new Error(response.error.message);
      error.name = response.error.name;
      pending.reject(error);
    }
  }

  private failAll(error: Error): void {
    for (const pending of this.pending.values()) pending.reject(error);
    this.pending.clear();
  }
}

/** A long request's progress: step `done` of `total`. */
type Progress = (done: number, total: number) => boolean | void;

/** Pieces of a streamed .gguf go to the worker in batches of this many bytes. */
const BATCH_BYTES = 4 << 20;

export class GptlensWorker {
  private placed: BackendInfo | undefined;
  /** The loaded model's vocabulary size (token ids are checked against it here, before posting) and head. */
  private facts: check.Facts | undefined;

  /** Which build the worker runs, once it has started. */
  private running: Backend | undefined;

  /** @internal use createWorkerClient() or startWorkerClient() */
  constructor(
    private readonly connection: Connection,
    starting: Promise<Backend>,
    private readonly requested: BackendChoice,
  ) {
    starting.then(
      (running) => (this.running = running),
      () => {},
    );
  }

  /** Which build the worker runs and why; throws before the worker has started (`startWorkerClient`). */
  backend(): Backend {
    if (!this.running) throw new Error('the gptlens worker has not started yet: await `started` first');
    return this.running;
  }

  /** Where the loaded model runs (`cpu` or `webgpu`), why, and the GPU adapter; throws before `load`. */
  backendInfo(): BackendInfo {
    if (!this.placed) throw new Error('no model loaded: call load() first');
    return this.placed;
  }

  /**
   * Loads a checkpoint, replacing any previous model (its sessions and traces become invalid),
   * on the client's backend or `backend`. Rejects, keeping the previous model, when the files are
   * bad or `webgpu` is not there. `transfer: true` moves the file buffers to the worker instead
   * of copying them (they become unusable here): worth it for large models.
   */
  async load(files: ModelFiles, { transfer = false, backend = this.requested }: { transfer?: boolean; backend?: BackendChoice } = {}): Promise<ModelInfo> {
    return this.took(await this.connection.request('load', [files, backend], transfer ? transferables(files) : []));
  }

  /**
   * Loads a `.gguf` model from its bytes as they arrive (a fetch's `response.body`,
   * `file.stream()`, any async iterable of Uint8Arrays), replacing any previous model once the new
   * one is complete; `fileBytes` is the file's size. The pieces go to the worker in batches of
   * about 4 MiB, each moved rather than copied, one in the worker while the next is read, and the
   * worker puts each into the weights and lets it go: the model is held once, on neither side as a
   * whole file.
   * `onProgress` hears the bytes sent so far. Rejects as soon as the file is known to be bad,
   * keeping the previous model.
   *
   * `snapshotKey` (in a browser): a string that changes whenever the file does — its URL with its
   * ETag or Last-Modified and size, say. The worker then keeps a snapshot of the loaded weights
   * under it in the origin-private file system, written between requests, and a later load with
   * the same key reads that instead of `pieces` (which it cancels): no decoding or packing, no
   * copies through the page. `snapshotState()` says which happened. A snapshot that cannot be used
   * (cut short, from another version of gptlens) is deleted and the file is read; the newest three
   * are kept (`listSnapshots`, `deleteSnapshots`).
   */
  async loadGguf(
    pieces: Pieces,
    fileBytes: number,
    { backend = this.requested, onProgress, snapshotKey }: { backend?: BackendChoice; onProgress?: (bytesRead: number) => void; snapshotKey?: string | undefined } = {},
  ): Promise<ModelInfo> {
    const size = check.byteCount(fileBytes, 'fileBytes');
    const key = snapshotKey === undefined ? undefined : check.snapshotKey(snapshotKey);
    if (key !== undefined) {
      const restored = await this.connection.call('restoreSnapshot', key, backend);
      if ('info' in restored) {
        await letGo(pieces);
        return this.took(restored);
      }
    }
    let sent = 0;
    /** The batch the worker is putting into the weights while the next one is read here. The
     * first batch goes without waiting for the load's beginning to be answered (the worker takes
     * requests in order): a round trip through this thread, when it is busy, delayed it. */
    let inWorker: Promise<void> | undefined = this.connection.call('loadGgufBegin', size, key);
    inWorker.catch(() => {}); // thrown where it is awaited, in order
    /** Batches the worker has put into the weights and given back, to be filled again. */
    const returned: Uint8Array[] = [];
    try {
      for await (const batch of readBatches(pieces, BATCH_BYTES, returned)) {
        // Moved, not copied: a batch owns its buffer (the last one's is longer than its bytes).
        const bytes = batch.byteLength;
        const request = this.connection.request('loadGgufPiece', [batch], [batch.buffer]).then((emptied) => {
          returned.push(emptied);
          sent += bytes;
          onProgress?.(sent);
        });
        // Its failure is thrown where it is awaited: below, or after the last batch.
        request.catch(() => {});
        // Reading and parsing overlap: one batch in the worker, the next filling here (one at a
        // time, the 98 MB SmolLM2 file took 0.85–1.0 s to load in Chromium; reading it alone took
        // 0.25–0.3 s and loading it whole 0.4 s).
        const previous = inWorker;
        inWorker = request;
        await previous;
      }
      await inWorker;
    } catch (error) {
      // A failed read (the network) leaves a partial model in the worker: let it go.
      await this.connection.call('loadGgufCancel').catch(() => {});
      throw error;
    }
    return this.took(await this.connection.call('loadGgufEnd', backend));
  }

  /** The snapshot of the loaded model's weights: restored, being written, kept, or why not (see `loadGguf`). */
  async snapshotState(): Promise<SnapshotState> {
    return this.connection.call('snapshotState');
  }

  /**
   * The snapshots kept in this browser, by any worker of this origin, newest first: each one's
   * key, size, date and whether a load could use it, and the origin's storage use and quota.
   * Rejects where there is no origin-private file system with synchronous access (Node).
   */
  async listSnapshots(): Promise<Snapshots> {
    return this.connection.call('listSnapshots');
  }

  /**
   * Deletes the snapshots `ids` (from `listSnapshots`); one being written stops first. The model
   * loaded stays, and its `snapshotState()` becomes `deleted` if its snapshot was one of them
   * (another tab's worker that loaded or wrote it still says `restored` or `kept`). Rejects
   * naming those another tab holds open, having deleted the rest.
   */
  async deleteSnapshots(ids: readonly string[]): Promise<void> {
    return this.connection.call('deleteSnapshots', check.snapshotIds(ids));
  }

  /** The model the worker loaded is this client's. */
  private took(loaded: { info: ModelInfo; backend: BackendInfo }): ModelInfo {
    this.placed = loaded.backend;
    this.facts = check.factsOf(loaded.info);
    return loaded.info;
  }

  /** The head detectors' default sequence: min(50, context / 2) seeded random ids, twice. */
  async repeatedRandomTokens(seed = 0): Promise<Uint32Array> {
    return this.connection.call('repeatedRandomTokens', check.seed(seed) ?? 0);
  }

  /**
   * Activation patching in the worker (see Model.patch); `onProgress` follows its runs, and
   * `signal` stops it (see `cancellable`).
   */
  async patch(request: PatchRequest, options: { onProgress?: Progress | undefined; signal?: AbortSignal | undefined } = {}): Promise<PatchScores> {
    const vocab = this.vocabSize();
    check.needHead(this.loaded(), 'patch');
    const [clean, corrupt] = [check.tokenIds(request.clean, vocab, 'clean'), check.tokenIds(request.corrupt, vocab, 'corrupt')];
    const [answer, wrong] = [check.tokenId(request.answer, vocab, 'answer'), check.tokenId(request.wrong, vocab, 'wrong')];
    return this.cancellable('patch', (cancel) => [clean, corrupt, answer, wrong, cancel], options);
  }

  /** The logit lens in the worker (see Model.logitLens); `signal` stops it (see `cancellable`). */
  async logitLens(tokens: Uint32Array | readonly number[], options: LogitLensOptions & { signal?: AbortSignal | undefined } = {}): Promise<LogitLens> {
    check.needHead(this.loaded(), 'logitLens');
    const { onProgress, signal, ...rest } = options;
    const ablate = rest.ablate && check.ablation(rest.ablate);
    const ablateWith = check.ablateMean(rest.ablateWith) ? 'mean' : 'zero';
    const ids = check.tokenIds(tokens, this.vocabSize());
    return this.cancellable('logitLens', (cancel) => [ids, { ...rest, ablate, ablateWith }, cancel], { onProgress, signal });
  }

  /**
   * A long request that reports progress and can be stopped. Aborting `signal` rejects with an
   * AbortError at once; where the page is cross-origin isolated (shared memory) it also stops the
   * worker's computation after its current step, so later requests do not wait for it —
   * elsewhere the worker finishes it first.
   */
  private async cancellable<K extends 'patch' | 'logitLens'>(
    op: K,
    args: (cancel: Int32Array | undefined) => Args<K>,
    { onProgress, signal }: { onProgress?: Progress | undefined; signal?: AbortSignal | undefined },
  ): Promise<Result<K>> {
    const shared = signal !== undefined && typeof SharedArrayBuffer === 'function' && globalThis.crossOriginIsolated === true;
    const cancel = shared ? new Int32Array(new SharedArrayBuffer(4)) : undefined;
    const stopped = () => new DOMException(`${op} was stopped`, 'AbortError');
    if (signal?.aborted) throw stopped();
    let onAbort = () => {};
    const aborted = new Promise<never>((_, reject) => {
      onAbort = () => {
        if (cancel) Atomics.store(cancel, 0, 1);
        reject(stopped());
      };
      signal?.addEventListener('abort', onAbort, { once: true });
    });
    // The worker's own "cancelled" error, when it stops first, is the same abort.
    // No progress is reported once the caller has stopped it (the worker may be mid-step).
    const progress = onProgress && ((done: number, total: number) => void (signal?.aborted || onProgress(done, total)));
    const work = this.connection.request(op, args(cancel), [], progress).catch((error: unknown) => {
      throw signal?.aborted ? stopped() : error;
    });
    try {
      return await Promise.race([work, aborted]);
    } finally {
      signal?.removeEventListener('abort', onAbort);
      work.catch(() => {});
    }
  }

  /** Direct logit attribution in the worker (see Model.attribution). */
  async attribution(tokens: Uint32Array | readonly number[], options: AttributionOptions = {}): Promise<Attribution> {
    check.needHead(this.loaded(), 'attribution');
    const ablate = options.ablate && check.ablation(options.ablate);
    const ablateWith = check.ablateMean(options.ablateWith) ? 'mean' : 'zero';
    return this.connection.call('attribution', check.tokenIds(tokens, this.vocabSize()), { ...options, ablate, ablateWith });
  }

  /** Bytes of the worker's engine memory: the most that loading and running ever took (wasm memory never shrinks). */
  engineMemory(): Promise<number> {
    return this.connection.call('engineMemory');
  }

  private loaded(): check.Facts {
    if (this.facts === undefined) throw new Error('no model loaded: call load() first');
    return this.facts;
  }

  private vocabSize(): number {
    return this.loaded().vocab;
  }

  /** Moves the loaded model to another backend; sessions opened afterwards run there. */
  async useBackend(backend: BackendChoice): Promise<BackendInfo> {
    this.placed = await this.connection.call('useBackend', backend);
    return this.placed;
  }

  info(): Promise<ModelInfo> {
    return this.connection.call('info');
  }

  /** `userText` as one user turn of the model's chat template (ChatML), ready to encode. */
  async chatPrompt(userText: string): Promise<string> {
    return this.connection.call('chatPrompt', check.text(userText, 'userText'));
  }

  async encode(text: string): Promise<Uint32Array> {
    return this.connection.call('encode', check.text(text, 'text'));
  }

  async decode(ids: Uint32Array | readonly number[]): Promise<string> {
    return this.connection.call('decode', check.tokenIds(ids, this.vocabSize(), 'ids'));
  }

  async tokenStrings(ids: Uint32Array | readonly number[]): Promise<string[]> {
    return this.connection.call('tokenStrings', check.tokenIds(ids, this.vocabSize(), 'ids'));
  }

  /** A fresh forward pass. `capture`: hooks to record; every hook when omitted, none for `[]`. */
  async run(tokens: Uint32Array | readonly number[], capture?: readonly HookName[]): Promise<WorkerTrace> {
    const facts = this.loaded();
    return new WorkerTrace(this.connection, await this.connection.call('run', check.tokenIds(tokens, facts.vocab), check.capture(capture)), facts);
  }

  /**
   * The sentence embedding of `input` (text, or token ids — at least one) in one message: see
   * `Model.embed`. The vector is transferred, not copied.
   */
  async embed(input: string | Uint32Array | readonly number[]): Promise<Float32Array> {
    return this.connection.call('embed', check.textOrTokenIds(input, this.vocabSize()));
  }

  async session(): Promise<WorkerSession> {
    const facts = this.loaded();
    return new WorkerSession(this.connection, await this.connection.call('openSession'), facts);
  }

  /**
   * A Trainer in the worker (see `Trainer`; the same arguments, checked here before posting):
   * train a few steps per call so other requests (the views' runs) go in between; `useModel()`
   * makes the trained model as it is now this client's model.
   */
  async trainer(shape: TrainShape, recipe?: Partial<TrainRecipe>): Promise<WorkerTrainer> {
    const checkedShape = check.trainShape(shape);
    const checkedRecipe = check.trainRecipe(recipe) as Partial<TrainRecipe> | undefined;
    const created = await this.connection.call('trainerCreate', checkedShape, checkedRecipe);
    return new WorkerTrainer(this.connection, created, checkedShape, (loaded) => {
      this.placed = loaded.backend;
      this.facts = check.factsOf(loaded.info);
    }, this.requested);
  }

  /**
   * Blocks this thread for up to `ms` (at most 50) until the answer of the latest
   * `runPrompt(…, { waitable: true })` is written, and settles it now if it is: its callbacks
   * run in this task. True when it settled it. Returns at once when no such answer is due, or
   * when a wait already gave up on it (it then settles when its note arrives). For a page's
   * animation-frame callback, so that a short run's answer is drawn in the frame being made.
   */
  waitForAnswer(ms: number): boolean {
    return this.connection.waitForAnswer(check.waitMs(ms, 'ms'));
  }

  /** Tests only: crashes the worker's engine on purpose (see `abortForTesting`). @internal */
  abortForTesting(how: 'now' | 'microtask' | 'pool thread' = 'now'): Promise<void> {
    return this.connection.call('abortForTesting', how);
  }

  /** Stops the worker; pending calls reject. */
  terminate(): void {
    this.connection.terminate();
  }
}

export class WorkerSession {
  private readonly vocab: number;

  /** @internal */
  constructor(
    private readonly connection: Connection,
    private readonly id: number,
    private readonly facts: check.Facts,
  ) {
    this.vocab = facts.vocab;
    connection.closeSession.register(this, id, this);
  }

  /** Runs `tokens`, reusing the longest prefix shared with this session's previous tokens. */
  async run(tokens: Uint32Array | readonly number[], capture?: readonly HookName[]): Promise<WorkerTrace> {
    const checked = check.tokenIds(tokens, this.vocab);
    return new WorkerTrace(this.connection, await this.connection.call('sessionRun', this.id, checked, check.capture(capture)), this.facts);
  }

  /**
   * Runs a prompt (text, encoded in the Worker with its model's tokenizer, or token ids) with
   * prefix reuse as `run` does, and answers `query` from the same run: the tokens' strings, the
   * next token's candidates, a long prompt's opened head. One message to the Worker however much
   * is asked, so a page that redraws on every keystroke waits for one round trip, not a chain.
   * A prompt longer than the context is a RangeError.
   */
  async runPrompt(input: string | Uint32Array | readonly number[], query: PromptQuery = {}, options: RunPromptOptions = {}): Promise<PromptAnswer> {
    const checked = typeof input === 'string' ? input : check.tokenIds(input, this.vocab, 'input');
    const asked = check.promptQuery(query, this.facts);
    if (asked.next) check.needHead(this.facts, 'runPrompt (query.next)');
    const shared = check.flag(options.waitable ?? false, 'waitable');
    const call = shared ? this.connection.callShared('sessionRunPrompt', this.id, checked, asked) : this.connection.call('sessionRunPrompt', this.id, checked, asked);
    const { trace, ...rest } = await call;
    return { trace: new WorkerTrace(this.connection, trace, this.facts), ...rest };
  }

  /** Appends one token (a decode step), recording the hooks of the last run. */
  async step(token: number): Promise<void> {
    check.needGenerates(this.facts, 'step');
    return this.connection.call('sessionStep', this.id, check.tokenId(token, this.vocab));
  }

  /** Draws the next token, appends it (a decode step) and returns it; see Session.sampleNext. */
  async sampleNext(params: SamplingParams, seed?: number): Promise<number> {
    check.needGenerates(this.facts, 'sampleNext');
    return this.connection.call('sessionSampleNext', this.id, check.samplingParams(params, this.vocab), check.seed(seed));
  }

  tokens(): Promise<Uint32Array> {
    return this.connection.call('sessionTokens', this.id);
  }

  lastLogits(): Promise<Float32Array> {
    return this.connection.call('sessionLastLogits', this.id);
  }

  reset(): Promise<void> {
    return this.connection.call('sessionReset', this.id);
  }

  /** Keeps every layer's queries from the next run on; see Session.keepQueries. */
  async keepQueries(keep: boolean): Promise<void> {
    return this.connection.call('sessionKeepQueries', this.id, check.flag(keep, 'keep'));
  }

  /** One head's whole map over the cached tokens, `[T, T]` (transferred); see Session.headPattern. */
  async headPattern(layer: number, head: number): Promise<Tensor> {
    return this.connection.call('sessionHeadPattern', this.id, check.position(layer, this.facts.layers, 'layer'), check.position(head, this.facts.heads, 'head'));
  }

  /** Ablates these heads (`[layer, head]`) and MLPs (`[layer, 'mlp']`) in every run from now on; see Session.setAblation. */
  async setAblation(units: readonly AblationUnit[], options: { with?: AblateWith | undefined } = {}): Promise<void> {
    return this.connection.call('sessionSetAblation', this.id, check.ablation(units), check.ablateMean(options.with, 'with'));
  }

  close(): Promise<void> {
    this.connection.closeSession.unregister(this);
    return this.connection.call('closeSession', this.id);
  }
}

export class WorkerTrace {
  /** Positions this run computed; the others came from the session's cache. */
  readonly computed: number;
  private readonly id: number;
  private readonly tokenIds: Uint32Array;
  private readonly tensors: TraceData['tensors'];
  private readonly vocab: number;

  /** @internal */
  constructor(
    private readonly connection: Connection,
    data: TraceData,
    private readonly facts: check.Facts,
  ) {
    this.vocab = facts.vocab;
    ({ id: this.id, computed: this.computed, tokens: this.tokenIds, tensors: this.tensors } = data);
    connection.releaseTrace.register(this, this.id, this);
  }

  names(): HookName[] {
    return Object.keys(this.tensors) as HookName[];
  }

  /** A captured tensor; throws if `name` was not captured. */
  tensor(name: HookName): Tensor {
    const tensor = this.tensors[name];
    if (!tensor) throw new Error(`hook \`${name}\` was not captured in this run`);
    return tensor;
  }

  /** Every token of the sequence, reused prefix included. */
  tokens(): Uint32Array {
    return this.tokenIds;
  }

  /** Next-token probabilities after position `pos` (an integer in [0, tokens)) at `temperature` (finite, ≥ 0). */
  async probs(pos: number, temperature: number): Promise<Float32Array> {
    check.needHead(this.facts, 'probs');
    return this.connection.call('traceProbs', this.id, check.position(pos, this.tokenIds.length), check.temperature(temperature));
  }

  /** The `k` (an integer ≥ 1, clamped to the vocabulary size) most probable next tokens under `params`. */
  async topK(k: number, params?: SamplingParams): Promise<TokenProb[]> {
    check.needHead(this.facts, 'topK');
    return this.connection.call('traceTopK', this.id, check.count(k, 'k', this.vocab), check.optionalSamplingParams(params, this.vocab));
  }

  /** What `runPrompt`'s `next` answers, for this trace: after new sampling settings, say, without running the prompt again. */
  async next(query: NextQuery): Promise<PromptNext> {
    check.needHead(this.facts, 'next');
    return this.connection.call('traceNext', this.id, check.nextQuery(query, this.vocab));
  }

  toSafetensors(): Promise<Uint8Array> {
    return this.connection.call('traceSafetensors', this.id);
  }

  /** Each head's detector scores on this trace's tokens (every layer's `hook_pattern` must be captured). */
  headScores(): Promise<HeadScores> {
    return this.connection.call('traceHeadScores', this.id);
  }

  /** Frees the worker's copy (probs, topK and toSafetensors stop working; the tensors here stay), with the next request to the worker or within a second. */
  release(): Promise<void> {
    this.connection.releaseTrace.unregister(this);
    this.connection.releaseLater(this.id);
    return Promise.resolve();
  }
}

/** A Trainer living in the worker; see `GptlensWorker.trainer`. */
export class WorkerTrainer {
  private readonly id: number;
  /** Parameters of the model. */
  readonly paramCount: number;
  private readonly fixedRecipe: TrainRecipe;

  /** @internal */
  constructor(
    private readonly connection: Connection,
    created: { id: number; paramCount: number; recipe: TrainRecipe },
    /** The model's shape, as checked. */
    readonly shape: TrainShape,
    private readonly adopt: (loaded: { info: ModelInfo; backend: BackendInfo }) => void,
    private readonly requested: BackendChoice,
  ) {
    ({ id: this.id, paramCount: this.paramCount, recipe: this.fixedRecipe } = created);
    connection.freeTrainer.register(this, this.id, this);
  }

  /** The recipe, every field filled in (it does not change). */
  recipe(): TrainRecipe {
    return this.fixedRecipe;
  }

  /** The text to learn (a string as UTF-8, or bytes, copied to the worker); the last `valFraction` is held out. */
  async setText(text: string | Uint8Array, valFraction = 0.1): Promise<void> {
    return this.connection.call('trainerSetText', this.id, check.trainText(text), check.valFraction(valFraction));
  }

  /** Up to `steps` more steps (never past `recipe().steps`), in one message; each step's progress. */
  async train(steps: number): Promise<TrainProgress[]> {
    return this.connection.call('trainerTrain', this.id, check.trainSteps(steps));
  }

  state(): Promise<TrainState> {
    return this.connection.call('trainerState', this.id);
  }

  /** `{ 'config.json', 'model.safetensors' }`, transferred. */
  files(): Promise<ModelFiles> {
    return this.connection.call('trainerFiles', this.id);
  }

  /**
   * The model as it is now becomes the client's model (on the client's backend, or `backend`):
   * `run`, `session()` and the rest use it from then on. Sessions and traces opened before keep
   * answering on the model they had; close them when done.
   */
  async useModel({ backend = this.requested }: { backend?: BackendChoice } = {}): Promise<ModelInfo> {
    const loaded = await this.connection.call('trainerUseModel', this.id, backend);
    this.adopt(loaded);
    return loaded.info;
  }

  /** Frees the worker's trainer (a model it made stays). */
  free(): Promise<void> {
    this.connection.freeTrainer.unregister(this);
    return this.connection.call('trainerFree', this.id);
  }
}
