// Wires the page: state, the live loop, the model loader, and one view per panel.
import './styles.css';
import { followInAddress, readAddress } from './address.ts';
import { mountAnnouncer } from './announcer.ts';
import { catalogSource } from './model-files.ts';
import { defaultModel, fetchCatalog } from './catalog.ts';
import { Live } from './live.ts';
import { Loader } from './loader.ts';
import { download } from './panel-tools.ts';
import { NO_REDRAWS } from './perf.ts';
import { Store, type HeadRef } from './store.ts';
import { applyTheme, initialTheme } from './theme.ts';
import { mountAttentionDetail } from './views/attention-detail.ts';
import { mountBackendPicker } from './views/backend-picker.ts';
import { mountAttentionGrid } from './views/attention-grid.ts';
import { mountDiagnostics } from './views/diagnostics.ts';
import { mountSavedModels } from './views/saved-models.ts';
import { mountInstruments } from './views/instruments.ts';
import { mountLayerNorm } from './views/layernorm.ts';
import { mountModelPicker } from './views/model-picker.ts';
import { mountNextToken } from './views/next-token.ts';
import { mountPrompt } from './views/prompt.ts';
import { mountSimilarity } from './views/similarity.ts';
import { mountTrain } from './views/train.ts';
import { DEFAULT_SECOND, ENCODER_PROMPT } from './similarity.ts';

import { EXAMPLES } from './views/prompt.ts';

// The indirect-object task from interpretability work: a prompt whose heads are worth a look.
const DEFAULT_PROMPT = EXAMPLES[0]!.prompt;
const BYTE_MODEL_PROMPT = 'Romeo:\nBut soft, what light through yonder window breaks?\n\nJuliet:\n';

function panel(id: string): HTMLElement {
  const element = document.getElementById(id);
  if (!element) throw new Error(`index.html has no #${id}`);
  return element;
}

// The views' controls are in forms only for the browser's sake (index.html): nothing submits them.
for (const form of [panel('views-controls'), panel('prompt-form')]) form.addEventListener('submit', (event) => event.preventDefault());

const params = new URLSearchParams(location.search);
const address = readAddress(params);

/** `?threads=N` overrides the engine's thread count (1: the single-thread build). */
function threadsParameter(): number | undefined {
  const threads = Number(params.get('threads'));
  return Number.isInteger(threads) && threads >= 1 ? threads : undefined;
}

const store = new Store({
  model: undefined,
  backend: address.backend,
  loading: undefined,
  loadError: undefined,
  snapshot: undefined,
  prompt: address.prompt ?? DEFAULT_PROMPT,
  promptError: undefined,
  analysis: undefined,
  next: undefined,
  query: undefined,
  head: { layer: 0, head: 0 },
  detailView: address.detailView ?? 'map',
  normTable: address.normTable,
  missingModel: undefined,
  attentionScale: address.attentionScale ?? 'rest',
  sampling: address.sampling,
  generating: false,
  redraw: NO_REDRAWS,
  theme: address.theme ?? initialTheme(),
  detectors: address.detectors,
  headScores: undefined,
  highlight: address.highlight,
  finderKey: undefined,
  ablated: address.ablated,
  ablateWith: address.ablateWith,
  instrument: address.instrument,
  lensTarget: address.lensTarget,
  comparePrompt: address.comparePrompt,
  secondSentence: address.secondSentence ?? DEFAULT_SECOND,
  similarity: undefined,
  engineNow: undefined,
});

const live = new Live(store);
// The first model opens on the head and token the address names (if it has them); later ones on
// the first head, with no token picked.
let restore: { head: HeadRef | undefined; query: number | undefined; finderKey: number | undefined } | undefined = {
  head: address.head,
  query: address.query,
  finderKey: address.finderKey,
};
// Whether the next model is the page's first and the address gave no prompt.
let opening = address.prompt === undefined;
/** Resolved once every view is built (see below): the first model waits for it. */
let viewsBuilt = () => {};
const viewsReady = new Promise<void>((resolve) => (viewsBuilt = resolve));
// One state change: views never see the new model with the old model's analysis.
const loader = new Loader(
  store,
  (model, keepView = false) => {
    const { nLayer, nHead } = model.engine.info;
    // The same model trained further keeps the open head and picked tokens.
    if (keepView) restore = { head: store.state.head, query: store.state.query, finderKey: store.state.finderKey };
    const wanted = restore?.head;
    const head = wanted && wanted.layer < nLayer && wanted.head < nHead ? wanted : { layer: 0, head: 0 };
    const { query, finderKey } = restore ?? {};
    // A target token id means nothing in another vocabulary: only the first model keeps the address's.
    const lensTarget = restore ? store.state.lensTarget : undefined;
    restore = undefined;
    // Ablated heads and MLPs this model does not have are dropped.
    const ablated = store.state.ablated.filter((name) => {
      const [layer, unit] = name.split('.');
      return Number(layer) < nLayer && (unit === 'mlp' || Number(unit) < nHead);
    });
    // An encoder opens on a sentence to compare rather than the decoders' default prompt; the page's
    // first model, when byte-level (gptlens's own, trained on Shakespeare) and the address names no
    // prompt, on a scene to continue.
    const byDefault = store.state.prompt === DEFAULT_PROMPT;
    const scene = byDefault && opening && model.engine.info.vocabSize === 256;
    opening = false;
    const prompt = byDefault && model.engine.encoder ? ENCODER_PROMPT : scene ? BYTE_MODEL_PROMPT : store.state.prompt;
    store.set({ model, prompt, loading: undefined, analysis: undefined, next: undefined, similarity: undefined, headScores: undefined, finderKey, ablated, head, query, lensTarget, redraw: NO_REDRAWS, engineNow: undefined });
    live.modelChanged();
  },
  threadsParameter(),
  viewsReady,
  params.get('snapshot') !== 'off',
);
live.onCrash = (trap) => void loader.restart(trap);
// The engine's Worker starts now, while the page builds itself and asks for its catalog and model.
loader.prepare();

const themeToggle = panel('theme-toggle');
themeToggle.addEventListener('click', () => store.set({ theme: store.state.theme === 'dark' ? 'light' : 'dark' }));
store.subscribe((state, changed) => {
  if (!changed.has('theme')) return;
  applyTheme(state.theme);
  themeToggle.textContent = state.theme === 'dark' ? '☀' : '☾';
  themeToggle.title = `Switch to the ${state.theme === 'dark' ? 'light' : 'dark'} theme`;
});

const exportTrace = panel('export-trace') as HTMLButtonElement;
exportTrace.setAttribute('aria-label', 'Download the trace as safetensors');
exportTrace.addEventListener('click', async () => {
  const bytes = await live.traceSafetensors();
  if (!bytes) return;
  download(`gptlens-trace-${store.state.model?.name.replace(/[^\w.-]+/g, '_') ?? 'model'}.safetensors`, new Blob([bytes as Uint8Array<ArrayBuffer>], { type: 'application/octet-stream' }));
});
store.subscribe((state, changed) => {
  if (changed.has('analysis')) exportTrace.disabled = state.analysis === undefined;
});

/**
 * Lets the browser run what waits (input, a frame) before the next views are built: built in one
 * go, they made a single main-thread task of 60–90 ms while the page opened.
 */
const yieldToBrowser = () => new Promise<void>((resolve) => setTimeout(resolve, 0));
const catalog = await fetchCatalog();
mountModelPicker(panel('model-picker'), panel('status'), store, catalog, loader);
mountBackendPicker(panel('model-picker'), store, loader);

// The model starts loading now, the Worker parsing its weights while the other views are built.
const requested = address.model;
if (requested !== undefined && !catalog.models.some((model) => model.id === requested)) store.set({ missingModel: requested });
const unavailable = catalog.models.find((model) => model.id === requested && model.unavailable !== undefined);
if (unavailable) store.set({ loadError: `${unavailable.name} is not available here: ${unavailable.unavailable}.` });
const initial = defaultModel(catalog, requested ?? null);
if (initial) {
  void loader.load(catalogSource(initial));
} else {
  store.set({ loadError: 'The server lists no models: open a .gguf, or config.json + .safetensors, or load one from a URL.' });
}
await yieldToBrowser();

mountPrompt(panel('prompt-panel'), store, live);
mountNextToken(panel('next-panel'), store, live);
mountSimilarity(panel('similarity-panel'), store, live);
// An encoder predicts no next token: the similarity panel takes the next-token panel's place.
store.subscribe((state, changed) => {
  if (!changed.has('model')) return;
  const encoder = state.model?.engine.encoder ?? false;
  panel('next-panel').hidden = encoder;
  panel('similarity-panel').hidden = !encoder;
});
await yieldToBrowser();
mountAttentionGrid(panel('grid-panel'), store, live);
await yieldToBrowser();
mountAttentionDetail(panel('detail-panel'), store, live);
mountLayerNorm(panel('layernorm-panel'), store);
await yieldToBrowser();
mountInstruments(panel('instruments-panel'), store, live);
mountTrain(panel('train-panel'), store, loader, threadsParameter());
mountDiagnostics(panel('diagnostics-panel'), store);
mountSavedModels(panel('diagnostics-panel'), store);
mountAnnouncer(document.body, store);
followInAddress(store);
viewsBuilt();
