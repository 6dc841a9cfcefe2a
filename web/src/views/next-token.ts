// What comes next: the model's most probable tokens as bars, and under the sampling settings
// (temperature, top-k, top-p) which of them survive and with what probability. "Step" samples
// one token and appends it; clicking a candidate appends that one; "Generate" keeps stepping,
// every view following each new token.
import type { SamplingParams } from 'gptlens';
import { formatCount, formatPercent, h, tokenText } from '../dom.ts';
import type { Live } from '../live.ts';
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
  const list = h('ol', { class: 'candidates' });
  const count = h('input', { type: 'number', min: 1, max: 512, value: 24, 'aria-label': 'Tokens to generate', class: 'count' });
  const stepButton = h('button', { type: 'button', 'data-testid': 'step', onclick: () => void live.step() }, 'Step');
  const generateButton = h('button', {
    type: 'button',
    class: 'primary',
    'data-testid': 'generate',
    onclick: () => (store.state.generating ? live.stop() : void live.generate(Math.max(1, Number(count.value) || 1))),
  });
  const context = h('span', { class: 'muted' });
  root.append(
    h('header', { class: 'panel-head' }, h('h2', {}, 'Next token'), context),
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
    h('p', { class: 'hint' }, 'Bar: the model’s probability (0–100%). Marker: the probability sampling uses after temperature and filters. Click a token to append it.'),
  );

  list.addEventListener('click', (event) => {
    const row = (event.target as Element).closest<HTMLElement>('[data-id]');
    if (row && !store.state.generating) void live.choose(Number(row.dataset.id));
  });

  const renderControls = ({ sampling: params }: Readonly<State>) => {
    temperature.input.value = String(params.temperature);
    temperature.output.textContent = params.temperature === 0 ? '0 (greedy)' : params.temperature.toFixed(2);
    topP.input.value = String(params.topP ?? 1);
    topP.output.textContent = params.topP === undefined ? 'off' : params.topP.toFixed(2);
    if (Number(topK.value) !== (params.topK ?? 0)) topK.value = String(params.topK ?? 0);
  };

  const renderList = (state: Readonly<State>) => {
    const { next, analysis, model } = state;
    const last = analysis ? analysis.labels[analysis.labels.length - 1] : undefined;
    context.textContent = last === undefined ? '' : `after “${tokenText(last)}”`;
    if (!next || !model) {
      list.replaceChildren();
      survivors.textContent = '';
      return;
    }
    const vocab = model.engine.info.vocabSize;
    const kept = `${next.survivorsCapped ? 'at least ' : ''}${formatCount(next.survivors)}`;
    survivors.textContent = `${describe(next.sampling)}: ${kept} of ${formatCount(vocab)} tokens can be sampled`;
    list.replaceChildren(
      h(
        'li',
        { class: 'candidate candidate-head', 'aria-hidden': 'true' },
        h('span', {}, 'token'),
        h('span', { class: 'candidate-id' }, 'id'),
        h('span', {}),
        h('span', { class: 'candidate-prob' }, 'model'),
        h('span', { class: 'candidate-sampled' }, 'sampled'),
      ),
      ...next.candidates.map((candidate) =>
        h(
          'li',
          {
            class: candidate.sampled === undefined ? 'candidate filtered' : 'candidate',
            'data-testid': 'candidate',
            'data-id': candidate.id,
            'data-prob': candidate.prob,
            'data-sampled': candidate.sampled ?? 0,
            title: candidate.sampled === undefined ? 'filtered out by top-k / top-p' : `sampled with probability ${formatPercent(candidate.sampled)}`,
          },
          h('span', { class: 'candidate-token' }, tokenText(candidate.label)),
          h('span', { class: 'candidate-id' }, String(candidate.id)),
          h(
            'span',
            { class: 'candidate-bar' },
            h('span', { class: 'bar', style: `width: ${(candidate.prob * 100).toFixed(2)}%` }),
            candidate.sampled === undefined ? null : h('span', { class: 'marker', style: `left: ${(candidate.sampled * 100).toFixed(2)}%` }),
          ),
          h('span', { class: 'candidate-prob' }, formatPercent(candidate.prob)),
          h('span', { class: 'candidate-sampled' }, candidate.sampled === undefined ? '—' : formatPercent(candidate.sampled)),
        ),
      ),
    );
  };

  store.subscribe((state, changed) => {
    if (touched(changed, 'sampling')) renderControls(state);
    if (touched(changed, 'next', 'model')) renderList(state);
    if (touched(changed, 'generating', 'analysis', 'model')) {
      generateButton.textContent = state.generating ? 'Stop' : 'Generate';
      const ready = state.analysis !== undefined;
      stepButton.disabled = !ready || state.generating;
      generateButton.disabled = !ready && !state.generating;
    }
  });
}
