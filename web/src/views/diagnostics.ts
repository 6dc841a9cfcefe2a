// How the engine runs here: CPU or WebGPU and why, the GPU adapter, which wasm build and why,
// isolation, the model, and the timings of the latest redraw (keystroke → views painted, with the
// forward pass and the drawing in it).
import type { GpuAdapterInfo } from 'gptlens';
import { formatBytes, formatCount, formatMs, h } from '../dom.ts';
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

  const fact = (field: string, label: string, value: string, detail?: string) => [
    h('dt', {}, label),
    h('dd', { 'data-field': field }, value, detail ? h('small', {}, detail) : null),
  ];

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
          `${info.architecture} · ${info.nLayer} layers × ${info.nHead} heads${info.nKvHead < info.nHead ? ` (${info.nKvHead} key/value)` : ''} · d ${info.dModel} · vocab ${formatCount(info.vocabSize)} · context ${info.contextLength}`,
        ),
        fact(
          'size',
          'size',
          `${formatBytes(model.bytes)} · ${formatCount(info.nParams)} parameters`,
          `${formatBytes(info.memoryBytes)} of weights in memory · engine memory ${formatBytes(model.engineBytes)} after loading · read and loaded in ${formatMs(model.loadMs)}`,
        ),
      );
    }
    if (model && state.engineNow !== undefined) {
      rows.push(fact('memory', 'engine memory', formatBytes(state.engineNow), 'the Worker’s WebAssembly memory now: the most loading and running have taken (it never shrinks)'));
    }
    if (redraw.forwardMs !== undefined) {
      rows.push(
        fact('forward', 'last forward', formatMs(redraw.forwardMs), `${redraw.computed} of ${redraw.tokens} tokens computed, the rest reused from the session (round trip, tensors included)`),
        fact(
          'stages',
          'redraw stages',
          `${redraw.tokenizeMs === undefined ? '' : `tokenize ${formatMs(redraw.tokenizeMs)} · `}forward ${formatMs(redraw.forwardMs)} · next token ${formatMs(redraw.predictMs!)} · views ${formatMs(redraw.drawMs!)}`,
          'worker round trips, then the synchronous update of every view',
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
    list.replaceChildren(...rows.flat());
  };

  store.subscribe((state, changed) => {
    if (touched(changed, 'model', 'redraw', 'engineNow')) render(state);
  });
}
