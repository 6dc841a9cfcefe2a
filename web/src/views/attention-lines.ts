// The "lines" view of one head: tokens listed twice, queries on the left and keys on the right,
// a line from each query to each key it attends to with the weight as opacity. With a query
// picked (or hovered) only its lines show, and the keys it reads are shaded by weight.
import { weight } from '../analysis.ts';
import { CanvasWindow, cssVar, tokenText, useFont } from '../dom.ts';
import { showTooltip, hideTooltip } from '../tooltip.ts';

const ROW = 20;
/** Room above the first row for the column titles. */
const HEADER = 30;
const LABEL_WIDTH = 120;
const FONT = '12px';

export interface LinesInput {
  labels: string[];
  pattern: Float32Array;
  head: number;
  /** The picked query, if any. */
  query: number | undefined;
  /** An encoder's full map: each query reads keys after it too. */
  full: boolean;
}

export class AttentionLines {
  readonly element = document.createElement('canvas');
  /** A row per token: the canvas grows with the prompt. */
  private readonly canvasWindow = new CanvasWindow(this.element, true);
  private input: LinesInput | undefined;
  private width = 0;
  private hoveredQuery: number | undefined;

  constructor(private readonly pick: (query: number) => void) {
    this.element.className = 'lines';
    this.element.addEventListener('mousemove', (event) => this.hover(event));
    this.element.addEventListener('mouseleave', () => {
      this.hoveredQuery = undefined;
      hideTooltip();
      this.render();
    });
    this.element.addEventListener('click', (event) => {
      const { side, row } = this.locate(event);
      if (side === 'query' && row !== undefined) this.pick(row);
    });
  }

  /** What the view puts on the page: the canvas in its window. */
  get box(): HTMLElement {
    return this.canvasWindow.element;
  }

  draw(input: LinesInput, width: number): void {
    this.input = input;
    this.width = width;
    this.render();
  }

  private locate(event: MouseEvent): { side: 'query' | 'key' | 'between'; row: number | undefined } {
    const bounds = this.element.getBoundingClientRect();
    const x = event.clientX - bounds.left;
    const row = Math.floor((event.clientY - bounds.top - HEADER) / ROW);
    const t = this.input?.labels.length ?? 0;
    const valid = row >= 0 && row < t ? row : undefined;
    const side = x < LABEL_WIDTH ? 'query' : x > this.width - LABEL_WIDTH ? 'key' : 'between';
    return { side, row: valid };
  }

  private hover(event: MouseEvent): void {
    const input = this.input;
    if (!input) return;
    const { side, row } = this.locate(event);
    if (side === 'query' && row !== this.hoveredQuery) {
      this.hoveredQuery = row;
      this.render();
    }
    const focus = this.hoveredQuery ?? input.query;
    if (side === 'key' && row !== undefined && focus !== undefined && row <= focus) {
      const t = input.labels.length;
      const value = weight(input.pattern, t, input.head, focus, row);
      showTooltip(event, [value.toFixed(4), `query ${focus} “${tokenText(input.labels[focus]!)}” → key ${row} “${tokenText(input.labels[row]!)}”`]);
    } else {
      hideTooltip();
    }
  }

  private render(): void {
    const input = this.input;
    if (!input) return;
    const t = input.labels.length;
    const width = this.width;
    const height = HEADER + t * ROW + 4;
    const ratio = devicePixelRatio || 1;
    const context = this.element.getContext('2d')!;
    this.canvasWindow.fit(context, width, height, ratio);
    context.setTransform(ratio, 0, 0, ratio, 0, 0);
    useFont(context, `${FONT} ${cssVar('--font-mono')}`);
    context.textBaseline = 'middle';

    const accent = cssVar('--accent');
    const text = cssVar('--text');
    const muted = cssVar('--text-muted');
    const focus = this.hoveredQuery ?? input.query;
    const y = (row: number) => HEADER + (row + 0.5) * ROW;
    const left = LABEL_WIDTH - 8;
    const right = width - LABEL_WIDTH + 8;
    const weightAt = (q: number, k: number) => weight(input.pattern, t, input.head, q, k);

    // Lines first, labels over them.
    context.strokeStyle = accent;
    for (let q = 0; q < t; q++) {
      if (focus !== undefined && q !== focus) continue;
      for (let k = 0; k <= (input.full ? t - 1 : q); k++) {
        const w = weightAt(q, k);
        if (w < 0.01) continue;
        context.globalAlpha = focus === undefined ? w * 0.6 : Math.max(0.08, w);
        context.lineWidth = focus === undefined ? 1.5 : 1 + 3 * w;
        context.beginPath();
        context.moveTo(left, y(q));
        context.lineTo(right, y(k));
        context.stroke();
      }
    }
    context.globalAlpha = 1;

    for (let row = 0; row < t; row++) {
      const label = tokenText(input.labels[row]!);
      if (focus !== undefined && (input.full || row <= focus)) {
        context.globalAlpha = Math.min(1, weightAt(focus, row) * 1.2);
        context.fillStyle = accent;
        context.fillRect(right, y(row) - ROW / 2 + 2, LABEL_WIDTH - 10, ROW - 4);
        context.globalAlpha = 1;
      }
      context.textAlign = 'right';
      context.fillStyle = row === focus ? accent : focus === undefined ? text : muted;
      context.fillText(label, left - 4, y(row), LABEL_WIDTH - 16);
      context.textAlign = 'left';
      context.fillStyle = focus === undefined || input.full || row <= focus ? text : muted;
      context.fillText(label, right + 4, y(row), LABEL_WIDTH - 18);
    }
    context.fillStyle = muted;
    context.textAlign = 'right';
    context.fillText('query', left - 4, HEADER / 2);
    context.textAlign = 'left';
    context.fillText('key', right + 4, HEADER / 2);
  }
}
