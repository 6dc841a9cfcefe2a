// One head up close: the attention map with token labels on both axes and the weight under the
// pointer, or the same head as lines from queries to keys. Follows the head picked in the grid
// and the query picked anywhere.
import { weight } from '../analysis.ts';
import { paintAttention } from '../attention-paint.ts';
import { sequentialMap } from '../colormap.ts';
import { h, onWidthChange, tokenText } from '../dom.ts';
import { MatrixCanvas } from '../matrix-canvas.ts';
import { touched, type Store } from '../store.ts';
import { hideTooltip, showTooltip } from '../tooltip.ts';
import { AttentionLines } from './attention-lines.ts';

type Mode = 'map' | 'lines';
const MAX_CELL = 36;

export function mountAttentionDetail(root: HTMLElement, store: Store): void {
  let mode: Mode = 'map';
  const title = h('h2', {});
  const step = (delta: number) => {
    const info = store.state.model?.engine.info;
    if (!info) return;
    const total = info.nLayer * info.nHead;
    const index = (store.state.head.layer * info.nHead + store.state.head.head + delta + total) % total;
    store.set({ head: { layer: Math.floor(index / info.nHead), head: index % info.nHead } });
  };
  const tab = (value: Mode, label: string) =>
    h('button', { type: 'button', class: 'tab', 'data-mode': value, onclick: () => ((mode = value), render()) }, label);
  const tabs = h('div', { class: 'tabs', role: 'tablist' }, tab('map', 'Map'), tab('lines', 'Lines'));
  const body = h('div', { class: 'detail-body', 'data-testid': 'attention-detail' });
  root.append(
    h(
      'header',
      { class: 'panel-head' },
      title,
      h('button', { type: 'button', class: 'quiet', 'aria-label': 'Previous head', onclick: () => step(-1) }, '‹'),
      h('button', { type: 'button', class: 'quiet', 'aria-label': 'Next head', onclick: () => step(1) }, '›'),
      h('span', { class: 'spacer' }),
      tabs,
    ),
    body,
  );

  const pick = (query: number) => store.set({ query: store.state.query === query ? undefined : query });
  const map = new MatrixCanvas({
    hover: ({ row, col }, event) => {
      const { analysis, head } = store.state;
      if (!analysis) return;
      const t = analysis.tokens.length;
      const value = col <= row ? weight(analysis.attention[head.layer]!, t, head.head, row, col).toFixed(4) : 'masked (future token)';
      showTooltip(event, [value, `query ${row} “${tokenText(analysis.labels[row]!)}” → key ${col} “${tokenText(analysis.labels[col]!)}”`]);
    },
    leave: hideTooltip,
    click: ({ row }) => pick(row),
  });
  const lines = new AttentionLines(pick);

  const render = () => {
    const { analysis, head, query, theme, attentionScale } = store.state;
    title.textContent = `Layer ${head.layer} · Head ${head.head}`;
    for (const button of tabs.children) button.setAttribute('aria-selected', String((button as HTMLElement).dataset.mode === mode));
    if (!analysis || !analysis.attention[head.layer]) {
      body.replaceChildren(h('p', { class: 'empty-note' }, 'Type a prompt to see this head.'));
      return;
    }
    const pattern = analysis.attention[head.layer]!;
    const t = analysis.tokens.length;
    const width = body.clientWidth;
    if (mode === 'lines') {
      lines.draw({ labels: analysis.labels, pattern, head: head.head, query }, width);
      if (body.firstChild !== lines.element) body.replaceChildren(lines.element);
      return;
    }
    const colors = sequentialMap(theme);
    map.setData(
      {
        rows: t,
        cols: t,
        width,
        maxCell: MAX_CELL,
        cellHeight: undefined,
        rowLabels: analysis.labels,
        colLabels: analysis.labels,
        paint: (image) => paintAttention(image, pattern, t, head.head, colors, attentionScale),
      },
      query,
    );
    if (body.firstChild !== map.element) body.replaceChildren(map.element);
  };

  onWidthChange(body, render);
  store.subscribe((_, changed) => {
    if (touched(changed, 'analysis', 'head', 'query', 'theme', 'attentionScale', 'model')) render();
  });
}
