// Wrappers over the wasm-bindgen classes: the same methods, typed with this package's names
// (hook names as `HookName`, not any string), and usable whichever build init() loaded. Each
// wrapper owns its wasm object; `free()` releases its memory now instead of at garbage collection.
// A model runs on the CPU or on WebGPU (`Model.load(files, { backend })`); a WebGPU session
// answers only through the async methods (`runAsync`, `stepAsync`, `sampleNextAsync`), which work
// on the CPU too.
import { glue, type Glue } from './backend.js';
import * as check from './check.js';
import { guarded, intoEngine } from './crash.js';
import { selectBackend } from './gpu.js';
import { iteratePieces, type Pieces } from './pieces.js';
import type {
  AblateWith,
  AblationUnit,
  Attribution,
  AttributionOptions,
  BackendChoice,
  BackendInfo,
  HeadScores,
  HookName,
  LoadOptions,
  LogitLens,
  LogitLensOptions,
  ModelFiles,
  ModelInfo,
  PatchRequest,
  PatchScores,
  SamplingParams,
  Tensor,
  TokenProb,
} from './types.js';

type RawModel = Glue['Model']['prototype'];


type RawSession = Glue['Session']['prototype'];
type RawTrace = Glue['Trace']['prototype'];

const ON_CPU: BackendInfo = { backend: 'cpu', requested: 'cpu', reason: 'cpu: the CPU was asked for' };

export class Model {
  private running: BackendInfo = ON_CPU;
  /** Token ids are checked against this before they reach the engine. */
  private readonly vocab: number;
  private readonly facts: check.Facts;
  /** Token labels made so far, by id (see `tokenStrings`). */
  private readonly labels = new Map<number, string>();

  private readonly raw: RawModel;

  private constructor(raw: RawModel) {
    this.raw = guarded(raw);
    this.facts = check.factsOf(this.raw.info() as ModelInfo);
    this.vocab = this.facts.vocab;
  }

  /**
   * Parses and validates a checkpoint; throws an Error saying what is wrong with the files. Needs
   * `init()`. Without options the model runs on the CPU and this returns it at once; with
   * `{ backend }` it returns a Promise that resolves once the weights are where they run
   * (`backendInfo()` says where and why) and rejects when `webgpu` was asked for and is not there.
   */
  static load(files: ModelFiles): Model;
  static load(files: ModelFiles, options: LoadOptions): Promise<Model>;
  static load(files: ModelFiles, options?: LoadOptions): Model | Promise<Model> {
    return Model.placed(intoEngine(() => glue().Model.load(files)), options);
  }

  /**
   * Loads a `.gguf` model from its bytes as they arrive — a fetch's `response.body`,
   * `file.stream()`, or any async iterable of Uint8Arrays — holding it in memory once: each piece
   * goes into the weights and is let go (`load` holds the whole file and the weights at once).
   * `fileBytes`: the file's size (Content-Length, `File.size`). `onProgress` hears the bytes read
   * so far. Rejects with what is wrong with the file, as soon as it is known.
   */
  static async loadGguf(
    pieces: Pieces,
    fileBytes: number,
    { onProgress, ...options }: LoadOptions & { onProgress?: (bytesRead: number) => void } = {},
  ): Promise<Model> {
    const loader = new GgufLoader(fileBytes);
    try {
      let read = 0;
      for await (const piece of iteratePieces(pieces)) {
        loader.push(piece);
        read += piece.byteLength;
        onProgress?.(read);
      }
      return await loader.finish(options);
    } finally {
      loader.free();
    }
  }

  /** @internal A loaded wasm model, on `options.backend` when options are given. */
  static placed(raw: RawModel, options?: LoadOptions): Model | Promise<Model> {
    const model = new Model(raw);
    if (options === undefined) return model;
    return model.useBackend(options.backend ?? 'cpu').then(
      () => model,
      (error: unknown) => {
        model.free();
        throw error;
      },
    );
  }

  /**
   * Moves the model to another backend; sessions made afterwards run there, earlier ones stay
   * where they were. On failure (`webgpu` without an adapter) the model stays where it was.
   */
  async useBackend(backend: BackendChoice): Promise<BackendInfo> {
    if (!['auto', 'cpu', 'webgpu'].includes(backend)) {
      throw new RangeError(`backend must be 'auto', 'cpu' or 'webgpu', not ${JSON.stringify(backend)}`);
    }
    this.running = await selectBackend(glue(), this.raw, backend);
    return this.running;
  }

  /** Where new sessions and runs go: `cpu` or `webgpu`. */
  backend(): 'cpu' | 'webgpu' {
    return this.raw.backend() as 'cpu' | 'webgpu';
  }

  /** The backend, what was asked for, the reason for the choice, and the GPU adapter. */
  backendInfo(): BackendInfo {
    return this.running;
  }

  info(): ModelInfo {
    return this.raw.info() as ModelInfo;
  }

  /**
   * @internal For snapshot.ts: the start of a snapshot of this model's weights, and where the
   * weights are (in the engine's memory, in the snapshot). Throws unless the model was loaded by a
   * `GgufLoader` made `forSnapshot`.
   */
  snapshotParts(): { start: Uint8Array; buffers: SnapshotPlaces } {
    return { start: this.raw.snapshotStart(), buffers: places(this.raw.snapshotBuffers()) };
  }

  /** Throws when the checkpoint has no tokenizer (`info().hasTokenizer`). */
  /** `userText` as one user turn of the model's chat template (ChatML), ready to encode. */
  chatPrompt(userText: string): string {
    return this.raw.chatPrompt(check.text(userText, 'userText'));
  }

  encode(text: string): Uint32Array {
    return this.raw.encode(check.text(text, 'text'));
  }

  decode(ids: Uint32Array | readonly number[]): string {
    return this.raw.decode(check.tokenIds(ids, this.vocab, 'ids'));
  }

  /**
   * Each token's own text (byte-level tokens that split a character show as replacement
   * characters). Labels are kept by id once made (at most one per vocabulary entry): a prompt being
   * typed is labelled again on every keystroke, and on a 6,000-token prompt making every label
   * took ~2 ms, three times its encoding.
   */
  tokenStrings(ids: Uint32Array | readonly number[]): string[] {
    const checked = check.tokenIds(ids, this.vocab, 'ids');
    const missing = [...new Set(checked.filter((id) => !this.labels.has(id)))];
    if (missing.length > 0) {
      const made = this.raw.tokenStrings(Uint32Array.from(missing));
      missing.forEach((id, i) => this.labels.set(id, made[i]!));
    }
    return Array.from(checked, (id) => this.labels.get(id)!);
  }

  /**
   * Each head's previous-token, first-token, duplicate-token and induction score on `trace`'s
   * tokens, `[layer][head]`; `trace` must have captured every layer's `hook_pattern`.
   */
  headScores(trace: Trace): HeadScores {
    return this.raw.headScores(trace.raw);
  }

  /** The head detectors' default sequence: min(50, context / 2) seeded random ids, twice. */
  repeatedRandomTokens(seed = 0): Uint32Array {
    return this.raw.repeatedRandomTokens(check.seed(seed) ?? 0);
  }

  /**
   * Activation patching (on the CPU): how much of logit[answer] − logit[wrong] at the last
   * position each clean `hook_resid_pre` (layer × position) and each clean head's `hook_z`
   * (layer × head) restores when patched into the corrupted run; 1 = all of it, 0 = none.
   * `onProgress(done, total)` follows its runs (2 + layers × (positions + heads)); returning
   * `false` from it stops the sweep (an Error saying "cancelled").
   */
  patch(request: PatchRequest, options: { onProgress?: ((done: number, total: number) => boolean | void) | undefined } = {}): PatchScores {
    check.needHead(this.facts, 'patch');
    const clean = check.tokenIds(request.clean, this.vocab, 'clean');
    const corrupt = check.tokenIds(request.corrupt, this.vocab, 'corrupt');
    const answer = check.tokenId(request.answer, this.vocab, 'answer');
    const wrong = check.tokenId(request.wrong, this.vocab, 'wrong');
    return this.raw.patch(clean, corrupt, answer, wrong, options.onProgress);
  }

  /**
   * The logit lens (on the CPU): what each layer's residual predicts at positions `first..`
   * (rows 0..nLayer−1 read `blocks.{l}.hook_resid_pre`, row nLayer is the model's output).
   */
  logitLens(tokens: Uint32Array | readonly number[], options: LogitLensOptions = {}): LogitLens {
    check.needHead(this.facts, 'logitLens');
    const ids = check.tokenIds(tokens, this.vocab);
    const first = check.optionalIndex(options.first, 'first', Math.max(ids.length, 1)) ?? 0;
    const k = check.count(options.k ?? 5, 'k', this.vocab);
    const target = options.target === undefined ? undefined : check.tokenId(options.target, this.vocab, 'target');
    const ablate = check.ablationNames(check.ablation(options.ablate ?? []));
    return this.raw.logitLens(ids, first, k, target, ablate, check.ablateMean(options.ablateWith), options.onProgress);
  }

  /**
   * Direct logit attribution (on the CPU): each head's, MLP's, embedding's and bias's direct
   * contribution to logit[answer] − logit[wrong] at a position, the final norm's scale frozen.
   */
  attribution(tokens: Uint32Array | readonly number[], options: AttributionOptions = {}): Attribution {
    check.needHead(this.facts, 'attribution');
    const ids = check.tokenIds(tokens, this.vocab);
    const position = check.optionalIndex(options.position, 'position', Math.max(ids.length, 1));
    const answer = options.answer === undefined ? undefined : check.tokenId(options.answer, this.vocab, 'answer');
    const wrong = options.wrong === undefined ? undefined : check.tokenId(options.wrong, this.vocab, 'wrong');
    return this.raw.attribution(ids, position, answer, wrong, check.ablationNames(check.ablation(options.ablate ?? [])), check.ablateMean(options.ablateWith));
  }

  /**
   * A fresh forward pass. `capture`: hooks to record; every hook when omitted, none for `[]`.
   * CPU only: on WebGPU use `runAsync`.
   */
  run(tokens: Uint32Array | readonly number[], capture?: readonly HookName[]): Trace {
    return new Trace(this.raw.run(check.tokenIds(tokens, this.vocab), check.capture(capture)), this.facts);
  }

  /** `run` on either backend. */
  async runAsync(tokens: Uint32Array | readonly number[], capture?: readonly HookName[]): Promise<Trace> {
    return new Trace(await this.raw.runAsync(check.tokenIds(tokens, this.vocab), check.capture(capture)), this.facts);
  }

  /**
   * The sentence embedding of `input` (text, encoded with the model's tokenizer, or token ids — at
   * least one): the final hidden states averaged over the tokens and scaled to length 1, as
   * sentence-transformers pools all-MiniLM-L6-v2; `[dModel]`. Compare two with `cosine(a, b)`.
   * On the CPU, whatever the backend.
   */
  embed(input: string | Uint32Array | readonly number[]): Float32Array {
    const given = check.textOrTokenIds(input, this.vocab);
    const ids = typeof given === 'string' ? check.someTokenIds(this.raw.encode(given), this.vocab, 'the encoded input') : given;
    return this.raw.embed(ids);
  }

  /** A session keeps the KV cache between runs, so a run sharing a prefix with the last one computes only the rest. */
  session(): Session {
    return new Session(this.raw.session(), this.facts);
  }

  free(): void {
    this.raw.free();
  }
}

export class Session {
  private readonly raw: RawSession;
  private readonly vocab: number;

  /** @internal */
  constructor(
    raw: RawSession,
    private readonly facts: check.Facts,
  ) {
    this.raw = guarded(raw);
    this.vocab = facts.vocab;
  }

  /**
   * Runs `tokens`, reusing the longest prefix shared with this session's previous tokens. CPU
   * only: a WebGPU session runs through `runAsync`.
   */
  run(tokens: Uint32Array | readonly number[], capture?: readonly HookName[]): Trace {
    return new Trace(this.raw.run(check.tokenIds(tokens, this.vocab), check.capture(capture)), this.facts);
  }

  /**
   * `run` on either backend. One call at a time: a call made before the previous async one has
   * settled throws (or rejects) with a "busy" Error.
   */
  async runAsync(tokens: Uint32Array | readonly number[], capture?: readonly HookName[]): Promise<Trace> {
    return new Trace(await this.raw.runAsync(check.tokenIds(tokens, this.vocab), check.capture(capture)), this.facts);
  }

  /** Appends one token (a decode step), recording the hooks of the last run. CPU only. */
  step(token: number): void {
    check.needGenerates(this.facts, 'step');
    this.raw.step(check.tokenId(token, this.vocab));
  }

  /** `step` on either backend. */
  async stepAsync(token: number): Promise<void> {
    check.needGenerates(this.facts, 'step');
    return this.raw.stepAsync(check.tokenId(token, this.vocab));
  }

  /**
   * Draws the next token from the last logits, appends it (a decode step) and returns it. The
   * random stream continues across calls; `seed` restarts it. Same seed, same text everywhere.
   */
  sampleNext(params: SamplingParams, seed?: number): number {
    check.needGenerates(this.facts, 'sampleNext');
    return this.raw.sampleNext(check.samplingParams(params, this.vocab), check.seed(seed));
  }

  /** `sampleNext` on either backend. */
  async sampleNextAsync(params: SamplingParams, seed?: number): Promise<number> {
    check.needGenerates(this.facts, 'sampleNext');
    return this.raw.sampleNextAsync(check.samplingParams(params, this.vocab), check.seed(seed));
  }

  /**
   * Keeps every layer's queries from the next run on (the cache empties), so that `headPattern`
   * can remake any head's whole map after runs that captured only pooled maps
   * (`blocks.{l}.attn.hook_pattern.pooled`): a long prompt's thumbnails stay small and the head a
   * reader opens comes whole. They count in the capture budget. CPU only.
   */
  keepQueries(keep: boolean): void {
    this.raw.keepQueries(check.flag(keep, 'keep'));
  }

  /** Head `head` of layer `layer` over the cached tokens, `[T, T]`: the bits of its `hook_pattern` rows, remade from the kept queries. */
  headPattern(layer: number, head: number): Tensor {
    return this.raw.headPattern(check.position(layer, this.facts.layers, 'layer'), check.position(head, this.facts.heads, 'head'));
  }

  /** Where this session runs: `cpu` or `webgpu`. */
  backend(): 'cpu' | 'webgpu' {
    return this.raw.backend() as 'cpu' | 'webgpu';
  }

  tokens(): Uint32Array {
    return this.raw.tokens();
  }

  reset(): void {
    this.raw.reset();
  }

  /**
   * Ablates these heads (`[layer, head]`) and MLPs (`[layer, 'mlp']`) in every run from now on —
   * their outputs are replaced before they join the residual by zero, or with `{ with: 'mean' }`
   * by their mean over the prompt's positions (in the run without ablation; every new token then
   * recomputes every position), so later layers and the logits run without them; `[]` for none.
   * A change empties the cache. On WebGPU, zero-ablation of heads below 32 of a layer.
   */
  setAblation(units: readonly AblationUnit[], options: { with?: AblateWith | undefined } = {}): void {
    this.raw.setAblation(check.ablationNames(check.ablation(units)), check.ablateMean(options.with, 'with'));
  }

  /**
   * The sentence embedding of token ids (at least one), as `Model.embed`, reusing this session's
   * buffers; the session then holds `tokens`. On the CPU.
   */
  embed(tokens: Uint32Array | readonly number[]): Float32Array {
    return this.raw.embed(check.someTokenIds(tokens, this.vocab));
  }

  /** Next-token logits after the last token, `[vocabSize]` (empty for an encoder without a language-model head). */
  lastLogits(): Float32Array {
    return this.raw.lastLogits();
  }

  free(): void {
    this.raw.free();
  }
}

export class Trace {
  /** @internal */
  readonly raw: RawTrace;
  private readonly vocab: number;

  /** @internal */
  constructor(
    raw: RawTrace,
    private readonly facts: check.Facts,
  ) {
    this.raw = guarded(raw);
    this.vocab = facts.vocab;
  }

  /** The captured hooks. */
  names(): HookName[] {
    return this.raw.names() as HookName[];
  }

  /** A captured tensor; throws if `name` was not captured. */
  tensor(name: HookName): Tensor {
    return this.raw.tensor(name);
  }

  /** Every token of the sequence, reused prefix included. */
  tokens(): Uint32Array {
    return this.raw.tokens();
  }

  /** Positions this run computed; the others came from the session's cache. */
  get computed(): number {
    return this.raw.computed;
  }

  /** Next-token probabilities after position `pos`. Positions before the last need `logits` captured. */
  probs(pos: number, temperature: number): Float32Array {
    check.needHead(this.facts, 'probs');
    return this.raw.probs(check.position(pos, this.raw.tokens().length), check.temperature(temperature));
  }

  /** The `k` most probable next tokens after the last position, under the sampling filters of `params`. */
  topK(k: number, params?: SamplingParams): TokenProb[] {
    return tokenProbs(this.topKFlat(k, params));
  }

  /** @internal `topK` as the engine gives it, `[id, prob, id, prob, …]`: no object per token. */
  topKFlat(k: number, params?: SamplingParams): Float64Array {
    check.needHead(this.facts, 'topK');
    return this.raw.topKFlat(check.count(k, 'k', this.vocab), check.optionalSamplingParams(params, this.vocab));
  }

  /** Every captured tensor plus `tokens`, as a safetensors file (loads in Python with `safetensors.numpy.load_file`). */
  toSafetensors(): Uint8Array {
    return this.raw.toSafetensors();
  }

  free(): void {
    this.raw.free();
  }
}


/**
 * A `.gguf` model loaded piece by piece, for callers that receive the pieces themselves (a worker
 * fed by messages); `Model.loadGguf` drives one from a stream. `push` the file's bytes in order,
 * then `finish`; `free()` releases what was loaded when giving up.
 */
export class GgufLoader {
  private readonly raw: Glue['GgufLoader']['prototype'];

  /**
   * For a file of `fileBytes` bytes. `forSnapshot` keeps the file's header (a few MB), which a
   * snapshot of the model's weights needs (`snapshot.ts`).
   */
  constructor(fileBytes: number, forSnapshot = false) {
    const size = check.byteCount(fileBytes, 'fileBytes');
    this.raw = guarded(intoEngine(() => new (glue().GgufLoader)(size, forSnapshot)));
  }

  /** The file's next bytes; throws what is wrong as soon as it is known, and then takes no more. */
  push(piece: Uint8Array): void {
    if (!(piece instanceof Uint8Array)) throw new TypeError('a piece of the file must be a Uint8Array');
    this.raw.push(piece);
  }

  /** The model, once every byte has come: on the CPU, or on `options.backend`. */
  finish(options: LoadOptions = {}): Promise<Model> {
    return Promise.resolve(Model.placed(this.raw.finish(), options));
  }

  free(): void {
    this.raw.free();
  }
}

/** Where a model's two weight buffers are: `…Ptr` in the engine's memory, `…At` in the snapshot. */
export interface SnapshotPlaces {
  floatsPtr: number;
  floatsAt: number;
  floatsBytes: number;
  blocksPtr: number;
  blocksAt: number;
  blocksBytes: number;
  /** The snapshot's whole length. */
  length: number;
}

/** @internal The engine's answer as a plain object (the engine's is freed). */
export function places(raw: Glue['SnapshotBuffers']['prototype']): SnapshotPlaces {
  const { floatsPtr, floatsAt, floatsBytes, blocksPtr, blocksAt, blocksBytes, length } = raw;
  raw.free();
  return { floatsPtr, floatsAt, floatsBytes, blocksPtr, blocksAt, blocksBytes, length };
}

/** @internal `[id, prob, id, prob, …]` (`Trace.topKFlat`) as `TokenProb`s. */
export function tokenProbs(flat: Float64Array): TokenProb[] {
  return Array.from({ length: flat.length / 2 }, (_, i) => ({ id: flat[2 * i]!, prob: flat[2 * i + 1]! }));
}
