// What the views draw: one forward pass's captured tensors, regrouped by what they show, and the
// next-token candidates under the current sampling settings.
import type { HookName, ModelInfo, SamplingParams, WorkerTrace } from 'gptlens';

/** One normalisation site (ln1 / ln2 of a block, or the final one), statistics per token. */
export interface NormSite {
  /** `L3 ln1`, `final`. */
  label: string;
  layer: number | undefined;
  /** sqrt(var + eps) (LayerNorm) or sqrt(mean(x²) + eps) (RMSNorm), `[T]`. */
  scale: Float32Array;
  /** Mean of the input, `[T]`; RMSNorm models have none. */
  mean: Float32Array | undefined;
}

export interface Analysis {
  tokens: Uint32Array;
  labels: string[];
  nLayer: number;
  nHead: number;
  /** Per layer, `[nHead, T, T]` row-major: row = query, column = key. Empty for a long prompt
   * (see `pooled`), whose every whole map would not fit in memory. */
  attention: Float32Array[];
  /** A long prompt's maps, max-pooled by the engine. */
  pooled: PooledMaps | undefined;
  /** A long prompt's opened head, whole, remade by the engine from the queries it kept. */
  opened: OpenedHead | undefined;
  /** An encoder's maps are full (every query reads every key); a causal model's are the lower triangle. */
  bidirectional: boolean;
  /** In depth order: L0 ln1, L0 ln2, …, final (post-LN models have no final norm). */
  norms: NormSite[];
  /** Positions this run computed; the rest came from the session's cache. */
  computed: number;
}

export interface PooledMaps {
  /** Per layer, `[nHead, cells, cells]`: each cell the largest weight of a block of `bin` × `bin` positions. */
  maps: Float32Array[];
  cells: number;
  bin: number;
}

export interface OpenedHead {
  layer: number;
  head: number;
  /** `[T, T]`. */
  pattern: Float32Array;
}

/** The most bins a side of an engine-pooled map (the engine's `POOLED_CELLS`). */
const POOLED_CELLS = 128;

/** Positions per bin of a pooled map of `t` positions: the smallest power of two leaving at most 128 bins (the engine's `pooled_bin`). */
export function pooledBin(t: number): number {
  let bin = 1;
  while (Math.ceil(t / bin) > POOLED_CELLS) bin *= 2;
  return bin;
}

/** Every map of `t` tokens of a model with `heads` heads in all fits in this many bytes: longer prompts get pooled maps. */
const WHOLE_MAPS_BYTES = 64 * 2 ** 20;

/** The longest prompt whose every head's whole map is captured; past it the maps are pooled and only the opened head comes whole. */
export function wholeMapsUpTo(info: ModelInfo): number {
  return Math.floor(Math.sqrt(WHOLE_MAPS_BYTES / (info.nLayer * info.nHead * 4)));
}

/** The `[H, T, T]` pattern holding head `layer.head`'s whole map and its index in it, or undefined (a long prompt's head not yet fetched). */
export function headMap(analysis: Analysis, layer: number, head: number): { pattern: Float32Array; head: number } | undefined {
  const whole = analysis.attention[layer];
  if (whole) return { pattern: whole, head };
  const { opened } = analysis;
  return opened && opened.layer === layer && opened.head === head ? { pattern: opened.pattern, head: 0 } : undefined;
}

/** What a layer's thumbnails are drawn from: its whole maps (`t` = tokens) or its pooled ones (`t` = bins). */
export function thumbnails(analysis: Analysis, layer: number): { pattern: Float32Array; t: number } | undefined {
  const whole = analysis.attention[layer];
  if (whole) return { pattern: whole, t: analysis.tokens.length };
  const maps = analysis.pooled?.maps[layer];
  return maps && { pattern: maps, t: analysis.pooled!.cells };
}

export interface Candidate {
  id: number;
  label: string;
  /** The model's probability (temperature 1, no filter). */
  prob: number;
  /** Probability under the sampling settings (temperature, top-k, top-p, renormalised); undefined if filtered out. */
  sampled: number | undefined;
  /** With heads ablated: the model's probability without the ablation. */
  before?: number | undefined;
}

export interface NextToken {
  candidates: Candidate[];
  /** Tokens left with a non-zero sampling probability (a lower bound when `survivorsCapped`). */
  survivors: number;
  survivorsCapped: boolean;
  sampling: SamplingParams;
}

/** The hooks the views need: no logits (only the last position's, which the trace keeps anyway).
 * A long prompt's run swaps the whole maps for pooled ones (see `wholeMapsUpTo`). */
export function viewHooks(info: ModelInfo): HookName[] {
  return info.hooks.filter((hook) => hook.endsWith('.hook_pattern') || hook.endsWith('.hook_scale') || hook.endsWith('.hook_mean'));
}

function normSite(trace: WorkerTrace, prefix: string, label: string, layer: number | undefined): NormSite {
  const has = new Set(trace.names());
  const mean = `${prefix}.hook_mean` as HookName;
  return {
    label,
    layer,
    scale: trace.tensor(`${prefix}.hook_scale` as HookName).data,
    mean: has.has(mean) ? trace.tensor(mean).data : undefined,
  };
}

export function analyse(trace: WorkerTrace, info: ModelInfo, labels: string[], opened?: OpenedHead): Analysis {
  const attention: Float32Array[] = [];
  const norms: NormSite[] = [];
  const isPooled = trace.names().includes('blocks.0.attn.hook_pattern.pooled');
  const t = trace.tokens().length;
  const pooled: PooledMaps | undefined = isPooled ? { maps: [], cells: Math.ceil(t / pooledBin(t)), bin: pooledBin(t) } : undefined;
  for (let layer = 0; layer < info.nLayer; layer++) {
    if (pooled) pooled.maps.push(trace.tensor(`blocks.${layer}.attn.hook_pattern.pooled`).data);
    else attention.push(trace.tensor(`blocks.${layer}.attn.hook_pattern`).data);
    norms.push(normSite(trace, `blocks.${layer}.ln1`, `L${layer} ln1`, layer));
    norms.push(normSite(trace, `blocks.${layer}.ln2`, `L${layer} ln2`, layer));
  }
  if (trace.names().includes('ln_final.hook_scale')) norms.push(normSite(trace, 'ln_final', 'final', undefined));
  const bidirectional = info.attention === 'bidirectional';
  return { tokens: trace.tokens(), labels, nLayer: info.nLayer, nHead: info.nHead, attention, pooled, opened, bidirectional, norms, computed: trace.computed };
}

/** True for a model without next-token logits, or whose tokens read the future: an encoder (BERT). */
export function isEncoder(info: ModelInfo): boolean {
  return info.attention === 'bidirectional' || info.hasHead === false;
}

/** The last key query `q` can read: itself in a causal map, the last token in a full one. */
export function lastKey(t: number, q: number, full: boolean): number {
  return full ? t - 1 : q;
}

/** The weight query `q` gives key `k` in `head` of a layer's `[H, T, T]` pattern. */
export function weight(pattern: Float32Array, t: number, head: number, q: number, k: number): number {
  return pattern[(head * t + q) * t + k]!;
}

/** The `count` keys query `q` of `head` weighs most, strongest first (`full`: keys after `q` too). */
export function strongestKeys(pattern: Float32Array, t: number, head: number, q: number, count: number, full = false): { key: number; weight: number }[] {
  const keys = Array.from({ length: lastKey(t, q, full) + 1 }, (_, key) => ({ key, weight: weight(pattern, t, head, q, key) }));
  return keys.sort((a, b) => b.weight - a.weight).slice(0, count);
}
