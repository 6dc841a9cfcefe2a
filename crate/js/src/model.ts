// Wrappers over the wasm-bindgen classes: the same methods, typed with this package's names
// (hook names as `HookName`, not any string), and usable whichever build init() loaded. Each
// wrapper owns its wasm object; `free()` releases its memory now instead of at garbage collection.
import { glue, type Glue } from './backend.js';
import type { HookName, ModelFiles, ModelInfo, SamplingParams, Tensor, TokenProb } from './types.js';

type RawModel = Glue['Model']['prototype'];
type RawSession = Glue['Session']['prototype'];
type RawTrace = Glue['Trace']['prototype'];

export class Model {
  private constructor(private readonly raw: RawModel) {}

  /** Parses and validates a checkpoint; throws an Error saying what is wrong with the files. Needs `init()`. */
  static load(files: ModelFiles): Model {
    return new Model(glue().Model.load(files));
  }

  info(): ModelInfo {
    return this.raw.info() as ModelInfo;
  }

  /** Throws when the checkpoint has no tokenizer (`info().hasTokenizer`). */
  /** `userText` as one user turn of the model's chat template (ChatML), ready to encode. */
  chatPrompt(userText: string): string {
    return this.raw.chatPrompt(userText);
  }

  encode(text: string): Uint32Array {
    return this.raw.encode(text);
  }

  decode(ids: Uint32Array): string {
    return this.raw.decode(ids);
  }

  /** Each token's own text (byte-level tokens that split a character show as replacement characters). */
  tokenStrings(ids: Uint32Array): string[] {
    return this.raw.tokenStrings(ids);
  }

  /** A fresh forward pass. `capture`: hooks to record; every hook when omitted, none for `[]`. */
  run(tokens: Uint32Array, capture?: readonly HookName[]): Trace {
    return new Trace(this.raw.run(tokens, capture === undefined ? undefined : [...capture]));
  }

  /** A session keeps the KV cache between runs, so a run sharing a prefix with the last one computes only the rest. */
  session(): Session {
    return new Session(this.raw.session());
  }

  free(): void {
    this.raw.free();
  }
}

export class Session {
  /** @internal */
  constructor(private readonly raw: RawSession) {}

  /** Runs `tokens`, reusing the longest prefix shared with this session's previous tokens. */
  run(tokens: Uint32Array, capture?: readonly HookName[]): Trace {
    return new Trace(this.raw.run(tokens, capture === undefined ? undefined : [...capture]));
  }

  /** Appends one token (a decode step), recording the hooks of the last run. */
  step(token: number): void {
    this.raw.step(token);
  }

  /**
   * Draws the next token from the last logits, appends it (a decode step) and returns it. The
   * random stream continues across calls; `seed` restarts it. Same seed, same text everywhere.
   */
  sampleNext(params: SamplingParams, seed?: number): number {
    return this.raw.sampleNext(params, seed);
  }

  tokens(): Uint32Array {
    return this.raw.tokens();
  }

  reset(): void {
    this.raw.reset();
  }

  /** Next-token logits after the last token, `[vocabSize]`. */
  lastLogits(): Float32Array {
    return this.raw.lastLogits();
  }

  free(): void {
    this.raw.free();
  }
}

export class Trace {
  /** @internal */
  constructor(private readonly raw: RawTrace) {}

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
    return this.raw.probs(pos, temperature);
  }

  /** The `k` most probable next tokens after the last position, under the sampling filters of `params`. */
  topK(k: number, params?: SamplingParams): TokenProb[] {
    return this.raw.topK(k, params);
  }

  /** Every captured tensor plus `tokens`, as a safetensors file (loads in Python with `safetensors.numpy.load_file`). */
  toSafetensors(): Uint8Array {
    return this.raw.toSafetensors();
  }

  free(): void {
    this.raw.free();
  }
}
