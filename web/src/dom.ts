// A few DOM helpers so the views read as markup, plus the number and token formats the page shares.

/** Attribute values; a function under an `on…` name is an event listener. */
type Attributes = Record<string, string | number | boolean | undefined | ((event: never) => void)>;
type Child = Node | string | null | undefined | false;

/** `h('button', { class: 'x', onclick }, 'Label')`: attributes, `on*` listeners, then children. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attributes: Attributes = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name.startsWith('on') && typeof value === 'function') {
      element.addEventListener(name.slice(2), value as EventListener);
    } else if (value === true) {
      element.setAttribute(name, '');
    } else if (value !== undefined && value !== false) {
      element.setAttribute(name, String(value));
    }
  }
  element.append(...children.filter((child): child is Node | string => child !== null && child !== undefined && child !== false));
  return element;
}

export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ['KB', 'MB', 'GB'];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

export function formatCount(count: number): string {
  if (count >= 1e9) return `${(count / 1e9).toFixed(2)} B`;
  if (count >= 1e6) return `${(count / 1e6).toFixed(1)} M`;
  if (count >= 1e3) return `${(count / 1e3).toFixed(1)} K`;
  return String(count);
}

export function formatPercent(prob: number): string {
  const percent = prob * 100;
  return `${percent >= 10 ? percent.toFixed(1) : percent >= 0.01 ? percent.toFixed(2) : percent.toExponential(0)}%`;
}

export function formatMs(ms: number): string {
  return ms >= 100 ? `${ms.toFixed(0)} ms` : `${ms.toFixed(1)} ms`;
}

/** A token as the page shows it: spaces as `·` so " the" and "the" differ at a glance. */
export function tokenText(label: string): string {
  return label.replaceAll(' ', '·');
}

/** A theme colour or font from the stylesheet's custom properties, for canvas drawing. */
export function cssVar(name: string): string {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

/** Calls `callback` when `element`'s width changes (not its height, which a redraw may change). */
export function onWidthChange(element: Element, callback: () => void): void {
  let width = -1;
  new ResizeObserver(([entry]) => {
    const next = Math.round(entry!.contentRect.width);
    if (next !== width) {
      width = next;
      callback();
    }
  }).observe(element);
}
