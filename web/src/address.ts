// The page's state in its address: model, prompt, picked token, open head and view, sampling
// settings, colour scale, theme, backend, the head detectors (source, highlighted kind, the head
// finder's key), the ablated heads and MLPs, and the instruments (the open one, the lens's target
// token, patching's corrupted prompt), and an encoder's second sentence. Every change replaces the history entry (a prompt
// being typed, at most every 300 ms), so the address is always a link to what is on screen, and
// opening it restores that.
import type { AblateWith, BackendChoice, SamplingParams } from 'gptlens';
import type { AttentionScale } from './attention-paint.ts';
import { touched, type DetailView, type DetectorKind, type DetectorSource, type HeadRef, type Instrument, type State, type Store } from './store.ts';
import type { Theme } from './theme.ts';

const VIEWS: DetailView[] = ['map', 'lines', 'row', 'table'];
const SCALES: AttentionScale[] = ['rest', 'linear', 'sqrt'];
const TRACKED: (keyof State)[] = [
  'model',
  'prompt',
  'query',
  'head',
  'detailView',
  'normTable',
  'sampling',
  'attentionScale',
  'theme',
  'backend',
  'detectors',
  'highlight',
  'finderKey',
  'ablated',
  'ablateWith',
  'instrument',
  'lensTarget',
  'comparePrompt',
  'secondSentence',
];
/** `inst=` spells each instrument short. */
const INSTRUMENTS: Record<string, Instrument> = { lens: 'lens', dla: 'attribution', patch: 'patching' };
/** `highlight=` spells each detector short. */
const HIGHLIGHTS: Record<string, DetectorKind> = { prev: 'previousToken', first: 'firstToken', dup: 'duplicateToken', ind: 'induction' };

/** What an address asks for; absent or malformed parameters are undefined. */
export interface AddressState {
  model: string | undefined;
  prompt: string | undefined;
  query: number | undefined;
  head: HeadRef | undefined;
  detailView: DetailView | undefined;
  normTable: boolean;
  sampling: SamplingParams;
  attentionScale: AttentionScale | undefined;
  theme: Theme | undefined;
  backend: BackendChoice;
  detectors: DetectorSource;
  highlight: DetectorKind | undefined;
  finderKey: number | undefined;
  ablated: string[];
  ablateWith: AblateWith;
  instrument: Instrument | undefined;
  lensTarget: number | undefined;
  comparePrompt: string | undefined;
  /** `second=`: the similarity panel's second sentence (encoders). */
  secondSentence: string | undefined;
}

function integer(value: string | null, min: number, max = Number.MAX_SAFE_INTEGER): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  const number = Number(value);
  return Number.isInteger(number) && number >= min && number <= max ? number : undefined;
}

function fraction(value: string | null, min: number, max: number): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  const number = Number(value);
  return Number.isFinite(number) && number >= min && number <= max ? number : undefined;
}

export function readAddress(params: URLSearchParams): AddressState {
  const theme = params.get('theme');
  const backend = params.get('backend');
  const view = params.get('view') as DetailView | null;
  const scale = params.get('scale') as AttentionScale | null;
  const [layer, head] = (params.get('head') ?? '').split('.').map((part) => integer(part, 0));
  const sampling: SamplingParams = { temperature: fraction(params.get('temp'), 0, 2) ?? 1 };
  const topK = integer(params.get('topk'), 1, 1000);
  const topP = fraction(params.get('topp'), 0.05, 0.999999);
  if (topK !== undefined) sampling.topK = topK;
  if (topP !== undefined) sampling.topP = topP;
  return {
    model: params.get('model') ?? undefined,
    prompt: params.get('prompt') ?? undefined,
    query: integer(params.get('q'), 0),
    head: layer !== undefined && head !== undefined ? { layer, head } : undefined,
    detailView: view && VIEWS.includes(view) ? view : undefined,
    normTable: params.get('norms') === 'table',
    sampling,
    attentionScale: scale && SCALES.includes(scale) ? scale : undefined,
    theme: theme === 'light' || theme === 'dark' ? theme : undefined,
    backend: backend === 'cpu' || backend === 'webgpu' ? backend : 'auto',
    detectors: params.get('detect') === 'repeated' || params.get('detect') === 'prompt' ? (params.get('detect') as DetectorSource) : 'off',
    highlight: HIGHLIGHTS[params.get('highlight') ?? ''],
    finderKey: integer(params.get('key'), 0),
    ablateWith: params.get('ablate_with') === 'mean' ? 'mean' : 'zero',
    instrument: INSTRUMENTS[params.get('inst') ?? ''],
    lensTarget: integer(params.get('target'), 0),
    comparePrompt: params.get('compare') ?? undefined,
    secondSentence: params.get('second') ?? undefined,
    ablated: [...new Set((params.get('ablate') ?? '').split(',').filter((unit) => /^\d{1,4}\.(\d{1,4}|mlp)$/.test(unit)))].sort(),
  };
}

/** The address for `state` (other parameters, such as `threads`, are kept). */
export function addressOf(state: Readonly<State>, current: string): URL {
  const url = new URL(current);
  const params = url.searchParams;
  const put = (name: string, value: string | number | undefined) => (value === undefined ? params.delete(name) : params.set(name, String(value)));
  // A model opened from files or a URL cannot be linked to: the link then opens the default.
  if (state.model) put('model', state.model.id);
  put('prompt', state.prompt);
  put('q', state.query);
  put('head', `${state.head.layer}.${state.head.head}`);
  put('view', state.detailView === 'map' ? undefined : state.detailView);
  put('norms', state.normTable ? 'table' : undefined);
  put('temp', state.sampling.temperature === 1 ? undefined : state.sampling.temperature);
  put('topk', state.sampling.topK);
  put('topp', state.sampling.topP);
  put('scale', state.attentionScale === 'rest' ? undefined : state.attentionScale);
  put('theme', state.theme);
  put('backend', state.backend);
  put('detect', state.detectors === 'off' ? undefined : state.detectors);
  put('highlight', Object.entries(HIGHLIGHTS).find(([, kind]) => kind === state.highlight)?.[0]);
  put('key', state.finderKey);
  put('ablate', state.ablated.length > 0 ? state.ablated.join(',') : undefined);
  put('ablate_with', state.ablateWith === 'mean' ? 'mean' : undefined);
  put('inst', Object.entries(INSTRUMENTS).find(([, instrument]) => instrument === state.instrument)?.[0]);
  put('target', state.lensTarget);
  put('compare', state.comparePrompt || undefined);
  // Only an encoder shows the second sentence: a decoder's link does not carry it.
  put('second', state.model?.engine.encoder ? state.secondSentence : undefined);
  return url;
}

/** Keeps the address in step with the state (history replaced, never pushed). */
export function followInAddress(store: Store): void {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const write = () => {
    timer = undefined;
    // Until the first model is there, the address still says what the reader asked for.
    if (!store.state.model) return;
    const next = addressOf(store.state, location.href);
    if (next.href !== location.href) history.replaceState(history.state, '', next);
  };
  store.subscribe((_, changed) => {
    if (!touched(changed, ...TRACKED)) return;
    if (timer !== undefined) clearTimeout(timer);
    // Typing: one replace per pause, not per keystroke; anything else in a task of its own, since
    // a replaceState took 13–22 ms here (the browser records a same-document navigation) and on
    // top of a new model's views made one task of over 50 ms.
    timer = setTimeout(write, changed.size === 1 && changed.has('prompt') ? 300 : 0);
  });
}
