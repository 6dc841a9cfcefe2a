// One floating label for every view's hover read-outs.
import { h } from './dom.ts';

const tip = h('div', { class: 'tooltip', role: 'tooltip', hidden: true });
document.body.append(tip);

/** Shows `lines` (the first in bold) near the pointer of `event`. */
export function showTooltip(event: MouseEvent, lines: string[]): void {
  tip.replaceChildren(...lines.map((line, i) => h(i === 0 ? 'strong' : 'span', {}, line)));
  tip.hidden = false;
  const margin = 14;
  const { offsetWidth: width, offsetHeight: height } = tip;
  const x = event.clientX + margin + width > innerWidth ? event.clientX - margin - width : event.clientX + margin;
  const y = event.clientY + margin + height > innerHeight ? event.clientY - margin - height : event.clientY + margin;
  tip.style.transform = `translate(${Math.max(4, x)}px, ${Math.max(4, y)}px)`;
}

export function hideTooltip(): void {
  tip.hidden = true;
}
