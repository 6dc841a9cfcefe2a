// Two polite live regions for screen readers: the head just opened (with where its picked query
// looks), and the top prediction once the views settle after typing.
import { headMap, strongestKeys } from './analysis.ts';
import { formatPercent, h, tokenText } from './dom.ts';
import { touched, type State, type Store } from './store.ts';

/** "Layer 1, head 2: query 9 “to” attends most to “Mary” (43.1%)". */
export function describeHead(state: Readonly<State>): string {
  const { head, analysis, query } = state;
  const title = `Layer ${head.layer}, head ${head.head}`;
  const opened = analysis && headMap(analysis, head.layer, head.head);
  if (!analysis || !opened) return title;
  const t = analysis.tokens.length;
  const q = query ?? t - 1;
  const [top] = strongestKeys(opened.pattern, t, opened.head, q, 1, analysis.bidirectional);
  return top
    ? `${title}: query ${q} “${tokenText(analysis.labels[q]!)}” attends most to ${top.key} “${tokenText(analysis.labels[top.key]!)}” (${formatPercent(top.weight)})`
    : title;
}

export function describePrediction(state: Readonly<State>): string {
  const top = state.next?.candidates[0];
  const last = state.analysis?.labels.at(-1);
  if (!top || last === undefined) return '';
  return `Top prediction after “${tokenText(last)}”: “${tokenText(top.label)}”, ${formatPercent(top.prob)}`;
}

export function mountAnnouncer(root: HTMLElement, store: Store): void {
  const head = h('div', { class: 'visually-hidden', 'aria-live': 'polite', 'data-testid': 'announce-head' });
  const prediction = h('div', { class: 'visually-hidden', 'aria-live': 'polite', 'data-testid': 'announce-prediction' });
  root.append(head, prediction);
  let timer: ReturnType<typeof setTimeout> | undefined;
  store.subscribe((state, changed) => {
    // A head the reader opened (not the first head of a newly loaded model).
    if (changed.has('head') && !changed.has('model') && state.model) head.textContent = describeHead(state);
    if (touched(changed, 'next')) {
      clearTimeout(timer);
      // Once typing pauses: one announcement, not one per keystroke.
      timer = setTimeout(() => (prediction.textContent = describePrediction(store.state)), 700);
    }
  });
}
