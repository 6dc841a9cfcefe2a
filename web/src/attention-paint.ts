// Paints one head's attention map into ImageData: one pixel per (query row, key column), coloured
// through the theme's colormap. In a causal map the cells above the diagonal (masked) stay
// transparent so the triangle reads at a glance; an encoder's map (`full`) is painted whole.
import { Colormap } from './colormap.ts';

export type AttentionScale = 'rest' | 'linear' | 'sqrt';

/** Colormap position of a weight: `sqrt` spreads the small weights that most heads are made of;
 * `rest` divides by `top`, the head's largest weight on any key but the first. */
export function scaled(value: number, scale: AttentionScale, top = 1): number {
  return scale === 'sqrt' ? Math.sqrt(value) : scale === 'rest' ? value / top : value;
}

/** The largest weight of `head` on keys after the first (the first position soaks up weight: the sink). */
export function restMax(pattern: Float32Array, t: number, head: number, full = false): number {
  let top = 0;
  for (let q = full ? 0 : 1; q < t; q++) {
    const row = (head * t + q) * t;
    const end = full ? t - 1 : q;
    for (let k = 1; k <= end; k++) if (pattern[row + k]! > top) top = pattern[row + k]!;
  }
  return top > 0 ? top : 1;
}

/** Side of a max-pooled thumbnail of a `t`-token map: at most `limit` pixels, each the largest
 * weight of its block, so a strong weight never disappears when the map is shrunk. */
export function pooledSize(t: number, limit: number): { size: number; factor: number } {
  const factor = Math.max(1, Math.ceil(t / limit));
  return { size: Math.ceil(t / factor), factor };
}

/** Maps pooled to at most this many pixels (the grid's thumbnails) reuse one buffer, kept
 * between heads (a redraw paints one per head); larger ones (the head map's, pooled to the
 * screen's pixels) get their own. */
const POOLING_KEPT = 128 * 128;
let pooling = new Float32Array(0);

/** Paints a max-pooled `size`×`size` thumbnail (blocks of `factor`×`factor` cells; masked cells skipped unless `full`). */
export function paintPooled(
  image: ImageData,
  pattern: Float32Array,
  t: number,
  head: number,
  factor: number,
  colors: Colormap,
  scale: AttentionScale,
  full = false,
): void {
  const size = image.width;
  const pixels = new Int32Array(image.data.buffer);
  pixels.fill(0);
  const cells = size * size;
  if (cells > pooling.length && cells <= POOLING_KEPT) pooling = new Float32Array(cells);
  const pooled = (cells <= pooling.length ? pooling.subarray(0, cells) : new Float32Array(cells)).fill(-1);
  for (let q = 0; q < t; q++) {
    const row = (head * t + q) * t;
    const end = full ? t - 1 : q;
    // Block by block along the row: each block's largest weight found before it is stored.
    let at = Math.floor(q / factor) * size;
    for (let start = 0; start <= end; start += factor, at++) {
      let largest = pooled[at]!;
      const last = Math.min(end, start + factor - 1);
      for (let k = start; k <= last; k++) if (pattern[row + k]! > largest) largest = pattern[row + k]!;
      pooled[at] = largest;
    }
  }
  const top = scale === 'rest' ? restMax(pattern, t, head, full) : 1;
  for (let i = 0; i < pooled.length; i++) {
    if (pooled[i]! >= 0) pixels[i] = colors.pixels[Colormap.index(scaled(pooled[i]!, scale, top))]!;
  }
}

export function paintAttention(
  image: ImageData,
  pattern: Float32Array,
  t: number,
  head: number,
  colors: Colormap,
  scale: AttentionScale,
  full = false,
): void {
  const pixels = new Int32Array(image.data.buffer);
  pixels.fill(0);
  const top = scale === 'rest' ? restMax(pattern, t, head, full) : 1;
  for (let q = 0; q < t; q++) {
    const row = (head * t + q) * t;
    const end = full ? t - 1 : q;
    for (let k = 0; k <= end; k++) {
      pixels[q * t + k] = colors.pixels[Colormap.index(scaled(pattern[row + k]!, scale, top))]!;
    }
  }
}
