// Colormaps as 256-entry lookup tables, packed for ImageData (one signed 32-bit word per pixel, RGBA
// bytes in memory order), so painting a T×T map is one table lookup per cell.
//   dark theme:  magma (perceptually uniform; near-black = no weight, bright = much)
//   light theme: ColorBrewer PuBu (near-white = no weight, deep blue = much)
//   signed values (LayerNorm means): a diverging map whose middle is the panel's background.
import type { Theme } from './theme.ts';

const MAGMA = ['#000004', '#180f3d', '#440f76', '#721f81', '#9e2f7f', '#cd4071', '#f1605d', '#fd9668', '#feca8d', '#fcfdbf'];
const PUBU = ['#fff7fb', '#ece7f2', '#d0d1e6', '#a6bddb', '#74a9cf', '#3690c0', '#0570b0', '#045a8d', '#023858'];
const DIVERGING_LIGHT = ['#2166ac', '#4393c3', '#92c5de', '#d1e5f0', '#f7f7f7', '#fddbc7', '#f4a582', '#d6604d', '#b2182b'];
const DIVERGING_DARK = ['#6baed6', '#3b7cb8', '#24496e', '#1a2a3d', '#16181d', '#3d2418', '#7a3b1c', '#c2612a', '#f59e5b'];

type Rgb = [number, number, number];

function parseHex(hex: string): Rgb {
  const value = Number.parseInt(hex.slice(1), 16);
  return [(value >> 16) & 255, (value >> 8) & 255, value & 255];
}

/** An opaque colour as one ImageData pixel (little-endian: alpha in the high byte), as a signed
 * 32-bit word: with alpha 255 it is negative and small enough for V8 to keep unboxed. Unsigned,
 * past 2^31, every pixel read was a new heap number (the attention grid's scaling, then done by
 * script, allocated ~0.5 MB of them a keystroke, and its collections landed in keystrokes' frames). */
function pack([r, g, b]: Rgb): number {
  return (255 << 24) | (b << 16) | (g << 8) | r;
}

export class Colormap {
  /** RGBA pixels for ImageData (little-endian: alpha in the high byte), as signed words (see `pack`). */
  readonly pixels = new Int32Array(256);
  readonly css: string[] = [];

  constructor(stops: readonly string[]) {
    const rgb = stops.map(parseHex);
    for (let i = 0; i < 256; i++) {
      const position = (i / 255) * (rgb.length - 1);
      const low = Math.min(Math.floor(position), rgb.length - 2);
      const mix = position - low;
      const [r, g, b] = [0, 1, 2].map((c) => Math.round(rgb[low]![c]! * (1 - mix) + rgb[low + 1]![c]! * mix)) as Rgb;
      this.pixels[i] = pack([r, g, b]);
      this.css.push(`rgb(${r} ${g} ${b})`);
    }
  }

  /** Table index of `t` in [0, 1] (clamped). */
  static index(t: number): number {
    return t <= 0 ? 0 : t >= 1 ? 255 : (t * 255 + 0.5) | 0;
  }

  cssAt(t: number): string {
    return this.css[Colormap.index(t)]!;
  }
}

const maps = {
  dark: { sequential: new Colormap(MAGMA), diverging: new Colormap(DIVERGING_DARK) },
  light: { sequential: new Colormap(PUBU), diverging: new Colormap(DIVERGING_LIGHT) },
};

export function sequentialMap(theme: Theme): Colormap {
  return maps[theme].sequential;
}

export function divergingMap(theme: Theme): Colormap {
  return maps[theme].diverging;
}
