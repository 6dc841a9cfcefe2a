// Paints one head's causal attention map into ImageData: one pixel per (query row, key column),
// coloured through the theme's colormap; cells above the diagonal (masked) stay transparent so
// the triangle reads at a glance.
import { Colormap } from './colormap.ts';

export type AttentionScale = 'linear' | 'sqrt';

/** Colormap position of a weight: `sqrt` spreads the small weights that most heads are made of. */
export function scaled(value: number, scale: AttentionScale): number {
  return scale === 'sqrt' ? Math.sqrt(value) : value;
}

export function paintAttention(
  image: ImageData,
  pattern: Float32Array,
  t: number,
  head: number,
  colors: Colormap,
  scale: AttentionScale,
): void {
  const pixels = new Uint32Array(image.data.buffer);
  pixels.fill(0);
  for (let q = 0; q < t; q++) {
    const row = (head * t + q) * t;
    for (let k = 0; k <= q; k++) {
      pixels[q * t + k] = colors.pixels[Colormap.index(scaled(pattern[row + k]!, scale))]!;
    }
  }
}
