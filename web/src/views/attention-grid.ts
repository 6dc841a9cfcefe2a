// Every head at once: a grid of buttons, one per layer (row) × head (column), over one canvas that
// holds every head's attention map (a causal model's triangle, an encoder's full square) at one
// pixel per token pair, scaled up without smoothing. One canvas, not one per head: the browser
// composites each canvas as a layer of its own, and 270 of them cost SmolLM2 ~50 ms of
// main-thread work on every frame (layerize and commit), more than all the page's own script.
// Only heads on screen are painted (an IntersectionObserver tracks their buttons: in the viewport
// and not scrolled away inside the grid), so a 30 × 9 model redraws what is visible within the
// frame and paints the rest as they scroll into view.
// The picked query row is a CSS overlay: moving it repaints nothing. Long prompts are max-pooled
// to at most THUMBNAIL pixels a side (each pixel the largest weight of its block), so a strong
// weight never disappears. Arrow keys move through the grid, Enter opens a head; the layer and
// head labels stay in view while the grid scrolls.
import { thumbnails, type Analysis } from '../analysis.ts';
import { paintAttention, paintPooled, pooledSize } from '../attention-paint.ts';
import { sequentialMap } from '../colormap.ts';
import { cssVar, formatPercent, h, tokenText } from '../dom.ts';
import { downloadCanvas, exportButton, howTo, rovingFocus, setRovingStop } from '../panel-tools.ts';
import { touched, type State, type Store } from '../store.ts';
import type { Live } from '../live.ts';
import { DETECTOR_THRESHOLD, FINDER_SHOWN, finderRanking, mountHeadDetectors, strongestDetector } from './head-detectors.ts';
import { colorbar, scaleNote } from './legend.ts';

const GRID_HELP_CAUSAL =
  'One small map per attention head: rows are layers (L0 is the first), columns are heads. In each map a row is a query token and a column a key token it can read; only the lower-left triangle exists, because a token cannot look at tokens after it.';
const GRID_HELP_ENCODER =
  'One small map per attention head: rows are layers (L0 is the first), columns are heads. In each map a row is a query token and a column a key token it reads. This model is an encoder: every token reads every other, those after it too, so each map is a full square.';

/** How long typing must pause before every head's accessible name is brought up to date. */
const DESCRIBE_QUIET_MS = 300;
/** Largest thumbnail side in canvas pixels; longer prompts (and cells smaller than it) are max-pooled down to it. */
const THUMBNAIL = 96;

interface HeadCell {
  layer: number;
  head: number;
  button: HTMLButtonElement;
  /** The head's strongest detector, when it scores high enough. */
  badge: HTMLSpanElement;
  visible: boolean;
  /** Shows an older analysis (or theme) than the current one. */
  stale: boolean;
}

export function mountAttentionGrid(root: HTMLElement, store: Store, live: Live): void {
  const scaleToggle = h(
    'select',
    {
      'data-testid': 'attention-scale',
      onchange: () => store.set({ attentionScale: scaleToggle.value === 'sqrt' ? 'sqrt' : scaleToggle.value === 'linear' ? 'linear' : 'rest' }),
    },
    h('option', { value: 'rest' }, 'without first token'),
    h('option', { value: 'linear' }, 'linear 0–1'),
    h('option', { value: 'sqrt' }, '√ weight'),
  );
  scaleToggle.title = 'Colour scale. “without first token”: each head’s colours span its largest weight on any key but the first (the attention sink, which then saturates)';
  const legend = h('div', { class: 'legend' });
  const legendNote = h('p', { class: 'muted legend-note', 'data-testid': 'scale-note' });
  const grid = h('div', { class: 'head-grid', 'data-testid': 'attention-grid', role: 'grid', 'aria-label': 'Attention heads: arrow keys move, Enter opens a head' });
  rovingFocus(grid, 'button.head', () => store.state.model?.engine.info.nHead ?? 1);
  const scroller = h('div', { class: 'head-grid-scroll' }, grid);
  const gridHelp = h('p', {}, GRID_HELP_CAUSAL);
  const help = howTo(
    'grid',
    gridHelp,
    'Bright (dark, in the light theme) means much weight: each row’s weights add up to 1. Long prompts are shrunk by keeping the largest weight of each block. Open a head (click, or arrow keys and Enter) to see it up close.',
  );
  const png = exportButton('PNG', 'Download the attention grid as PNG', () => exportGrid());
  root.append(
    h('header', { class: 'panel-head' }, h('h2', {}, 'Attention'), h('span', { class: 'spacer' }), legend, h('label', { class: 'inline-label' }, h('span', { class: 'visually-hidden' }, 'Colour scale'), scaleToggle), png, help.toggle),
    help.note,
    legendNote,
  );
  mountHeadDetectors(root, store, live);
  root.append(scroller);

  let cells: HeadCell[] = [];
  const cellOf = new Map<Element, HeadCell>();
  /** The pending naming of every head (see describeSoon). */
  let describing: ReturnType<typeof setTimeout> | undefined;
  let shape = '';
  /** Every head's map, each drawn under its button (the canvas spans the whole grid). */
  const canvas = h('canvas', { class: 'grid-canvas', width: 1, height: 1, 'aria-hidden': 'true' });
  const context = canvas.getContext('2d')!;
  /** One thumbnail at its own resolution, before it is scaled into its cell. */
  let thumbnail = new ImageData(1, 1);
  /** The thumbnail as the canvas draws it, scaled into its cell. */
  const scratch = new OffscreenCanvas(1, 1);
  const scratchContext = scratch.getContext('2d')!;

  /**
   * Head `cell`'s thumbnail at one pixel per token pair (or pooled block), max-pooled to at most
   * `side` pixels (its cell's, or THUMBNAIL) so that no weight is lost to scaling it down;
   * undefined without a map.
   */
  const paintThumbnail = (cell: HeadCell, analysis: Analysis, side: number): ImageData | undefined => {
    // A long prompt's thumbnails come from the engine's pooled maps: `t` bins, not tokens.
    const source = thumbnails(analysis, cell.layer);
    if (!source) return undefined;
    const { pattern, t } = source;
    const { size, factor } = pooledSize(t, Math.max(1, Math.min(THUMBNAIL, side)));
    if (thumbnail.width !== size) thumbnail = new ImageData(size, size);
    const { theme, attentionScale } = store.state;
    const colors = sequentialMap(theme);
    const full = analysis.bidirectional;
    if (factor === 1) paintAttention(thumbnail, pattern, t, cell.head, colors, attentionScale, full);
    else paintPooled(thumbnail, pattern, t, cell.head, factor, colors, attentionScale, full);
    return thumbnail;
  };

  /** The grid canvas's pixels per CSS pixel, and each cell's place in it (read once per layout, not per paint). */
  let scale = 1;
  let places: { x: number; y: number; side: number }[] = [];
  const layout = () => {
    scale = devicePixelRatio;
    canvas.width = Math.max(1, Math.round(grid.scrollWidth * scale));
    canvas.height = Math.max(1, Math.round(grid.scrollHeight * scale));
    canvas.style.width = `${canvas.width / scale}px`;
    canvas.style.height = `${canvas.height / scale}px`;
    places = cells.map(({ button }) => ({ x: Math.round(button.offsetLeft * scale), y: Math.round(button.offsetTop * scale), side: Math.round(button.offsetWidth * scale) }));
    for (const cell of cells) cell.stale = true; // resizing cleared the canvas
  };

  /**
   * Draws head `cell`'s map into `target` at `x, y`, `side` pixels a side, scaled without smoothing
   * over the map background (which the masked half of a causal map shows). The canvas scales it:
   * scaled by script into one ImageData put back at once, a 106-token prompt's sixteen heads took
   * 0.5 ms of the keystroke's frame; drawn by the canvas, 0.17 ms (CPU profiles). Returns the
   * thumbnail's side in map pixels (undefined without a map).
   */
  const drawHead = (target: CanvasRenderingContext2D, cell: HeadCell, analysis: Analysis | undefined, x: number, y: number, side: number) => {
    target.fillStyle = cssVar('--map-bg');
    target.fillRect(x, y, side, side);
    const source = analysis && paintThumbnail(cell, analysis, side);
    if (!source) return undefined;
    if (scratch.width !== source.width) scratch.width = scratch.height = source.width;
    scratchContext.putImageData(source, 0, 0);
    target.imageSmoothingEnabled = false;
    target.drawImage(scratch, x, y, side, side);
    return source.width;
  };

  const paintVisible = () => {
    const analysis = store.state.analysis;
    cells.forEach((cell, i) => {
      const place = places[i];
      if (!place || !cell.visible || !cell.stale) return;
      // The side the grid shows, in map pixels (the PNG export's own sizes leave it alone).
      const pixels = drawHead(context, cell, analysis, place.x, place.y, place.side);
      if (pixels === undefined) delete cell.button.dataset.pixels;
      else if (cell.button.dataset.pixels !== String(pixels)) cell.button.dataset.pixels = String(pixels);
      cell.stale = false;
    });
  };
  new ResizeObserver(() => {
    layout();
    paintVisible();
  }).observe(grid);

  const observer = new IntersectionObserver(
    (entries) => {
      for (const entry of entries) {
        const cell = cellOf.get(entry.target);
        if (cell) cell.visible = entry.isIntersecting;
      }
      paintVisible();
    },
    // On screen: in the page's viewport (or near it) and not scrolled away inside the grid.
    { rootMargin: '200px' },
  );

  // A click or X on a head, heard once for every head. With two listeners and seven attributes
  // made for each of SmolLM2's 270 buttons, building the grid took 4–10 ms of a new model's
  // store update, before its first run was asked for; from a copied blank button, 2–2.5 ms.
  const cellAt = (event: Event) => {
    const button = (event.target as Element).closest('button.head');
    return button ? cellOf.get(button) : undefined;
  };
  grid.addEventListener('click', (event) => {
    const cell = cellAt(event);
    if (!cell) return;
    if (event.altKey) void live.toggleAblated(`${cell.layer}.${cell.head}`);
    else store.set({ head: { layer: cell.layer, head: cell.head } });
  });
  grid.addEventListener('keydown', (event) => {
    const cell = cellAt(event);
    if (!cell || (event.key !== 'x' && event.key !== 'X')) return;
    event.preventDefault();
    void live.toggleAblated(`${cell.layer}.${cell.head}`);
  });
  /** Every head's button before its names: copied whole, as the browser copies it faster than script makes it. */
  const blankCell = h(
    'button',
    { type: 'button', class: 'head', role: 'gridcell', tabindex: -1, 'aria-keyshortcuts': 'X' },
    h('span', { class: 'query-row' }),
    h('span', { class: 'badge', 'aria-hidden': 'true', hidden: true }),
  );

  const build = (nLayer: number, nHead: number) => {
    observer.disconnect();
    grid.style.setProperty('--heads', String(nHead));
    const headLabels = Array.from({ length: nHead }, (_, head) =>
      h('span', { class: 'axis-label head-label', role: 'columnheader', title: `Head ${head} of every layer` }, `H${head}`),
    );
    cells = [];
    cellOf.clear();
    const rows = Array.from({ length: nLayer }, (_, layer) => {
      const row = Array.from({ length: nHead }, (_, head) => {
        const button = blankCell.cloneNode(true) as HTMLButtonElement;
        button.title = `Layer ${layer}, head ${head} (Alt+click or X: ablate it, or bring it back)`;
        button.setAttribute('aria-label', `Layer ${layer} head ${head}`);
        const cell = { layer, head, button, badge: button.lastElementChild as HTMLSpanElement, visible: false, stale: true };
        cells.push(cell);
        cellOf.set(button, cell);
        return button;
      });
      return h(
        'div',
        { class: 'grid-row', role: 'row' },
        h('span', { class: 'axis-label layer-label', role: 'rowheader', title: `Layer ${layer}: ${layer === 0 ? 'the first' : `the ${layer + 1}th`} block` }, `L${layer}`),
        ...row,
      );
    });
    grid.replaceChildren(canvas, h('div', { class: 'grid-row grid-head', role: 'row' }, h('span', { class: 'axis-label corner' }), ...headLabels), ...rows);
    // The new cells' places are read in the next frame, where the browser lays the page out
    // anyway: read here, they forced that layout (SmolLM2’s 270 heads: ~7 ms) before the new
    // model's first run was asked for. No cell is painted before then: none is visible until
    // the observer below says so, and that comes after the frame.
    places = [];
    requestAnimationFrame(layout);
    for (const cell of cells) observer.observe(cell.button);
  };

  store.subscribe((state, changed) => {
    if (touched(changed, 'model') && state.model) {
      const { nLayer, nHead } = state.model.engine.info;
      const encoder = state.model.engine.info.attention === 'bidirectional';
      gridHelp.textContent = encoder ? GRID_HELP_ENCODER : GRID_HELP_CAUSAL;
      if (shape !== `${nLayer}x${nHead}`) {
        shape = `${nLayer}x${nHead}`;
        build(nLayer, nHead);
      }
    }
    if (touched(changed, 'theme', 'attentionScale')) {
      const rest = state.attentionScale === 'rest';
      legend.replaceChildren(colorbar(sequentialMap(state.theme), '0', rest ? 'max*' : '1'));
      legendNote.textContent = scaleNote(state.attentionScale);
      scaleToggle.value = state.attentionScale;
    }
    if (touched(changed, 'analysis', 'query', 'model', 'headScores', 'ablated')) describeSoon();
    if (touched(changed, 'headScores', 'highlight', 'model', 'finderKey', 'analysis', 'query')) {
      const { headScores, highlight, analysis, finderKey, query } = state;
      // The head finder, while a key is picked, takes the badges and highlights.
      const found = analysis && finderKey !== undefined ? finderRanking(analysis, query, finderKey).slice(0, FINDER_SHOWN) : undefined;
      const rank = new Map(found?.map(({ layer, head, weight }) => [`${layer}.${head}`, weight]));
      grid.classList.toggle('highlighting', found !== undefined || (highlight !== undefined && headScores !== undefined));
      for (const cell of cells) {
        const strongest = headScores && strongestDetector(headScores, cell.layer, cell.head);
        const finder = rank.get(`${cell.layer}.${cell.head}`);
        const badge = found ? (finder === undefined ? '' : formatPercent(finder)) : (strongest?.detector.short ?? '');
        if (cell.badge.textContent !== badge) {
          cell.badge.textContent = badge;
          cell.badge.hidden = badge === '';
        }
        const lit = found ? finder !== undefined : headScores !== undefined && highlight !== undefined && (headScores[highlight][cell.layer]?.[cell.head] ?? 0) >= DETECTOR_THRESHOLD;
        cell.button.classList.toggle('lit', lit);
      }
    }
    if (touched(changed, 'analysis', 'theme', 'attentionScale', 'model')) {
      for (const cell of cells) cell.stale = true;
      grid.classList.toggle('empty', !state.analysis);
      paintVisible();
    }
    if (touched(changed, 'analysis', 'query')) {
      grid.classList.toggle('has-query', state.query !== undefined);
      // The picked row's outline, placed by two custom properties of the grid: set only while a
      // query is picked and when they change, since setting one restyles every cell.
      if (state.query !== undefined) {
        for (const [name, value] of [['--query', state.query], ['--tokens', state.analysis?.tokens.length ?? 1]] as const) {
          if (grid.style.getPropertyValue(name) !== String(value)) grid.style.setProperty(name, String(value));
        }
      }
    }
    if (touched(changed, 'ablated', 'model')) {
      for (const cell of cells) cell.button.classList.toggle('ablated', state.ablated.includes(`${cell.layer}.${cell.head}`));
    }
    if (touched(changed, 'head', 'model')) {
      for (const cell of cells) {
        const selected = cell.layer === state.head.layer && cell.head === state.head.head;
        cell.button.classList.toggle('selected', selected);
        cell.button.setAttribute('aria-selected', String(selected));
      }
      const buttons = cells.map((cell) => cell.button);
      const focused = buttons.find((button) => button === document.activeElement);
      setRovingStop(buttons, focused ?? buttons.find((button) => button.classList.contains('selected')));
    }
  });

  /**
   * Each head's accessible name says where the query (picked, else last) looks most. Naming all
   * 270 of SmolLM2's heads on every keystroke was 540 attribute writes a redraw: the focused head
   * (the one a screen reader reads) is named at once and on focus, the rest once typing pauses.
   */
  function describeSoon(): void {
    const focused = cellOf.get(document.activeElement!);
    if (focused) describeCell(focused, store.state);
    clearTimeout(describing);
    describing = setTimeout(() => {
      for (const cell of cells) describeCell(cell, store.state);
    }, DESCRIBE_QUIET_MS);
  }
  grid.addEventListener('focusin', (event) => {
    const cell = cellAt(event);
    if (cell) describeCell(cell, store.state);
  });

  function describeCell(cell: HeadCell, { analysis, query, headScores, ablated }: Readonly<State>): void {
    const label = (text: string) => {
      if (cell.button.getAttribute('aria-label') !== text) cell.button.setAttribute('aria-label', text);
    };
    const strongest = headScores && strongestDetector(headScores, cell.layer, cell.head);
    const kind = strongest ? ` (${strongest.detector.label.toLowerCase()} head, ${strongest.score.toFixed(2)})` : '';
    const name = `Layer ${cell.layer} head ${cell.head}${kind}${ablated.includes(`${cell.layer}.${cell.head}`) ? ', ablated' : ''}`;
    const source = analysis && thumbnails(analysis, cell.layer);
    if (!analysis || !source) return label(name);
    if (analysis.pooled) {
      // A long prompt: the pooled map's strongest block for the query's block of positions.
      const { bin } = analysis.pooled;
      const { pattern, t } = source;
      const q = Math.floor((query ?? analysis.tokens.length - 1) / bin);
      let top = 0;
      for (let key = 1; key <= (analysis.bidirectional ? t - 1 : q); key++) if (pattern[(cell.head * t + q) * t + key]! > pattern[(cell.head * t + q) * t + top]!) top = key;
      const span = (block: number) => `tokens ${block * bin}–${Math.min((block + 1) * bin, analysis.tokens.length) - 1}`;
      return label(`${name}: ${span(q)} attend most to ${span(top)} (up to ${formatPercent(pattern[(cell.head * t + q) * t + top]!)})`);
    }
    const pattern = source.pattern;
    const t = analysis.tokens.length;
    const q = query ?? t - 1;
    let top: { key: number; weight: number } | undefined;
    const row = (cell.head * t + q) * t;
    const end = analysis.bidirectional ? t - 1 : q;
    for (let key = 0; key <= end; key++) if (!top || pattern[row + key]! > top.weight) top = { key, weight: pattern[row + key]! };
    label(top ? `${name}: “${tokenText(analysis.labels[q]!)}” attends most to “${tokenText(analysis.labels[top.key]!)}” (${formatPercent(top.weight)})` : name);
  }

  /** The whole grid, labels included, as one PNG (every head painted, on screen or not). */
  function exportGrid(): void {
    const { analysis, model } = store.state;
    if (!analysis || !model) return;
    const { nLayer, nHead } = model.engine.info;
    const side = 96;
    const gap = 6;
    const left = 36;
    const top = 20;
    const canvas = h('canvas', { width: left + nHead * (side + gap), height: top + nLayer * (side + gap) });
    const context = canvas.getContext('2d')!;
    context.fillStyle = cssVar('--panel');
    context.fillRect(0, 0, canvas.width, canvas.height);
    context.fillStyle = cssVar('--text-muted');
    context.font = `11px ${cssVar('--font-mono')}`;
    context.textBaseline = 'middle';
    for (let head = 0; head < nHead; head++) context.fillText(`H${head}`, left + head * (side + gap) + side / 2 - 8, top / 2);
    for (const cell of cells) {
      const x = left + cell.head * (side + gap);
      const y = top + cell.layer * (side + gap);
      if (cell.head === 0) context.fillText(`L${cell.layer}`, 4, y + side / 2);
      drawHead(context, cell, analysis, x, y, side);
      context.fillStyle = cssVar('--text-muted');
    }
    downloadCanvas('gptlens-attention-grid.png', canvas);
  }
}
