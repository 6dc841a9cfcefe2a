// The live loop: prompt edits, steps and generation become forward passes on the current model,
// and their results become the page's state. Session calls run one at a time (they share the KV
// cache); prompt edits are coalesced on top, so typing fast never queues stale forward passes:
// at most one runs, and the newest prompt is the next.
import { coalesceLatest, cosine, type WorkerTrace } from 'gptlens';
import { drawInFrame } from './dom.ts';
import { engineCrash, PromptError, type Engine } from './engine.ts';
import { quantile, RedrawClock, stage, stageTook } from './perf.ts';
import { RANKED_SENTENCES } from './similarity.ts';
import type { Store } from './store.ts';

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** True when `text` already begins with what the chat template puts before a user's words. */
export async function isWrapped(engine: Engine, text: string): Promise<boolean> {
  const opening = await engine.chatOpening();
  return opening.length > 0 && text.trimStart().startsWith(opening);
}

/** When runs take the Worker this long or less (ms), the next is waited for in the next frame... */
const SHORT_RUN_MS = 5;
/** ...for at most this long. */
const SHORT_RUN_WAIT_MS = 8;

export class Live {
  private readonly clock = new RedrawClock();
  /** The tokens the views show, and the trace they came from (kept for sampling questions). */
  private tokens: Uint32Array = new Uint32Array();
  private trace: WorkerTrace | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private readonly runPrompt = coalesceLatest((text: string, keystroke: number | undefined) =>
    this.exclusive(() => this.showPrompt(text, keystroke)),
  );
  private readonly repredict = coalesceLatest(() => this.exclusive(() => this.predictAgain()));
  /** Encoders: the similarity panel, recomputed for the newest texts (embeddings outside the session). */
  private readonly resimilar = coalesceLatest(() => this.computeSimilarity());
  /** Generated text as undoable units (a step, a generation, an appended candidate): the prompt
   * before and after each. Typing is the prompt box's own undo; these sit on top of it. */
  private readonly undone: { before: string; after: string }[] = [];
  private readonly done: { before: string; after: string }[] = [];
  /** The unit in progress (a generation spans many steps), awaited before an undo. */
  private unit: Promise<void> | undefined;
  /** Bumped by every generate and stop: a generation loop runs only while it is the current one,
   * so a stopped loop never resumes because a newer generation set `generating` again. */
  private generation = 0;

  /** Called once per crashed engine with the trap's name; main.ts restarts the engine. */
  onCrash: (trap: string) => void = () => {};
  private readonly crashedEngines = new WeakSet<Engine>();
  /** The prompt that crashed the engine last (until a run succeeds): crashing on it again after a
   * restart restarts the engine without running it a third time, so a prompt that always traps
   * cannot restart the engine in a loop. */
  private crashedPrompt: string | undefined;
  private holdRerun = false;
  /** The Worker's time (encoding, forward pass, next token) for the latest three runs. A model's
   * first run reads the whole prompt, where a typed character's reads one new position as a rule
   * (not an encoder's, which reads every token again): it counts as its time per position, so
   * that the first keystroke's answer is waited for too. A new model's first run is not. */
  private runMs: number[] = [];
  /** When the engine's memory was last read for the diagnostics (`performance.now()`). */
  private memoryReadAt = -Infinity;

  constructor(private readonly store: Store) {
    // A long prompt's views hold one whole head: opening another fetches it.
    store.subscribe((state, changed) => {
      if (changed.has('head') && state.analysis?.pooled) void this.reopen();
    });
  }

  /** Fetches the opened head of a long prompt's views when they do not hold it yet. */
  private reopen(): Promise<void> {
    return this.exclusive(async () => {
      const { engine, trace } = this;
      const { analysis, head } = this.store.state;
      if (!engine?.keepsQueries || !trace || !analysis?.pooled || (analysis.opened?.layer === head.layer && analysis.opened.head === head.head)) return;
      try {
        const opened = await engine.headPattern(head);
        if (engine === this.engine && this.store.state.analysis === analysis) this.store.set({ analysis: { ...analysis, opened } });
      } catch (error) {
        if (this.crashed(engine, error)) return;
        this.store.set({ promptError: message(error) });
      }
    });
  }

  /** True (and the restart asked for, once per engine) when `error` is the engine's crash. */
  private crashed(engine: Engine, error: unknown): boolean {
    const trap = engineCrash(error);
    if (trap === undefined) return false;
    if (this.crashedEngines.has(engine)) return true;
    this.crashedEngines.add(engine);
    const { prompt } = this.store.state;
    this.holdRerun = this.crashedPrompt === prompt;
    this.crashedPrompt = prompt;
    this.generation++;
    this.store.set({ generating: false });
    this.onCrash(trap);
    return true;
  }

  private get engine(): Engine | undefined {
    return this.store.state.model?.engine;
  }

  /** A keystroke in the prompt box (or any new prompt text; `typed` false for an undo or redo,
   * which keeps the redo history). Settles once the views show this text (or a newer one). */
  async edit(text: string, typed = true): Promise<void> {
    if (typed) this.undone.length = 0;
    const keystroke = this.clock.keystroke();
    this.generation++;
    this.store.set({ prompt: text, generating: false });
    void this.resimilar();
    await this.runPrompt(text, keystroke);
  }

  /** Encoders: the second sentence (or the prompt) changed; settles once the panel shows the newest texts. */
  async similarityChanged(): Promise<void> {
    await this.resimilar();
  }

  /**
   * The prompt's sentence embedding against the second sentence and the ranked sentences: one
   * round trip for the text that changed (the others are kept by the engine).
   */
  private async computeSimilarity(): Promise<void> {
    const engine = this.engine;
    if (!engine?.encoder) {
      if (this.store.state.similarity) this.store.set({ similarity: undefined });
      return;
    }
    const { prompt, secondSentence: second } = this.store.state;
    try {
      const mine = await engine.embed(prompt);
      const other = await engine.embed(second);
      const ranked: { text: string; score: number }[] = [];
      for (const text of RANKED_SENTENCES) ranked.push({ text, score: cosine(mine, await engine.embed(text)) });
      ranked.sort((a, b) => b.score - a.score);
      if (engine !== this.engine) return;
      this.store.set({ similarity: { prompt, second, score: cosine(mine, other), ranked, error: undefined } });
    } catch (error) {
      if (engine !== this.engine || this.crashed(engine, error)) return;
      this.store.set({ similarity: { prompt, second, score: undefined, ranked: [], error: message(error) } });
    }
  }

  /** Replaces the prompt with itself wrapped in the model's chat template (instruct models). A
   * prompt that already starts like the template (wrapped before) stays as it is. */
  async wrapAsChat(): Promise<void> {
    const engine = this.engine;
    if (!engine?.info.hasChatTemplate) return;
    const text = this.store.state.prompt;
    if (await isWrapped(engine, text)) return;
    await this.edit(await engine.chatPrompt(text));
  }

  /** The current trace as a safetensors file (every captured tensor), or undefined before a run. */
  traceSafetensors(): Promise<Uint8Array> | undefined {
    return this.trace?.toSafetensors();
  }

  /** A new model is loaded: the same prompt, run on it. */
  modelChanged(): void {
    this.clock.reset();
    this.runMs = [];
    const { ablated, ablateWith } = this.store.state;
    if (ablated.length > 0) void this.store.state.model?.engine.setAblation(ablated, ablateWith);
    this.tokens = new Uint32Array();
    this.trace = undefined;
    if (this.holdRerun) {
      this.holdRerun = false;
      this.store.set({ promptError: 'This prompt crashed the engine twice, so after the restart it was not run again: edit it to try again.' });
      return;
    }
    void this.runPrompt(this.store.state.prompt, undefined);
    void this.resimilar();
    if (this.store.state.detectors === 'repeated') void this.detectorsChanged();
  }

  /**
   * The head detectors' source changed, or a model was loaded: scores on the repeated sequence
   * (once per model), on the current prompt's trace, or none.
   */
  async detectorsChanged(): Promise<void> {
    const { engine, trace } = this;
    const { detectors } = this.store.state;
    if (!engine || detectors === 'off') {
      this.store.set({ headScores: undefined });
      return;
    }
    try {
      const headScores = detectors === 'repeated' ? await engine.repeatedHeadScores() : await trace?.headScores();
      if (engine === this.engine && this.store.state.detectors === detectors) this.store.set({ headScores });
    } catch (error) {
      if (this.crashed(engine, error)) return;
      this.store.set({ promptError: message(error) });
    }
  }

  /** Ablates a head (`"layer.head"`) or an MLP (`"layer.mlp"`), or brings it back, and re-runs. */
  toggleAblated(name: string): Promise<void> {
    const { ablated } = this.store.state;
    this.store.set({ ablated: (ablated.includes(name) ? ablated.filter((n) => n !== name) : [...ablated, name]).sort() });
    return this.ablationChanged();
  }

  /** The ablated heads changed: the session runs without them from now on, and the prompt again. */
  async ablationChanged(): Promise<void> {
    const engine = this.engine;
    if (!engine) return;
    try {
      await engine.setAblation(this.store.state.ablated, this.store.state.ablateWith);
      this.tokens = new Uint32Array();
      await this.runPrompt(this.store.state.prompt, undefined);
    } catch (error) {
      if (this.crashed(engine, error)) return;
      this.store.set({ promptError: message(error) });
    }
  }

  /** The sampling settings changed: the same trace, new survivors. */
  samplingChanged(): void {
    void this.repredict();
  }

  /** Appends `token` (a candidate the reader clicked): one undoable unit. */
  choose(token: number): Promise<void> {
    return this.undoable(() => this.exclusive(() => this.append(async () => token)));
  }

  /** Appends a token sampled under the current settings: one undoable unit. */
  step(): Promise<void> {
    return this.undoable(() => this.sampleOne());
  }

  /** Samples up to `count` tokens one at a time, every view following, until stopped or full;
   * the whole generation is one undoable unit. */
  async generate(count: number): Promise<void> {
    const mine = ++this.generation;
    this.store.set({ generating: true });
    // A stopped generation may still have a step in flight: start after it has settled, so this
    // unit's "before" is the prompt it left and the two never interleave.
    await this.unit;
    if (mine !== this.generation) return;
    return this.undoable(async () => {
      for (let i = 0; i < count && mine === this.generation && this.store.state.generating; i++) {
        const full = this.tokens.length >= (this.engine?.info.contextLength ?? 0);
        if (full || this.tokens.length === 0) break;
        await this.sampleOne();
        // End of sequence: the model has finished its answer.
        if (this.tokens[this.tokens.length - 1] === this.engine?.info.eosTokenId) break;
      }
      if (mine === this.generation) this.store.set({ generating: false });
    });
  }

  /**
   * Undoes the last step, generation or appended candidate when the prompt is still what it left
   * (a generation in progress stops first). False when there is none: the prompt box's own undo
   * (typing) applies.
   */
  undo(): boolean {
    return this.travel(this.done, this.undone, 'after', 'before');
  }

  /** Redoes the last undone unit when the prompt is still what the undo left. */
  redo(): boolean {
    return this.travel(this.undone, this.done, 'before', 'after');
  }

  private travel(from: { before: string; after: string }[], to: { before: string; after: string }[], now: 'before' | 'after', then: 'before' | 'after'): boolean {
    if (this.store.state.generating) {
      // Stop, and undo once the generation has settled.
      this.stop();
      void this.unit?.then(() => this.travel(from, to, now, then));
      return true;
    }
    const last = from[from.length - 1];
    if (!last || last[now] !== this.store.state.prompt) return false;
    from.pop();
    to.push(last);
    void this.edit(last[then], false);
    return true;
  }

  /** Runs `task` (which changes the prompt by generated tokens) and records it as one unit. */
  private undoable(task: () => Promise<void>): Promise<void> {
    const before = this.store.state.prompt;
    const recorded = task().finally(() => {
      const after = this.store.state.prompt;
      if (after === before) return;
      this.done.push({ before, after });
      this.undone.length = 0;
    });
    this.unit = recorded.catch(() => {});
    return recorded;
  }

  private sampleOne(): Promise<void> {
    return this.exclusive(() => this.append((engine) => engine.sample(this.store.state.sampling)));
  }

  stop(): void {
    this.generation++;
    this.store.set({ generating: false });
  }

  private exclusive<T>(task: () => Promise<T>): Promise<T> {
    const result = this.queue.then(task);
    this.queue = result.catch(() => {});
    return result;
  }

  private async showPrompt(text: string, keystroke: number | undefined): Promise<void> {
    const engine = this.engine;
    if (!engine) return;
    try {
      // An empty prompt may still be tokens (BERT's [CLS] [SEP], a BOS): asked first, it runs when it is.
      const input = text === '' && engine.info.hasTokenizer ? await engine.tokenize(text) : text;
      if (input.length === 0 || (!engine.info.hasTokenizer && text.trim() === '')) {
        this.clear();
        return;
      }
      await this.show(engine, input, keystroke);
    } catch (error) {
      if (engine !== this.engine) return; // the model changed meanwhile; its successor reruns the prompt
      if (this.crashed(engine, error)) return;
      this.store.set({ promptError: error instanceof PromptError ? error.message : `The engine failed: ${message(error)}` });
    }
  }

  /** Runs `next(engine)`'s token after the current ones and puts the decoded text in the prompt box. */
  private async append(next: (engine: Engine) => Promise<number>): Promise<void> {
    const engine = this.engine;
    // An encoder does not generate (the page hides step and generate for it).
    if (!engine || engine.encoder || this.tokens.length === 0) return;
    try {
      if (this.tokens.length >= engine.info.contextLength) throw new PromptError('The context is full.');
      const tokens = Uint32Array.of(...this.tokens, await next(engine));
      await this.show(engine, tokens, undefined);
      this.store.set({ prompt: await engine.detokenize(tokens) });
    } catch (error) {
      if (this.crashed(engine, error)) return;
      this.store.set({ promptError: message(error), generating: false });
    }
  }

  private async show(engine: Engine, input: string | Uint32Array, keystroke: number | undefined): Promise<void> {
    // One message to the Worker: encoding, the forward pass, labels and the next token.
    // When the model's runs take the Worker a few ms, this one's answer is waited for at the
    // start of the next frame (the keystroke's own), blocked, and drawn in it. Brought by the
    // Worker's note it would arrive after that frame and be painted in the one after. A longer
    // run's answer is not waited for: its note brings it, and this thread stays free meanwhile.
    // The median of three, so that one run slowed by the machine does not leave the next unwaited;
    // and not after a run longer than the wait itself (an edit early in a long prompt reads every
    // position after it), which would not have come in time either. Every answer comes in shared
    // memory (`Engine.run`): by message the Worker copied SmolLM2's maps out of the engine into
    // new memory (6.9 MB at 80 tokens), whose pages Chromium maps on first write, on each
    // keystroke's path.
    const waitable = this.runMs.length > 0 && quantile([...this.runMs].sort((a, b) => a - b), 0.5) <= SHORT_RUN_MS && this.runMs.at(-1)! <= SHORT_RUN_WAIT_MS;
    const running = engine.run(input, this.store.state.head, engine.encoder ? undefined : this.store.state.sampling);
    // True once the frame's callback has settled the answer (this one: only one run is in
    // flight); it is read right after, in the same frame, and then the views are drawn in it.
    let inFrame = false;
    // An answer its note brought before the frame: the frame must not wait for a later request's.
    let answered = false;
    const settled = () => (answered = true);
    running.then(settled, settled);
    if (waitable) requestAnimationFrame(() => (inFrame = !answered && engine.waitForAnswer(SHORT_RUN_WAIT_MS)));
    const { trace, analysis, next, timings } = await running;
    let drawnInFrame = inFrame;
    const tokens = analysis.tokens;
    stageTook('tokenize', timings.tokenize);
    stageTook('forward', timings.forward, { computed: analysis.computed, tokens: tokens.length });
    stageTook('next-token', timings.next);
    stageTook('transfer', timings.transfer);
    const extraStart = performance.now();
    // With heads ablated, each candidate also shows its probability without the ablation.
    if (next && this.store.state.ablated.length > 0) {
      drawnInFrame = false; // another round trip to the Worker first
      const before = await engine.unablatedProbs(tokens);
      for (const candidate of next.candidates) candidate.before = before[candidate.id];
    }
    // Scored on the prompt: with the rest of the run, in the same redraw (they need every whole
    // map: a long prompt's pooled ones have none).
    const onPrompt = this.store.state.detectors === 'prompt';
    if (onPrompt && !analysis.pooled) drawnInFrame = false;
    const headScores = onPrompt ? (analysis.pooled ? undefined : await trace.headScores()) : this.store.state.headScores;
    const extraMs = performance.now() - extraStart;
    if (engine !== this.engine) {
      void trace.release();
      return;
    }
    const workerMs = timings.tokenize + timings.forward + timings.next;
    this.runMs = [...this.runMs.slice(-2), this.runMs.length === 0 && !engine.encoder ? workerMs / Math.max(1, analysis.computed) : workerMs];
    void this.trace?.release();
    this.trace = trace;
    this.tokens = tokens;
    this.crashedPrompt = undefined;
    const { query } = this.store.state;
    const drawStart = performance.now();
    // Inside the keystroke's frame, the views' later draws wait for this frame's paint.
    const inThisFrame = (draw: () => void) => (drawnInFrame ? drawInFrame(draw) : draw());
    inThisFrame(() =>
      this.store.set({
        analysis,
        next,
        headScores,
        promptError: undefined,
        query: query !== undefined && query < tokens.length ? query : undefined,
        finderKey: this.store.state.finderKey !== undefined && this.store.state.finderKey < tokens.length ? this.store.state.finderKey : undefined,
      }),
    );
    const drawMs = stage('views', drawStart);
    const latest = {
      tokenizeMs: timings.tokenize,
      forwardMs: timings.forward,
      predictMs: timings.next,
      transferMs: timings.transfer,
      extraMs: extraMs > 0.05 ? extraMs : undefined,
      drawMs,
      computed: analysis.computed,
      tokens: tokens.length,
    };
    inThisFrame(() => this.store.set({ redraw: this.clock.stats(latest) }));
    if (performance.now() - this.memoryReadAt > 1000) {
      this.memoryReadAt = performance.now();
      void engine.engineMemory().then((bytes) => engine === this.engine && this.store.set({ engineNow: bytes }), () => {});
    }
    // Not awaited: the next forward pass need not wait for this paint.
    if (keystroke !== undefined) {
      void this.clock.painted(keystroke, drawnInFrame).then((ms) => ms !== undefined && this.store.set({ redraw: this.clock.stats(latest) }));
    }
  }

  private async predictAgain(): Promise<void> {
    const { engine, trace } = this;
    if (!engine || !trace || engine.encoder) return;
    try {
      this.store.set({ next: await engine.predict(trace, this.store.state.sampling) });
    } catch (error) {
      if (this.crashed(engine, error)) return;
      this.store.set({ promptError: message(error) });
    }
  }

  private clear(): void {
    void this.trace?.release();
    this.trace = undefined;
    this.tokens = new Uint32Array();
    this.store.set({ analysis: undefined, next: undefined, promptError: undefined, query: undefined, finderKey: undefined });
  }
}
