// A small SVG line chart: one emphasised series over faint context series, on a linear or log
// y axis, with sparse x labels. For the LayerNorm statistics of one token across depth.
import { cssVar } from './dom.ts';

export interface ChartInput {
  width: number;
  height: number;
  /** Label under each x position; undefined = none. */
  xLabels: (string | undefined)[];
  /** Faint lines for comparison (the other tokens). */
  context: ArrayLike<number>[];
  emphasis: ArrayLike<number>;
  log: boolean;
  yLabel: string;
}

const SVG = 'http://www.w3.org/2000/svg';
const MARGIN = { top: 10, right: 12, bottom: 22, left: 52 };

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attributes: Record<string, string | number>, text?: string): SVGElementTagNameMap[K] {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, String(value));
  if (text !== undefined) element.textContent = text;
  return element;
}

/** Round tick values across [low, high]: powers of ten (with 2 and 5 when the range is narrow) on a log axis. */
function ticks(low: number, high: number, log: boolean): number[] {
  if (log) {
    const values: number[] = [];
    const decades = Math.log10(high / low);
    const steps = decades < 1.5 ? [1, 2, 5] : [1];
    for (let exponent = Math.floor(Math.log10(low)); exponent <= Math.ceil(Math.log10(high)); exponent++) {
      for (const step of steps) {
        const value = step * 10 ** exponent;
        if (value >= low && value <= high) values.push(value);
      }
    }
    return values.length > 0 ? values : [low, high];
  }
  const span = high - low || 1;
  const step = 10 ** Math.floor(Math.log10(span / 4));
  const nice = [1, 2, 5, 10].map((factor) => factor * step).find((candidate) => span / candidate <= 5) ?? step * 10;
  const values: number[] = [];
  for (let value = Math.ceil(low / nice) * nice; value <= high + 1e-12; value += nice) values.push(Number(value.toPrecision(6)));
  return values;
}

function formatTick(value: number): string {
  const magnitude = Math.abs(value);
  if (magnitude !== 0 && (magnitude >= 1e4 || magnitude < 1e-2)) return value.toExponential(0);
  return String(Number(value.toPrecision(3)));
}

export function lineChart(input: ChartInput): SVGSVGElement {
  const { width, height, xLabels, log } = input;
  // A loop, not Math.min(...values): a long prompt's context lines hold hundreds of thousands of
  // values, more arguments than a call may take.
  let [low, high] = [Infinity, -Infinity];
  for (const series of [input.emphasis, ...input.context]) {
    for (let i = 0; i < series.length; i++) {
      const v = series[i]!;
      if (!Number.isFinite(v) || (log && v <= 0)) continue;
      low = Math.min(low, v);
      high = Math.max(high, v);
    }
  }
  if (!(low < high)) [low, high] = log ? [low / 2 || 0.5, high * 2 || 2] : [low - 1, high + 1];
  const plotWidth = width - MARGIN.left - MARGIN.right;
  const plotHeight = height - MARGIN.top - MARGIN.bottom;
  const count = xLabels.length;
  const x = (i: number) => MARGIN.left + (count === 1 ? plotWidth / 2 : (i / (count - 1)) * plotWidth);
  const project = log ? Math.log10 : (v: number) => v;
  const y = (v: number) => MARGIN.top + plotHeight * (1 - (project(v) - project(low)) / (project(high) - project(low)));
  const path = (series: ArrayLike<number>) =>
    Array.from(series, (v, i) => `${i === 0 ? 'M' : 'L'}${x(i).toFixed(1)},${y(v).toFixed(1)}`).join('');

  const root = svg('svg', { width, height, viewBox: `0 0 ${width} ${height}`, class: 'chart', role: 'img' });
  const grid = cssVar('--grid');
  const muted = cssVar('--text-muted');
  for (const tick of ticks(low, high, log)) {
    root.append(
      svg('line', { x1: MARGIN.left, x2: width - MARGIN.right, y1: y(tick), y2: y(tick), stroke: grid }),
      svg('text', { x: MARGIN.left - 6, y: y(tick), 'text-anchor': 'end', 'dominant-baseline': 'middle', fill: muted }, formatTick(tick)),
    );
  }
  xLabels.forEach((label, i) => {
    if (label !== undefined) root.append(svg('text', { x: x(i), y: height - 6, 'text-anchor': 'middle', fill: muted }, label));
  });
  root.append(
    svg('text', { x: 12, y: MARGIN.top + plotHeight / 2, transform: `rotate(-90 12 ${MARGIN.top + plotHeight / 2})`, 'text-anchor': 'middle', fill: muted }, input.yLabel),
  );
  const faint = svg('g', { fill: 'none', stroke: muted, 'stroke-opacity': 0.22, 'stroke-width': 1 });
  for (const series of input.context) faint.append(svg('path', { d: path(series) }));
  root.append(faint, svg('path', { d: path(input.emphasis), fill: 'none', stroke: cssVar('--accent'), 'stroke-width': 2 }));
  const dots = svg('g', { fill: cssVar('--accent') });
  Array.from(input.emphasis, (v, i) => dots.append(svg('circle', { cx: x(i), cy: y(v), r: count > 40 ? 1.5 : 2.5 })));
  root.append(dots);
  return root;
}
