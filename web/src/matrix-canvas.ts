// A labelled heat map on one canvas: cells painted as an image (one pixel per cell, scaled up
// without smoothing), row labels on the left, column labels below, a highlighted row and the
// hovered cell outlined. The large attention map and the LayerNorm strips are both this.
import { cssVar, tokenText } from './dom.ts';

export interface MatrixData {
  rows: number;
  cols: number;
  /** CSS pixels to fill: cells get what the labels leave, between 1 and `maxCell` wide. */
  width: number;
  maxCell: number;
  /** Fixed row height; square cells when undefined. */
  cellHeight: number | undefined;
  rowLabels: string[];
  /** Only defined entries get a label. */
  colLabels: (string | undefined)[];
  /** Fills `image` (cols × rows pixels). */
  paint(image: ImageData): void;
}

export interface Cell {
  row: number;
  col: number;
}

interface Handlers {
  hover?(cell: Cell, event: MouseEvent): void;
  leave?(): void;
  click?(cell: Cell): void;
}

const FONT_PX = 11;
const MAX_LABEL_CHARS = 14;
const GAP = 6;

function shorten(label: string): string {
  const text = tokenText(label);
  return text.length > MAX_LABEL_CHARS ? `${text.slice(0, MAX_LABEL_CHARS - 1)}…` : text;
}

export class MatrixCanvas {
  readonly element = document.createElement('canvas');
  private readonly image = document.createElement('canvas');
  private data: MatrixData | undefined;
  private left = 0;
  private cellWidth = 1;
  private cellHeight = 1;
  private highlightedRow: number | undefined;
  private hovered: Cell | undefined;

  constructor(handlers: Handlers) {
    this.element.className = 'matrix';
    this.element.addEventListener('mousemove', (event) => {
      const cell = this.cellAt(event);
      if (!cell) return this.leave(handlers);
      if (cell.row !== this.hovered?.row || cell.col !== this.hovered?.col) {
        this.hovered = cell;
        this.render();
      }
      handlers.hover?.(cell, event);
    });
    this.element.addEventListener('mouseleave', () => this.leave(handlers));
    this.element.addEventListener('click', (event) => {
      const cell = this.cellAt(event);
      if (cell) handlers.click?.(cell);
    });
  }

  /** New values: repaints the cell image and the whole canvas. */
  setData(data: MatrixData, highlightedRow: number | undefined): void {
    this.data = data;
    this.highlightedRow = highlightedRow;
    this.image.width = data.cols;
    this.image.height = data.rows;
    const context = this.image.getContext('2d')!;
    const pixels = context.createImageData(data.cols, data.rows);
    data.paint(pixels);
    context.putImageData(pixels, 0, 0);
    this.render();
  }

  highlightRow(row: number | undefined): void {
    this.highlightedRow = row;
    this.render();
  }

  private leave(handlers: Handlers): void {
    if (this.hovered) {
      this.hovered = undefined;
      this.render();
    }
    handlers.leave?.();
  }

  private cellAt(event: MouseEvent): Cell | undefined {
    if (!this.data) return undefined;
    const bounds = this.element.getBoundingClientRect();
    const col = Math.floor((event.clientX - bounds.left - this.left) / this.cellWidth);
    const row = Math.floor((event.clientY - bounds.top) / this.cellHeight);
    return row >= 0 && row < this.data.rows && col >= 0 && col < this.data.cols ? { row, col } : undefined;
  }

  private render(): void {
    const data = this.data;
    if (!data) return;
    const context = this.element.getContext('2d')!;
    const font = `${FONT_PX}px ${cssVar('--font-mono')}`;
    context.font = font;
    const rowLabels = data.rowLabels.map(shorten);
    const colLabels = data.colLabels.map((label) => (label === undefined ? undefined : shorten(label)));
    const widest = (labels: (string | undefined)[]) => Math.max(0, ...labels.map((label) => (label ? context.measureText(label).width : 0)));
    this.left = Math.ceil(widest(rowLabels)) + GAP;
    const cellWidth = Math.max(1, Math.min(data.maxCell, Math.floor((data.width - this.left - 2) / data.cols)));
    const cellHeight = data.cellHeight ?? cellWidth;
    [this.cellWidth, this.cellHeight] = [cellWidth, cellHeight];
    const mapWidth = data.cols * cellWidth;
    const mapHeight = data.rows * cellHeight;
    const width = this.left + mapWidth + 2;
    const height = mapHeight + Math.ceil(widest(colLabels)) + GAP + 2;

    const ratio = devicePixelRatio || 1;
    this.element.width = Math.round(width * ratio);
    this.element.height = Math.round(height * ratio);
    this.element.style.width = `${width}px`;
    this.element.style.height = `${height}px`;
    context.setTransform(ratio, 0, 0, ratio, 0, 0);
    context.font = font;
    context.imageSmoothingEnabled = false;
    context.drawImage(this.image, this.left, 0, mapWidth, mapHeight);

    const muted = cssVar('--text-muted');
    const strong = cssVar('--text');
    const accent = cssVar('--accent');
    const highlighted = this.highlightedRow !== undefined && this.highlightedRow < data.rows ? this.highlightedRow : undefined;
    // Labels that fit: every `stride`-th, the highlighted row's always, and none crowding it.
    const rowStride = Math.ceil((FONT_PX + 1) / cellHeight);
    const colStride = Math.ceil((FONT_PX + 1) / cellWidth);
    context.textBaseline = 'middle';
    context.textAlign = 'right';
    rowLabels.forEach((label, row) => {
      const crowds = highlighted !== undefined && row !== highlighted && Math.abs(row - highlighted) < rowStride;
      if (crowds || (row % rowStride !== 0 && row !== highlighted)) return;
      context.fillStyle = row === highlighted ? accent : row === this.hovered?.row ? strong : muted;
      context.fillText(label, this.left - GAP, (row + 0.5) * cellHeight);
    });
    context.save();
    context.rotate(-Math.PI / 2);
    let lastLabelled = -Infinity;
    colLabels.forEach((label, col) => {
      if (label === undefined || col - lastLabelled < colStride) return;
      lastLabelled = col;
      context.fillStyle = col === this.hovered?.col ? strong : muted;
      context.fillText(label, -(mapHeight + GAP), this.left + (col + 0.5) * cellWidth);
    });
    context.restore();

    context.lineWidth = 1.5;
    if (highlighted !== undefined) {
      context.strokeStyle = accent;
      context.strokeRect(this.left + 0.75, highlighted * cellHeight + 0.75, mapWidth - 1.5, cellHeight - 1.5);
    }
    if (this.hovered) {
      context.strokeStyle = strong;
      const { row, col } = this.hovered;
      context.strokeRect(this.left + col * cellWidth + 0.75, row * cellHeight + 0.75, cellWidth - 1.5, cellHeight - 1.5);
    }
  }
}
