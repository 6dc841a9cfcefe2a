// One loaded model, running in its own module Worker on the CPU or WebGPU. A model switch (or a
// backend switch) starts a new Worker and keeps the old one until the new model has loaded, so a
// bad file, or a GPU that is not there, never costs the model that works; stopping the old Worker
// then frees all its memory (wasm memory never shrinks).
import {
  startWorkerClient,
  type AblateWith,
  type AblationUnit,
  type Attribution,
  type Backend,
  type BackendChoice,
  type BackendInfo,
  type GptlensWorker,
  type HeadScores,
  type HookName,
  type LogitLens,
  type ModelFiles,
  type ModelInfo,
  type NextQuery,
  type PatchScores,
  type PromptNext,
  type PromptTimings,
  type SamplingParams,
  type Snapshots,
  type SnapshotState,
  type WorkerSession,
  type WorkerTrace,
} from 'gptlens';
import { analyse, isEncoder, viewHooks, wholeMapsUpTo, type Analysis, type NextToken, type OpenedHead } from './analysis.ts';
import { workerStarted } from './perf.ts';
import type { HeadRef } from './store.ts';

/** Candidates listed in the next-token view. */
const SHOWN_CANDIDATES = 12;
/** Survivors counted exactly up to this many; beyond, the view says "at least". */
const SURVIVOR_LIMIT = 1000;
/** Sentence embeddings kept per model, by text (the similarity panel's sentences come back on every keystroke). */
const EMBEDDINGS_KEPT = 64;

/** A prompt the model cannot run: shown under the prompt box, the views keep the last good run. */
export class PromptError extends Error {
  override name = 'PromptError';
}

/** The Worker's engine trapped (a bug, or out of memory): it must be restarted (see Loader.restart). */
export function engineCrash(error: unknown): string | undefined {
  if (!(error instanceof Error) || error.name !== 'EngineCrashedError') return undefined;
  // The package names the trap in parentheses: "the engine crashed (RuntimeError: unreachable) …".
  return /\(([^)]+)\)/.exec(error.message)?.[1] ?? error.message;
}

export interface Run {
  trace: WorkerTrace;
  analysis: Analysis;
  /** The next token's candidates (not for an encoder). */
  next: NextToken | undefined;
  /** Milliseconds: the Worker's own (encoding, forward pass, next token) and the rest of the round trip (messages, copies, waiting for this thread). */
  timings: PromptTimings & { transfer: number };
}

interface EngineOptions {
  threads: number | undefined;
  backend: BackendChoice;
}

/** A Worker being started (its client usable already), with when its start began and (once it has) ended. */
interface Starting {
  options: EngineOptions;
  client: GptlensWorker;
  started: Promise<unknown>;
  began: number;
  ready?: number;
}

/** The Worker started ahead of the next load (see Engine.prestart). */
let spare: Starting | undefined;

const sameOptions = (a: EngineOptions, b: EngineOptions) => a.threads === b.threads && a.backend === b.backend;

function startWorker(options: EngineOptions): Starting {
  const began = performance.now();
  const { client, started } = startWorkerClient(options.threads === undefined ? { backend: options.backend } : { threads: options.threads, backend: options.backend });
  const starting: Starting = { options, client, started, began };
  started.then(
    () => {
      starting.ready = performance.now();
    },
    () => {
      // A spare that failed to start is not handed to the next load, which starts its own instead
      // (the failure may have passed: the page's own files still arriving); a load that took it
      // has the failure from `start`.
      if (spare === starting) spare = undefined;
    },
  );
  return starting;
}

export class Engine {
  private readonly labelCache = new Map<number, string>();
  private readonly embeddings = new Map<string, Float32Array>();
  private readonly capture: HookName[];
  /** The session keeps its queries (long prompts: the opened head is remade from them). */
  private keepingQueries = false;
  /** An encoder (BERT, all-MiniLM-L6-v2): full attention maps, no next token; sentence embeddings instead. */
  readonly encoder: boolean;

  private constructor(
    private readonly client: GptlensWorker,
    readonly info: ModelInfo,
    private readonly session: WorkerSession,
    /** The Worker is someone else's (the Train panel's): disposing closes the session, not the Worker. */
    private readonly borrowed = false,
  ) {
    this.capture = viewHooks(info);
    this.encoder = isEncoder(info);
  }

  /**
   * Starts a Worker and loads `files` into it (their buffers move there) on `backend`; throws
   * what is wrong with them, or that WebGPU is not there. `threads` as in the package's `init`
   * (default: one per core; the WebGPU backend runs the single-thread build).
   */
  static load(files: ModelFiles, options: EngineOptions): Promise<Engine> {
    return Engine.start(options, (client) => client.load(files, { transfer: true }));
  }

  /**
   * `load` for a lone .gguf read as it arrives (`fileBytes` long): its pieces go to the Worker as
   * they come and into the weights there, so neither the page nor the Worker holds the file whole.
   */
  static async loadGguf(
    body: ReadableStream<Uint8Array>,
    fileBytes: number,
    options: EngineOptions & { onProgress: (bytesRead: number) => void; snapshotKey: string | undefined },
  ): Promise<Engine> {
    const { onProgress, snapshotKey } = options;
    try {
      return await Engine.start(options, (client) => client.loadGguf(body, fileBytes, { onProgress, snapshotKey }));
    } catch (error) {
      // A load that failed before reading the body to its end (no Worker, a bad file) cancels it,
      // letting go of the connection and what it had buffered (a stream the load read to its end
      // or cancelled already: nothing happens).
      await body.cancel().catch(() => {});
      throw error;
    }
  }

  /**
   * Starts the Worker the next load with `options` will take, before the load knows its files: its
   * start (the wasm module, the thread pool: 0.3–0.4 s of SmolLM2's cold start here) then overlaps
   * the page's own start and the wait for the model file's first response. A Worker started for
   * other options is stopped.
   */
  static prestart(options: EngineOptions): void {
    if (spare && sameOptions(spare.options, options)) return;
    spare?.client.terminate();
    spare = startWorker(options);
  }

  /**
   * Loads with the spare Worker if it was started for `options`, else with one of its own: a spare
   * for other options is left to the load it was started for (two loads of different options
   * would otherwise stop each other's Workers and start them again).
   */
  private static async start(options: EngineOptions, load: (client: GptlensWorker) => Promise<ModelInfo>): Promise<Engine> {
    let taken: Starting;
    if (spare && sameOptions(spare.options, options)) {
      taken = spare;
      spare = undefined;
    } else {
      taken = startWorker(options);
    }
    const { client } = taken;
    // Asked before the Worker has started: it answers once it has (its start's failure is the one
    // thrown, not what the load's requests then heard).
    const loading = load(client);
    loading.catch(() => {});
    try {
      await taken.started;
      // Only the Worker a load runs on is measured (a spare stopped unused is not).
      workerStarted(taken.began, taken.ready ?? performance.now());
      const info = await loading;
      return new Engine(client, info, await client.session());
    } catch (error) {
      client.terminate();
      throw error;
    }
  }

  /**
   * The model `client` holds now (`info`: what loading or `trainer.useModel()` answered), in a
   * Worker this engine does not own: disposing it closes its session and leaves the Worker running.
   */
  static async borrow(client: GptlensWorker, info: ModelInfo): Promise<Engine> {
    return new Engine(client, info, await client.session(), true);
  }

  /** The snapshot of the model's weights the Worker keeps in this browser (see `Loader`). */
  snapshotState(): Promise<SnapshotState> {
    return this.client.snapshotState();
  }

  /** The snapshots kept in this browser (the Worker reads OPFS; see `GptlensWorker.listSnapshots`). */
  listSnapshots(): Promise<Snapshots> {
    return this.client.listSnapshots();
  }

  /** Deletes snapshots by id; the model stays loaded. */
  deleteSnapshots(ids: readonly string[]): Promise<void> {
    return this.client.deleteSnapshots(ids);
  }

  /** Bytes of the Worker's engine memory: the most loading and running have taken (it never shrinks). */
  engineMemory(): Promise<number> {
    return this.client.engineMemory();
  }

  /** The wasm build the Worker runs (SIMD, threads) and why. */
  get backend(): Backend {
    return this.client.backend();
  }

  /** CPU or WebGPU, why, and the GPU adapter. */
  get backendInfo(): BackendInfo {
    return this.client.backendInfo();
  }

  /** Text → token ids; a model without a tokenizer takes ids typed as numbers ("12 7 300"). */
  async tokenize(text: string): Promise<Uint32Array> {
    const tokens = this.info.hasTokenizer ? await this.client.encode(text) : parseIds(text, this.info.vocabSize);
    if (tokens.length > this.info.contextLength) {
      const cut = this.info.contextCut ? ` (${this.info.contextCut})` : '';
      throw new PromptError(`The prompt is ${tokens.length} tokens; this model reads at most ${this.info.contextLength}${cut}.`);
    }
    return tokens;
  }

  /** `text` as one user turn of the model's chat template (ChatML): markers and all, so the
   * reader sees exactly what the instruct model was trained on. */
  chatPrompt(text: string): Promise<string> {
    return this.client.chatPrompt(text);
  }

  private opening: Promise<string> | undefined;

  /** The first line the chat template puts before a user's words (e.g. `<|im_start|>system`):
   * asked once per model, since the prompt box checks it on every keystroke. */
  chatOpening(): Promise<string> {
    this.opening ??= this.chatPrompt('\u0001').then((wrapped) => (wrapped.split('\u0001')[0] ?? '').trimStart().split('\n')[0] ?? '');
    return this.opening;
  }

  /** Token ids → the text the prompt box shows after a step. */
  async detokenize(tokens: Uint32Array): Promise<string> {
    return this.info.hasTokenizer ? this.client.decode(tokens) : Array.from(tokens).join(' ');
  }

  /**
   * A prompt (text, or token ids for a model without a tokenizer) through the session, in one
   * message to the Worker: encoding, the forward pass (the prefix shared with the previous run
   * reused), every token's label and, with `sampling` (not for an encoder), the next token. A
   * prompt too long for every head's whole map captures the maps pooled, plus `opened` whole.
   * The answer comes in shared memory where the page has some: `waitForAnswer` may wait for it in
   * a frame, and one not waited for comes with the Worker's note.
   */
  async run(text: string | Uint32Array, opened: HeadRef, sampling: SamplingParams | undefined): Promise<Run> {
    const input = typeof text === 'string' && !this.info.hasTokenizer ? parseIds(text, this.info.vocabSize) : text;
    const started = performance.now();
    const answer = await this.session
      .runPrompt(
        input,
        {
          capture: this.capture,
          pooledPast: wholeMapsUpTo(this.info),
          open: opened,
          next: sampling && nextQuery(sampling),
        },
        { waitable: true },
      )
      .catch((error: unknown) => {
        // Too long for the context, or to show (the engine's capture budget): said under the
        // prompt while the views keep the last run, instead of the engine running out of memory.
        if (error instanceof Error && error.name === 'RangeError') throw new PromptError(error.message);
        if (error instanceof Error && error.message.includes('capture budget')) throw new PromptError(`This prompt is too long to show: ${error.message}.`);
        throw error;
      });
    const roundTrip = performance.now() - started;
    const { trace, timings } = answer;
    this.keepingQueries = answer.opened !== undefined;
    const tokens = trace.tokens();
    const labels = answer.labels ?? Array.from(tokens, (id) => `#${id}`);
    if (answer.labels) tokens.forEach((id, i) => this.labelCache.set(id, labels[i]!));
    const head = answer.opened && { ...opened, pattern: answer.opened.data };
    const next = answer.next && nextToken(answer.next, sampling!);
    const transferMs = roundTrip - timings.tokenize - timings.forward - timings.next;
    return { trace, analysis: analyse(trace, this.info, labels, head), next, timings: { ...timings, transfer: transferMs } };
  }

  /** Blocks up to `ms` for the answer of the latest waitable `run`, which then settles in this
   * task; true when it did. */
  waitForAnswer(ms: number): boolean {
    return this.client.waitForAnswer(ms);
  }

  /** True while the session keeps its queries: a long prompt's opened head can be remade whole. */
  get keepsQueries(): boolean {
    return this.keepingQueries;
  }

  /** A long prompt's head `layer.head`, whole, remade from the session's kept queries. */
  async headPattern({ layer, head }: HeadRef): Promise<OpenedHead> {
    return { layer, head, pattern: (await this.session.headPattern(layer, head)).data };
  }

  /**
   * The sentence embedding of `text` (token ids typed as numbers for a model without a
   * tokenizer): one round trip to the Worker, or none for a text embedded recently.
   */
  async embed(text: string): Promise<Float32Array> {
    const kept = this.embeddings.get(text);
    if (kept) return kept;
    let input: string | Uint32Array = text;
    if (!this.info.hasTokenizer) {
      input = parseIds(text, this.info.vocabSize);
      if (input.length === 0) throw new PromptError('Type token ids to embed.');
    }
    const vector = await this.client.embed(input);
    if (this.embeddings.size >= EMBEDDINGS_KEPT) this.embeddings.delete(this.embeddings.keys().next().value!);
    this.embeddings.set(text, vector);
    return vector;
  }

  /** The most probable next tokens, and which of them the sampling settings keep (the sampling settings changed). */
  async predict(trace: WorkerTrace, sampling: SamplingParams): Promise<NextToken> {
    return nextToken(await trace.next(nextQuery(sampling)), sampling);
  }

  /**
   * The head detectors' scores on the seeded repeated random sequence: a run of its own (the
   * session keeps the prompt's cache), capturing only the patterns.
   */
  async repeatedHeadScores(): Promise<HeadScores> {
    const tokens = await this.client.repeatedRandomTokens(0);
    const patterns = this.info.hooks.filter((hook) => hook.endsWith('.attn.hook_pattern')) as HookName[];
    const trace = await this.client.run(tokens, patterns);
    try {
      return await trace.headScores();
    } finally {
      void trace.release();
    }
  }

  /** Ablates these heads (`"layer.head"`) and MLPs (`"layer.mlp"`) with zero or their means in the session's runs from now on. */
  setAblation(ablated: readonly string[], ablateWith: AblateWith): Promise<void> {
    return this.session.setAblation(ablationUnits(ablated), { with: ablateWith });
  }

  /** The next-token probabilities of `tokens` without any ablation: a run of its own, outside the session. */
  async unablatedProbs(tokens: Uint32Array): Promise<Float32Array> {
    const trace = await this.client.run(tokens, []);
    try {
      return await trace.probs(tokens.length - 1, 1);
    } finally {
      void trace.release();
    }
  }

  /** The logit lens at positions `first..` of `tokens` (with the page's ablation), following `target`. */
  logitLens(tokens: Uint32Array, first: number, target: number | undefined, ablated: readonly string[], ablateWith: AblateWith, signal: AbortSignal): Promise<LogitLens> {
    return this.client.logitLens(tokens, { first, k: 3, target, ablate: ablationUnits(ablated), ablateWith, signal });
  }

  /** Direct logit attribution at `position` for logit[answer] − logit[wrong] (defaults: the top two). */
  attribution(
    tokens: Uint32Array,
    options: { position?: number | undefined; answer?: number | undefined; wrong?: number | undefined },
    ablated: readonly string[],
    ablateWith: AblateWith,
  ): Promise<Attribution> {
    return this.client.attribution(tokens, { ...options, ablate: ablationUnits(ablated), ablateWith });
  }

  /** Activation patching from `clean` into `corrupt` (same length); `signal` stops it. */
  patch(
    clean: Uint32Array,
    corrupt: Uint32Array,
    answer: number,
    wrong: number,
    onProgress: (done: number, total: number) => void,
    signal: AbortSignal,
  ): Promise<PatchScores> {
    return this.client.patch({ clean, corrupt, answer, wrong }, { onProgress, signal });
  }

  /** The two most probable next tokens after `tokens`, without any ablation. */
  async topTwo(tokens: Uint32Array): Promise<[number, number]> {
    const trace = await this.client.run(tokens, []);
    try {
      const [first, second] = await trace.topK(2);
      return [first!.id, second!.id];
    } finally {
      void trace.release();
    }
  }

  /** Draws the next token under `sampling` from the session's last run and appends it there. */
  sample(sampling: SamplingParams): Promise<number> {
    return this.session.sampleNext(sampling);
  }

  /** Each token's text (cached: the same ids come back on every keystroke). */
  async labels(ids: ArrayLike<number>): Promise<string[]> {
    const all = Array.from(ids);
    if (!this.info.hasTokenizer) return all.map((id) => `#${id}`);
    const missing = [...new Set(all.filter((id) => !this.labelCache.has(id)))];
    if (missing.length > 0) {
      const strings = await this.client.tokenStrings(Uint32Array.from(missing));
      missing.forEach((id, i) => this.labelCache.set(id, strings[i]!));
    }
    return all.map((id) => this.labelCache.get(id)!);
  }

  dispose(): void {
    if (this.borrowed) void this.session.close().catch(() => {});
    else this.client.terminate();
  }
}

/** What the next-token view asks: the shown candidates' sampled probabilities and the survivors' count, not their list. */
function nextQuery(sampling: SamplingParams): NextQuery {
  return { k: SHOWN_CANDIDATES, sampling, survivors: SURVIVOR_LIMIT, kept: false };
}

/** The next-token view's candidates from the engine's answer. */
function nextToken({ top, survivors }: PromptNext, sampling: SamplingParams): NextToken {
  return {
    candidates: top.map(({ id, prob, label, sampled }) => ({ id, prob, label: label ?? `#${id}`, sampled })),
    survivors,
    survivorsCapped: survivors === SURVIVOR_LIMIT,
    sampling,
  };
}

/** `"3.1"` → `[3, 1]`, `"2.mlp"` → `[2, 'mlp']`: the page's spelling of an ablation, the package's. */
export function ablationUnits(ablated: readonly string[]): AblationUnit[] {
  return ablated.map((name) => {
    const [layer, unit] = name.split('.');
    return [Number(layer), unit === 'mlp' ? 'mlp' : Number(unit)] as const;
  });
}

function parseIds(text: string, vocabSize: number): Uint32Array {
  const words = text.split(/[\s,]+/).filter(Boolean);
  const ids = words.map(Number);
  const bad = words.find((_, i) => !(Number.isInteger(ids[i]) && ids[i]! >= 0 && ids[i]! < vocabSize));
  if (bad !== undefined) {
    throw new PromptError(`This model has no tokenizer: type token ids from 0 to ${vocabSize - 1} (“${bad}” is not one).`);
  }
  return Uint32Array.from(ids);
}
