// Choosing the model: the server's list (with sizes), local files by picker or drag-and-drop, or
// a URL. Shows reading progress and, when a load fails, why (the previous model stays).
import type { Catalog } from '../catalog.ts';
import { formatBytes, h } from '../dom.ts';
import type { Loader } from '../loader.ts';
import { catalogSource, filesOfDirectory, localSource, urlSource } from '../model-files.ts';
import { touched, type Store } from '../store.ts';

const LOCAL = '';

export function mountModelPicker(root: HTMLElement, progressRoot: HTMLElement, store: Store, catalog: Catalog, loader: Loader): void {
  const group = (label: string, kind: 'model' | 'fixture') => {
    const models = catalog.models.filter((model) => model.kind === kind);
    return models.length === 0
      ? null
      : h(
          'optgroup',
          { label },
          ...models.map((model) =>
            model.unavailable !== undefined
              ? h('option', { value: model.id, disabled: true, title: model.unavailable }, `${model.name} · unavailable: ${model.unavailable}`)
              : h('option', { value: model.id }, `${model.name} · ${formatBytes(model.bytes)}${model.license ? ` · ${model.license}` : ''}`),
          ),
        );
  };
  const localOption = h('option', { value: LOCAL, hidden: true }, '');
  const select = h(
    'select',
    {
      'data-testid': 'model-select',
      'aria-label': 'Model',
      onchange: () => {
        const model = catalog.models.find((entry) => entry.id === select.value && entry.unavailable === undefined);
        if (model) void loader.load(catalogSource(model));
      },
    },
    localOption,
    group('Models (assets/models)', 'model'),
    group('Test fixtures (random weights)', 'fixture'),
  );

  const loadFiles = (files: File[], folder?: string) => void loader.load(() => localSource(files, folder));
  const fileInput = h('input', {
    type: 'file',
    multiple: true,
    accept: '.gguf,.safetensors,.json,.txt',
    hidden: true,
    'data-testid': 'model-files',
    onchange: () => {
      loadFiles([...(fileInput.files ?? [])]);
      fileInput.value = '';
    },
  });
  // A whole model folder (config.json, weights, tokenizer): the model is named after it.
  const folderInput = h('input', {
    type: 'file',
    webkitdirectory: true,
    hidden: true,
    'data-testid': 'model-folder',
    onchange: () => {
      loadFiles([...(folderInput.files ?? [])]);
      folderInput.value = '';
    },
  });
  const urlInput = h('input', {
    type: 'url',
    placeholder: 'https://…/model.gguf',
    'aria-label': 'Model URL',
    'data-testid': 'model-url',
  });
  const urlForm = h(
    'form',
    {
      class: 'url-form',
      onsubmit: (event: Event) => {
        event.preventDefault();
        if (urlInput.value.trim()) void loader.load(() => urlSource(urlInput.value.trim()));
      },
    },
    urlInput,
    h('button', { type: 'submit' }, 'Load'),
  );
  root.append(
    h('label', { class: 'picker-label' }, h('span', {}, 'Model'), select),
    h('button', { type: 'button', title: 'A .gguf, or config.json + .safetensors (+ tokenizer.json)', onclick: () => fileInput.click() }, 'Open files…'),
    fileInput,
    h('button', { type: 'button', title: 'A folder holding config.json + .safetensors (+ tokenizer.json), or a .gguf', onclick: () => folderInput.click() }, 'Open folder…'),
    folderInput,
    urlForm,
  );

  const bar = h('div', { class: 'progress-bar' });
  const label = h('span', { class: 'progress-label' });
  const progress = h('div', { class: 'progress', 'data-testid': 'model-progress', hidden: true }, h('div', { class: 'progress-track' }, bar), label);
  const errorText = h('span', {});
  const error = h(
    'div',
    { class: 'load-error', role: 'alert', 'data-testid': 'model-error', hidden: true },
    errorText,
    h('button', { type: 'button', class: 'quiet', 'aria-label': 'Dismiss', onclick: () => store.set({ loadError: undefined }) }, '✕'),
  );
  const missingText = h('span', {});
  const missingList = h('span', { class: 'missing-list' });
  const missing = h(
    'div',
    { class: 'load-error missing-model', role: 'alert', 'data-testid': 'missing-model', hidden: true },
    h('span', {}, missingText, ' ', missingList),
    h('button', { type: 'button', class: 'quiet', 'aria-label': 'Dismiss', onclick: () => store.set({ missingModel: undefined }) }, '✕'),
  );
  progressRoot.append(progress, error, missing);

  // Dropping files anywhere on the page loads them.
  const dropHint = h('div', { class: 'drop-hint', hidden: true }, 'Drop a .gguf, or config.json + .safetensors (+ tokenizer.json)');
  document.body.append(dropHint);
  addEventListener('dragover', (event) => {
    if (!event.dataTransfer?.types.includes('Files')) return;
    event.preventDefault();
    dropHint.hidden = false;
  });
  addEventListener('dragleave', (event) => {
    if (event.relatedTarget === null) dropHint.hidden = true;
  });
  addEventListener('drop', (event) => {
    event.preventDefault();
    dropHint.hidden = true;
    const transfer = event.dataTransfer;
    if (!transfer?.files.length) return;
    // A dropped folder arrives as a directory entry (its File is empty): read the files inside.
    const directory = [...transfer.items].map((item) => item.webkitGetAsEntry?.()).find((entry) => entry?.isDirectory);
    if (!directory) return loadFiles([...transfer.files]);
    void filesOfDirectory(directory as FileSystemDirectoryEntry).then(
      (files) => loadFiles(files, directory.name),
      (error: unknown) => store.set({ loadError: `Could not read the folder ${directory.name}: ${error instanceof Error ? error.message : String(error)}.` }),
    );
  });

  store.subscribe((state, changed) => {
    if (touched(changed, 'model', 'loading')) {
      const listed = state.model?.id !== undefined && catalog.models.some((model) => model.id === state.model?.id);
      localOption.textContent = state.model ? `${state.model.name} · ${formatBytes(state.model.bytes)}` : 'No model';
      localOption.hidden = listed;
      select.value = listed ? state.model!.id! : LOCAL;
    }
    if (touched(changed, 'loading')) {
      progress.hidden = !state.loading;
      if (state.loading) {
        const { fraction } = state.loading;
        progress.classList.toggle('indeterminate', fraction === undefined);
        bar.style.transform = fraction === undefined ? '' : `scaleX(${fraction.toFixed(3)})`;
        label.textContent = fraction === undefined ? `${state.loading.label}…` : `${state.loading.label} · ${Math.round(fraction * 100)}%`;
      }
    }
    if (touched(changed, 'missingModel', 'model')) {
      missing.hidden = state.missingModel === undefined;
      if (state.missingModel !== undefined) {
        const showing = state.model ? ` Showing ${state.model.name} instead.` : '';
        missingText.textContent = catalog.models.length
          ? `This server has no model “${state.missingModel}”.${showing} Its models:`
          : `This server has no model “${state.missingModel}” and lists none.`;
        missingList.replaceChildren(
          ...catalog.models.map((model) =>
            h('button', { type: 'button', class: 'link-button', onclick: () => (store.set({ missingModel: undefined }), void loader.load(catalogSource(model))) }, model.id),
          ),
        );
      }
    }
    if (touched(changed, 'loadError')) {
      error.hidden = !state.loadError;
      errorText.textContent = state.loadError ?? '';
    }
  });
}
