// Loading a model: read its bytes with progress, start a new engine on them, and only then
// replace the current one. A failure leaves the current model in place and says why. Switching
// the backend (CPU / WebGPU) loads the current model again on the other one.
import type { BackendChoice } from 'gptlens';
import { formatBytes } from './dom.ts';
import { Engine } from './engine.ts';
import { openGguf, readSource, type ModelSource } from './model-files.ts';
import { modelLoaded, snapshotKept } from './perf.ts';
import type { LoadedModel, Store } from './store.ts';

export class Loader {
  /** Only the newest load may replace the model: a slow earlier one that finishes later is dropped. */
  private latest = 0;

  /**
   * `loaded` puts the new model into the state; the previous model's Worker stops after it. A load
   * may start before the views are built (the Worker parses the weights meanwhile): no model is
   * put into the state before `viewsReady`.
   */
  constructor(
    private readonly store: Store,
    private readonly loaded: (model: LoadedModel, keepView?: boolean) => void,
    private readonly threads: number | undefined,
    private readonly viewsReady: Promise<void>,
    /**
     * Keep a snapshot of a server's .gguf's packed weights in this browser (OPFS) and load it again
     * from there, skipping the read through the page and the packing (`?snapshot=off`: never).
     */
    private readonly snapshots: boolean,
  ) {}

  /**
   * Starts the Worker the next load will take, so that its start overlaps whatever comes before
   * that load knows its files (the page's start, the catalog, the file's first response).
   */
  prepare(): void {
    Engine.prestart({ threads: this.threads, backend: this.store.state.backend });
  }

  /**
   * The current model again, on `backend` (the prompt stays and runs again). When that fails
   * (no WebGPU), the model stays where it runs and the error says why.
   */
  switchBackend(backend: BackendChoice): Promise<void> {
    const current = this.store.state.model;
    this.store.set({ backend });
    return current ? this.load(current.source) : Promise.resolve();
  }

  /**
   * The engine crashed (`trap`): a new Worker with the current model read again from its source
   * (a file the reader chose, or a URL, usually from the HTTP cache) rather than from a copy kept
   * in the page, which would double the page's memory for the model; `loaded` re-runs the prompt.
   */
  restart(trap: string): Promise<void> {
    const current = this.store.state.model;
    return current ? this.load(current.source, `The engine crashed (${trap}) and was restarted`) : Promise.resolve();
  }

  /**
   * A model already running (the Train panel's, in its own Worker) becomes the page's model, in
   * place of any load in progress; `keepView` keeps the open head and picked tokens (the same
   * model, trained further).
   */
  show(engine: Engine, source: ModelSource, { bytes, engineBytes, keepView }: { bytes: number; engineBytes: number; keepView: boolean }): void {
    ++this.latest;
    const previous = this.store.state.model;
    this.store.set({ loading: undefined, snapshot: undefined });
    this.loaded({ engine, source, id: undefined, name: source.name, bytes, engineBytes, loadMs: 0 }, keepView);
    if (previous?.engine !== engine) previous?.engine.dispose();
  }

  /**
   * Follows the shown model's snapshot while it is written (between requests, in the Worker) until
   * it is written or fails, for the diagnostics; asked every 2 s, since each question delays the
   * writing (it waits for a quiet Worker).
   */
  private async followSnapshot(engine: Engine): Promise<void> {
    for (;;) {
      await new Promise((resolve) => setTimeout(resolve, 2000));
      if (this.store.state.model?.engine !== engine) return;
      const snapshot = await engine.snapshotState().catch(() => undefined);
      if (!snapshot || this.store.state.model?.engine !== engine) return;
      this.store.set({ snapshot });
      if (snapshot.state === 'kept') snapshotKept();
      if (snapshot.state !== 'writing') return;
    }
  }

  /**
   * `source` may be a function that throws (a bad file set): that failure is reported like any
   * other. `restarting`: why the model is loaded again (said while loading and after).
   */
  async load(source: ModelSource | (() => ModelSource), restarting?: string): Promise<void> {
    const ticket = ++this.latest;
    const { backend } = this.store.state;
    let name = 'the model';
    try {
      const resolved = typeof source === 'function' ? source() : source;
      name = resolved.name;
      const reading = restarting ? `${restarting}: reading ${name} again` : `Reading ${name}`;
      this.store.set({ loadError: undefined, loading: { label: reading, fraction: 0 } });
      const progress = (fraction: number | undefined) => {
        if (ticket === this.latest) this.store.set({ loading: { label: reading, fraction } });
      };
      const started = performance.now();
      this.prepare();
      let engine: Engine;
      let bytes: number;
      let snapshotKey: string | undefined;
      const gguf = await openGguf(resolved);
      if (gguf) {
        // Read and loaded at once, piece by piece: the model is held once, in the Worker's weights.
        bytes = gguf.bytes;
        const onProgress = (read: number) => progress(bytes > 0 ? Math.min(1, read / bytes) : undefined);
        snapshotKey = this.snapshots ? gguf.snapshotKey : undefined;
        engine = await Engine.loadGguf(gguf.body, bytes, { threads: this.threads, backend, onProgress, snapshotKey });
      } else {
        const files = await readSource(resolved, progress);
        bytes = Object.values(files).reduce((sum, file) => sum + file.byteLength, 0);
        this.store.set({ loading: { label: `Checking and loading ${name} (${formatBytes(bytes)})`, fraction: undefined } });
        engine = await Engine.load(files, { threads: this.threads, backend });
      }
      const engineBytes = await engine.engineMemory();
      const snapshot = snapshotKey !== undefined ? await engine.snapshotState() : undefined;
      await this.viewsReady;
      if (ticket !== this.latest) {
        engine.dispose();
        return;
      }
      const previous = this.store.state.model;
      // Files and URLs are named by the model itself when it can (GGUF general.name, config.json's
      // _name_or_path), else by their folder or file; the server's models keep the list's name.
      const own = (engine.info as { name?: unknown }).name;
      const named = resolved.id === undefined && typeof own === 'string' && own.trim() ? own.trim() : name;
      const loadMs = modelLoaded(started, snapshot && { snapshot: snapshot.state });
      this.loaded({ engine, source: { ...resolved, name: named }, id: resolved.id, name: named, bytes, engineBytes, loadMs });
      this.store.set({ snapshot });
      if (snapshot?.state === 'writing') void this.followSnapshot(engine);
      previous?.engine.dispose();
      if (restarting) this.store.set({ loadError: `${restarting}; ${named} was loaded again.` });
    } catch (error) {
      if (ticket !== this.latest) return;
      const reason = (error instanceof Error ? error.message : String(error)).replace(/\.$/, '');
      const current = this.store.state.model;
      const kept = current ? ` Still showing ${current.name}${backend === current.engine.backendInfo.requested ? '' : `, on ${current.engine.backendInfo.backend === 'webgpu' ? 'WebGPU' : 'the CPU'}`}.` : '';
      // The backend control goes back to what the shown model runs on.
      const still = current?.engine.backendInfo.requested ?? backend;
      this.store.set({ loading: undefined, loadError: `Could not load ${name}: ${reason}.${kept}`, backend: still });
    }
  }
}
