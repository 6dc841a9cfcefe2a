// One head up close, four ways: the attention map with token labels on both axes (zoom with the
// wheel, a pinch or + − 0, pan by dragging or with the arrow keys; hover: the weight), lines from
// queries to keys, the picked query's row as a labelled bar strip (readable at any length), and a
// table of every query's strongest keys. Follows the head picked in the grid and the query
// picked anywhere; every canvas has a text alternative.
import { headMap, lastKey, strongestKeys, weight, type Analysis } from '../analysis.ts';
import { paintAttention, paintPooled } from '../attention-paint.ts';
import { sequentialMap } from '../colormap.ts';
import { afterPaint, drawnWhenSeen, formatPercent, h, morphChildren, setAttribute, setHidden, setText, tokenText, trackWidth } from '../dom.ts';
import { MatrixCanvas } from '../matrix-canvas.ts';
import type { Live } from '../live.ts';
import { downloadCanvas, downloadCsv, exportButton, howTo } from '../panel-tools.ts';
import { touched, type DetailView, type HeadRef, type State, type Store } from '../store.ts';
import { hideTooltip, showTooltip } from '../tooltip.ts';
import { AttentionLines } from './attention-lines.ts';

const VIEWS: [DetailView, string, string][] = [
  ['map', 'Map', 'The head’s whole attention map'],
  ['lines', 'Lines', 'Lines from each query to the keys it reads'],
  ['row', 'Query row', 'The picked token’s weights over every key, as bars'],
  ['table', 'Table', 'Every query’s strongest keys, as a table'],
];

const DETAIL_HELP_CAUSAL =
  'Each row is a query: the token doing the looking. Each column is a key: a token it can read. Only the lower-left triangle exists (causal attention: no token sees the future). The colour of a cell is the weight the query gives that key; each row adds up to 1, so a weight is “the share of this token’s attention”.';
const DETAIL_HELP_ENCODER =
  'Each row is a query: the token doing the looking. Each column is a key: a token it reads. This model is an encoder (bidirectional attention): every token reads every other, those after it too, so the whole square is filled. The colour of a cell is the weight the query gives that key; each row adds up to 1, so a weight is “the share of this token’s attention”.';

/** Share of the weight, averaged over queries after the first, that goes to the first key: above
 * this the panel explains the attention sink. */
const SINK_SHARE = 0.4;

function sinkShare(pattern: Float32Array, t: number, head: number): number {
  if (t < 3) return 0;
  let sum = 0;
  for (let q = 1; q < t; q++) sum += weight(pattern, t, head, q, 0);
  return sum / (t - 1);
}

export function mountAttentionDetail(root: HTMLElement, store: Store, live: Live): void {
  const title = h('h2', { id: 'detail-title' });
  const step = (delta: number) => {
    const info = store.state.model?.engine.info;
    if (!info) return;
    const total = info.nLayer * info.nHead;
    const index = (store.state.head.layer * info.nHead + store.state.head.head + delta + total) % total;
    store.set({ head: { layer: Math.floor(index / info.nHead), head: index % info.nHead } });
  };
  const tab = ([value, label, description]: (typeof VIEWS)[number]) =>
    h('button', { type: 'button', class: 'tab', role: 'tab', 'data-mode': value, title: description, onclick: () => store.set({ detailView: value }) }, label);
  const tabs = h('div', { class: 'tabs', role: 'tablist', 'aria-label': 'Show the head as' }, ...VIEWS.map(tab));
  const body = h('div', { class: 'detail-body', 'data-testid': 'attention-detail', role: 'tabpanel', 'aria-labelledby': 'detail-title', tabindex: 0 });
  const zoomOut = h('button', { type: 'button', class: 'quiet', 'aria-label': 'Zoom out', title: 'Zoom out (−)', onclick: () => map.zoomBy(1 / 1.5) }, '−');
  const zoomIn = h('button', { type: 'button', class: 'quiet', 'aria-label': 'Zoom in', title: 'Zoom in (+); wheel or pinch on the map', onclick: () => map.zoomBy(1.5) }, '+');
  const zoomFit = h('button', { type: 'button', class: 'quiet', 'aria-label': 'Fit the whole map', title: 'Fit the whole map (0)', onclick: () => map.resetView() }, 'Fit');
  const zoomBar = h('div', { class: 'zoom', role: 'group', 'aria-label': 'Zoom' }, zoomOut, zoomIn, zoomFit);
  const sinkNote = h('p', { class: 'sink-note', 'data-testid': 'sink-note', hidden: true });
  const detailHelp = h('p', {}, DETAIL_HELP_CAUSAL);
  const help = howTo(
    'detail',
    detailHelp,
    'Zoom with the wheel, a pinch, the + − buttons or the + − 0 keys on the focused map; drag or use the arrow keys to pan. “Query row” lists one token’s weights over every key, which stays readable for long prompts.',
  );
  const png = exportButton('PNG', 'Download this head’s view as PNG', () => {
    const { head } = store.state;
    const canvas = body.querySelector('canvas');
    if (canvas) downloadCanvas(`gptlens-L${head.layer}H${head.head}.png`, canvas);
  });
  const csv = exportButton('CSV', 'Download this head’s weights as CSV (rows: queries, columns: keys)', () => exportCsv(store.state));
  const ablate = h('button', {
    type: 'button',
    class: 'quiet',
    'data-testid': 'ablate-head',
    'aria-pressed': 'false',
    title: 'Zero-ablate this head: its output is zeroed before the output projection, and every view shows the run without it (the next token shows before → after)',
    onclick: () => void live.toggleAblated(`${store.state.head.layer}.${store.state.head.head}`),
  }, 'Ablate');
  root.append(
    h(
      'header',
      { class: 'panel-head' },
      title,
      h('button', { type: 'button', class: 'quiet', 'aria-label': 'Previous head', onclick: () => step(-1) }, '‹'),
      h('button', { type: 'button', class: 'quiet', 'aria-label': 'Next head', onclick: () => step(1) }, '›'),
      ablate,
      h('span', { class: 'spacer' }),
      tabs,
      zoomBar,
      png,
      csv,
      help.toggle,
    ),
    help.note,
    sinkNote,
    body,
  );

  const pick = (query: number) => store.set({ query: store.state.query === query ? undefined : query });
  const map = new MatrixCanvas({
    hover: ({ row, col }, event) => {
      const { analysis, head } = store.state;
      if (!analysis) return;
      const t = analysis.tokens.length;
      const opened = headMap(analysis, head.layer, head.head);
      if (!opened) return;
      const value = col <= row || analysis.bidirectional ? weight(opened.pattern, t, opened.head, row, col).toFixed(4) : 'masked (future token)';
      showTooltip(event, [value, `query ${row} “${tokenText(analysis.labels[row]!)}” → key ${col} “${tokenText(analysis.labels[col]!)}”`]);
    },
    leave: hideTooltip,
    // Shift+click: find the heads that move this key to this query (the head finder).
    click: ({ row, col }, event) => (event.shiftKey && (col <= row || store.state.analysis?.bidirectional) ? store.set({ query: row, finderKey: col }) : pick(row)),
  });
  map.element.tabIndex = 0;
  map.element.setAttribute('role', 'img');
  map.element.dataset.testid = 'attention-map';
  const zoomLevel = h('span', { class: 'muted zoom-level', 'aria-live': 'polite' });
  zoomBar.append(zoomLevel);
  map.onViewChange = () => {
    zoomLevel.textContent = map.zoomLevel > 1.01 ? `${map.zoomLevel.toFixed(1)}×` : '';
  };
  const lines = new AttentionLines(pick);
  lines.element.setAttribute('role', 'img');

  const nameViews = (summary: string) => {
    map.element.setAttribute('aria-label', `Attention map of ${summary}. Keys: + and − zoom, arrows pan, 0 fits.`);
    lines.element.setAttribute('aria-label', `Lines of ${summary}`);
  };
  // The map's and the lines' full names read the whole map (its strongest weights): given after
  // the frame, which then shows the new map sooner (0.3 ms of script for a 106-token map). Until
  // then a name another map's would be is replaced by what costs nothing: the head and the length.
  const nameLater = afterPaint(() => {
    const state = store.state;
    if (state.analysis && headMap(state.analysis, state.head.layer, state.head.head)) nameViews(describeMap(state.analysis, state));
  });
  const nameSoon = (head: HeadRef, t: number) => {
    const heading = mapHeading(head, t);
    if (!map.element.getAttribute('aria-label')?.startsWith(`Attention map of ${heading}`)) nameViews(heading);
    nameLater();
  };

  const render = () => {
    const state = store.state;
    const { analysis, head, query, theme, attentionScale, detailView } = state;
    setText(detailHelp, state.model?.engine.info.attention === 'bidirectional' ? DETAIL_HELP_ENCODER : DETAIL_HELP_CAUSAL);
    setText(title, `Layer ${head.layer} · Head ${head.head}`);
    for (const button of tabs.children) setAttribute(button, 'aria-selected', String((button as HTMLElement).dataset.mode === detailView));
    setHidden(zoomBar, detailView !== 'map');
    if (!analysis || !headMap(analysis, head.layer, head.head)) {
      setHidden(sinkNote, true);
      morphChildren(body, [h('p', { class: 'empty-note' }, emptyNote(state))]);
      return;
    }
    const { pattern, head: slot } = headMap(analysis, head.layer, head.head)!;
    const t = analysis.tokens.length;
    const share = sinkShare(pattern, t, slot);
    setHidden(sinkNote, share < SINK_SHARE);
    setText(sinkNote, `This head gives ${formatPercent(share)} of its attention, on average, to the first token “${tokenText(analysis.labels[0]!)}”. That is the attention sink: a head with nothing useful to read parks its weight on the first position, whose content barely changes the output. The colour scale leaves it out unless you choose “linear” or “√ weight”.`);
    const width = bodyWidth();
    if (detailView === 'lines') {
      nameSoon(head, t);
      lines.draw({ labels: analysis.labels, pattern, head: slot, query, full: analysis.bidirectional }, width);
      if (body.firstChild !== lines.box) body.replaceChildren(lines.box);
      return;
    }
    if (detailView === 'row') {
      morphChildren(body, [queryRow(analysis, state)]);
      return;
    }
    if (detailView === 'table') {
      morphChildren(body, [strongestTable(analysis, state)]);
      return;
    }
    const colors = sequentialMap(theme);
    nameSoon(head, t);
    map.setData(
      {
        rows: t,
        cols: t,
        width,
        maxCell: 36,
        cellHeight: undefined,
        rowLabels: analysis.labels,
        colLabels: analysis.labels,
        paint: (image) => paintAttention(image, pattern, t, slot, colors, attentionScale, analysis.bidirectional),
        pool: (image, factor) => paintPooled(image, pattern, t, slot, factor, colors, attentionScale, analysis.bidirectional),
        zoomable: true,
      },
      query,
    );
    if (query !== undefined) map.reveal(query);
    if (body.firstChild !== map.box) body.replaceChildren(map.box);
  };

  const redraw = drawnWhenSeen(root, render);
  const bodyWidth = trackWidth(body, redraw);
  store.subscribe((state, changed) => {
    if (touched(changed, 'analysis', 'head', 'query', 'theme', 'attentionScale', 'model', 'detailView')) redraw();
    if (touched(changed, 'head', 'ablated')) ablate.setAttribute('aria-pressed', String(state.ablated.includes(`${state.head.layer}.${state.head.head}`)));
  });
}

/** What names a map before its weights are read: "layer 1, head 2, 12 tokens (rows: queries, columns: keys)". */
function mapHeading({ layer, head }: HeadRef, t: number): string {
  return `layer ${layer}, head ${head}, ${t} tokens (rows: queries, columns: keys)`;
}

/** `mapHeading`, then the picked query's strongest keys and the map's strongest weights. */
function describeMap(analysis: Analysis, { head, query }: Readonly<State>): string {
  const t = analysis.tokens.length;
  const { pattern, head: slot } = headMap(analysis, head.layer, head.head)!;
  const label = (i: number) => `${i} “${tokenText(analysis.labels[i]!)}”`;
  // The five largest, in one pass (a 512-token map has 130 000 weights).
  const strongest: { q: number; k: number; w: number }[] = [];
  for (let q = 1; q < t; q++) {
    for (let k = 1; k <= lastKey(t, q, analysis.bidirectional); k++) {
      const w = weight(pattern, t, slot, q, k);
      if (strongest.length === 5 && w <= strongest[4]!.w) continue;
      strongest.push({ q, k, w });
      strongest.sort((a, b) => b.w - a.w);
      if (strongest.length > 5) strongest.pop();
    }
  }
  const q = query ?? t - 1;
  const row = strongestKeys(pattern, t, slot, q, 3, analysis.bidirectional).map(({ key, weight: w }) => `${label(key)} ${formatPercent(w)}`);
  return (
    `${mapHeading(head, t)}. ` +
    `Query ${label(q)} reads most ${row.join(', ')}. ` +
    (strongest.length ? `Strongest weights off the first token: ${strongest.map(({ q: a, k, w }) => `${label(a)} → ${label(k)} ${formatPercent(w)}`).join('; ')}.` : '')
  );
}

/** The picked (else last) query's weight on every key, as a table of labelled bars. */
function queryRow(analysis: Analysis, { head, query }: Readonly<State>): HTMLElement {
  const t = analysis.tokens.length;
  const q = query ?? t - 1;
  const { pattern, head: slot } = headMap(analysis, head.layer, head.head)!;
  const weights = Array.from({ length: lastKey(t, q, analysis.bidirectional) + 1 }, (_, k) => weight(pattern, t, slot, q, k));
  const top = weights.reduce((a, b) => Math.max(a, b), 0);
  const ranked = new Set(strongestKeys(pattern, t, slot, q, 3, analysis.bidirectional).map(({ key }) => key));
  return h(
    'table',
    { class: 'query-row-table', 'data-testid': 'query-row' },
    h('caption', {}, `Query ${q} “${tokenText(analysis.labels[q]!)}”: its weight on each key${query === undefined ? ' (the last token; pick another on the chips)' : ''}. Bars are scaled to the largest weight.`),
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'key'), h('th', { scope: 'col' }, 'token'), h('th', { scope: 'col' }, 'weight'), h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, 'bar')))),
    h(
      'tbody',
      {},
      ...weights.map((w, k) =>
        h(
          'tr',
          { class: ranked.has(k) ? 'strong' : undefined },
          h('td', { class: 'num' }, String(k)),
          h('td', { class: 'token' }, tokenText(analysis.labels[k]!)),
          h('td', { class: 'num' }, w.toFixed(4)),
          h('td', { class: 'bar-cell', 'aria-hidden': 'true' }, h('span', { class: 'bar', style: `width: ${((w / top) * 100).toFixed(1)}%` })),
        ),
      ),
    ),
  );
}

/** For every query: its three strongest keys and their weights. */
function strongestTable(analysis: Analysis, { head, query }: Readonly<State>): HTMLElement {
  const t = analysis.tokens.length;
  const { pattern, head: slot } = headMap(analysis, head.layer, head.head)!;
  const cell = (entries: { key: number; weight: number }[], i: number) => {
    const entry = entries[i];
    return h('td', {}, entry ? `${entry.key} “${tokenText(analysis.labels[entry.key]!)}” ${formatPercent(entry.weight)}` : '');
  };
  return h(
    'table',
    { class: 'strongest-table', 'data-testid': 'head-table' },
    h('caption', {}, `Layer ${head.layer}, head ${head.head}: each query’s three strongest keys`),
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'query'), h('th', { scope: 'col' }, '1st key'), h('th', { scope: 'col' }, '2nd'), h('th', { scope: 'col' }, '3rd'))),
    h(
      'tbody',
      {},
      ...analysis.labels.map((label, q) => {
        const entries = strongestKeys(pattern, t, slot, q, 3, analysis.bidirectional);
        return h('tr', { class: q === query ? 'picked' : undefined }, h('th', { scope: 'row' }, `${q} “${tokenText(label)}”`), cell(entries, 0), cell(entries, 1), cell(entries, 2));
      }),
    ),
  );
}

/** Why the panel has no map to show. */
function emptyNote({ analysis, model }: Readonly<State>): string {
  if (!analysis) return 'Type a prompt to see this head.';
  // A long prompt: only the opened head comes whole, remade from the queries the CPU keeps.
  return model?.engine.keepsQueries ? 'Reading this head…' : 'On WebGPU a prompt this long shows its heads pooled only (the grid); choose the CPU backend to open one whole.';
}

function exportCsv({ analysis, head }: Readonly<State>): void {
  if (!analysis || !headMap(analysis, head.layer, head.head)) return;
  const t = analysis.tokens.length;
  const { pattern, head: slot } = headMap(analysis, head.layer, head.head)!;
  const rows: (string | number)[][] = [['query', 'token', ...analysis.labels.map((label, k) => `${k}:${label}`)]];
  for (let q = 0; q < t; q++) {
    rows.push([q, analysis.labels[q]!, ...Array.from({ length: t }, (_, k) => (k <= lastKey(t, q, analysis.bidirectional) ? weight(pattern, t, slot, q, k) : ''))]);
  }
  downloadCsv(`gptlens-L${head.layer}H${head.head}.csv`, rows);
}
