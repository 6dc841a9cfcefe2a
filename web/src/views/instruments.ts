// The instruments panel: why the model predicts what it does.
// - Logit lens: what each layer's residual would predict (the final norm and the unembedding
//   applied to it) at the last positions; cells coloured by the probability of the model's final
//   top token, or of a target token the reader picks; that token's curve through the depth.
// - Attribution: each head's and MLP's direct contribution to logit[answer] − logit[wrong] at the
//   picked (else last) position, the final norm's scale frozen; the parts sum to the difference.
// - Patching: a second, corrupted prompt of the same length; how much of the clean logit
//   difference each clean residual (layer × position) and each clean head (layer × head)
//   restores in the corrupted run. The IOI pair is one click away.
// Lens and attribution follow the prompt (after a pause in typing); patching runs on request.
import type { Attribution, LogitLens, PatchScores } from 'gptlens';
import { divergingMap, sequentialMap, type Colormap } from '../colormap.ts';
import { formatPercent, h, tokenText } from '../dom.ts';
import { engineCrash, type Engine } from '../engine.ts';
import { lineChart } from '../line-chart.ts';
import type { Live } from '../live.ts';
import { download, downloadCsv, exportButton, howTo } from '../panel-tools.ts';
import { touched, type Instrument, type State, type Store } from '../store.ts';

/** Positions the lens reads: the last ones (each costs a vocabulary-wide unembedding per layer). */
export const LENS_POSITIONS = 10;
/** Quiet time after the last keystroke before the lens or attribution runs again. */
const SETTLE_MS = 350;

/** The indirect-object pair: the clean prompt names Mary as the one who did not give; the corrupted swaps who gives. */
export const IOI_PAIR = {
  clean: 'When Mary and John went to the store, John gave a drink to',
  corrupt: 'When Mary and John went to the store, Mary gave a drink to',
};

const TABS: readonly [Instrument, string, string][] = [
  ['lens', 'Logit lens', 'What each layer’s residual stream would predict if the model stopped there'],
  ['attribution', 'Attribution', 'Each head’s and MLP’s direct push on the logit difference of two tokens'],
  ['patching', 'Patching', 'Which positions and heads carry the difference between a clean and a corrupted prompt'],
];

interface LensResult {
  lens: LogitLens;
  /** Labels of every token id the lens shows, by id. */
  labels: Map<number, string>;
  /** Position labels (the prompt's tokens). */
  positions: string[];
}

interface PatchResult {
  scores: PatchScores;
  cleanLabels: string[];
  answer: string;
  wrong: string;
}

/** Text colour readable on `background` (a colormap's `rgb(r g b)`): dark on light, light on dark. */
function inkOn(background: string): string {
  const [r, g, b] = (background.match(/\d+/g) ?? ['0', '0', '0']).map((c) => {
    const v = Number(c) / 255;
    return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r! + 0.7152 * g! + 0.0722 * b! > 0.18 ? '#111' : '#f5f5f5';
}

/** A heat table: rows × columns of numbers, each cell coloured, with row and column headers. */
function heatTable(options: {
  caption: string;
  columns: string[];
  rows: { label: string; values: number[]; texts?: string[]; titles?: string[] }[];
  color: (value: number) => string;
  testid: string;
  onCell?: (row: number, column: number) => void;
}): HTMLTableElement {
  return h(
    'table',
    { class: 'heat-table', 'data-testid': options.testid },
    h('caption', { class: 'visually-hidden' }, options.caption),
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, ''), ...options.columns.map((column) => h('th', { scope: 'col' }, column)))),
    h(
      'tbody',
      {},
      ...options.rows.map((row, r) =>
        h(
          'tr',
          {},
          h('th', { scope: 'row' }, row.label),
          ...row.values.map((value, c) => {
            const text = row.texts?.[c] ?? value.toFixed(2);
            const background = options.color(value);
            const style = `background:${background};color:${inkOn(background)}`;
            const cell = h('td', { style, title: row.titles?.[c] ?? `${row.label}, ${options.columns[c]}: ${value.toFixed(4)}`, 'data-value': value }, text);
            if (options.onCell) {
              cell.classList.add('clickable');
              cell.tabIndex = 0;
              cell.addEventListener('click', () => options.onCell!(r, c));
              cell.addEventListener('keydown', (event) => event.key === 'Enter' && options.onCell!(r, c));
            }
            return cell;
          }),
        ),
      ),
    ),
  );
}

/** A signed value as a colour of the diverging map, 0 in the middle, ±`span` at the ends. */
function signedColor(map: Colormap, span: number): (value: number) => string {
  return (value) => map.cssAt(0.5 + value / (2 * (span || 1)));
}

export function mountInstruments(root: HTMLElement, store: Store, live: Live): void {
  const heading = h('h2', {}, 'Instruments');
  const tabs = TABS.map(([instrument, label, about]) =>
    h('button', {
      type: 'button',
      class: 'quiet chip-button',
      'data-testid': `instrument-${instrument}`,
      'aria-pressed': 'false',
      title: about,
      onclick: () => store.set({ instrument: store.state.instrument === instrument ? undefined : instrument }),
    }, label),
  );
  const status = h('span', { class: 'muted', role: 'status', 'data-testid': 'instrument-status' });
  const json = exportButton('JSON', 'Download the open instrument’s numbers as JSON', () => exportJson());
  const csv = exportButton('CSV', 'Download the open instrument’s numbers as CSV', () => exportCsv());
  const help = howTo(
    'instruments',
    'Logit lens: the final norm and the unembedding applied to the residual stream entering each layer — what the model would say if it stopped there. Click a cell to follow its token through the depth.',
    'Attribution: the residual at the last norm is a sum of parts (embeddings, every head, every MLP, biases); with the norm’s scale frozen, each part’s share of logit[answer] − logit[wrong] is exact, and the parts add up to it.',
    'Patching: run a corrupted prompt, then put back one clean activation at a time. A score of 1 means that activation alone restores the clean answer; 0, that it carries nothing of it.',
  );
  const body = h('div', { class: 'instrument-body', 'data-testid': 'instrument-body' });
  root.append(h('header', { class: 'panel-head' }, heading, ...tabs, status, h('span', { class: 'spacer' }), json, csv, help.toggle), help.note, body);

  // Logit lens.
  const lensGrid = h('div', { class: 'heat-scroll', tabindex: 0, 'data-testid': 'lens-grid' });
  const lensTarget = h('span', { class: 'muted', 'data-testid': 'lens-target' });
  const clearTarget = h('button', { type: 'button', class: 'quiet', onclick: () => store.set({ lensTarget: undefined }) }, 'Follow the final top token');
  const lensChart = h('div', { class: 'lens-chart', 'data-testid': 'lens-chart' });
  const lensView = h('div', {}, h('p', { class: 'muted' }, 'Rows: layers (the residual entering each; “out” is the model’s output). Cells: the top token there; colour: the probability of ', lensTarget, '. ', clearTarget), lensGrid, lensChart);

  // Attribution.
  const answerSelect = h('select', { 'data-testid': 'dla-answer', onchange: () => scheduleAnalysis() });
  const wrongSelect = h('select', { 'data-testid': 'dla-wrong', onchange: () => scheduleAnalysis() });
  const dlaSummary = h('p', { class: 'muted', 'data-testid': 'dla-summary' });
  const dlaGrid = h('div', { class: 'heat-scroll', tabindex: 0, 'data-testid': 'dla-grid' });
  const dlaSorted = h('ol', { class: 'dla-sorted', 'data-testid': 'dla-sorted' });
  const dlaView = h(
    'div',
    {},
    h('div', { class: 'detector-bar' }, h('label', { class: 'inline-label' }, 'logit[', answerSelect, '] − logit[', wrongSelect, ']')),
    dlaSummary,
    h('div', { class: 'dla-layout' }, dlaGrid, h('div', {}, h('h3', {}, 'Largest parts'), dlaSorted)),
  );

  // Patching.
  const compareBox = h('textarea', {
    rows: 2,
    'data-testid': 'compare-prompt',
    'aria-label': 'Corrupted prompt (same number of tokens as the prompt)',
    placeholder: 'The corrupted prompt: the same number of tokens, with the detail that changes the answer',
    oninput: () => store.set({ comparePrompt: compareBox.value }),
  });
  const runPatch = h('button', { type: 'button', class: 'primary', 'data-testid': 'run-patching', onclick: () => void patchNow() }, 'Patch');
  const preset = h('button', {
    type: 'button',
    class: 'quiet',
    'data-testid': 'ioi-preset',
    title: 'The indirect-object pair: clean “…John gave a drink to” (answer Mary), corrupted “…Mary gave a drink to” (answer John)',
    onclick: async () => {
      store.set({ comparePrompt: IOI_PAIR.corrupt, instrument: 'patching' });
      await live.edit(IOI_PAIR.clean);
      await patchNow();
    },
  }, 'IOI pair');
  const progress = h('progress', { max: 1, value: 0, hidden: true, 'data-testid': 'patch-progress' });
  const patchSummary = h('p', { class: 'muted', 'data-testid': 'patch-summary' });
  const residMap = h('div', { class: 'heat-scroll', tabindex: 0, 'data-testid': 'patch-resid' });
  const headMap = h('div', { class: 'heat-scroll', tabindex: 0, 'data-testid': 'patch-heads' });
  const patchView = h(
    'div',
    {},
    h('label', { class: 'inline-label block' }, 'Corrupted prompt (the prompt above is the clean one)', compareBox),
    h('div', { class: 'detector-bar' }, runPatch, preset, progress),
    patchSummary,
    h('div', { class: 'patch-layout' }, h('div', {}, h('h3', {}, 'Residual stream, layer × position'), residMap), h('div', {}, h('h3', {}, 'Heads, layer × head (all positions)'), headMap)),
  );

  let lens: LensResult | undefined;
  let attribution: Attribution | undefined;
  let patching: PatchResult | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  /** The patching in progress: a new prompt (either box) or model stops it, so typing never waits
   * behind a sweep for text that is gone. */
  let patchRun: AbortController | undefined;
  /** The lens being read: a new prompt stops it too (a lens over SmolLM2 takes seconds). */
  let lensRun: AbortController | undefined;
  /** Bumped by every new question: an answer to an older one is dropped. */
  let asked = 0;

  // An encoder has no logits for any instrument to read: they stay off (show() says why).
  const engine = (): Engine | undefined => (store.state.model?.engine.encoder ? undefined : store.state.model?.engine);

  function scheduleAnalysis(): void {
    if (timer !== undefined) clearTimeout(timer);
    timer = setTimeout(() => void analyseNow(), SETTLE_MS);
  }

  /** Runs the open instrument (lens or attribution) on the current prompt. */
  async function analyseNow(): Promise<void> {
    timer = undefined;
    const { instrument, analysis, ablated, ablateWith, lensTarget: target, query } = store.state;
    const current = engine();
    if (!current || !analysis || (instrument !== 'lens' && instrument !== 'attribution')) return;
    const mine = ++asked;
    status.textContent = 'computing…';
    try {
      if (instrument === 'lens') {
        const first = Math.max(0, analysis.tokens.length - LENS_POSITIONS);
        lensRun?.abort();
        const run = (lensRun = new AbortController());
        const result = await current.logitLens(analysis.tokens, first, target, ablated, ablateWith, run.signal).finally(() => {
          if (lensRun === run) lensRun = undefined;
        });
        const ids = new Set<number>(result.finalTop);
        result.top.forEach((layer) => layer.forEach((best) => best.forEach(({ id }) => ids.add(id))));
        if (target !== undefined) ids.add(target);
        const list = [...ids];
        const names = await current.labels(list);
        if (mine !== asked) return;
        lens = { lens: result, labels: new Map(list.map((id, i) => [id, names[i]!])), positions: analysis.labels };
        drawLens();
      } else {
        const position = query ?? analysis.tokens.length - 1;
        const answer = answerSelect.value === '' ? undefined : Number(answerSelect.value);
        const wrong = wrongSelect.value === '' ? undefined : Number(wrongSelect.value);
        const result = await current.attribution(analysis.tokens, { position, answer, wrong }, ablated, ablateWith);
        if (mine !== asked) return;
        attribution = result;
        await drawAttribution();
      }
      status.textContent = '';
    } catch (error) {
      if (mine !== asked || (error instanceof Error && error.name === 'AbortError')) return;
      status.textContent = engineCrash(error) ? '' : error instanceof Error ? error.message : String(error);
    }
  }

  function drawLens(): void {
    if (!lens) return;
    const { lens: result, labels, positions } = lens;
    const { theme } = store.state;
    const map = sequentialMap(theme);
    const byTarget = result.target !== undefined && result.targetProb !== undefined;
    const probs = byTarget ? result.targetProb! : result.finalTopProb;
    lensTarget.textContent = byTarget ? `“${tokenText(labels.get(result.target!) ?? '')}” (picked)` : 'the model’s final top token at each position';
    clearTarget.hidden = !byTarget;
    const layers = result.top.length;
    const columns = result.finalTop.map((_, i) => `${result.first + i} ${tokenText(positions[result.first + i] ?? '')}`);
    // The output on top, layer 0 at the bottom: the residual stream rises through the model.
    const rows = Array.from({ length: layers }, (_, i) => layers - 1 - i).map((layer) => ({
      label: layer === layers - 1 ? 'out' : `L${layer}`,
      values: probs[layer]!,
      texts: result.top[layer]!.map((best) => tokenText(labels.get(best[0]?.id ?? -1) ?? '')),
      titles: result.top[layer]!.map(
        (best, i) =>
          `${layer === layers - 1 ? 'output' : `layer ${layer}`}, position ${result.first + i}: ${best.map(({ id, prob }) => `“${tokenText(labels.get(id) ?? '')}” ${formatPercent(prob)}`).join(', ')}; ${byTarget ? 'picked' : 'final top'} token ${formatPercent(probs[layer]![i]!)}`,
      ),
    }));
    lensGrid.replaceChildren(
      heatTable({
        caption: 'Logit lens: top token per layer and position',
        columns,
        rows,
        color: (value) => map.cssAt(value),
        testid: 'lens-table',
        onCell: (row, column) => {
          const layer = layers - 1 - row;
          store.set({ lensTarget: result.top[layer]![column]![0]?.id });
        },
      }),
    );
    // The followed token's probability through the depth at the picked (else last) position.
    const picked = Math.min(Math.max((store.state.query ?? Number.MAX_SAFE_INTEGER) - result.first, 0), result.finalTop.length - 1);
    const series = (i: number) => probs.map((row) => row[i]!);
    lensChart.replaceChildren(
      h('h3', {}, `Probability through the depth at position ${result.first + picked} “${tokenText(positions[result.first + picked] ?? '')}”`),
      lineChart({
        width: 560,
        height: 160,
        xLabels: Array.from({ length: layers }, (_, l) => (l === layers - 1 ? 'out' : l % 5 === 0 ? `L${l}` : undefined)),
        context: result.finalTop.map((_, i) => series(i)).filter((_, i) => i !== picked),
        emphasis: series(picked),
        log: false,
        yLabel: 'probability',
      }),
    );
  }

  /** The answer and wrong-answer choices: the next token's candidates, kept while they stay among them. */
  function fillAnswerChoices(state: Readonly<State>): void {
    const candidates = state.next?.candidates ?? [];
    const keep = (select: HTMLSelectElement, fallback: number) => {
      const value = select.value;
      select.replaceChildren(...candidates.map(({ id, label }) => h('option', { value: String(id) }, `“${tokenText(label)}”`)));
      select.value = candidates.some(({ id }) => String(id) === value) ? value : String(candidates[fallback]?.id ?? '');
    };
    keep(answerSelect, 0);
    keep(wrongSelect, 1);
  }

  async function drawAttribution(): Promise<void> {
    const current = engine();
    if (!attribution || !current) return;
    const a = attribution;
    const [answer, wrong] = await current.labels([a.answer, a.wrong]);
    const { nHead } = current.info;
    const parts = [
      ...a.heads.flatMap((row, layer) => row.map((value, head) => ({ name: `L${layer} H${head}`, value }))),
      ...a.mlps.map((value, layer) => ({ name: `L${layer} MLP`, value })),
      ...a.attnBias.map((value, layer) => ({ name: `L${layer} attn bias`, value })),
      { name: 'token embedding', value: a.embed },
      { name: 'position embedding', value: a.posEmbed },
      { name: 'final norm bias', value: a.finalBias },
    ];
    const span = Math.max(...parts.map(({ value }) => Math.abs(value)), 1e-6);
    dlaSummary.textContent = `At position ${a.position}: logit[“${tokenText(answer!)}”] − logit[“${tokenText(wrong!)}”] = ${a.logitDiff.toFixed(3)}; the parts below sum to ${a.total.toFixed(3)} (embeddings ${(a.embed + a.posEmbed).toFixed(3)}, final norm bias ${a.finalBias.toFixed(3)}).`;
    const map = divergingMap(store.state.theme);
    const columns = [...Array.from({ length: nHead }, (_, head) => `H${head}`), 'MLP', 'bias'];
    dlaGrid.replaceChildren(
      heatTable({
        caption: 'Direct logit attribution per layer: heads, MLP and attention bias',
        columns,
        rows: a.heads.map((row, layer) => ({ label: `L${layer}`, values: [...row, a.mlps[layer]!, a.attnBias[layer]!] })),
        color: signedColor(map, span),
        testid: 'dla-table',
        onCell: (layer, column) => column < nHead && store.set({ head: { layer, head: column } }),
      }),
    );
    const sorted = [...parts].sort((x, y) => Math.abs(y.value) - Math.abs(x.value)).slice(0, 15);
    dlaSorted.replaceChildren(
      ...sorted.map(({ name, value }) =>
        h(
          'li',
          { 'data-part': name },
          h('span', { class: 'part-name' }, name),
          h('span', { class: `part-bar ${value < 0 ? 'negative' : 'positive'}`, style: `width:${(Math.abs(value) / span) * 100}%` }),
          h('span', { class: 'num' }, `${value >= 0 ? '+' : ''}${value.toFixed(3)}`),
        ),
      ),
    );
  }

  async function patchNow(): Promise<void> {
    const current = engine();
    const { analysis, comparePrompt } = store.state;
    if (!current || !analysis) return;
    const mine = ++asked;
    try {
      const corrupt = await current.tokenize(comparePrompt ?? '');
      const clean = analysis.tokens;
      if (corrupt.length !== clean.length) {
        patchSummary.textContent = `The prompt is ${clean.length} tokens and the corrupted prompt ${corrupt.length}: patching needs the same number of tokens.`;
        return;
      }
      // The clean run's top token is the answer; the corrupted run's, the wrong one (else the clean run's second).
      const [answer, second] = await current.topTwo(clean);
      const [corruptTop] = await current.topTwo(corrupt);
      const wrong = corruptTop === answer ? second : corruptTop;
      progress.hidden = false;
      progress.value = 0;
      runPatch.disabled = true;
      status.textContent = 'patching…';
      const started = performance.now();
      patchRun = new AbortController();
      const onProgress = (done: number, total: number) => {
        progress.value = done / total;
        status.textContent = `patching: ${done} of ${total} runs`;
      };
      const scores = await current.patch(clean, corrupt, answer, wrong, onProgress, patchRun.signal);
      const [answerLabel, wrongLabel] = await current.labels([answer, wrong]);
      if (mine !== asked && store.state.instrument !== 'patching') return;
      patching = { scores, cleanLabels: analysis.labels, answer: answerLabel!, wrong: wrongLabel! };
      status.textContent = `patched in ${((performance.now() - started) / 1000).toFixed(1)} s`;
      drawPatching();
    } catch (error) {
      const stopped = error instanceof Error && error.name === 'AbortError';
      status.textContent = stopped ? 'patching stopped: the prompts changed' : engineCrash(error) ? '' : error instanceof Error ? error.message : String(error);
    } finally {
      patchRun = undefined;
      progress.hidden = true;
      runPatch.disabled = false;
    }
  }

  function drawPatching(): void {
    if (!patching) return;
    const { scores, cleanLabels, answer, wrong } = patching;
    patchSummary.textContent = `logit[“${tokenText(answer)}”] − logit[“${tokenText(wrong)}”]: clean ${scores.cleanDiff.toFixed(3)}, corrupted ${scores.corruptDiff.toFixed(3)}. A cell is the share of that difference restored by patching its clean activation into the corrupted run.`;
    const map = divergingMap(store.state.theme);
    const span = Math.max(1, ...scores.residPre.flat().map(Math.abs), ...scores.heads.flat().map(Math.abs));
    const color = signedColor(map, span);
    residMap.replaceChildren(
      heatTable({
        caption: 'Patching the clean residual stream into the corrupted run, per layer and position',
        columns: cleanLabels.map((label, t) => `${t} ${tokenText(label)}`),
        rows: scores.residPre.map((values, layer) => ({ label: `L${layer}`, values })),
        color,
        testid: 'patch-resid-table',
      }),
    );
    headMap.replaceChildren(
      heatTable({
        caption: 'Patching each clean head output into the corrupted run, per layer and head',
        columns: scores.heads[0]!.map((_, head) => `H${head}`),
        rows: scores.heads.map((values, layer) => ({ label: `L${layer}`, values })),
        color,
        testid: 'patch-heads-table',
        onCell: (layer, head) => store.set({ head: { layer, head } }),
      }),
    );
  }

  function exportJson(): void {
    const { instrument } = store.state;
    const data = instrument === 'lens' ? lens?.lens : instrument === 'attribution' ? attribution : instrument === 'patching' ? patching?.scores : undefined;
    if (!data) return;
    download(`gptlens-${instrument}.json`, new Blob([JSON.stringify(data, null, 1)], { type: 'application/json' }));
  }

  function exportCsv(): void {
    const { instrument } = store.state;
    if (instrument === 'lens' && lens) {
      const { lens: result, labels } = lens;
      const rows: (string | number)[][] = [['layer', 'position', 'top', 'top_prob', 'final_top', 'final_top_prob', 'target_prob']];
      result.top.forEach((layer, l) =>
        layer.forEach((best, i) =>
          rows.push([l === result.top.length - 1 ? 'out' : l, result.first + i, labels.get(best[0]?.id ?? -1) ?? '', best[0]?.prob ?? 0, labels.get(result.finalTop[i]!) ?? '', result.finalTopProb[l]![i]!, result.targetProb?.[l]?.[i] ?? '']),
        ),
      );
      downloadCsv('gptlens-logit-lens.csv', rows);
    } else if (instrument === 'attribution' && attribution) {
      const a = attribution;
      const rows: (string | number)[][] = [['part', 'layer', 'head', 'contribution']];
      a.heads.forEach((row, layer) => row.forEach((value, head) => rows.push(['head', layer, head, value])));
      a.mlps.forEach((value, layer) => rows.push(['mlp', layer, '', value]));
      a.attnBias.forEach((value, layer) => rows.push(['attn_bias', layer, '', value]));
      rows.push(['embed', '', '', a.embed], ['pos_embed', '', '', a.posEmbed], ['final_bias', '', '', a.finalBias]);
      downloadCsv('gptlens-attribution.csv', rows);
    } else if (instrument === 'patching' && patching) {
      const rows: (string | number)[][] = [['sweep', 'layer', 'position_or_head', 'score']];
      patching.scores.residPre.forEach((row, layer) => row.forEach((value, t) => rows.push(['resid_pre', layer, t, value])));
      patching.scores.heads.forEach((row, layer) => row.forEach((value, head) => rows.push(['head', layer, head, value])));
      downloadCsv('gptlens-patching.csv', rows);
    }
  }

  function show(state: Readonly<State>): void {
    const encoder = state.model?.engine.encoder ?? false;
    tabs.forEach((tab) => (tab.disabled = encoder));
    if (encoder) {
      tabs.forEach((tab) => tab.setAttribute('aria-pressed', 'false'));
      body.replaceChildren(
        h('p', { class: 'muted', 'data-testid': 'instruments-unavailable' }, `${state.model!.name} is an encoder: it has no language-model head, so there are no next-token logits for the logit lens, attribution or patching to read. The similarity panel shows what it computes instead: sentence embeddings.`),
      );
      json.hidden = csv.hidden = true;
      status.textContent = '';
      return;
    }
    tabs.forEach((tab, i) => tab.setAttribute('aria-pressed', String(TABS[i]![0] === state.instrument)));
    const view = state.instrument === 'lens' ? lensView : state.instrument === 'attribution' ? dlaView : state.instrument === 'patching' ? patchView : undefined;
    body.replaceChildren(...(view ? [view] : [h('p', { class: 'muted' }, 'Pick an instrument: the logit lens, direct logit attribution, or activation patching against a corrupted prompt.')]));
    json.hidden = csv.hidden = view === undefined;
    if (state.instrument !== 'patching') status.textContent = '';
  }

  store.subscribe((state, changed) => {
    if (patchRun && touched(changed, 'prompt', 'comparePrompt', 'model')) patchRun.abort();
    if (lensRun && touched(changed, 'prompt', 'model', 'instrument')) lensRun.abort();
    if (touched(changed, 'instrument', 'model')) show(state);
    if (touched(changed, 'comparePrompt') && compareBox.value !== (state.comparePrompt ?? '')) compareBox.value = state.comparePrompt ?? '';
    // Only while attribution is open: on every keystroke, it rebuilt two lists no one saw.
    if (touched(changed, 'next', 'instrument') && state.instrument === 'attribution') fillAnswerChoices(state);
    if (touched(changed, 'model')) {
      lens = attribution = patching = undefined;
      for (const element of [lensGrid, lensChart, dlaGrid, dlaSorted, residMap, headMap]) element.replaceChildren();
      patchSummary.textContent = dlaSummary.textContent = '';
    }
    const inputs = touched(changed, 'analysis', 'instrument', 'lensTarget', 'ablated', 'ablateWith') || (state.instrument === 'attribution' && touched(changed, 'query'));
    if (inputs && (state.instrument === 'lens' || state.instrument === 'attribution')) scheduleAnalysis();
    if (touched(changed, 'theme')) {
      drawLens();
      drawPatching();
      void drawAttribution();
    }
    if (touched(changed, 'query') && state.instrument === 'lens') drawLens();
  });
}
