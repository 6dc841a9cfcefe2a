// Where the model runs: auto (WebGPU on a hardware GPU, else the CPU), the CPU, or WebGPU (any
// adapter, software included). A change loads the model again there and reruns the prompt; the
// address follows (`?backend=`), so a reload keeps the choice.
import type { BackendChoice } from 'gptlens';
import { h } from '../dom.ts';
import type { Loader } from '../loader.ts';
import { touched, type Store } from '../store.ts';

const CHOICES: [BackendChoice, string][] = [
  ['auto', 'Auto'],
  ['cpu', 'CPU'],
  ['webgpu', 'WebGPU'],
];

export function mountBackendPicker(root: HTMLElement, store: Store, loader: Loader): void {
  const select = h(
    'select',
    {
      'data-testid': 'backend-select',
      'aria-label': 'Backend',
      title: 'Where the model runs. Auto: WebGPU on a hardware GPU, else the CPU; WebGPU: any adapter, software included',
      onchange: () => void loader.switchBackend(select.value as BackendChoice),
    },
    ...CHOICES.map(([value, label]) => h('option', { value }, label)),
  );
  root.append(h('label', { class: 'picker-label' }, h('span', {}, 'Backend'), select));

  store.subscribe((state, changed) => {
    if (touched(changed, 'backend')) {
      select.value = state.backend;
      const url = new URL(location.href);
      if ((url.searchParams.get('backend') ?? 'auto') !== state.backend) {
        url.searchParams.set('backend', state.backend);
        history.replaceState(null, '', url);
      }
    }
    if (touched(changed, 'loading')) select.disabled = state.loading !== undefined;
  });
}
