// A few DOM helpers so the views read as markup, plus the number and token formats the page shares.

/** Attribute values; a function under an `on…` name is an event listener. */
type Attributes = Record<string, string | number | boolean | undefined | ((event: never) => void)>;
type Child = Node | string | null | undefined | false;

/** The options `setOptions` last gave each select. */
const optionsGiven = new WeakMap<HTMLSelectElement, readonly (readonly [string, string])[]>();

/**
 * Makes `select`'s options `[value, text]…`, changing only the ones that differ: a list of the
 * prompt's tokens rebuilt on every keystroke was ~60 elements made and dropped per redraw. Each is
 * compared with what this function gave it last, not read back: reading an option's text makes
 * the browser collapse its whitespace, for each of a long prompt's tokens on every keystroke.
 */
export function setOptions(select: HTMLSelectElement, options: readonly (readonly [string, string])[]): void {
  const existing = select.options;
  const last = optionsGiven.get(select);
  // Trusted while the select has as many options as it was given (no one else adds or removes them).
  const given = last?.length === existing.length ? last : [];
  options.forEach(([value, text], i) => {
    if (given[i]?.[0] === value && given[i]?.[1] === text) return;
    const option = existing[i] ?? select.appendChild(document.createElement('option'));
    if (option.value !== value) option.value = value;
    if (option.text !== text) option.text = text;
  });
  while (existing.length > options.length) existing[existing.length - 1]!.remove();
  optionsGiven.set(select, options);
}

/** Elements made by `h` with listeners of their own: `morphChildren` replaces them, never patches. */
const listening = new WeakSet<Element>();

/** Sets `element`'s text unless it already reads so (setting it anew replaces the text node). */
export function setText(element: Element, text: string): void {
  if (element.textContent !== text) element.textContent = text;
}

/** Sets a text node's data unless it already reads so. */
export function setData(text: Text, data: string): void {
  if (text.data !== data) text.data = data;
}

/** Shows or hides `element` unless it already is so. */
export function setHidden(element: HTMLElement, hidden: boolean): void {
  if (element.hidden !== hidden) element.hidden = hidden;
}

/** Sets an attribute unless it already has that value. */
export function setAttribute(element: Element, name: string, value: string): void {
  if (element.getAttribute(name) !== value) element.setAttribute(name, value);
}

/**
 * Makes `parent`'s children look like `fresh` (nodes made by `h`, not in the document), changing
 * only what differs: nodes of the same tag are kept and their attributes and texts updated, so a
 * panel redrawn with what it already shows writes nothing. Elements that carry listeners of their
 * own are replaced, so no listener outlives the data it was made for.
 */
export function morphChildren(parent: Element, fresh: readonly Node[]): void {
  let current = parent.firstChild;
  for (const next of fresh) {
    if (current === null) {
      parent.append(next);
      continue;
    }
    const following = current.nextSibling;
    if (!morph(current, next)) parent.replaceChild(next, current);
    current = following;
  }
  while (current !== null) {
    const following: ChildNode | null = current.nextSibling;
    current.remove();
    current = following;
  }
}

/** Updates `current` in place to look like `next`; false when it cannot (another kind of node). */
function morph(current: Node, next: Node): boolean {
  if (current.nodeName !== next.nodeName) return false;
  if (current instanceof Text) {
    setData(current, (next as Text).data);
    return true;
  }
  if (!(current instanceof Element) || !(next instanceof Element) || listening.has(current) || listening.has(next)) return false;
  for (const name of next.getAttributeNames()) setAttribute(current, name, next.getAttribute(name)!);
  for (const name of current.getAttributeNames()) if (!next.hasAttribute(name)) current.removeAttribute(name);
  morphChildren(current, Array.from(next.childNodes));
  return true;
}

/** `h('button', { class: 'x', onclick }, 'Label')`: attributes, `on*` listeners, then children. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attributes: Attributes = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name.startsWith('on') && typeof value === 'function') {
      element.addEventListener(name.slice(2), value as EventListener);
      listening.add(element);
    } else if (value === true) {
      element.setAttribute(name, '');
    } else if (value !== undefined && value !== false) {
      element.setAttribute(name, String(value));
    }
  }
  element.append(...children.filter((child): child is Node | string => child !== null && child !== undefined && child !== false));
  return element;
}

export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ['KB', 'MB', 'GB'];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

export function formatCount(count: number): string {
  if (count >= 1e9) return `${(count / 1e9).toFixed(2)} B`;
  if (count >= 1e6) return `${(count / 1e6).toFixed(1)} M`;
  if (count >= 1e3) return `${(count / 1e3).toFixed(1)} K`;
  return String(count);
}

export function formatPercent(prob: number): string {
  const percent = prob * 100;
  return `${percent >= 10 ? percent.toFixed(1) : percent >= 0.01 ? percent.toFixed(2) : percent.toExponential(0)}%`;
}

export function formatMs(ms: number): string {
  return ms >= 100 ? `${ms.toFixed(0)} ms` : `${ms.toFixed(1)} ms`;
}

/** A token as the page shows it: spaces as `·` so " the" and "the" differ at a glance. */
export function tokenText(label: string): string {
  return label.replaceAll(' ', '·');
}

/** Custom properties read so far, for the theme they were read under. */
const cssVars = new Map<string, string>();
let cssVarsTheme: string | undefined;

/**
 * A theme colour or font from the stylesheet's custom properties, for canvas drawing. Read once
 * per theme: reading computed style after a view changed the DOM makes the browser recompute
 * style there and then, in the middle of a redraw.
 */
export function cssVar(name: string): string {
  const theme = document.documentElement.dataset.theme;
  if (theme !== cssVarsTheme) {
    cssVars.clear();
    cssVarsTheme = theme;
  }
  let value = cssVars.get(name);
  if (value === undefined) {
    value = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
    cssVars.set(name, value);
  }
  return value;
}

/**
 * `element`'s width in CSS pixels as a ResizeObserver last reported it, so a redraw never reads
 * layout (which would make the browser lay out the page mid-redraw); `callback` runs when the
 * width changes (not the height, which a redraw may change), and once when first observed.
 */
export function trackWidth(element: Element, callback: () => void = () => {}): () => number {
  let width = element.clientWidth;
  let observed = false;
  new ResizeObserver(([entry]) => {
    const next = Math.round(entry!.contentRect.width);
    if (next !== width || !observed) {
      observed = true;
      width = next;
      // A resize observer's callbacks run in the frame's rendering steps.
      drawInFrame(callback);
    }
  }).observe(element);
  return () => width;
}

/** Each canvas context's font as the page asked for it and as the context reports it back. */
const fonts = new WeakMap<CanvasRenderingContext2D, { asked: string; set: string }>();

/**
 * Gives `context` the font `font` unless it already has it. Setting a canvas's font makes the
 * browser compute the document's style there and then, which mid-redraw (views have just changed
 * the DOM) is a full style recalculation: ~5 ms on every keystroke. A resized canvas forgets its
 * font (and direction), and then gets them again.
 */
export function useFont(context: CanvasRenderingContext2D, font: string): void {
  const had = fonts.get(context);
  if (had?.asked === font && context.font === had.set) return;
  context.font = font;
  // Text in the default direction (`inherit`) asks the canvas element's computed style on every
  // fillText: the same recalculation again. Labels are drawn left to right.
  context.direction = 'ltr';
  fonts.set(context, { asked: font, set: context.font });
}

/** A detached context for measuring text: it has no element, so no style to recompute. */
let measurer: OffscreenCanvasRenderingContext2D | undefined;
/** Text widths by font and text: the same token labels come back on every keystroke. */
const widths = new Map<string, number>();

/** The width of `text` in `font`, in CSS pixels (measured once per font and text). */
export function textWidth(font: string, text: string): number {
  const key = `${font}\u0000${text}`;
  let width = widths.get(key);
  if (width === undefined) {
    measurer ??= new OffscreenCanvas(1, 1).getContext('2d')!;
    if (measurer.font !== font) measurer.font = font;
    if (widths.size > 50_000) widths.clear();
    width = measurer.measureText(text).width;
    widths.set(key, width);
  }
  return width;
}

/** Device pixels of each windowed canvas that hold the drawing (the rest is room to grow). */
const drawnPixels = new WeakMap<HTMLCanvasElement, { width: number; height: number }>();

/** The part of `canvas` that holds its drawing, in device pixels: all of it unless it is in a `CanvasWindow`. */
export function drawnSize(canvas: HTMLCanvasElement): { width: number; height: number } {
  return drawnPixels.get(canvas) ?? { width: canvas.width, height: canvas.height };
}

/**
 * A canvas on the page through a box the size of its drawing. `fit` readies it for a drawing of a
 * new size. A window that `grows` (a view whose size follows the prompt) allocates the canvas
 * with room to spare, and keeps it until a drawing needs less than half: each new size is a new
 * allocation, which Chromium makes with a round trip to its GPU process in the frame that shows
 * the canvas (0.5–0.9 ms a canvas, headless on 2 cores), and the LayerNorm strips grew by a row
 * on most keystrokes. Otherwise the canvas is the drawing's size, as the attention map's must be:
 * its focus ring and its box (for tests and tools) are the drawing's. Either way the canvas and
 * the box share their top-left corner, which is all the views' pointer arithmetic uses. The box is
 * not made by `h`: views put it in place with `replaceChildren`, never `morphChildren`.
 */
export class CanvasWindow {
  readonly element = document.createElement('div');
  constructor(
    readonly canvas: HTMLCanvasElement,
    private readonly grows: boolean,
  ) {
    this.element.className = grows ? 'canvas-window grows' : 'canvas-window';
    this.element.append(canvas);
  }

  /** Sizes the drawing (CSS px, at `ratio` device pixels each) and leaves `context` clear and untransformed. */
  fit(context: CanvasRenderingContext2D, width: number, height: number, ratio: number): void {
    const { canvas } = this;
    const [pixelsWide, pixelsHigh] = [Math.round(width * ratio), Math.round(height * ratio)];
    const [backingWide, backingHigh] = this.grows ? room(canvas, pixelsWide, pixelsHigh, ratio) : [pixelsWide, pixelsHigh];
    if (canvas.width !== backingWide || canvas.height !== backingHigh) {
      // Each only when it changes: setting one to its value is a write the browser must process.
      if (canvas.width !== backingWide) canvas.width = backingWide;
      if (canvas.height !== backingHigh) canvas.height = backingHigh;
    } else {
      context.setTransform(1, 0, 0, 1, 0, 0);
      context.clearRect(0, 0, backingWide, backingHigh);
    }
    if (this.grows) {
      // The canvas is its whole backing store at `ratio`; the box, the drawing, hides the room.
      setCssSize(canvas, backingWide / ratio, backingHigh / ratio);
      setCssSize(this.element, pixelsWide / ratio, pixelsHigh / ratio);
    } else {
      setCssSize(canvas, width, height);
    }
    drawnPixels.set(canvas, { width: pixelsWide, height: pixelsHigh });
  }
}

/** The CSS size last given to each element by `setCssSize` (the style reads back its own rounding). */
const cssSizes = new WeakMap<HTMLElement, string>();

/** Gives `element` this CSS size, written only when it changes (a write is a style change to process). */
function setCssSize(element: HTMLElement, width: number, height: number): void {
  const size = `${width}px ${height}px`;
  if (cssSizes.get(element) === size) return;
  cssSizes.set(element, size);
  element.style.width = `${width}px`;
  element.style.height = `${height}px`;
}

/** Room a growing canvas keeps beyond its drawing, per side: half the drawing, at most this many CSS px. */
const MOST_ROOM = 256;
/** Chromium draws nothing on a canvas with a side over 32,767 device pixels, Safari over 16,777,216 in all. */
const MOST_SIDE = 32_767;
const MOST_AREA = 16_777_216;

/** A growing window's backing size for a drawing of `wide` × `high` device pixels. */
function room(canvas: HTMLCanvasElement, wide: number, high: number, ratio: number): [number, number] {
  const side = (needed: number, allocated: number) => {
    if (needed <= allocated && needed * 2 > allocated) return allocated;
    const spare = Math.min(Math.ceil(needed / 2), Math.round(MOST_ROOM * ratio));
    return Math.min(needed + spare, Math.max(needed, MOST_SIDE));
  };
  const [backingWide, backingHigh] = [side(wide, canvas.width), side(high, canvas.height)];
  // Room is not worth a canvas the browser will not draw.
  return backingWide * backingHigh > MOST_AREA && wide * high <= MOST_AREA ? [wide, high] : [backingWide, backingHigh];
}

/** Views whose redraw waits (off screen, typing goes on), for tests and tools: `window.gptlensViewsWaiting`. */
const waitingViews = new Set<() => void>();
declare global {
  interface Window {
    gptlensViewsWaiting: number;
  }
}
window.gptlensViewsWaiting = 0;

/** Calls `report(true/false)` as `element` comes within `margin` of the screen and leaves it. */
function whileWithin(element: Element, margin: string, report: (within: boolean) => void): void {
  // The latest entry: a fast scroll can cross the line twice before the observer reports.
  new IntersectionObserver((entries) => report(entries.at(-1)!.isIntersecting), { rootMargin: margin }).observe(element);
}

/** Set while the page draws in a frame's rendering steps (`drawInFrame`). */
let drawingInFrame = false;

/**
 * Runs `draw`, which is called in a frame's rendering steps (an animation-frame or resize-observer
 * callback, or their promise callbacks): views that wait for the next paint then wait for this
 * frame's, not the one after.
 */
export function drawInFrame(draw: () => void): void {
  drawingInFrame = true;
  try {
    draw();
  } finally {
    drawingInFrame = false;
  }
}

/**
 * Runs `task` after the browser's next paint, behind the tasks that frame leaves (the page's own
 * measure of its paint among them): at background priority where there is `scheduler.postTask`.
 * Not an idle callback: one that finds no idle time runs at its timeout, at any moment, and its
 * frame then often lands just before the next keystroke — the browser, having just ticked for it,
 * makes that keystroke's frame wait for its next tick (~16 ms later). Nor an animation-frame
 * request made during a frame: Chromium runs that next frame at once, ahead of the tasks the
 * first one left.
 */
function afterNextPaint(task: () => void): () => void {
  let cancelled = false;
  const run = () => cancelled || task();
  const behind = () => {
    if (typeof scheduler === 'object' && typeof scheduler.postTask === 'function') void scheduler.postTask(run, { priority: 'background' });
    // Timers run in the order they were set, and this one was set before the page's measure of
    // the paint (set after the views are drawn): a second hop puts the draw behind it.
    else setTimeout(() => setTimeout(run, 0), 0);
  };
  if (drawingInFrame) {
    behind();
    return () => (cancelled = true);
  }
  const frame = requestAnimationFrame(behind);
  return () => {
    cancelled = true;
    cancelAnimationFrame(frame);
  };
}

/**
 * A function that asks for `update` to run after the next paint (`afterNextPaint`); the asks made
 * before it runs share that one run, which reads the state then. For what the frame need not show
 * (an accessible name), so that a keystroke's frame does not wait for it.
 */
export function afterPaint(update: () => void): () => void {
  let asked = false;
  return () => {
    if (asked) return;
    asked = true;
    afterNextPaint(() => {
      asked = false;
      try {
        update();
      } catch (error) {
        reportError(error);
      }
    });
  };
}

/** How long redraws pause before the views far off screen are drawn: typing has stopped. */
const QUIET_MS = 300;
/** The draws of the views far off screen, waiting for redraws to pause: one timer for them all
 * (the next-token list's rows are a dozen such views, asking again on every keystroke). */
const waitingForQuiet = new Set<() => void>();
let quietTimer: ReturnType<typeof setTimeout> | undefined;

/** Runs `draw` once no view far off screen has asked for a draw for `QUIET_MS`; returns its cancel. */
function whenQuiet(draw: () => void): () => void {
  waitingForQuiet.add(draw);
  clearTimeout(quietTimer);
  quietTimer = setTimeout(() => {
    const draws = [...waitingForQuiet];
    waitingForQuiet.clear();
    for (const waiting of draws) {
      // One view's failure leaves the others' draws to run.
      try {
        waiting();
      } catch (error) {
        reportError(error);
      }
    }
  }, QUIET_MS);
  return () => waitingForQuiet.delete(draw);
}

/** Set while a view left for later is drawn: the parts of it that wait on their own (a panel's
 * rows) are drawn with it, not left for later again. */
let drawingLeftOver = false;

/** A `drawnWhenSeen` redraw; `now()` draws at once if a draw waits (before an export reads the view). */
export interface Redraw {
  (): void;
  now(): void;
}

/**
 * A redraw of `element`: at once while any of it is on screen; while it is only near (within
 * 200 px), right after the next frame, so that the keystroke's own frame draws only what is seen
 * and scrolling still finds it drawn; farther away, when it comes near or once no view far off
 * screen has asked for `QUIET_MS` (typing has stopped; they are drawn together). What no one sees
 * neither delays the views that are seen nor competes with the engine for the CPU while someone
 * types. Calls made while it waits coalesce into one draw; meanwhile `element` has a `data-stale`
 * attribute.
 */
export function drawnWhenSeen(element: Element, draw: () => void): Redraw {
  // Until the observers' first reports, which come with the next frame.
  let onScreen = true;
  let near = true;
  /** The draw this view waits for, if any: after the next frame (near), or after a pause (far). */
  let waiting: { soon: boolean; cancel: () => void } | undefined;
  const flush = () => {
    waiting?.cancel();
    waiting = undefined;
    element.removeAttribute('data-stale');
    waitingViews.delete(flush);
    window.gptlensViewsWaiting = waitingViews.size;
    draw();
  };
  const flushLeftOver = () => {
    const was = drawingLeftOver;
    drawingLeftOver = true;
    try {
      flush();
    } finally {
      drawingLeftOver = was;
    }
  };
  const later = () => {
    // A draw already asked for after the next frame draws the newest state: asking again would
    // put it off by a frame on every keystroke or generated token.
    if (near && waiting?.soon) return;
    waiting?.cancel();
    if (near) {
      waiting = { soon: true, cancel: afterNextPaint(flushLeftOver) };
    } else {
      waiting = { soon: false, cancel: whenQuiet(flushLeftOver) };
    }
    if (!element.hasAttribute('data-stale')) element.setAttribute('data-stale', '');
    waitingViews.add(flush);
    window.gptlensViewsWaiting = waitingViews.size;
  };
  whileWithin(element, '0px', (within) => {
    onScreen = within;
    if (within && waiting) flush();
  });
  whileWithin(element, '200px', (within) => {
    near = within;
    if (within && waiting) later();
  });
  const redraw = () => (onScreen || drawingLeftOver ? flush() : later());
  return Object.assign(redraw, { now: () => waiting && flush() });
}
