// Wires the page: state, the live loop, the model loader, and one view per panel.
import './styles.css';
import type { BackendChoice } from 'gptlens';
import { catalogSource } from './model-files.ts';
import { defaultModel, fetchCatalog } from './catalog.ts';
import { Live } from './live.ts';
import { Loader } from './loader.ts';
import { NO_REDRAWS } from './perf.ts';
import { Store } from './store.ts';
import { applyTheme, initialTheme } from './theme.ts';
import { mountAttentionDetail } from './views/attention-detail.ts';
import { mountBackendPicker } from './views/backend-picker.ts';
import { mountAttentionGrid } from './views/attention-grid.ts';
import { mountDiagnostics } from './views/diagnostics.ts';
import { mountLayerNorm } from './views/layernorm.ts';
import { mountModelPicker } from './views/model-picker.ts';
import { mountNextToken } from './views/next-token.ts';
import { mountPrompt } from './views/prompt.ts';

// The indirect-object task from interpretability work: a prompt whose heads are worth a look.
const DEFAULT_PROMPT = 'When Mary and John went to the store, John gave a drink to';

function panel(id: string): HTMLElement {
  const element = document.getElementById(id);
  if (!element) throw new Error(`index.html has no #${id}`);
  return element;
}

const params = new URLSearchParams(location.search);

/** `?threads=N` overrides the engine's thread count (1: the single-thread build). */
function threadsParameter(): number | undefined {
  const threads = Number(params.get('threads'));
  return Number.isInteger(threads) && threads >= 1 ? threads : undefined;
}
/** `?backend=webgpu|cpu|auto` chooses where the model runs (default auto: WebGPU on a hardware GPU). */
function backendParameter(): BackendChoice {
  const backend = params.get('backend');
  return backend === 'cpu' || backend === 'webgpu' ? backend : 'auto';
}

const store = new Store({
  model: undefined,
  backend: backendParameter(),
  loading: undefined,
  loadError: undefined,
  prompt: params.get('prompt') ?? DEFAULT_PROMPT,
  promptError: undefined,
  analysis: undefined,
  next: undefined,
  query: undefined,
  head: { layer: 0, head: 0 },
  attentionScale: 'linear',
  sampling: { temperature: 1 },
  generating: false,
  redraw: NO_REDRAWS,
  theme: params.get('theme') === 'light' ? 'light' : params.get('theme') === 'dark' ? 'dark' : initialTheme(),
});

const live = new Live(store);
// One state change: views never see the new model with the old model's analysis.
const loader = new Loader(store, (model) => {
  store.set({ model, loading: undefined, analysis: undefined, next: undefined, head: { layer: 0, head: 0 }, query: undefined, redraw: NO_REDRAWS });
  live.modelChanged();
}, threadsParameter());

const themeToggle = panel('theme-toggle');
themeToggle.addEventListener('click', () => store.set({ theme: store.state.theme === 'dark' ? 'light' : 'dark' }));
store.subscribe((state, changed) => {
  if (!changed.has('theme')) return;
  applyTheme(state.theme);
  themeToggle.textContent = state.theme === 'dark' ? '☀' : '☾';
  themeToggle.title = `Switch to the ${state.theme === 'dark' ? 'light' : 'dark'} theme`;
});

const catalog = await fetchCatalog();
mountModelPicker(panel('model-picker'), panel('status'), store, catalog, loader);
mountBackendPicker(panel('model-picker'), store, loader);
mountPrompt(panel('prompt-panel'), store, live);
mountNextToken(panel('next-panel'), store, live);
mountAttentionGrid(panel('grid-panel'), store);
mountAttentionDetail(panel('detail-panel'), store);
mountLayerNorm(panel('layernorm-panel'), store);
mountDiagnostics(panel('diagnostics-panel'), store);

const initial = defaultModel(catalog, params.get('model'));
if (initial) {
  void loader.load(catalogSource(initial));
} else {
  store.set({ loadError: 'The server lists no models: open a .gguf, or config.json + .safetensors, or load one from a URL.' });
}
