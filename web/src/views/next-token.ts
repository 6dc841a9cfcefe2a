// What comes next: the model's most probable tokens as bars, and under the sampling settings
// (temperature, top-k, top-p) which of them survive and with what probability. "Step" samples
// one token and appends it; clicking a candidate appends that one; "Generate" keeps stepping,
// every view following each new token.
import type { SamplingParams } from 'gptlens';
import type { Candidate } from '../analysis.ts';
import { drawnWhenSeen, formatCount, formatPercent, h, setAttribute, setData, setHidden, setText, tokenText } from '../dom.ts';
import type { Live } from '../live.ts';
import { firstProbabilitiesShown } from '../perf.ts';
import { downloadCsv, exportButton, howTo } from '../panel-tools.ts';
import { touched, type State, type Store } from '../store.ts';

function slider(label: string, min: number, max: number, step: number, onchange: (value: number) => void) {
  const output = h('output', {});
  const input = h('input', {
    type: 'range',
    min,
    max,
    step,
    'aria-label': label,
    oninput: () => onchange(Number(input.value)),
  });
  return { element: h('label', { class: 'control' }, h('span', {}, label), input, output), input, output };
}

function describe({ temperature, topK, topP }: SamplingParams): string {
  const parts = [temperature === 0 ? 'greedy' : `temperature ${temperature}`];
  if (topK !== undefined) parts.push(`top-k ${topK}`);
  if (topP !== undefined) parts.push(`top-p ${topP}`);
  return parts.join(', ');
}

export function mountNextToken(root: HTMLElement, store: Store, live: Live): void {
  const sampling = (patch: { temperature?: number; topK?: number | undefined; topP?: number | undefined }) => {
    const merged = { ...store.state.sampling, ...patch };
    const next: SamplingParams = { temperature: merged.temperature };
    if (merged.topK !== undefined) next.topK = merged.topK;
    if (merged.topP !== undefined) next.topP = merged.topP;
    store.set({ sampling: next });
    live.samplingChanged();
  };
  const temperature = slider('temperature', 0, 2, 0.05, (value) => sampling({ temperature: value }));
  const topP = slider('top-p', 0.05, 1, 0.05, (value) => sampling({ topP: value >= 1 ? undefined : value }));
  const topK = h('input', {
    type: 'number',
    min: 0,
    max: 1000,
    step: 1,
    value: 0,
    'aria-label': 'top-k',
    oninput: () => sampling({ topK: Number(topK.value) > 0 ? Math.floor(Number(topK.value)) : undefined }),
  });
  const survivors = h('p', { class: 'muted survivors', 'data-testid': 'survivors' });
  const list = h('ol', { class: 'candidates', 'aria-label': 'Most probable next tokens: choose one to append it' });
  const count = h('input', { type: 'number', min: 1, max: 512, value: 24, 'aria-label': 'Tokens to generate', class: 'count' });
  const stepButton = h('button', { type: 'button', 'data-testid': 'step', onclick: () => void live.step() }, 'Step');
  const generateButton = h('button', {
    type: 'button',
    class: 'primary',
    'data-testid': 'generate',
    onclick: () => (store.state.generating ? live.stop() : void live.generate(Math.max(1, Number(count.value) || 1))),
  });
  const context = h('span', { class: 'muted' });
  const help = howTo(
    'next',
    'The model’s most probable next tokens. The bar is the model’s own probability; the marker (and the “sampled” column) is the probability sampling uses.',
    'Temperature divides the logits before the softmax: below 1 sharpens the distribution, above 1 flattens it, 0 always takes the top token. Top-k keeps only the k most probable tokens; top-p keeps the fewest whose probabilities add up to p. What survives is renormalised.',
    'Choose a token (click, or Tab to it and Enter) to append it; Step samples one; Generate keeps sampling.',
  );
  const csv = exportButton('CSV', 'Download the candidates as CSV', () => {
    const next = store.state.next;
    if (!next) return;
    downloadCsv('gptlens-next-token.csv', [
      ['rank', 'id', 'token', 'model_probability', 'sampled_probability'],
      ...next.candidates.map((candidate, i) => [i + 1, candidate.id, candidate.label, candidate.prob, candidate.sampled ?? 0]),
    ]);
  });
  root.append(
    h('header', { class: 'panel-head' }, h('h2', {}, 'Next token'), context, h('span', { class: 'spacer' }), csv, help.toggle),
    help.note,
    h(
      'div',
      { class: 'controls' },
      temperature.element,
      h('label', { class: 'control' }, h('span', {}, 'top-k'), topK, h('output', {}, '0 = off')),
      topP.element,
    ),
    survivors,
    list,
    h('div', { class: 'actions' }, stepButton, generateButton, h('label', { class: 'inline' }, count, 'tokens')),
  );

  list.addEventListener('click', (event) => {
    // The row's own candidate, not its drawn text: a row off screen is drawn once seen or once
    // typing pauses, and can be activated before (assistive technology reads off screen too).
    const chosen = rows.find((row) => row.item.contains(event.target as Node))?.candidate();
    if (chosen && !store.state.generating) void live.choose(chosen.id);
  });
  // Up and Down move between candidates.
  list.addEventListener('keydown', (event) => {
    const buttons = [...list.querySelectorAll<HTMLButtonElement>('button.candidate')];
    const index = buttons.indexOf(event.target as HTMLButtonElement);
    const delta = event.key === 'ArrowDown' ? 1 : event.key === 'ArrowUp' ? -1 : 0;
    if (index < 0 || delta === 0) return;
    event.preventDefault();
    buttons[Math.max(0, Math.min(buttons.length - 1, index + delta))]!.focus();
  });

  const renderControls = ({ sampling: params }: Readonly<State>) => {
    temperature.input.value = String(params.temperature);
    temperature.output.textContent = params.temperature === 0 ? '0 (greedy)' : params.temperature.toFixed(2);
    topP.input.value = String(params.topP ?? 1);
    topP.output.textContent = params.topP === undefined ? 'off' : params.topP.toFixed(2);
    if (Number(topK.value) !== (params.topK ?? 0)) topK.value = String(params.topK ?? 0);
  };

  const heading = h(
    'li',
    { class: 'candidate candidate-head', 'aria-hidden': 'true' },
    h('span', {}, 'token'),
    h('span', { class: 'candidate-id' }, 'id'),
    h('span', {}),
    h('span', { class: 'candidate-prob' }, 'model'),
    h('span', { class: 'candidate-sampled' }, 'sampled'),
  );
  // The rows are made once and their texts and attributes updated on each keystroke: rebuilt, they
  // were ~200 new nodes a keystroke for the browser to style and lay out. Each row is redrawn when
  // seen: under open notes the panel's head is on screen and the list below the fold, and laying
  // out its ~50 changing texts took ~0.7 ms of the keystroke's frame.
  const rows: CandidateRow[] = [];

  const renderList = (state: Readonly<State>) => {
    const { next, analysis, model } = state;
    const last = analysis ? analysis.labels[analysis.labels.length - 1] : undefined;
    setText(context, last === undefined ? '' : `after “${tokenText(last)}”`);
    if (!next || !model) {
      list.replaceChildren();
      setText(survivors, '');
      return;
    }
    // A keyboard reader who appended a candidate stays in the list, at the same rank.
    const focused = [...list.querySelectorAll('button.candidate')].indexOf(document.activeElement as Element);
    const vocab = model.engine.info.vocabSize;
    const kept = `${next.survivorsCapped ? 'at least ' : ''}${formatCount(next.survivors)}`;
    setText(survivors, `${describe(next.sampling)}: ${kept} of ${formatCount(vocab)} tokens can be sampled`);
    while (rows.length < next.candidates.length) rows.push(candidateRow());
    next.candidates.forEach((candidate, i) => rows[i]!.show(candidate));
    firstProbabilitiesShown();
    const shown = [heading, ...rows.slice(0, next.candidates.length).map((row) => row.item)];
    if (list.childElementCount !== shown.length || shown.some((item, i) => list.children[i] !== item)) list.replaceChildren(...shown);
    const buttons = list.querySelectorAll<HTMLButtonElement>('button.candidate');
    if (focused >= 0 && buttons.length > 0) buttons[Math.min(focused, buttons.length - 1)]!.focus();
  };

  // A long prompt pushes the panel below the fold: then it is drawn after the keystroke's frame.
  const redrawList = drawnWhenSeen(root, () => renderList(store.state));
  store.subscribe((state, changed) => {
    if (touched(changed, 'sampling')) renderControls(state);
    if (touched(changed, 'next', 'model')) redrawList();
    if (touched(changed, 'generating', 'analysis', 'model')) {
      setText(generateButton, state.generating ? 'Stop' : 'Generate');
      const ready = state.analysis !== undefined;
      stepButton.disabled = !ready || state.generating;
      generateButton.disabled = !ready && !state.generating;
    }
  });
}

interface CandidateRow {
  item: HTMLLIElement;
  /** Shows `candidate` in the row: at once while the row is on screen, else later (`drawnWhenSeen`:
   * right after the frame when near, once typing pauses when far), or when focus comes to it. */
  show(candidate: Candidate): void;
  /** The candidate the row shows, or will once drawn. */
  candidate(): Candidate | undefined;
}

/** A row of the candidates list: the token (a button that appends it), its id, the bars, the two probabilities. */
function candidateRow(): CandidateRow {
  const [token, id, probability, sampledProbability] = [new Text(), new Text(), new Text(), new Text()];
  const [probabilityWhat, sampledWhat] = [h('span', { class: 'visually-hidden' }), h('span', { class: 'visually-hidden' })];
  const bar = h('span', { class: 'bar' });
  const marker = h('span', { class: 'marker' });
  const probabilityCell = h('span', { class: 'candidate-prob' }, probabilityWhat, probability);
  const button = h(
    'button',
    { type: 'button', 'data-testid': 'candidate' },
    h('span', { class: 'candidate-token' }, h('span', { class: 'visually-hidden' }, 'Append '), token),
    h('span', { class: 'candidate-id' }, h('span', { class: 'visually-hidden' }, ', id '), id),
    h('span', { class: 'candidate-bar' }, bar, marker),
    probabilityCell,
    h('span', { class: 'candidate-sampled' }, sampledWhat, sampledProbability),
  );
  const item = h('li', {}, button);
  let shown: Candidate | undefined;
  const draw = (candidate: Candidate) => {
    const { sampled, before } = candidate;
    setAttribute(button, 'class', sampled === undefined ? 'candidate filtered' : 'candidate');
    setAttribute(button, 'data-id', String(candidate.id));
    setAttribute(button, 'data-prob', String(candidate.prob));
    setAttribute(button, 'data-sampled', String(sampled ?? 0));
    setAttribute(button, 'title', sampled === undefined ? 'filtered out by top-k / top-p' : `sampled with probability ${formatPercent(sampled)}`);
    setData(token, tokenText(candidate.label));
    setData(id, String(candidate.id));
    setAttribute(bar, 'style', `width: ${(candidate.prob * 100).toFixed(2)}%`);
    setHidden(marker, sampled === undefined);
    if (sampled !== undefined) setAttribute(marker, 'style', `left: ${(sampled * 100).toFixed(2)}%`);
    if (before === undefined) probabilityCell.removeAttribute('title');
    else setAttribute(probabilityCell, 'title', 'without the ablation → with it');
    setText(probabilityWhat, before === undefined ? ', model ' : ', model without the ablation, then with it ');
    setData(probability, before === undefined ? formatPercent(candidate.prob) : `${formatPercent(before)} → ${formatPercent(candidate.prob)}`);
    setText(sampledWhat, sampled === undefined ? ', filtered out ' : ', sampled ');
    setData(sampledProbability, sampled === undefined ? '—' : formatPercent(sampled));
  };
  const redraw = drawnWhenSeen(item, () => {
    if (shown) draw(shown);
  });
  // Focus names the row's token (to a screen reader too) before the row is seen to be on screen.
  item.addEventListener('focusin', () => redraw.now());
  return {
    item,
    show(candidate) {
      shown = candidate;
      redraw();
    },
    candidate: () => shown,
  };
}
