// How the engine runs here: CPU or WebGPU and why, the GPU adapter, which wasm build and why,
// isolation, the model, and the timings of the latest redraw (keystroke → views painted, with the
// forward pass and the drawing in it).
import type { GpuAdapterInfo, SnapshotState } from 'gptlens';
import { drawnWhenSeen, formatBytes, formatCount, formatMs, h } from '../dom.ts';
import { touched, type State, type Store } from '../store.ts';

/** "google swiftshader · fallback (software)", and its key limits. */
function describeAdapter(adapter: GpuAdapterInfo): [string, string] {
  const maker = [adapter.vendor, adapter.architecture].filter((word) => word && word !== 'unknown').join(' ') || adapter.name || 'unnamed adapter';
  const kind = adapter.isFallbackAdapter ? 'fallback adapter (software)' : adapter.isSoftware ? 'software adapter' : 'hardware adapter';
  const limits = [
    `max storage binding ${formatBytes(adapter.maxStorageBufferBindingSize)}`,
    `max buffer ${formatBytes(adapter.maxBufferSize)}`,
    `workgroup storage ${formatBytes(adapter.maxComputeWorkgroupStorageSize)}`,
  ].join(' · ');
  return [`${maker} · ${kind}`, `${adapter.name && maker !== adapter.name ? `${adapter.name} · ` : ''}isFallbackAdapter ${adapter.isFallbackAdapter} · ${limits}`];
}

export function mountDiagnostics(root: HTMLElement, store: Store): void {
  const list = h('dl', { class: 'facts' });
  root.append(h('header', { class: 'panel-head' }, h('h2', {}, 'Diagnostics')), list);

  type Fact = { field: string; label: string; value: string; detail: string | undefined };
  const fact = (field: string, label: string, value: string, detail?: string): Fact => ({ field, label, value, detail });
  /** The rows on screen, by field: a redraw (twice per keystroke) rewrites only the text that changed. */
  let shown = new Map<string, { fact: Fact; dd: HTMLElement }>();
  const show = (facts: Fact[]) => {
    const fields = [...shown.keys()];
    const same = facts.length === fields.length && facts.every(({ field, label }, i) => fields[i] === field && shown.get(field)!.fact.label === label);
    if (!same) {
      shown = new Map(facts.map((fact) => [fact.field, { fact, dd: h('dd', { 'data-field': fact.field }) }]));
      list.replaceChildren(...[...shown.values()].flatMap(({ fact, dd }) => [h('dt', {}, fact.label), dd]));
    }
    for (const next of facts) {
      const row = shown.get(next.field)!;
      if (same && row.fact.value === next.value && row.fact.detail === next.detail) continue;
      row.fact = next;
      row.dd.replaceChildren(next.value, ...(next.detail ? [h('small', {}, next.detail)] : []));
    }
  };

  const render = (state: Readonly<State>) => {
    const { model, redraw } = state;
    const rows = [
      fact('isolation', 'cross-origin isolated', crossOriginIsolated ? 'yes' : 'no', crossOriginIsolated ? undefined : 'threads need COOP/COEP headers'),
    ];
    if (!model) rows.push(fact('adapter', 'GPU adapter', 'gpu' in navigator ? 'not asked yet' : 'none: this browser has no WebGPU'));
    if (model) {
      const { backend, backendInfo, info } = model.engine;
      const adapter = backendInfo.adapter ? describeAdapter(backendInfo.adapter) : (['none', 'gpu' in navigator ? 'WebGPU offered no adapter' : 'this browser has no WebGPU'] as const);
      rows.unshift(
        fact('backend', 'backend', backendInfo.backend === 'webgpu' ? 'WebGPU' : 'CPU', backendInfo.reason.replace(/^(cpu|webgpu): /, '')),
        fact('adapter', 'GPU adapter', adapter[0], adapter[1]),
        fact('simd', 'SIMD128', backend.simd ? 'yes' : 'no'),
        fact('threads', 'threads', String(backend.threads), backend.reason),
      );
      rows.push(
        fact(
          'model',
          'model',
          model.name,
          `${info.architecture} · ${info.nLayer} layers × ${info.nHead} heads${info.nKvHead < info.nHead ? ` (${info.nKvHead} key/value)` : ''} · d ${info.dModel} · vocab ${formatCount(info.vocabSize)} · context ${info.contextLength}${info.contextCut ? ` (${info.contextCut})` : ''}`,
        ),
        fact(
          'size',
          'size',
          `${formatBytes(model.bytes)} · ${formatCount(info.nParams)} parameters`,
          `${formatBytes(info.memoryBytes)} of weights in memory · engine memory ${formatBytes(model.engineBytes)} after loading · read and loaded in ${formatMs(model.loadMs)}`,
        ),
      );
      if (state.snapshot) rows.push(fact('snapshot', 'saved copy', ...savedCopy(state.snapshot)));
    }
    if (model && state.engineNow !== undefined) {
      rows.push(fact('memory', 'engine memory', formatBytes(state.engineNow), 'the Worker’s WebAssembly memory now: the most loading and running have taken (it never shrinks)'));
    }
    if (redraw.forwardMs !== undefined) {
      const budget = (ms: number, limit: number) => `${formatMs(ms)}${ms > limit ? ` (over its ${limit} ms budget)` : ''}`;
      rows.push(
        fact('forward', 'last forward', formatMs(redraw.forwardMs), `${redraw.computed} of ${redraw.tokens} tokens computed, the rest reused from the session`),
        fact(
          'stages',
          'redraw stages',
          [
            `tokenize ${budget(redraw.tokenizeMs!, 1)}`,
            `forward ${formatMs(redraw.forwardMs)}`,
            `next token ${budget(redraw.predictMs!, 1)}`,
            `message ${formatMs(redraw.transferMs!)}`,
            ...(redraw.extraMs === undefined ? [] : [`ablation and detectors ${formatMs(redraw.extraMs)}`]),
            `views ${budget(redraw.drawMs!, 6)}`,
          ].join(' · '),
          'one message to the engine’s Worker per redraw: encoding, forward pass and next token timed there; “message” is the rest of its round trip (copying the tensors, waiting for this page to be free); then the update of every view',
        ),
      );
    }
    if (redraw.count > 0) {
      rows.push(
        fact(
          'redraw',
          'keystroke → redraw',
          formatMs(redraw.lastMs!),
          `median ${formatMs(redraw.medianMs!)} · p95 ${formatMs(redraw.p95Ms!)} · ${redraw.count} keystroke${redraw.count === 1 ? '' : 's'}`,
        ),
      );
    }
    show(rows);
  };

  // Below the fold on most screens: redrawn after the keystroke's frame (or once seen), not in it.
  const redraw = drawnWhenSeen(root, () => render(store.state));
  store.subscribe((_, changed) => {
    if (touched(changed, 'model', 'redraw', 'engineNow', 'snapshot')) redraw();
  });
}

/** The diagnostics' words for the snapshot of the weights a load used or left: [value, detail]. */
function savedCopy({ state, missed, why }: SnapshotState): [string, string] {
  const kept = 'the packed weights, kept in this browser (origin-private file system) to load again without reading and packing the file';
  const notUsed = missed ? `not used (${missed})` : 'not used';
  switch (state) {
    case 'restored':
      return ['loaded from it', kept];
    case 'writing':
      return [`${notUsed}; being written`, `${kept}: written between keystrokes, for the next load`];
    case 'kept':
      return [`${notUsed}; written`, kept];
    case 'failed':
      return [`${notUsed}; could not be written`, why ?? ''];
    case 'none':
      return [notUsed, kept];
    case 'deleted':
      return ['deleted from this browser', 'the next load of this file reads it and saves it again'];
  }
}
