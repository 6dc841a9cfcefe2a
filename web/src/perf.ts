// Keystroke → redrawn views, measured with the User Timing API so the numbers also show in the
// browser's performance panel. A keystroke's latency runs from its input event to the first
// paint of views that include it; keystrokes that were coalesced into one forward pass are all
// answered by that paint, and the earliest of them gives the (worst) number recorded.
import type { SnapshotState } from 'gptlens';

const INPUT_MARK = 'gptlens:keystroke';
const REDRAW_MEASURE = 'gptlens:keystroke→redraw';
/** Marked once per page: the first next-token probabilities painted (cold start, from navigation). */
const FIRST_PROBABILITIES = 'gptlens:first-probabilities';
/** Measured once per model: its load, from asking for it to the page taking it (its Worker
 * started, the file read into the weights, the views built). With the first run's forward stage
 * it splits a cold start into its parts (npm run bench:live reports them). */
const MODEL_LOAD = 'gptlens:load';
/** Measured once per model: the start of the Worker its load runs on (the wasm module, the thread
 * pool), begun when the page opened or the load began (`Engine.prestart`), so maybe before the load. */
const WORKER_START = 'gptlens:worker-start';
/** Marked when the snapshot of the shown model's weights has been written (the bench waits for it). */
const SNAPSHOT_KEPT = 'gptlens:snapshot-kept';

/**
 * A redraw's stages, each a User Timing measure `gptlens:stage:<name>` (npm run bench:live reads
 * them): in the Worker, encoding, the forward pass and the next token; `transfer`, the rest of
 * the round trip (the messages, copying the tensors, waiting for this thread to be free); then
 * the views' update and the browser's paint.
 */
export type Stage = 'tokenize' | 'forward' | 'next-token' | 'transfer' | 'views' | 'paint';
const STAGES: Stage[] = ['tokenize', 'forward', 'next-token', 'transfer', 'views', 'paint'];

/** Keystrokes whose marks and measures the browser keeps (it keeps User Timing entries until they
 * are cleared: 10,000 keystrokes left 70,000 of them, 12 MB per 1,000). A PerformanceObserver
 * sees every entry as it is made, cleared or not. */
const KEPT_KEYSTROKES = 1000;

/** Measures stage `name` from `start` to now; returns its milliseconds. */
export function stage(name: Stage, start: number, detail?: Record<string, number>): number {
  return performance.measure(`gptlens:stage:${name}`, { start, end: performance.now(), detail }).duration;
}

/** Records stage `name` as taking `ms` (timed elsewhere: in the Worker), ending now. */
export function stageTook(name: Stage, ms: number, detail?: Record<string, number>): void {
  performance.measure(`gptlens:stage:${name}`, { start: performance.now() - ms, duration: ms, detail });
}

/** Measures a model's load, begun at `start`, ending now; `detail.snapshot`: whether it was restored from one. */
export function modelLoaded(start: number, detail?: { snapshot: SnapshotState['state'] }): number {
  return performance.measure(MODEL_LOAD, { start, end: performance.now(), detail }).duration;
}

/** Marks the snapshot of the shown model's weights written (`Loader`). */
export function snapshotKept(): void {
  performance.mark(SNAPSHOT_KEPT);
}

/** Measures a Worker's start, from `start` to `end` (when its client was ready). */
export function workerStarted(start: number, end: number): void {
  performance.measure(WORKER_START, { start, end });
}

let firstProbabilities = false;

/** Marks the first probabilities on screen, once per page load. */
export function firstProbabilitiesShown(): void {
  if (firstProbabilities) return;
  firstProbabilities = true;
  void nextPaint(false).then(() => performance.mark(FIRST_PROBABILITIES));
}

export interface RedrawStats {
  count: number;
  lastMs: number | undefined;
  medianMs: number | undefined;
  p95Ms: number | undefined;
  /** Where the latest redraw's time went: in the Worker (encoding, forward pass, next token), the
   * rest of its round trip, other questions to the Worker (ablation, detectors), and the
   * synchronous update of every view. */
  tokenizeMs: number | undefined;
  forwardMs: number | undefined;
  predictMs: number | undefined;
  transferMs: number | undefined;
  extraMs: number | undefined;
  drawMs: number | undefined;
  /** Positions computed by the latest run, of `tokens` (the rest reused from the session's cache). */
  computed: number | undefined;
  tokens: number | undefined;
}

/** The latest redraw's own numbers, which `RedrawClock.stats` joins to the keystroke statistics. */
export type Latest = Pick<RedrawStats, 'tokenizeMs' | 'forwardMs' | 'predictMs' | 'transferMs' | 'extraMs' | 'drawMs' | 'computed' | 'tokens'>;

export const NO_REDRAWS: RedrawStats = {
  count: 0,
  lastMs: undefined,
  medianMs: undefined,
  p95Ms: undefined,
  tokenizeMs: undefined,
  forwardMs: undefined,
  predictMs: undefined,
  transferMs: undefined,
  extraMs: undefined,
  drawMs: undefined,
  computed: undefined,
  tokens: undefined,
};

/** Resolves after the browser has painted the current DOM — the task after the frame that paints
 * it: this one when it was drawn in an animation-frame callback (`inFrame`), else the next —
 * with the time that frame began drawing it. */
async function nextPaint(inFrame: boolean): Promise<number> {
  // Resumed in the frame's animation-frame step (promise callbacks run there before style, layout and paint).
  if (!inFrame) await new Promise(requestAnimationFrame);
  const frame = performance.now();
  await new Promise((resolve) => setTimeout(resolve, 0));
  return frame;
}

/** The value at fraction `q` of `sorted` (ascending); the upper middle for 0.5 of an even count. */
export function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

export class RedrawClock {
  private lastSeq = 0;
  private pending: { seq: number; start: number }[] = [];
  private readonly samples: number[] = [];

  /** Records a keystroke; returns its sequence number, to hand to `painted` with the run it started. */
  keystroke(): number {
    if (this.lastSeq % KEPT_KEYSTROKES === KEPT_KEYSTROKES - 1) {
      performance.clearMarks(INPUT_MARK);
      performance.clearMeasures(REDRAW_MEASURE);
      for (const stage of STAGES) performance.clearMeasures(`gptlens:stage:${stage}`);
    }
    const start = performance.now();
    performance.mark(INPUT_MARK, { startTime: start });
    this.pending.push({ seq: ++this.lastSeq, start });
    return this.lastSeq;
  }

  /** Views now show the run started by keystroke `seq` (drawn in an animation-frame callback
   * when `inFrame`): waits for the paint and measures. */
  async painted(seq: number, inFrame = false): Promise<number | undefined> {
    const answered = this.pending.filter((keystroke) => keystroke.seq <= seq);
    if (answered.length === 0) return undefined;
    this.pending = this.pending.filter((keystroke) => keystroke.seq > seq);
    const drawn = performance.now();
    const frame = await nextPaint(inFrame);
    // The paint in two: waiting for the browser's next frame (its clock ticks 60 times a second,
    // whatever the page does), then the frame's own work (style, layout, paint).
    stage('paint', drawn, { frameWaitMs: frame - drawn, renderMs: performance.now() - frame });
    const { duration } = performance.measure(REDRAW_MEASURE, { start: answered[0]!.start, end: performance.now() });
    this.samples.push(duration);
    return duration;
  }

  /** Forgets the samples (a new model has its own numbers). */
  reset(): void {
    this.samples.length = 0;
  }

  stats(latest: Latest): RedrawStats {
    const sorted = [...this.samples].sort((a, b) => a - b);
    const has = sorted.length > 0;
    return {
      count: sorted.length,
      lastMs: this.samples.at(-1),
      medianMs: has ? quantile(sorted, 0.5) : undefined,
      p95Ms: has ? quantile(sorted, 0.95) : undefined,
      ...latest,
    };
  }
}
