// Encoders (all-MiniLM-L6-v2) in place of the next-token view: the prompt's sentence embedding
// against a second sentence (its own box, prefilled), as a cosine similarity updated live as
// either text is typed, and a few fixed sentences ranked by their similarity to the prompt, each
// score as a number and a bar. Choosing a ranked sentence makes it the second sentence.
import { h } from '../dom.ts';
import type { Live } from '../live.ts';
import { downloadCsv, exportButton, howTo } from '../panel-tools.ts';
import { touched, type Store } from '../store.ts';

/** A bar for a cosine similarity: its length is the similarity (negative ones show none). */
function bar(score: number): HTMLElement {
  return h('span', { class: 'similarity-bar', 'aria-hidden': 'true' }, h('span', { class: 'bar', style: `width: ${(Math.max(0, Math.min(1, score)) * 100).toFixed(1)}%` }));
}

export function mountSimilarity(root: HTMLElement, store: Store, live: Live): void {
  const second = h('textarea', {
    id: 'second-sentence',
    'data-testid': 'second-sentence',
    rows: 2,
    spellcheck: false,
    oninput: () => {
      store.set({ secondSentence: second.value });
      void live.similarityChanged();
    },
  });
  const figure = h('output', { class: 'similarity-score', 'data-testid': 'similarity-score', 'aria-live': 'polite', for: 'second-sentence', id: 'similarity-score' });
  const figureBar = h('span', { class: 'similarity-bar', 'aria-hidden': 'true' }, h('span', { class: 'bar' }));
  const error = h('p', { class: 'similarity-error', 'data-testid': 'similarity-error', hidden: true });
  const ranked = h('ol', { class: 'similarity-ranked', 'data-testid': 'similarity-ranked', 'aria-labelledby': 'similarity-ranked-title' });
  const help = howTo(
    'similarity',
    'This model is an encoder: it reads the whole sentence at once (every token attends to every other) and predicts no next token. Its sentence embedding is the average of its final hidden states over the tokens, scaled to length 1 — what sentence-transformers does with all-MiniLM-L6-v2.',
    'Two sentences are compared by the cosine of the angle between their embeddings: 1 for the same direction (the same meaning, as far as the model can tell), near 0 for unrelated sentences.',
  );
  const csv = exportButton('CSV', 'Download the similarities as CSV', () => {
    const similarity = store.state.similarity;
    if (!similarity) return;
    downloadCsv('gptlens-similarity.csv', [
      ['sentence', 'cosine_similarity_to_prompt'],
      [similarity.second, similarity.score ?? ''],
      ...similarity.ranked.map(({ text, score }) => [text, score]),
    ]);
  });
  root.append(
    h('header', { class: 'panel-head' }, h('h2', {}, 'Similarity'), h('span', { class: 'muted' }, 'sentence embeddings, cosine'), h('span', { class: 'spacer' }), csv, help.toggle),
    help.note,
    h('label', { class: 'similarity-label', for: 'second-sentence' }, 'Second sentence, compared with the prompt'),
    second,
    h('p', { class: 'similarity-figure' }, h('span', {}, 'Cosine similarity: '), figure, figureBar),
    error,
    h('h3', { id: 'similarity-ranked-title', class: 'similarity-title' }, 'Sentences ranked by similarity to the prompt'),
    ranked,
  );

  store.subscribe((state, changed) => {
    if (touched(changed, 'secondSentence') && second.value !== state.secondSentence) second.value = state.secondSentence;
    if (!touched(changed, 'similarity')) return;
    const { similarity } = state;
    const score = similarity?.score;
    figure.textContent = score === undefined ? '—' : score.toFixed(4);
    figure.dataset.score = score === undefined ? '' : String(score);
    figure.dataset.prompt = similarity?.prompt ?? '';
    figure.dataset.second = similarity?.second ?? '';
    (figureBar.firstChild as HTMLElement).style.width = `${(Math.max(0, Math.min(1, score ?? 0)) * 100).toFixed(1)}%`;
    error.hidden = similarity?.error === undefined;
    error.textContent = similarity?.error ?? '';
    // A keyboard reader who chose a sentence stays at the same rank.
    const focused = [...ranked.querySelectorAll('button')].indexOf(document.activeElement as HTMLButtonElement);
    ranked.replaceChildren(
      ...(similarity?.ranked ?? []).map(({ text, score: value }) =>
        h(
          'li',
          { 'data-testid': 'similarity-item', 'data-score': value },
          h(
            'button',
            { type: 'button', class: 'similarity-item', title: 'Compare the prompt with this sentence', onclick: () => (store.set({ secondSentence: text }), void live.similarityChanged()) },
            h('span', { class: 'similarity-text' }, text),
            h('span', { class: 'similarity-value' }, h('span', { class: 'visually-hidden' }, ', similarity '), value.toFixed(3)),
            bar(value),
          ),
        ),
      ),
    );
    const buttons = ranked.querySelectorAll('button');
    if (focused >= 0 && buttons.length > 0) buttons[Math.min(focused, buttons.length - 1)]!.focus();
  });
}
