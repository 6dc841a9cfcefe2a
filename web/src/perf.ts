// Keystroke → redrawn views, measured with the User Timing API so the numbers also show in the
// browser's performance panel. A keystroke's latency runs from its input event to the first
// paint of views that include it; keystrokes that were coalesced into one forward pass are all
// answered by that paint, and the earliest of them gives the (worst) number recorded.

const INPUT_MARK = 'gptlens:keystroke';
const REDRAW_MEASURE = 'gptlens:keystroke→redraw';

export interface RedrawStats {
  count: number;
  lastMs: number | undefined;
  medianMs: number | undefined;
  p95Ms: number | undefined;
  /** Where the latest redraw's time went: worker round trips (tokenize, forward pass, next-token
   * query) and the synchronous update of every view. */
  tokenizeMs: number | undefined;
  forwardMs: number | undefined;
  predictMs: number | undefined;
  drawMs: number | undefined;
  /** Positions computed by the latest run, of `tokens` (the rest reused from the session's cache). */
  computed: number | undefined;
  tokens: number | undefined;
}

/** The latest redraw's own numbers, which `RedrawClock.stats` joins to the keystroke statistics. */
export type Latest = Pick<RedrawStats, 'tokenizeMs' | 'forwardMs' | 'predictMs' | 'drawMs' | 'computed' | 'tokens'>;

export const NO_REDRAWS: RedrawStats = {
  count: 0,
  lastMs: undefined,
  medianMs: undefined,
  p95Ms: undefined,
  tokenizeMs: undefined,
  forwardMs: undefined,
  predictMs: undefined,
  drawMs: undefined,
  computed: undefined,
  tokens: undefined,
};

/** Resolves after the browser has painted the current DOM (the task after the next frame). */
function nextPaint(): Promise<void> {
  return new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
}

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

export class RedrawClock {
  private lastSeq = 0;
  private pending: { seq: number; start: number }[] = [];
  private readonly samples: number[] = [];

  /** Records a keystroke; returns its sequence number, to hand to `painted` with the run it started. */
  keystroke(): number {
    const start = performance.now();
    performance.mark(INPUT_MARK, { startTime: start });
    this.pending.push({ seq: ++this.lastSeq, start });
    return this.lastSeq;
  }

  /** Views now show the run started by keystroke `seq`: waits for the paint and measures. */
  async painted(seq: number): Promise<number | undefined> {
    const answered = this.pending.filter((keystroke) => keystroke.seq <= seq);
    if (answered.length === 0) return undefined;
    this.pending = this.pending.filter((keystroke) => keystroke.seq > seq);
    await nextPaint();
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
