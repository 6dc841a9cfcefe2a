// Things every panel shares: a dismissible "how to read this" note with its toggle, downloads
// (PNG, SVG, CSV, safetensors) and arrow-key movement through a row of buttons.
import { drawnSize, h } from './dom.ts';

const DISMISSED = 'gptlens-howto-hidden';

function dismissed(): Set<string> {
  try {
    return new Set(JSON.parse(localStorage.getItem(DISMISSED) ?? '[]') as string[]);
  } catch {
    return new Set();
  }
}

/**
 * A short explanation shown above a panel's view until dismissed (remembered per panel), and the
 * "?" button for the panel's header that shows it again.
 */
export function howTo(id: string, ...paragraphs: (string | Node)[]): { note: HTMLElement; toggle: HTMLButtonElement } {
  const noteId = `howto-${id}`;
  const toggle = h('button', { type: 'button', class: 'quiet howto-toggle', 'aria-controls': noteId, 'aria-label': 'How to read this', title: 'How to read this' }, '?');
  const close = h('button', { type: 'button', class: 'quiet howto-close', 'aria-label': 'Hide how to read this' }, '✕');
  const note = h(
    'div',
    { class: 'howto', id: noteId, role: 'note', 'data-testid': `howto-${id}` },
    h('div', { class: 'howto-text' }, ...paragraphs.map((text) => (typeof text === 'string' ? h('p', {}, text) : text))),
    close,
  );
  const show = (visible: boolean) => {
    note.hidden = !visible;
    toggle.setAttribute('aria-expanded', String(visible));
    const hidden = dismissed();
    if (visible) hidden.delete(id);
    else hidden.add(id);
    localStorage.setItem(DISMISSED, JSON.stringify([...hidden]));
  };
  const initially = !dismissed().has(id);
  note.hidden = !initially;
  toggle.setAttribute('aria-expanded', String(initially));
  toggle.addEventListener('click', () => show(Boolean(note.hidden)));
  close.addEventListener('click', () => {
    show(false);
    toggle.focus();
  });
  return { note, toggle };
}

export function download(name: string, data: Blob): void {
  const url = URL.createObjectURL(data);
  const link = h('a', { href: url, download: name, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** Saves what is drawn on `canvas` (not the room a growing one keeps) as a PNG. */
export function downloadCanvas(name: string, canvas: HTMLCanvasElement): void {
  const { width, height } = drawnSize(canvas);
  if (width === canvas.width && height === canvas.height) {
    canvas.toBlob((blob) => blob && download(name, blob), 'image/png');
    return;
  }
  const drawn = new OffscreenCanvas(width, height);
  drawn.getContext('2d')!.drawImage(canvas, 0, 0);
  void drawn.convertToBlob({ type: 'image/png' }).then((blob) => download(name, blob));
}

export function downloadSvg(name: string, svg: SVGSVGElement): void {
  const copy = svg.cloneNode(true) as SVGSVGElement;
  copy.setAttribute('xmlns', 'http://www.w3.org/2000/svg');
  download(name, new Blob([new XMLSerializer().serializeToString(copy)], { type: 'image/svg+xml' }));
}

function csvField(value: string | number): string {
  const text = String(value);
  return /[",\n\r]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

export function downloadCsv(name: string, rows: (string | number)[][]): void {
  download(name, new Blob([rows.map((row) => row.map(csvField).join(',')).join('\n') + '\n'], { type: 'text/csv' }));
}

/** A small menu-less export button. */
export function exportButton(label: string, description: string, run: () => void): HTMLButtonElement {
  return h('button', { type: 'button', class: 'quiet export', title: description, 'aria-label': description, onclick: run }, label);
}

/**
 * Arrow keys (and Home/End) move focus through `container`'s items matching `selector`, one of
 * which is in the tab order at a time (roving tabindex); `columns` > 1 makes Up/Down jump rows.
 */
export function rovingFocus(container: HTMLElement, selector: string, columns: () => number = () => 1): void {
  container.addEventListener('keydown', (event) => {
    const items = [...container.querySelectorAll<HTMLElement>(selector)];
    const index = items.indexOf(event.target as HTMLElement);
    if (index < 0) return;
    const step: Record<string, number> = {
      ArrowRight: 1,
      ArrowLeft: -1,
      ArrowDown: columns(),
      ArrowUp: -columns(),
      Home: -index,
      End: items.length - 1 - index,
    };
    const delta = step[event.key];
    if (delta === undefined) return;
    const next = items[index + delta];
    event.preventDefault();
    if (!next) return;
    for (const item of items) item.tabIndex = -1;
    next.tabIndex = 0;
    next.focus();
  });
}

/** Makes `active` (or the first item) the one tabbable item of a roving group. */
export function setRovingStop(items: HTMLElement[], active: HTMLElement | undefined): void {
  const stop = active ?? items[0];
  // Set only what changes: an attribute written on every keystroke for every chip and head is
  // style and mutation work for nothing.
  for (const item of items) {
    const index = item === stop ? 0 : -1;
    if (item.tabIndex !== index) item.tabIndex = index;
  }
}
