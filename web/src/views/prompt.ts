// The prompt box (every keystroke runs the model), example prompts one click away, and the tokens
// it became, as chips with their ids. Clicking a chip (or Enter on it; arrow keys move between
// chips) picks that position as the query whose row every view highlights. Ctrl+Z / Ctrl+Shift+Z
// in the box undo and redo generated tokens (a step, a generation, a candidate) as one unit each.
import { h, setText, tokenText } from '../dom.ts';
import { isWrapped, type Live } from '../live.ts';
import { howTo, rovingFocus, setRovingStop } from '../panel-tools.ts';
import { touched, type Store } from '../store.ts';

/** Prompts whose heads are worth a look, from interpretability work. */
export const EXAMPLES = [
  {
    name: 'Indirect object',
    prompt: 'When Mary and John went to the store, John gave a drink to',
    about: 'Indirect-object identification: the model should say “Mary”. Look for heads whose last row reads “Mary” but not the repeated “John”.',
  },
  {
    name: 'Induction',
    prompt: 'Mr and Mrs Dursley of number four, Privet Drive, were proud to say. Mr and Mrs Dursley of number four,',
    about: 'A repeated sequence: induction heads look from each token of the copy to the token after its earlier occurrence (an off-diagonal stripe).',
  },
  {
    name: 'Factual recall',
    prompt: 'The Eiffel Tower is located in the city of',
    about: 'A fact stored in the weights: the next token should be “Paris”.',
  },
];

export function mountPrompt(root: HTMLElement, store: Store, live: Live): void {
  const box = h('textarea', {
    'data-testid': 'prompt',
    rows: 3,
    spellcheck: false,
    'aria-label': 'Prompt',
    // A form of its own (index.html says why).
    form: 'prompt-form',
    oninput: () => void live.edit(box.value),
    // Ctrl+Z / Ctrl+Shift+Z (Cmd on macOS; Ctrl+Y too) undo and redo a step, a generation or an
    // appended candidate as one unit; anything else (typing) is the box's own undo.
    onkeydown: (event: KeyboardEvent) => {
      if (!(event.ctrlKey || event.metaKey) || event.altKey) return;
      const key = event.key.toLowerCase();
      const redo = (key === 'z' && event.shiftKey) || (key === 'y' && !event.shiftKey);
      const undo = key === 'z' && !event.shiftKey;
      if ((undo && live.undo()) || (redo && live.redo())) event.preventDefault();
    },
  });
  const summary = h('span', { class: 'muted', 'aria-live': 'off' });
  const chat = h('button', {
    type: 'button',
    'data-testid': 'wrap-chat',
    hidden: true,
    title: "Wrap the prompt in the model's chat template (ChatML), as an instruct model expects (once: a wrapped prompt stays as it is)",
    onclick: () => void live.wrapAsChat(),
  }, 'Wrap as chat');
  const examples = h(
    'div',
    { class: 'examples', role: 'group', 'aria-label': 'Example prompts' },
    h('span', { class: 'muted' }, 'Try:'),
    ...EXAMPLES.map(({ name, prompt, about }) =>
      h('button', { type: 'button', class: 'example', 'data-testid': 'example', title: `${about}\n\n${prompt}`, onclick: () => void live.edit(prompt) }, name),
    ),
  );
  const chips = h('ol', { class: 'chips', 'data-testid': 'tokens', 'aria-label': 'Tokens: pick one to follow it as the query' });
  rovingFocus(chips, '.chip');
  const error = h('p', { class: 'prompt-error', role: 'status', 'data-testid': 'prompt-error', hidden: true });
  const help = howTo(
    'prompt',
    'Every keystroke runs the model. The text becomes tokens (below): a “·” is a space, the small number is the token’s id in the vocabulary.',
    'Pick a token (click, or Enter; arrow keys move between tokens) to follow it as the query: its row is outlined in every attention map and the LayerNorm strips. Shift+click a token to rank the heads by how much the query reads it (the head finder).',
  );
  root.append(
    h('header', { class: 'panel-head' }, h('h2', {}, 'Prompt'), summary, h('span', { class: 'spacer' }), chat, help.toggle),
    help.note,
    box,
    examples,
    error,
    chips,
  );

  chips.addEventListener('click', (event) => {
    const chip = (event.target as Element).closest<HTMLElement>('[data-pos]');
    if (!chip) return;
    const position = Number(chip.dataset.pos);
    // Shift+click: the head finder's key (the heads that move this token to the query).
    if (event.shiftKey) store.set({ finderKey: store.state.finderKey === position ? undefined : position });
    else store.set({ query: store.state.query === position ? undefined : position });
  });

  const chipButtons = () => [...chips.querySelectorAll<HTMLButtonElement>('.chip')];
  store.subscribe((state, changed) => {
    if (touched(changed, 'prompt') && box.value !== state.prompt) box.value = state.prompt;
    if (touched(changed, 'model') && state.model) {
      const { info } = state.model.engine;
      chat.hidden = !info.hasChatTemplate;
      examples.hidden = !info.hasTokenizer;
      const noTokenizer = info.tokenizerProblem ? `This model's tokenizer cannot be read (${info.tokenizerProblem})` : 'This model has no tokenizer';
      box.placeholder = info.hasTokenizer ? 'Type a prompt…' : `${noTokenizer}: type token ids (0–${info.vocabSize - 1})`;
    }
    if (touched(changed, 'prompt', 'model') && state.model?.engine.info.hasChatTemplate) {
      const engine = state.model.engine;
      void isWrapped(engine, state.prompt).then((wrapped) => {
        if (store.state.model?.engine === engine) chat.disabled = wrapped;
      });
    }
    if (touched(changed, 'promptError')) {
      error.hidden = !state.promptError;
      error.textContent = state.promptError ?? '';
    }
    if (touched(changed, 'analysis')) {
      const analysis = state.analysis;
      const count = analysis?.tokens.length ?? 0;
      setText(summary, analysis ? `${count} token${count === 1 ? '' : 's'} · ${analysis.computed} computed, ${count - analysis.computed} reused` : '');
      // Only the chips after the first changed token are rebuilt (typing at the end: the last one
      // or two); rebuilt chips keep the keyboard focus where it was.
      const labels = analysis?.labels ?? [];
      const items = [...chips.children] as HTMLLIElement[];
      let same = 0;
      while (same < Math.min(items.length, labels.length) && items[same]!.dataset.token === `${analysis!.tokens[same]}` && items[same]!.dataset.label === labels[same]) same++;
      const focused = chipButtons().indexOf(document.activeElement as HTMLButtonElement);
      for (const item of items.slice(same)) item.remove();
      chips.append(
        ...labels.slice(same).map((label, i) => {
          const position = same + i;
          const id = analysis!.tokens[position];
          return h(
            'li',
            { 'data-token': id, 'data-label': label },
            h(
              'button',
              {
                type: 'button',
                class: 'chip',
                'data-pos': position,
                'aria-pressed': 'false',
                title: `position ${position} · id ${id}${label.includes(' ') ? ' · “·” is a space' : ''}`,
              },
              h('span', { class: 'chip-text' }, tokenText(label)),
              h('span', { class: 'chip-id' }, String(id)),
              h('span', { class: 'visually-hidden' }, `, position ${position}`),
            ),
          );
        }),
      );
      const buttons = chipButtons();
      if (focused >= same && buttons.length > 0) buttons[Math.min(focused, buttons.length - 1)]!.focus();
    }
    if (touched(changed, 'analysis', 'query')) {
      const buttons = chipButtons();
      for (const button of buttons) {
        const pressed = String(Number(button.dataset.pos) === state.query);
        if (button.getAttribute('aria-pressed') !== pressed) button.setAttribute('aria-pressed', pressed);
      }
      const focused = buttons.find((button) => button === document.activeElement);
      setRovingStop(buttons, focused ?? (state.query === undefined ? undefined : buttons[state.query]));
    }
  });
}
