// A small horizontal colour bar with its end values, for the heat maps' legends.
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
