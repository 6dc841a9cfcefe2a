// A labelled heat map on one canvas: cells painted as an image (one pixel per cell, scaled up
// without smoothing; max-pooled when a zoomable map has more cells than device pixels), row labels
// on the left, column labels below, a highlighted row and the hovered cell outlined. The large
// attention map (zoom and pan by wheel, pinch, drag and keys) and the LayerNorm strips are both this.
import { CanvasWindow, cssVar, textWidth, tokenText } from './dom.ts';

export interface MatrixData {
  rows: number;
  cols: number;
  /** CSS pixels to fill: cells get what the labels leave, between 1 and `maxCell` wide. */
  width: number;
  maxCell: number;
  /** Fixed row height (CSS px, not necessarily whole); square cells when undefined. */
  cellHeight: number | undefined;
  rowLabels: string[];
  /** Only defined entries get a label. */
  colLabels: (string | undefined)[];
  /** Fills `image` (cols × rows pixels). */
  paint(image: ImageData): void;
  /**
   * Fills `image` (⌈cols/factor⌉ × ⌈rows/factor⌉ pixels) with blocks of factor × factor cells,
   * each pixel the block's largest value: a zoomable map with more than one cell per device
   * pixel is drawn from it, so a strong value never disappears at any zoom.
   */
  pool?(image: ImageData, factor: number): void;
  /**
   * A square view that zooms (wheel, pinch, + − 0 keys, buttons) and pans (drag, arrow keys),
   * its labels always those of the rows and columns in view, never overlapping.
   */
  zoomable?: boolean;
}

/** A label as drawn: its text and box in CSS pixels (for tests and the text alternative). */
export interface DrawnLabel {
  axis: 'row' | 'col';
  index: number;
  text: string;
  x: number;
  y: number;
  width: number;
  height: number;
}

/** Cell side (CSS px) at the largest zoom. */
const MAX_ZOOM_CELL = 48;

export interface Cell {
  row: number;
  col: number;
}

interface Handlers {
  hover?(cell: Cell, event: MouseEvent): void;
  leave?(): void;
  click?(cell: Cell, event: MouseEvent): void;
}

const FONT_PX = 11;
const MAX_LABEL_CHARS = 14;
const GAP = 6;

/** Each label drawn once (per font, colour and pixel ratio), then copied where it goes. */
const sprites = new Map<string, { bitmap: ImageBitmap; width: number }>();
/** Sprites kept before the cache starts over (a long prompt's labels at a few colours). */
const SPRITES_KEPT = 4096;
/** A sprite's height in CSS pixels: the font's, and a pixel of room above and below. */
const SPRITE_PX = FONT_PX + 4;

/**
 * Draws `text` in `color`, its right end at `x` and centred on `y` (CSS pixels in `context`'s
 * current transform, `ratio` device pixels each). `fillText` cost ~100 µs a label in Chromium's
 * software canvas here, and the head detail redraws ~34 labels on every keystroke, nearly all the
 * same as the keystroke before: now each is drawn once, and copied 1:1 at whole device pixels
 * (as sharp as text drawn in place).
 */
function drawLabel(context: CanvasRenderingContext2D, font: string, color: string, ratio: number, text: string, x: number, y: number): void {
  const key = `${font}\u0000${color}\u0000${ratio}\u0000${text}`;
  let sprite = sprites.get(key);
  if (!sprite) {
    const width = textWidth(font, text) + 2;
    const canvas = new OffscreenCanvas(Math.max(1, Math.ceil(width * ratio)), Math.ceil(SPRITE_PX * ratio));
    const drawn = canvas.getContext('2d')!;
    drawn.scale(ratio, ratio);
    drawn.font = font;
    drawn.fillStyle = color;
    drawn.textBaseline = 'middle';
    drawn.textAlign = 'right';
    drawn.fillText(text, width - 1, SPRITE_PX / 2);
    if (sprites.size >= SPRITES_KEPT) sprites.clear();
    sprite = { bitmap: canvas.transferToImageBitmap(), width };
    sprites.set(key, sprite);
  }
  const { bitmap } = sprite;
  const left = Math.round((x - sprite.width + 1) * ratio) / ratio;
  const top = Math.round((y - SPRITE_PX / 2) * ratio) / ratio;
  context.drawImage(bitmap, left, top, bitmap.width / ratio, bitmap.height / ratio);
}

function shorten(label: string): string {
  const text = tokenText(label);
  return text.length > MAX_LABEL_CHARS ? `${text.slice(0, MAX_LABEL_CHARS - 1)}…` : text;
}

/** The widest of `labels` in `font` (0 for none). */
function widestLabel(font: string, labels: (string | undefined)[]): number {
  return labels.reduce((most: number, label) => (label ? Math.max(most, textWidth(font, label)) : most), 0);
}

export class MatrixCanvas {
  readonly element = document.createElement('canvas');
  /** The canvas in a box the size of its drawing. */
  private readonly canvasWindow: CanvasWindow;
  private readonly image = document.createElement('canvas');
  private data: MatrixData | undefined;
  private left = 0;
  private cellWidth = 1;
  private cellHeight = 1;
  private highlightedRow: number | undefined;
  private hovered: Cell | undefined;
  /** Zoomable views: magnification over the fitted map, and the first row/column in view. */
  private zoom = 1;
  private originRow = 0;
  private originCol = 0;
  private mapSide = 0;
  private drag: { x: number; y: number; row: number; col: number; moved: boolean } | undefined;
  /** Pointers down on a zoomable map (two of them pinch), and the last pinch distance. */
  private readonly pointers = new Map<number, { x: number; y: number }>();
  private pinch: { distance: number } | undefined;
  /** Clicks before this time end a drag or a pinch: they pick nothing. */
  private quietUntil = 0;
  /** The max-pooled cell image of the current data, by pooling factor (made when first needed). */
  private pooled: { factor: number; canvas: HTMLCanvasElement } | undefined;
  /** The labels of the last render. */
  labels: DrawnLabel[] = [];
  /** Called after every zoomable render (zoom or pan changed). */
  onViewChange: (() => void) | undefined;

  /** `growsWithPrompt`: the drawing's size changes with the prompt (a strip of a row per token). */
  constructor(handlers: Handlers, { growsWithPrompt = false } = {}) {
    this.canvasWindow = new CanvasWindow(this.element, growsWithPrompt);
    this.element.className = 'matrix';
    this.element.addEventListener('wheel', (event) => {
      if (!this.data?.zoomable) return;
      event.preventDefault();
      const bounds = this.element.getBoundingClientRect();
      this.zoomBy(Math.exp(-event.deltaY * (event.ctrlKey ? 0.01 : 0.0025)), event.clientX - bounds.left - this.left, event.clientY - bounds.top);
    }, { passive: false });
    this.element.addEventListener('pointerdown', (event) => {
      if (!this.data?.zoomable) return;
      this.pointers.set(event.pointerId, { x: event.clientX, y: event.clientY });
      try {
        this.element.setPointerCapture(event.pointerId);
      } catch {
        // A pointer the browser does not track (a synthetic event) is followed without capture.
      }
      if (this.pointers.size === 2) {
        // A second finger: pinch to zoom, about the point between the two.
        this.drag = undefined;
        this.pinch = { distance: this.pointerSpread() };
      } else if (this.pointers.size === 1 && this.zoom !== 1) {
        this.drag = { x: event.clientX, y: event.clientY, row: this.originRow, col: this.originCol, moved: false };
      }
    });
    this.element.addEventListener('pointermove', (event) => {
      if (this.pointers.has(event.pointerId)) this.pointers.set(event.pointerId, { x: event.clientX, y: event.clientY });
      if (this.pinch && this.pointers.size === 2) {
        const distance = this.pointerSpread();
        if (this.pinch.distance > 0 && distance > 0) {
          const [a, b] = [...this.pointers.values()] as [{ x: number; y: number }, { x: number; y: number }];
          const bounds = this.element.getBoundingClientRect();
          this.zoomBy(distance / this.pinch.distance, (a.x + b.x) / 2 - bounds.left - this.left, (a.y + b.y) / 2 - bounds.top);
        }
        this.pinch.distance = distance;
        return;
      }
      const drag = this.drag;
      if (!drag) return;
      const dx = event.clientX - drag.x;
      const dy = event.clientY - drag.y;
      if (!drag.moved && Math.hypot(dx, dy) < 4) return;
      drag.moved = true;
      this.panTo(drag.row - dy / this.cellHeight, drag.col - dx / this.cellWidth);
    });
    const endDrag = (event: PointerEvent) => {
      this.pointers.delete(event.pointerId);
      // A drag or a pinch is not a click: a click right after it is ignored.
      if (this.drag?.moved || this.pinch) this.quietUntil = performance.now() + 300;
      if (this.pointers.size < 2) this.pinch = undefined;
      this.drag = undefined;
    };
    this.element.addEventListener('pointerup', endDrag);
    this.element.addEventListener('pointercancel', endDrag);
    this.element.addEventListener('keydown', (event) => {
      if (!this.data?.zoomable) return;
      const page = this.mapSide / this.cellWidth / 4;
      const actions: Record<string, () => void> = {
        '+': () => this.zoomBy(1.5),
        '=': () => this.zoomBy(1.5),
        '-': () => this.zoomBy(1 / 1.5),
        '0': () => this.resetView(),
        ArrowUp: () => this.panTo(this.originRow - page, this.originCol),
        ArrowDown: () => this.panTo(this.originRow + page, this.originCol),
        ArrowLeft: () => this.panTo(this.originRow, this.originCol - page),
        ArrowRight: () => this.panTo(this.originRow, this.originCol + page),
      };
      const action = actions[event.key];
      if (!action) return;
      event.preventDefault();
      action();
    });
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
      if (performance.now() < this.quietUntil) return;
      const cell = this.cellAt(event);
      if (cell) handlers.click?.(cell, event);
    });
  }

  /** What a view puts on the page: the canvas in its window. */
  get box(): HTMLElement {
    return this.canvasWindow.element;
  }

  /** Distance between the two pointers of a pinch (CSS px). */
  private pointerSpread(): number {
    const [a, b] = [...this.pointers.values()];
    return a && b ? Math.hypot(a.x - b.x, a.y - b.y) : 0;
  }

  /** The cell image max-pooled by `factor` (cached until the data changes). */
  private pooledImage(data: MatrixData, factor: number): HTMLCanvasElement {
    if (this.pooled?.factor === factor) return this.pooled.canvas;
    const canvas = document.createElement('canvas');
    canvas.width = Math.ceil(data.cols / factor);
    canvas.height = Math.ceil(data.rows / factor);
    const context = canvas.getContext('2d')!;
    const pixels = context.createImageData(canvas.width, canvas.height);
    data.pool!(pixels, factor);
    context.putImageData(pixels, 0, 0);
    this.pooled = { factor, canvas };
    return canvas;
  }

  /** New values: repaints the cell image and the whole canvas. */
  setData(data: MatrixData, highlightedRow: number | undefined): void {
    this.data = data;
    this.pooled = undefined;
    this.highlightedRow = highlightedRow;
    if (this.image.width !== data.cols || this.image.height !== data.rows) {
      this.image.width = data.cols;
      this.image.height = data.rows;
    }
    const context = this.image.getContext('2d')!;
    const pixels = context.createImageData(data.cols, data.rows);
    data.paint(pixels);
    context.putImageData(pixels, 0, 0);
    this.render();
  }

  /** Zooms by `factor` about the point (`x`, `y`) of the map (CSS px; default: its centre). */
  zoomBy(factor: number, x = this.mapSide / 2, y = this.mapSide / 2): void {
    const data = this.data;
    if (!data?.zoomable) return;
    const base = this.mapSide / data.cols;
    const maxZoom = Math.max(1, MAX_ZOOM_CELL / base);
    const zoom = Math.min(maxZoom, Math.max(1, this.zoom * factor));
    // The cell under the point stays under it.
    const row = this.originRow + y / this.cellHeight;
    const col = this.originCol + x / this.cellWidth;
    this.zoom = zoom;
    const cell = base * zoom;
    this.cellWidth = this.cellHeight = cell;
    this.panTo(row - y / cell, col - x / cell);
  }

  resetView(): void {
    this.zoom = 1;
    this.originRow = this.originCol = 0;
    this.render();
  }

  get zoomLevel(): number {
    return this.zoom;
  }

  /** Shows `row` (the picked query) if it is out of view. */
  reveal(row: number): void {
    if (!this.data?.zoomable || this.zoom === 1) return;
    const visible = this.mapSide / this.cellHeight;
    if (row < this.originRow || row >= this.originRow + visible - 1) this.panTo(row - visible / 2, this.originCol);
  }

  private panTo(row: number, col: number): void {
    const data = this.data;
    if (!data) return;
    const visible = this.mapSide / (this.mapSide / data.cols) / this.zoom;
    this.originRow = Math.max(0, Math.min(data.rows - visible, row));
    this.originCol = Math.max(0, Math.min(data.cols - visible, col));
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
    const x = event.clientX - bounds.left - this.left;
    const y = event.clientY - bounds.top;
    if (this.data.zoomable && (x < 0 || y < 0 || x >= this.mapSide || y >= this.mapSide)) return undefined;
    const col = Math.floor(x / this.cellWidth + (this.data.zoomable ? this.originCol : 0));
    const row = Math.floor(y / this.cellHeight + (this.data.zoomable ? this.originRow : 0));
    return row >= 0 && row < this.data.rows && col >= 0 && col < this.data.cols ? { row, col } : undefined;
  }

  private render(): void {
    const data = this.data;
    if (!data) return;
    if (data.zoomable) return this.renderZoomable(data);
    const context = this.element.getContext('2d')!;
    const font = `${FONT_PX}px ${cssVar('--font-mono')}`;
    const rowLabels = data.rowLabels.map(shorten);
    const colLabels = data.colLabels.map((label) => (label === undefined ? undefined : shorten(label)));
    this.left = Math.ceil(widestLabel(font, rowLabels)) + GAP;
    const cellWidth = Math.max(1, Math.min(data.maxCell, Math.floor((data.width - this.left - 2) / data.cols)));
    const cellHeight = data.cellHeight ?? cellWidth;
    [this.cellWidth, this.cellHeight] = [cellWidth, cellHeight];
    const mapWidth = data.cols * cellWidth;
    const mapHeight = Math.round(data.rows * cellHeight);
    /** Row `row`'s top edge, on a whole CSS pixel (rows may be fractional: some a pixel taller). */
    const rowTop = (row: number) => Math.round(row * cellHeight);
    const width = this.left + mapWidth + 2;
    const height = mapHeight + Math.ceil(widestLabel(font, colLabels)) + GAP + 2;

    const ratio = devicePixelRatio || 1;
    this.canvasWindow.fit(context, width, height, ratio);
    context.setTransform(ratio, 0, 0, ratio, 0, 0);
    context.imageSmoothingEnabled = false;
    context.drawImage(this.image, this.left, 0, mapWidth, mapHeight);

    const muted = cssVar('--text-muted');
    const strong = cssVar('--text');
    const accent = cssVar('--accent');
    const highlighted = this.highlightedRow !== undefined && this.highlightedRow < data.rows ? this.highlightedRow : undefined;
    // Labels that fit: every `stride`-th, the highlighted row's always, and none crowding it.
    const rowStride = Math.ceil((FONT_PX + 1) / cellHeight);
    const colStride = Math.ceil((FONT_PX + 1) / cellWidth);
    rowLabels.forEach((label, row) => {
      const crowds = highlighted !== undefined && row !== highlighted && Math.abs(row - highlighted) < rowStride;
      if (crowds || (row % rowStride !== 0 && row !== highlighted)) return;
      drawLabel(context, font, row === highlighted ? accent : row === this.hovered?.row ? strong : muted, ratio, label, this.left - GAP, (row + 0.5) * cellHeight);
    });
    context.save();
    context.rotate(-Math.PI / 2);
    let lastLabelled = -Infinity;
    colLabels.forEach((label, col) => {
      if (label === undefined || col - lastLabelled < colStride) return;
      lastLabelled = col;
      drawLabel(context, font, col === this.hovered?.col ? strong : muted, ratio, label, -(mapHeight + GAP), this.left + (col + 0.5) * cellWidth);
    });
    context.restore();

    context.lineWidth = 1.5;
    if (highlighted !== undefined) {
      context.strokeStyle = accent;
      context.strokeRect(this.left + 0.75, rowTop(highlighted) + 0.75, mapWidth - 1.5, rowTop(highlighted + 1) - rowTop(highlighted) - 1.5);
    }
    if (this.hovered) {
      context.strokeStyle = strong;
      const { row, col } = this.hovered;
      context.strokeRect(this.left + col * cellWidth + 0.75, rowTop(row) + 0.75, cellWidth - 1.5, rowTop(row + 1) - rowTop(row) - 1.5);
    }
  }

  /** The square zoomable view: the cells in view, and labels for as many of them as fit. */
  private renderZoomable(data: MatrixData): void {
    const context = this.element.getContext('2d')!;
    const font = `${FONT_PX}px ${cssVar('--font-mono')}`;
    const rowLabels = data.rowLabels.map(shorten);
    const colLabels = data.colLabels.map((label) => (label === undefined ? undefined : shorten(label)));
    this.left = Math.ceil(widestLabel(font, rowLabels)) + GAP;
    const bottom = Math.ceil(widestLabel(font, colLabels)) + GAP + 2;
    const side = Math.max(40, Math.floor(data.width - this.left - 2));
    this.mapSide = side;
    const cell = (side / data.cols) * this.zoom;
    this.cellWidth = this.cellHeight = cell;
    const visible = side / cell;
    this.originRow = Math.max(0, Math.min(data.rows - visible, this.originRow));
    this.originCol = Math.max(0, Math.min(data.cols - visible, this.originCol));
    const width = this.left + side + 2;
    const height = side + bottom;

    const ratio = devicePixelRatio || 1;
    this.canvasWindow.fit(context, width, height, ratio);
    context.setTransform(ratio, 0, 0, ratio, 0, 0);
    context.save();
    context.beginPath();
    context.rect(this.left, 0, side, side);
    context.clip();
    // Cells smaller than a device pixel are max-pooled (each pixel its block's largest value, so a
    // strong weight never disappears; averaged when the data cannot pool); larger ones are crisp squares.
    const factor = cell * ratio < 1 && data.pool ? Math.ceil(1 / (cell * ratio)) : 1;
    context.imageSmoothingEnabled = factor === 1 && cell * ratio < 1;
    if (factor === 1) {
      context.drawImage(this.image, this.left - this.originCol * cell, -this.originRow * cell, data.cols * cell, data.rows * cell);
    } else {
      const pooled = this.pooledImage(data, factor);
      const block = factor * cell;
      context.drawImage(pooled, this.left - this.originCol * cell, -this.originRow * cell, pooled.width * block, pooled.height * block);
    }
    // One finger scrolls the page over a fitted map and pans a zoomed one.
    this.element.style.touchAction = this.zoom === 1 ? 'pan-x pan-y' : 'none';
    const accent = cssVar('--accent');
    const strong = cssVar('--text');
    context.lineWidth = 1.5;
    const highlighted = this.highlightedRow !== undefined && this.highlightedRow < data.rows ? this.highlightedRow : undefined;
    if (highlighted !== undefined) {
      context.strokeStyle = accent;
      context.strokeRect(this.left + 0.75, (highlighted - this.originRow) * cell + 0.75, side - 1.5, Math.max(1, cell - 1.5));
    }
    if (this.hovered) {
      context.strokeStyle = strong;
      const { row, col } = this.hovered;
      context.strokeRect(this.left + (col - this.originCol) * cell + 0.75, (row - this.originRow) * cell + 0.75, Math.max(1, cell - 1.5), Math.max(1, cell - 1.5));
    }
    context.restore();

    // Labels: every `stride`-th row/column in view (the picked row's always, none crowding it), so
    // neighbours are at least a line apart and never overlap.
    const muted = cssVar('--text-muted');
    const labels: DrawnLabel[] = [];
    const stride = Math.max(1, Math.ceil((FONT_PX + 2) / cell));
    const first = Math.floor(this.originRow);
    const last = Math.min(data.rows - 1, Math.ceil(this.originRow + visible) - 1);
    for (let row = first; row <= last; row++) {
      const crowds = highlighted !== undefined && row !== highlighted && Math.abs(row - highlighted) < stride;
      if (crowds || (row % stride !== 0 && row !== highlighted)) continue;
      const y = (row - this.originRow + 0.5) * cell;
      if (y < FONT_PX / 2 - 1 || y > side - FONT_PX / 2 + 1) continue;
      const text = rowLabels[row]!;
      const labelWidth = textWidth(font, text);
      drawLabel(context, font, row === highlighted ? accent : row === this.hovered?.row ? strong : muted, ratio, text, this.left - GAP, y);
      labels.push({ axis: 'row', index: row, text, x: this.left - GAP - labelWidth, y: y - FONT_PX / 2, width: labelWidth, height: FONT_PX });
    }
    context.save();
    context.rotate(-Math.PI / 2);
    const firstCol = Math.floor(this.originCol);
    const lastCol = Math.min(data.cols - 1, Math.ceil(this.originCol + visible) - 1);
    for (let col = firstCol; col <= lastCol; col++) {
      const text = colLabels[col];
      if (text === undefined || col % stride !== 0) continue;
      const x = this.left + (col - this.originCol + 0.5) * cell;
      if (x < this.left + FONT_PX / 2 - 1 || x > this.left + side - FONT_PX / 2 + 1) continue;
      const labelWidth = textWidth(font, text);
      drawLabel(context, font, col === this.hovered?.col ? strong : muted, ratio, text, -(side + GAP), x);
      labels.push({ axis: 'col', index: col, text, x: x - FONT_PX / 2, y: side + GAP, width: FONT_PX, height: labelWidth });
    }
    context.restore();
    this.labels = labels;
    // For tests and tools: what the canvas shows as text.
    Object.assign(this.element, {
      drawnLabels: labels,
      zoomLevel: this.zoom,
      // Where the cells are: the full-resolution cell image, and the first cell's corner and a
      // cell's side in CSS px (with the pooling factor in use).
      cellImage: this.image,
      cellGeometry: { left: this.left - this.originCol * cell, top: -this.originRow * cell, cell, factor, ratio },
    });
    this.onViewChange?.();
  }
}
