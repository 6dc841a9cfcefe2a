// Every head at once: a grid of small canvases, one per layer (row) × head (column), each the
// head's causal attention map at one pixel per token pair, scaled up by CSS without smoothing.
// Only canvases on screen are painted (an IntersectionObserver tracks them), so a 30 × 9 model
// redraws what is visible within the frame and paints the rest as they scroll into view. The
// picked query row is a CSS overlay: moving it repaints nothing.
import type { Analysis } from '../analysis.ts';
import { paintAttention } from '../attention-paint.ts';
import { sequentialMap } from '../colormap.ts';
import { h } from '../dom.ts';
import { touched, type Store } from '../store.ts';
import { colorbar } from './legend.ts';

interface HeadCell {
  layer: number;
  head: number;
  button: HTMLButtonElement;
  canvas: HTMLCanvasElement;
  visible: boolean;
  /** Shows an older analysis (or theme) than the current one. */
  stale: boolean;
}

export function mountAttentionGrid(root: HTMLElement, store: Store): void {
  const scaleToggle = h(
    'select',
    {
      'aria-label': 'Colour scale',
      onchange: () => store.set({ attentionScale: scaleToggle.value === 'sqrt' ? 'sqrt' : 'linear' }),
    },
    h('option', { value: 'linear' }, 'linear'),
    h('option', { value: 'sqrt' }, '√ weight'),
  );
  const legend = h('div', { class: 'legend' });
  const grid = h('div', { class: 'head-grid', 'data-testid': 'attention-grid' });
  const scroller = h('div', { class: 'head-grid-scroll' }, grid);
  root.append(
    h('header', { class: 'panel-head' }, h('h2', {}, 'Attention'), h('span', { class: 'spacer' }), legend, scaleToggle),
    scroller,
  );

  let cells: HeadCell[] = [];
  const cellOf = new Map<Element, HeadCell>();
  let shape = '';

  const paint = (cell: HeadCell, analysis: Analysis) => {
    const t = analysis.tokens.length;
    const { canvas } = cell;
    if (canvas.width !== t) {
      canvas.width = t;
      canvas.height = t;
    }
    const context = canvas.getContext('2d')!;
    const image = context.createImageData(t, t);
    const { theme, attentionScale } = store.state;
    paintAttention(image, analysis.attention[cell.layer]!, t, cell.head, sequentialMap(theme), attentionScale);
    context.putImageData(image, 0, 0);
    cell.stale = false;
  };

  const paintVisible = () => {
    const analysis = store.state.analysis;
    for (const cell of cells) {
      if (!analysis) cell.canvas.width = 1; // resizing clears: no prompt, no maps
      else if (cell.visible && cell.stale) paint(cell, analysis);
    }
  };

  const observer = new IntersectionObserver(
    (entries) => {
      for (const entry of entries) {
        const cell = cellOf.get(entry.target);
        if (cell) cell.visible = entry.isIntersecting;
      }
      paintVisible();
    },
    { root: scroller, rootMargin: '120px' },
  );

  const build = (nLayer: number, nHead: number) => {
    observer.disconnect();
    grid.style.setProperty('--heads', String(nHead));
    const headLabels = Array.from({ length: nHead }, (_, head) => h('span', { class: 'axis-label' }, `H${head}`));
    cells = [];
    cellOf.clear();
    const rows = Array.from({ length: nLayer }, (_, layer) => {
      const row = Array.from({ length: nHead }, (_, head) => {
        const canvas = h('canvas', { width: 1, height: 1 });
        const button = h(
          'button',
          {
            type: 'button',
            class: 'head',
            title: `Layer ${layer}, head ${head}`,
            'aria-label': `Layer ${layer} head ${head}`,
            onclick: () => store.set({ head: { layer, head } }),
          },
          canvas,
          h('span', { class: 'query-row' }),
        );
        const cell = { layer, head, button, canvas, visible: false, stale: true };
        cells.push(cell);
        cellOf.set(button, cell);
        return button;
      });
      return [h('span', { class: 'axis-label layer-label' }, `L${layer}`), ...row];
    });
    grid.replaceChildren(h('span', {}), ...headLabels, ...rows.flat());
    for (const cell of cells) observer.observe(cell.button);
  };

  store.subscribe((state, changed) => {
    if (touched(changed, 'model') && state.model) {
      const { nLayer, nHead } = state.model.engine.info;
      if (shape !== `${nLayer}x${nHead}`) {
        shape = `${nLayer}x${nHead}`;
        build(nLayer, nHead);
      }
    }
    if (touched(changed, 'theme', 'attentionScale')) {
      legend.replaceChildren(colorbar(sequentialMap(state.theme), '0', '1'));
      scaleToggle.value = state.attentionScale;
    }
    if (touched(changed, 'analysis', 'theme', 'attentionScale', 'model')) {
      for (const cell of cells) cell.stale = true;
      grid.classList.toggle('empty', !state.analysis);
      paintVisible();
    }
    if (touched(changed, 'analysis', 'query')) {
      const t = state.analysis?.tokens.length ?? 1;
      grid.classList.toggle('has-query', state.query !== undefined);
      grid.style.setProperty('--query', String(state.query ?? 0));
      grid.style.setProperty('--tokens', String(t));
    }
    if (touched(changed, 'head', 'model')) {
      for (const cell of cells) {
        cell.button.classList.toggle('selected', cell.layer === state.head.layer && cell.head === state.head.head);
      }
    }
  });
}
