// The head detectors in the attention panel: where heads are scored (a repeated random sequence,
// the prompt, or not at all), one-click highlights of each kind of head in the grid (the strongest
// one opens), and a sortable table of every head's scores. And the head finder: every head ranked
// by the weight the picked query gives one key. The grid draws the badges and highlights.
import type { HeadScores } from 'gptlens';
import { lastKey, weight, type Analysis } from '../analysis.ts';
import { formatPercent, h, setOptions, tokenText } from '../dom.ts';
import { downloadCsv, exportButton } from '../panel-tools.ts';
import type { Live } from '../live.ts';
import { touched, type DetectorKind, type DetectorSource, type Store } from '../store.ts';

/** A head with at least this score gets its detector's badge and highlight. */
export const DETECTOR_THRESHOLD = 0.4;

export const DETECTORS: readonly { kind: DetectorKind; label: string; short: string; about: string }[] = [
  { kind: 'previousToken', label: 'Previous token', short: 'prev', about: 'mean weight each token gives the token just before it' },
  { kind: 'firstToken', label: 'First token', short: '1st', about: 'mean weight each token gives the first token (an attention sink)' },
  { kind: 'duplicateToken', label: 'Duplicate token', short: 'dup', about: 'mean weight a repeated token gives its earlier copies' },
  { kind: 'induction', label: 'Induction', short: 'ind', about: 'mean weight a repeated token gives the token that followed its earlier copy' },
];

type Detector = (typeof DETECTORS)[number];

/** The detector a head scores highest on, when that score reaches the threshold. */
export function strongestDetector(scores: HeadScores, layer: number, head: number): { detector: Detector; score: number } | undefined {
  let best: { detector: Detector; score: number } | undefined;
  for (const detector of DETECTORS) {
    const score = scores[detector.kind][layer]?.[head] ?? 0;
    if (score >= DETECTOR_THRESHOLD && (!best || score > best.score)) best = { detector, score };
  }
  return best;
}

/** How many heads the head finder highlights. */
export const FINDER_SHOWN = 5;

/** Every head by the weight query `q` (the picked one, else the last) gives key `key`, strongest first. */
export function finderRanking(analysis: Analysis, query: number | undefined, key: number): { layer: number; head: number; weight: number }[] {
  const t = analysis.tokens.length;
  const q = query ?? t - 1;
  if (key >= t || (key > q && !analysis.bidirectional)) return [];
  const heads = analysis.attention.flatMap((pattern, layer) =>
    Array.from({ length: analysis.nHead }, (_, head) => ({ layer, head, weight: weight(pattern, t, head, q, key) })),
  );
  return heads.sort((a, b) => b.weight - a.weight || a.layer - b.layer || a.head - b.head);
}

/** The head scoring highest on `kind`. */
function strongestHead(scores: HeadScores, kind: DetectorKind): { layer: number; head: number } {
  let best = { layer: 0, head: 0, score: -1 };
  scores[kind].forEach((row, layer) => row.forEach((score, head) => score > best.score && (best = { layer, head, score })));
  return best;
}

const SOURCES: readonly [DetectorSource, string][] = [
  ['off', 'off'],
  ['repeated', 'on a repeated random sequence'],
  ['prompt', 'on this prompt'],
];

export function mountHeadDetectors(root: HTMLElement, store: Store, live: Live): void {
  const source = h(
    'select',
    {
      'data-testid': 'detectors',
      onchange: () => {
        const detectors = source.value as DetectorSource;
        store.set({ detectors, headScores: undefined, highlight: detectors === 'off' ? undefined : store.state.highlight });
        void live.detectorsChanged();
      },
    },
    ...SOURCES.map(([value, label]) => h('option', { value }, label)),
  );
  source.title =
    'Score every head as a previous-token, first-token, duplicate-token or induction head. The repeated random sequence is 50 random tokens (seed 0) twice: in its second half every token has an earlier copy, which is what induction heads need.';
  /** A highlight asked for before the scores arrived: its strongest head opens when they do. */
  let openWhenScored: DetectorKind | undefined;
  const buttons = DETECTORS.map(({ kind, label, about }) =>
    h(
      'button',
      {
        type: 'button',
        class: 'quiet chip-button',
        'data-testid': `highlight-${kind}`,
        'aria-pressed': 'false',
        title: `Highlight the ${label.toLowerCase()} heads (score ≥ ${DETECTOR_THRESHOLD}: ${about}) and open the strongest`,
        onclick: () => {
          const highlight = store.state.highlight === kind ? undefined : kind;
          store.set({ highlight });
          if (!highlight) return;
          const { headScores } = store.state;
          if (headScores) store.set({ head: strongestHead(headScores, kind) });
          else openWhenScored = kind;
          if (store.state.detectors === 'off') {
            store.set({ detectors: 'repeated' });
            void live.detectorsChanged();
          }
        },
      },
      label,
    ),
  );
  const status = h('span', { class: 'muted', 'data-testid': 'detector-status', role: 'status' });
  const sortBy: { kind: DetectorKind | 'head' } = { kind: 'induction' };
  const body = h('tbody');
  const header = h(
    'tr',
    {},
    h('th', { scope: 'col' }, sortButton('head', 'Head')),
    ...DETECTORS.map(({ kind, short, label }) => h('th', { scope: 'col', title: label }, sortButton(kind, short))),
  );
  const table = h('table', { class: 'query-row-table head-scores', 'data-testid': 'head-scores-table' }, h('caption', { class: 'visually-hidden' }, 'Head detector scores'), h('thead', {}, header), body);
  const csv = exportButton('CSV', 'Download every head’s detector scores as CSV', () => {
    const { headScores } = store.state;
    if (!headScores) return;
    const rows = headScores.induction.flatMap((row, layer) => row.map((_, head) => [layer, head, ...DETECTORS.map(({ kind }) => headScores[kind][layer]![head]!)]));
    downloadCsv(`gptlens-head-scores-${store.state.detectors}.csv`, [['layer', 'head', ...DETECTORS.map(({ kind }) => kind)], ...rows]);
  });
  csv.dataset.testid = 'head-scores-csv';
  const details = h('details', { class: 'head-scores-details' }, h('summary', {}, 'Scores of every head '), csv, table);
  const finderKey = h('select', {
    class: 'finder-key',
    'data-testid': 'finder-key',
    onchange: () => store.set({ finderKey: finderKey.value === '' ? undefined : Number(finderKey.value) }),
  });
  finderKey.title = 'Rank every head by the weight the picked token (or the last) gives this key; Shift+click a cell of the map picks both';
  const finderQuery = h('span', { class: 'muted finder-query' });
  const ablatedList = h('span', { class: 'muted', 'data-testid': 'ablated-heads' });
  const clearAblation = h('button', {
    type: 'button',
    class: 'quiet',
    'data-testid': 'clear-ablation',
    onclick: () => {
      store.set({ ablated: [] });
      void live.ablationChanged();
    },
  }, 'Clear');
  const mlpLayer = h('select', { 'data-testid': 'ablate-mlp-layer', 'aria-label': 'Layer whose MLP to ablate' });
  const ablateMlp = h('button', {
    type: 'button',
    class: 'quiet',
    'data-testid': 'ablate-mlp',
    title: 'Zero this layer’s MLP output (or bring it back): every view then shows the run without it',
    onclick: () => void live.toggleAblated(`${mlpLayer.value}.mlp`),
  }, 'Ablate MLP');
  const ablateWith = h(
    'select',
    {
      'data-testid': 'ablate-with',
      'aria-label': 'Ablated units output',
      onchange: () => {
        store.set({ ablateWith: ablateWith.value === 'mean' ? 'mean' : 'zero' });
        void live.ablationChanged();
      },
    },
    h('option', { value: 'zero' }, 'zero'),
    h('option', { value: 'mean' }, 'their mean'),
  );
  ablateWith.title = 'Zero: the ablated heads and MLPs output nothing. Their mean: each outputs its average over the prompt’s positions (from the run without ablation), which keeps the residual stream’s usual size; every keystroke then recomputes the whole prompt.';
  const ablationBar = h(
    'div',
    { class: 'detector-bar', 'data-testid': 'ablation-bar' },
    h('span', {}, 'Ablated: '),
    ablatedList,
    h('label', { class: 'inline-label' }, ' replaced by ', ablateWith),
    clearAblation,
    h('span', { class: 'spacer' }),
    h('label', { class: 'inline-label' }, 'MLP of layer ', mlpLayer),
    ablateMlp,
  );
  const showAblated = (ablated: readonly string[]) => {
    clearAblation.hidden = ablated.length === 0;
    ablatedList.textContent = ablated.length === 0 ? 'nothing' : ablated.map((name) => (name.endsWith('.mlp') ? `L${name.split('.')[0]} MLP` : `L${name.replace('.', ' H')}`)).join(', ');
  };
  showAblated(store.state.ablated);
  const ranking = h('ol', { class: 'finder-ranking', 'data-testid': 'finder-ranking', 'aria-live': 'polite' });
  root.append(
    h('div', { class: 'detector-bar', 'data-testid': 'detector-bar' }, h('label', { class: 'inline-label' }, 'Head detectors ', source), ...buttons, status),
    details,
    h('div', { class: 'detector-bar' }, h('label', { class: 'inline-label finder-line' }, 'Head finder: ', finderQuery, ' reads ', finderKey), ranking),
    ablationBar,
  );

  function fillFinder(analysis: Analysis | undefined, query: number | undefined, key: number | undefined): void {
    const t = analysis?.tokens.length ?? 0;
    const q = query ?? t - 1;
    finderQuery.textContent = analysis ? `“${tokenText(analysis.labels[q]!)}” (${query === undefined ? 'the last token' : `token ${q}`})` : 'the picked token';
    // Cut short to one line (see .finder-query): the whole of it on hover.
    finderQuery.title = finderQuery.textContent;
    finderKey.disabled = analysis?.pooled !== undefined;
    if (analysis?.pooled) {
      // A long prompt's maps are pooled: no head's exact weight on one key is at hand.
      setOptions(finderKey, [['', '(a prompt this long keeps pooled maps only: shorten it to rank heads)']]);
      ranking.replaceChildren();
      return;
    }
    setOptions(finderKey, [
      ['', '(pick a key)'],
      ...Array.from({ length: analysis ? lastKey(t, q, analysis.bidirectional) + 1 : 0 }, (_, k) => [String(k), `${k} “${tokenText(analysis!.labels[k]!)}”`] as const),
    ]);
    finderKey.value = key !== undefined && analysis && key <= lastKey(t, q, analysis.bidirectional) ? String(key) : '';
    const ranked = analysis && key !== undefined ? finderRanking(analysis, query, key).slice(0, FINDER_SHOWN) : [];
    ranking.replaceChildren(
      ...ranked.map(({ layer, head, weight }) =>
        h('li', {}, h('button', { type: 'button', class: 'quiet', 'data-head': `${layer}.${head}`, onclick: () => store.set({ head: { layer, head } }) }, `L${layer} H${head} ${formatPercent(weight)}`)),
      ),
    );
  }

  function sortButton(kind: DetectorKind | 'head', text: string): HTMLButtonElement {
    return h('button', { type: 'button', class: 'sort', 'data-sort': kind, onclick: () => ((sortBy.kind = kind), fillTable()) }, text);
  }

  function fillTable(): void {
    const { headScores } = store.state;
    if (!headScores) {
      body.replaceChildren();
      return;
    }
    const rows = headScores.induction.flatMap((row, layer) => row.map((_, head) => ({ layer, head })));
    if (sortBy.kind !== 'head') {
      const kind = sortBy.kind;
      rows.sort((a, b) => headScores[kind][b.layer]![b.head]! - headScores[kind][a.layer]![a.head]!);
    }
    for (const th of header.querySelectorAll('th')) {
      const sorted = th.querySelector('button')?.dataset.sort === sortBy.kind;
      th.setAttribute('aria-sort', sorted ? (sortBy.kind === 'head' ? 'ascending' : 'descending') : 'none');
    }
    body.replaceChildren(
      ...rows.map(({ layer, head }) =>
        h(
          'tr',
          { 'data-head': `${layer}.${head}` },
          h('th', { scope: 'row' }, h('button', { type: 'button', class: 'link', onclick: () => store.set({ head: { layer, head } }) }, `L${layer} H${head}`)),
          ...DETECTORS.map(({ kind }) => h('td', { class: 'num' }, headScores[kind][layer]![head]!.toFixed(3))),
        ),
      ),
    );
  }

  store.subscribe((state, changed) => {
    if (touched(changed, 'analysis', 'query', 'finderKey')) fillFinder(state.analysis, state.query, state.finderKey);
    if (touched(changed, 'detectors')) source.value = state.detectors;
    if (touched(changed, 'ablated')) showAblated(state.ablated);
    if (touched(changed, 'ablateWith')) ablateWith.value = state.ablateWith;
    if (touched(changed, 'model')) {
      const layers = state.model?.engine.info.nLayer ?? 0;
      mlpLayer.replaceChildren(...Array.from({ length: layers }, (_, layer) => h('option', { value: String(layer) }, String(layer))));
    }
    if (touched(changed, 'highlight')) {
      for (const [i, button] of buttons.entries()) button.setAttribute('aria-pressed', String(DETECTORS[i]!.kind === state.highlight));
    }
    if (touched(changed, 'headScores', 'detectors', 'model', 'highlight')) {
      const half = Math.min(50, Math.floor((state.model?.engine.info.contextLength ?? 0) / 2));
      const on = state.detectors === 'prompt' ? `the prompt's ${state.analysis?.tokens.length ?? 0} tokens` : `${half} random tokens (seed 0), twice`;
      const kind = DETECTORS.find(({ kind }) => kind === state.highlight);
      const lit = kind && state.headScores?.[kind.kind].flat().filter((score) => score >= DETECTOR_THRESHOLD).length;
      const found = kind && state.headScores ? ` · ${lit === 0 ? 'no' : lit} ${kind.label.toLowerCase()} head${lit === 1 ? '' : 's'} (≥ ${DETECTOR_THRESHOLD})` : '';
      status.textContent = state.detectors === 'off' ? '' : state.headScores ? `scored on ${on}${found}` : 'scoring…';
      fillTable();
      if (state.headScores && openWhenScored) {
        store.set({ head: strongestHead(state.headScores, openWhenScored) });
        openWhenScored = undefined;
      }
    }
  });
}
