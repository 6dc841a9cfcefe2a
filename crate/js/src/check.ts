// Validation at the package's boundary, where JS values first arrive (the direct API and the
// worker client alike). The wasm glue would coerce silently (NaN → 0, 2^40 → 0, -5 → 2^32 − 5,
// 'x' → 0); here a wrong type is a TypeError and a number out of range a RangeError, each naming
// the argument and the valid range. Limits chosen:
// - token ids: integers in [0, vocabSize), given as an array of numbers or a typed array;
// - counts (`topK(k)`, `SamplingParams.topK`): integers ≥ 1; above vocabSize they are clamped to
//   it (asking for more candidates than the vocabulary has means all of them);
// - temperatures: finite numbers ≥ 0 (as float32: 1e39 is not finite there);
// - `SamplingParams.topP`: in (0, 1];
// - seeds: integers in [0, 2^53 − 1];
// - positions (`probs(pos)`): integers in [0, tokens).
import type { HookName, NextQuery, PromptQuery, SamplingParams } from './types.js';

function show(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'number') return Object.is(value, -0) ? '-0' : String(value);
  if (value === null || value === undefined) return String(value);
  if (Array.isArray(value)) return 'an array';
  if (ArrayBuffer.isView(value)) return `a ${value.constructor.name}`;
  return `a ${typeof value}`;
}

/** An integer in [min, max) (or ≤ max when `inclusive`): TypeError for a non-number, RangeError otherwise. */
function integer(value: unknown, name: string, min: number, max: number, range: string): number {
  if (typeof value !== 'number') throw new TypeError(`${name} must be an integer in ${range}, not ${show(value)}`);
  if (!Number.isInteger(value) || value < min || value >= max) throw new RangeError(`${name} must be an integer in ${range}, not ${show(value)}`);
  return value;
}

/** A token id in [0, vocab). */
export function tokenId(value: unknown, vocab: number, name = 'token'): number {
  return integer(value, name, 0, vocab, `[0, ${vocab})`);
}

/** Token ids in [0, vocab) as a Uint32Array (the same one when it already is). */
export function tokenIds(value: unknown, vocab: number, name = 'tokens'): Uint32Array {
  const isTyped = ArrayBuffer.isView(value) && !(value instanceof DataView);
  if (!Array.isArray(value) && !isTyped) {
    throw new TypeError(`${name} must be a Uint32Array or an array of integers in [0, ${vocab}), not ${show(value)}`);
  }
  const items = value as ArrayLike<unknown>;
  for (let i = 0; i < items.length; i++) tokenId(items[i], vocab, `${name}[${i}]`);
  return value instanceof Uint32Array ? value : Uint32Array.from(items as ArrayLike<number>);
}

/** Token ids in [0, vocab), at least one (a sentence to embed). */
export function someTokenIds(value: unknown, vocab: number, name = 'tokens'): Uint32Array {
  const ids = tokenIds(value, vocab, name);
  if (ids.length === 0) throw new RangeError(`${name} must hold at least one token id, not none`);
  return ids;
}

/** A string, or token ids in [0, vocab) (at least one): what `embed` takes. */
export function textOrTokenIds(value: unknown, vocab: number, name = 'input'): string | Uint32Array {
  if (typeof value === 'string') return value;
  const isTyped = ArrayBuffer.isView(value) && !(value instanceof DataView);
  if (!Array.isArray(value) && !isTyped) {
    throw new TypeError(`${name} must be a string, a Uint32Array or an array of integers in [0, ${vocab}), not ${show(value)}`);
  }
  return someTokenIds(value, vocab, name);
}

/** A count ≥ 1, clamped to `max`. */
export function count(value: unknown, name: string, max: number): number {
  const range = `an integer ≥ 1 (values above ${max} are clamped to ${max})`;
  if (typeof value !== 'number') throw new TypeError(`${name} must be ${range}, not ${show(value)}`);
  if (!Number.isInteger(value) || value < 1) throw new RangeError(`${name} must be ${range}, not ${show(value)}`);
  return Math.min(value, max);
}

/** A boolean (no truthy coercion). */
export function flag(value: unknown, name: string): boolean {
  if (typeof value !== 'boolean') throw new TypeError(`${name} must be true or false, not ${show(value)}`);
  return value;
}

/** A finite temperature ≥ 0 (finite as float32 too). */
export function temperature(value: unknown, name = 'temperature'): number {
  if (typeof value !== 'number') throw new TypeError(`${name} must be a finite number ≥ 0, not ${show(value)}`);
  if (!(value >= 0 && Number.isFinite(Math.fround(value)))) throw new RangeError(`${name} must be a finite number ≥ 0, not ${show(value)}`);
  return value;
}

/** The longest `waitForAnswer` may block its thread: longer, it would be a long task. */
const MAX_WAIT_MS = 50;

/** `waitForAnswer`'s milliseconds, in [0, MAX_WAIT_MS]. */
export function waitMs(value: unknown, name: string): number {
  const range = `a number of milliseconds in [0, ${MAX_WAIT_MS}]`;
  if (typeof value !== 'number') throw new TypeError(`${name} must be ${range}, not ${show(value)}`);
  if (!(value >= 0 && value <= MAX_WAIT_MS)) throw new RangeError(`${name} must be ${range}, not ${show(value)}`);
  return value;
}

/** A position in [0, length). */
export function position(value: unknown, length: number, name = 'pos'): number {
  return integer(value, name, 0, length, `[0, ${length})`);
}

/** An optional seed: an integer in [0, 2^53 − 1]. */
export function seed(value: unknown, name = 'seed'): number | undefined {
  if (value === undefined) return undefined;
  return integer(value, name, 0, Number.MAX_SAFE_INTEGER + 1, '[0, 2^53 − 1]');
}

/** Optional sampling parameters: undefined (or null) for the engine's defaults (temperature 1, no filter). */
export function optionalSamplingParams(value: unknown, vocab: number, name = 'params'): SamplingParams | undefined {
  return value === undefined || value === null ? undefined : samplingParams(value, vocab, name);
}

/** `{ temperature, topK?, topP? }` checked and copied (topK clamped to `vocab`). */
export function samplingParams(value: unknown, vocab: number, name = 'params'): SamplingParams {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new TypeError(`${name} must be an object { temperature, topK?, topP? }, not ${show(value)}`);
  }
  const given = value as Record<string, unknown>;
  const params: SamplingParams = { temperature: temperature(given['temperature'], `${name}.temperature`) };
  if (given['topK'] !== undefined && given['topK'] !== null) params.topK = count(given['topK'], `${name}.topK`, vocab);
  const topP = given['topP'];
  if (topP !== undefined && topP !== null) {
    if (typeof topP !== 'number') throw new TypeError(`${name}.topP must be a number in (0, 1], not ${show(topP)}`);
    if (!(topP > 0 && topP <= 1 && Math.fround(topP) > 0)) throw new RangeError(`${name}.topP must be a number in (0, 1], not ${show(topP)}`);
    params.topP = topP;
  }
  return params;
}

/** A string (text to encode, a chat turn). */
export function text(value: unknown, name: string): string {
  if (typeof value !== 'string') throw new TypeError(`${name} must be a string, not ${show(value)}`);
  return value;
}

/** A `PromptQuery` checked and copied: its capture, a token count ≥ 0, a head of the model, next-token counts ≥ 1 (clamped to `facts.vocab`). */
export function promptQuery(value: unknown, facts: Facts, name = 'query'): PromptQuery {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new TypeError(`${name} must be an object { capture?, pooledPast?, open?, next? }, not ${show(value)}`);
  const given = value as Record<string, unknown>;
  const query: PromptQuery = {};
  const hooks = capture(given['capture'], `${name}.capture`);
  if (hooks) query.capture = hooks;
  if (given['pooledPast'] !== undefined) query.pooledPast = integer(given['pooledPast'], `${name}.pooledPast`, 0, Number.MAX_SAFE_INTEGER, '[0, 2^53 − 1)');
  const open = given['open'];
  if (open !== undefined) {
    if (open === null || typeof open !== 'object') throw new TypeError(`${name}.open must be an object { layer, head }, not ${show(open)}`);
    const { layer, head } = open as Record<string, unknown>;
    query.open = { layer: position(layer, facts.layers, `${name}.open.layer`), head: position(head, facts.heads, `${name}.open.head`) };
  }
  if (given['next'] !== undefined) query.next = nextQuery(given['next'], facts.vocab, `${name}.next`);
  return query;
}

/** A `NextQuery` checked and copied: counts ≥ 1 (clamped to `vocab`), sampling parameters, `kept` a boolean. */
export function nextQuery(value: unknown, vocab: number, name = 'next'): NextQuery {
  if (value === null || typeof value !== 'object') throw new TypeError(`${name} must be an object { k, sampling?, survivors?, kept? }, not ${show(value)}`);
  const { k, sampling, survivors, kept } = value as Record<string, unknown>;
  const next: NextQuery = { k: count(k, `${name}.k`, vocab) };
  const params = optionalSamplingParams(sampling, vocab, `${name}.sampling`);
  if (params) next.sampling = params;
  if (survivors !== undefined) next.survivors = count(survivors, `${name}.survivors`, vocab);
  if (kept !== undefined) {
    if (typeof kept !== 'boolean') throw new TypeError(`${name}.kept must be true or false, not ${show(kept)}`);
    next.kept = kept;
  }
  return next;
}

/** Hooks to capture: undefined (every hook) or an array of hook names, copied. */
export function capture(value: unknown, name = 'capture'): HookName[] | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value)) throw new TypeError(`${name} must be an array of hook names or undefined, not ${show(value)}`);
  value.forEach((hook, i) => {
    if (typeof hook !== 'string') throw new TypeError(`${name}[${i}] must be a hook name (a string), not ${show(hook)}`);
  });
  return [...value] as HookName[];
}

/** Heads as `[layer, head]` and MLPs as `[layer, 'mlp']`, integers in [0, 1024) (the engine checks that they exist). */
export function ablation(value: unknown, name = 'ablation'): [number, number | 'mlp'][] {
  if (!Array.isArray(value)) throw new TypeError(`${name} must be an array of [layer, head] or [layer, 'mlp'] pairs, not ${show(value)}`);
  return value.map((pair: unknown, i) => {
    if (!Array.isArray(pair) || pair.length !== 2) throw new TypeError(`${name}[${i}] must be a [layer, head] or [layer, 'mlp'] pair, not ${show(pair)}`);
    const layer = integer(pair[0], `${name}[${i}][0]`, 0, 1024, '[0, 1024)');
    const unit = pair[1] === 'mlp' ? 'mlp' : integer(pair[1], `${name}[${i}][1]`, 0, 1024, "[0, 1024) or 'mlp'");
    return [layer, unit];
  });
}

/** `'zero'` (the default, for undefined) or `'mean'`, as the engine's flag. */
export function ablateMean(value: unknown, name = 'ablateWith'): boolean {
  if (value === undefined || value === 'zero') return false;
  if (value === 'mean') return true;
  throw new TypeError(`${name} must be 'zero' or 'mean', not ${show(value)}`);
}

/** An ablation as the engine spells it: `layer.head` / `layer.mlp`. */
export function ablationNames(units: readonly (readonly [number, number | 'mlp'])[]): string[] {
  return units.map(([layer, unit]) => `${layer}.${unit}`);
}

/** An optional whole number ≥ 0 below `max` (undefined stays undefined). */
export function optionalIndex(value: unknown, name: string, max: number): number | undefined {
  return value === undefined ? undefined : integer(value, name, 0, max, `[0, ${max})`);
}

/** A snapshot's key: a string of 1 to 4096 characters (a URL with its validators). */
export function snapshotKey(value: unknown): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > 4096) {
    throw new TypeError(`snapshotKey must be a string of 1 to 4096 characters, not ${typeof value === 'string' ? `one of ${value.length}` : typeof value}`);
  }
  return value;
}

/** Snapshots' ids, as `listSnapshots` gives them: file names made of a 32-digit hex hash and `.snapshot`. */
export function snapshotIds(value: unknown): string[] {
  if (!Array.isArray(value) || value.length > 1000) throw new TypeError('ids must be an array of at most 1000 snapshot ids (from listSnapshots)');
  return value.map((id: unknown) => {
    if (typeof id !== 'string' || !/^[0-9a-f]{32}\.snapshot$/.test(id)) {
      throw new TypeError(`${typeof id === 'string' ? JSON.stringify(id.slice(0, 80)) : typeof id} is not a snapshot id (listSnapshots gives them)`);
    }
    return id;
  });
}

/** A size in bytes: an integer in [0, 2^53). */
export function byteCount(value: unknown, name: string): number {
  return integer(value, name, 0, Number.MAX_SAFE_INTEGER + 1, '[0, 2^53)');
}

/** What the wrappers check arguments against: the vocabulary, and whether there are logits. */
export interface Facts {
  vocab: number;
  /** False for an encoder without a language-model head (all-MiniLM-L6-v2): no logits. */
  hasHead: boolean;
  /** An encoder's attention: every position reads every other, so there is no next token to append. */
  bidirectional: boolean;
  architecture: string;
  layers: number;
  heads: number;
}

/** The Error for a question about next tokens put to a model without a language-model head. */
export function noHead(facts: Facts, what: string): Error {
  return new Error(`${what} needs next-token logits, and this ${facts.architecture} model is an encoder without a language-model head: use embed() for its sentence embedding`);
}

/** A model's facts from its info (`hasHead` missing: an older engine, which always had a head). */
export function factsOf(info: { vocabSize: number; hasHead?: boolean; attention?: string; architecture: string; nLayer: number; nHead: number }): Facts {
  return {
    vocab: info.vocabSize,
    hasHead: info.hasHead !== false,
    bidirectional: info.attention === 'bidirectional',
    architecture: info.architecture,
    layers: info.nLayer,
    heads: info.nHead,
  };
}

/** Throws unless the model can append tokens: a causal model with a language-model head (not an encoder). */
export function needGenerates(facts: Facts, what: string): void {
  if (!facts.hasHead || facts.bidirectional) {
    throw new Error(`${what}: this ${facts.architecture} model is an encoder: it gives hidden states and embeddings, not next tokens`);
  }
}

/** Throws `noHead` unless the model has a language-model head. */
export function needHead(facts: Facts, what: string): void {
  if (!facts.hasHead) throw noHead(facts, what);
}

/** `new Trainer(shape)`'s shape: positive integer sizes, `nCtx` ≤ 1024, `dModel` a multiple of `nHead`. */
export function trainShape(value: unknown, name = 'shape'): { nLayer: number; nHead: number; dModel: number; nCtx: number; sinusoidal?: boolean } {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new TypeError(`${name} must be an object { nLayer, nHead, dModel, nCtx, sinusoidal? }, not ${show(value)}`);
  }
  const given = value as Record<string, unknown>;
  const size = (key: string, max: number) => integer(given[key], `${name}.${key}`, 1, max + 1, `[1, ${max}]`);
  const shape: { nLayer: number; nHead: number; dModel: number; nCtx: number; sinusoidal?: boolean } = {
    nLayer: size('nLayer', 1024),
    nHead: size('nHead', 1024),
    dModel: size('dModel', 65536),
    nCtx: size('nCtx', 1024),
  };
  if (shape.dModel % shape.nHead !== 0) {
    throw new RangeError(`${name}.dModel (${shape.dModel}) must be a multiple of ${name}.nHead (${shape.nHead})`);
  }
  const sinusoidal = given['sinusoidal'];
  if (sinusoidal !== undefined) {
    if (typeof sinusoidal !== 'boolean') throw new TypeError(`${name}.sinusoidal must be a boolean, not ${show(sinusoidal)}`);
    shape.sinusoidal = sinusoidal;
  }
  return shape;
}

function finite(value: unknown, name: string, ok: (v: number) => boolean, range: string): number {
  if (typeof value !== 'number') throw new TypeError(`${name} must be ${range}, not ${show(value)}`);
  if (!Number.isFinite(value) || !ok(value)) throw new RangeError(`${name} must be ${range}, not ${show(value)}`);
  return value;
}

/**
 * A partial training recipe, checked field by field and copied (undefined: the engine's
 * defaults). Unknown fields are left for the engine to refuse.
 */
export function trainRecipe(value: unknown, name = 'recipe'): Record<string, unknown> | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'object' || Array.isArray(value)) throw new TypeError(`${name} must be an object (any of the TrainRecipe fields) or undefined, not ${show(value)}`);
  const given = value as Record<string, unknown>;
  const recipe: Record<string, unknown> = { ...given };
  const big = Number.MAX_SAFE_INTEGER + 1;
  const field = (key: string, checkOne: (v: unknown, n: string) => unknown) => {
    if (given[key] !== undefined) recipe[key] = checkOne(given[key], `${name}.${key}`);
  };
  field('steps', (v, n) => integer(v, n, 1, 2 ** 32, '[1, 2^32)'));
  field('batch', (v, n) => integer(v, n, 1, 65537, '[1, 65536]'));
  field('warmup', (v, n) => integer(v, n, 0, 2 ** 32, '[0, 2^32)'));
  field('evalEvery', (v, n) => integer(v, n, 1, 2 ** 32, '[1, 2^32)'));
  field('evalBatches', (v, n) => integer(v, n, 1, 65537, '[1, 65536]'));
  field('seed', (v, n) => integer(v, n, 0, big, '[0, 2^53 − 1]'));
  field('lr', (v, n) => finite(v, n, (x) => x > 0, 'a finite number > 0'));
  field('minLr', (v, n) => finite(v, n, (x) => x >= 0, 'a finite number ≥ 0'));
  field('dropout', (v, n) => finite(v, n, (x) => x >= 0 && x < 1, 'a number in [0, 1)'));
  if (given['clip'] !== undefined && given['clip'] !== null) recipe['clip'] = finite(given['clip'], `${name}.clip`, (x) => x > 0, 'a finite number > 0, or null (no clipping)');
  const adamw = given['adamw'];
  if (adamw !== undefined) {
    if (adamw === null || typeof adamw !== 'object' || Array.isArray(adamw)) throw new TypeError(`${name}.adamw must be an object { beta1, beta2, eps, weightDecay }, not ${show(adamw)}`);
    const a = adamw as Record<string, unknown>;
    const copy: Record<string, unknown> = { ...a };
    for (const key of ['beta1', 'beta2'] as const) {
      if (a[key] !== undefined) copy[key] = finite(a[key], `${name}.adamw.${key}`, (x) => x >= 0 && x < 1, 'a number in [0, 1)');
    }
    if (a['eps'] !== undefined) copy['eps'] = finite(a['eps'], `${name}.adamw.eps`, (x) => x > 0, 'a finite number > 0');
    if (a['weightDecay'] !== undefined) copy['weightDecay'] = finite(a['weightDecay'], `${name}.adamw.weightDecay`, (x) => x >= 0, 'a finite number ≥ 0');
    recipe['adamw'] = copy;
  }
  return recipe;
}

/** The text to learn: a non-empty string (as UTF-8) or non-empty Uint8Array. */
export function trainText(value: unknown, name = 'text'): Uint8Array {
  let bytes: Uint8Array;
  if (typeof value === 'string') bytes = new TextEncoder().encode(value);
  else if (value instanceof Uint8Array) bytes = value;
  else throw new TypeError(`${name} must be a string or a Uint8Array, not ${show(value)}`);
  if (bytes.length === 0) throw new RangeError(`${name} must not be empty`);
  return bytes;
}

/** The held-out fraction of the text: a number in [0, 1). */
export function valFraction(value: unknown, name = 'valFraction'): number {
  return finite(value, name, (x) => x >= 0 && x < 1, 'a number in [0, 1)');
}

/** Training steps to run now: an integer in [1, 2^32). */
export function trainSteps(value: unknown, name = 'steps'): number {
  return integer(value, name, 1, 2 ** 32, '[1, 2^32)');
}
