// The prompt box (every keystroke runs the model) and the tokens it became, as chips with their
// ids. Clicking a chip picks that position as the query whose row every view highlights.
import { h, tokenText } from '../dom.ts';
import type { Live } from '../live.ts';
import { touched, type Store } from '../store.ts';

export function mountPrompt(root: HTMLElement, store: Store, live: Live): void {
  const box = h('textarea', {
    'data-testid': 'prompt',
    rows: 3,
    spellcheck: false,
    'aria-label': 'Prompt',
    oninput: () => live.edit(box.value),
  });
  const summary = h('span', { class: 'muted' });
  const chat = h('button', {
    type: 'button',
    'data-testid': 'wrap-chat',
    hidden: true,
    title: "Wrap the prompt in the model's chat template (ChatML), as an instruct model expects",
    onclick: () => void live.wrapAsChat(),
  }, 'Wrap as chat');
  const chips = h('div', { class: 'chips', 'data-testid': 'tokens', role: 'list' });
  const error = h('p', { class: 'prompt-error', role: 'status', 'data-testid': 'prompt-error', hidden: true });
  root.append(
    h('header', { class: 'panel-head' }, h('h2', {}, 'Prompt'), summary, chat),
    box,
    error,
    chips,
    h('p', { class: 'hint' }, 'Click a token to follow it as the query in every view.'),
  );

  chips.addEventListener('click', (event) => {
    const chip = (event.target as Element).closest<HTMLElement>('[data-pos]');
    if (!chip) return;
    const position = Number(chip.dataset.pos);
    store.set({ query: store.state.query === position ? undefined : position });
  });

  store.subscribe((state, changed) => {
    if (touched(changed, 'prompt') && box.value !== state.prompt) box.value = state.prompt;
    if (touched(changed, 'model') && state.model) {
      const { info } = state.model.engine;
      chat.hidden = !info.hasChatTemplate;
      box.placeholder = info.hasTokenizer ? 'Type a prompt…' : `This model has no tokenizer: type token ids (0–${info.vocabSize - 1})`;
    }
    if (touched(changed, 'promptError')) {
      error.hidden = !state.promptError;
      error.textContent = state.promptError ?? '';
    }
    if (touched(changed, 'analysis', 'query')) {
      const analysis = state.analysis;
      const count = analysis?.tokens.length ?? 0;
      summary.textContent = analysis
        ? `${count} token${count === 1 ? '' : 's'} · ${analysis.computed} computed, ${count - analysis.computed} reused`
        : '';
      chips.replaceChildren(
        ...(analysis?.labels ?? []).map((label, position) =>
          h(
            'button',
            {
              type: 'button',
              class: 'chip',
              role: 'listitem',
              'data-pos': position,
              'aria-pressed': String(position === state.query),
              title: `position ${position} · id ${analysis!.tokens[position]}`,
            },
            h('span', { class: 'chip-text' }, tokenText(label)),
            h('span', { class: 'chip-id' }, String(analysis!.tokens[position])),
          ),
        ),
      );
    }
  });
}
