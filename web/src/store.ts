// The page's state in one place. Views subscribe and look at which keys changed, so a slider
// move repaints the bars but not 270 attention maps.
import type { Analysis, NextToken } from './analysis.ts';
import type { AttentionScale } from './attention-paint.ts';
import type { Engine } from './engine.ts';
import type { RedrawStats } from './perf.ts';
import type { Theme } from './theme.ts';
import type { AblateWith, BackendChoice, HeadScores, SamplingParams, SnapshotState } from 'gptlens';
import type { ModelSource } from './model-files.ts';
import type { Similarity } from './similarity.ts';

export interface LoadedModel {
  engine: Engine;
  /** Where its bytes came from: a backend switch reads them again. */
  source: ModelSource;
  /** Catalog id, when the model came from the server's list. */
  id: string | undefined;
  name: string;
  bytes: number;
  /** The Worker's engine memory once loaded: what loading took at most (wasm memory never shrinks). */
  engineBytes: number;
  /** From the first byte read to the model ready. */
  loadMs: number;
}

export interface Loading {
  label: string;
  /** 0..1 while bytes arrive; undefined while the engine parses them. */
  fraction: number | undefined;
}

/** How the head detail shows the open head: its map, lines, the picked query's row as bars, or a table. */
export type DetailView = 'map' | 'lines' | 'row' | 'table';

/** Where the head detectors score the heads: not at all, on the seeded repeated random sequence
 * (what shows induction heads), or on the prompt as it is typed. */
export type DetectorSource = 'off' | 'repeated' | 'prompt';

/** The detectors, as `HeadScores` names them. */
export type DetectorKind = 'previousToken' | 'firstToken' | 'duplicateToken' | 'induction';

/** The open instrument of the instruments panel. */
export type Instrument = 'lens' | 'attribution' | 'patching';

export interface HeadRef {
  layer: number;
  head: number;
}

export interface State {
  model: LoadedModel | undefined;
  /** The backend asked for: the next load uses it (`?backend=`, or the backend control). */
  backend: BackendChoice;
  loading: Loading | undefined;
  /** The last load failure, shown until dismissed or the next load. */
  loadError: string | undefined;
  /** The prompt box's text (the reader's, or the decoded tokens after a step). */
  prompt: string;
  /** A prompt the engine could not run (too long, bad ids), shown under the prompt. */
  promptError: string | undefined;
  analysis: Analysis | undefined;
  next: NextToken | undefined;
  /** Query position picked on a token chip; its row is highlighted everywhere. */
  query: number | undefined;
  head: HeadRef;
  detailView: DetailView;
  /** The LayerNorm panel as heat strips or as a table of numbers. */
  normTable: boolean;
  /** `?model=` named a model the server does not list (the page says so and offers the list). */
  missingModel: string | undefined;
  /** Attention colour scale: `rest` spans each head's range without the first key (the sink),
   * `sqrt` lifts small weights out of the dark, `linear` is 0..1. */
  attentionScale: AttentionScale;
  sampling: SamplingParams;
  generating: boolean;
  redraw: RedrawStats;
  theme: Theme;
  detectors: DetectorSource;
  /** The detectors' scores on `detectors`' sequence, once computed. */
  headScores: HeadScores | undefined;
  /** Heads scoring at least DETECTOR_THRESHOLD on this detector are highlighted in the grid. */
  highlight: DetectorKind | undefined;
  /** The head finder's key position: the grid ranks heads by the picked (else last) query's
   * weight on it. */
  finderKey: number | undefined;
  /** Zero-ablated heads (`"layer.head"`) and MLPs (`"layer.mlp"`), sorted: every view shows the run without them. */
  ablated: readonly string[];
  /** What the ablated units output: zero, or their mean over the prompt's positions. */
  ablateWith: AblateWith;
  /** The open instrument (logit lens, attribution, patching), if any. */
  instrument: Instrument | undefined;
  /** The token the logit lens follows through the depth (else each position's final top token). */
  lensTarget: number | undefined;
  /** Patching's corrupted prompt (the prompt box holds the clean one). */
  comparePrompt: string | undefined;
  /** Encoders: the sentence compared with the prompt in the similarity panel. */
  secondSentence: string;
  /** Encoders: the prompt's similarity to the second sentence and the ranked sentences. */
  similarity: Similarity | undefined;
  /** The Worker engine's WebAssembly memory, read at most once a second after runs. */
  engineNow: number | undefined;
  /** The snapshot of the shown model's packed weights in this browser: loaded from, being written, written, or why not. */
  snapshot: SnapshotState | undefined;
}

export type Listener = (state: Readonly<State>, changed: ReadonlySet<keyof State>) => void;

export class Store {
  private readonly listeners: Listener[] = [];

  constructor(private current: State) {}

  get state(): Readonly<State> {
    return this.current;
  }

  /** Applies `patch` and tells every listener, synchronously, which keys changed. */
  set(patch: Partial<State>): void {
    const changed = new Set<keyof State>();
    for (const key of Object.keys(patch) as (keyof State)[]) {
      if (!Object.is(this.current[key], patch[key])) changed.add(key);
    }
    if (changed.size === 0) return;
    this.current = { ...this.current, ...patch };
    for (const listener of this.listeners) listener(this.current, changed);
  }

  /** Calls `listener` now with every key marked changed, then on each change. */
  subscribe(listener: Listener): void {
    this.listeners.push(listener);
    listener(this.current, new Set(Object.keys(this.current) as (keyof State)[]));
  }
}

/** True when any of `keys` changed. */
export function touched(changed: ReadonlySet<keyof State>, ...keys: (keyof State)[]): boolean {
  return keys.some((key) => changed.has(key));
}
