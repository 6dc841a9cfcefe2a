// A small horizontal colour bar with its end values, for the heat maps' legends.
import type { AttentionScale } from '../attention-paint.ts';
import type { Colormap } from '../colormap.ts';
import { h } from '../dom.ts';

export function colorbar(colors: Colormap, low: string, high: string): HTMLElement {
  const stops = [0, 0.25, 0.5, 0.75, 1].map((t) => `${colors.cssAt(t)} ${t * 100}%`).join(', ');
  return h(
    'span',
    { class: 'colorbar' },
    h('span', {}, low),
    h('span', { class: 'colorbar-ramp', style: `background: linear-gradient(to right, ${stops})` }),
    h('span', {}, high),
  );
}

/** What the attention colours mean under `scale`, for the legend. */
export function scaleNote(scale: AttentionScale): string {
  switch (scale) {
    case 'rest':
      return '* Colours span 0 to each head’s largest weight on any key but the first token; the first token (the attention sink, which often takes most of the weight) is left out of the range and saturates.';
    case 'sqrt':
      return 'Colours follow √weight from 0 to 1, which lifts small weights out of the dark.';
    default:
      return 'Colours follow the weight from 0 to 1.';
  }
}
