// The models saved in this browser: the snapshots of .gguf weights the engine's Worker keeps in
// the origin-private file system (`GptlensWorker.listSnapshots`), each with its file, size, date
// and whether a load can use it, with the site's storage use; any or all can be deleted. Listed
// when opened, and again when the shown model's snapshot changes while open.
import type { SnapshotEntry, Snapshots } from 'gptlens';
import { formatBytes, h } from '../dom.ts';
import { fileOfSnapshotKey } from '../model-files.ts';
import { touched, type Store } from '../store.ts';

export function mountSavedModels(root: HTMLElement, store: Store): void {
  const status = h('p', { class: 'saved-status', role: 'status', 'data-testid': 'saved-status' });
  const list = h('ul', { class: 'saved-list' });
  const deleteAll = h('button', { type: 'button', hidden: true, 'data-testid': 'saved-delete-all' }, 'Delete all');
  const details = h(
    'details',
    { class: 'saved-models', 'data-testid': 'saved-models' },
    h('summary', {}, 'Models saved in this browser'),
    status,
    list,
    deleteAll,
  );
  root.append(details);

  /** The latest listing asked for: an older one that answers later is not shown. */
  let asked = 0;
  const refresh = async (said?: string) => {
    const engine = store.state.model?.engine;
    const ask = ++asked;
    if (!engine) {
      status.textContent = 'No model is loaded: its Worker keeps the saved copies.';
      list.replaceChildren();
      deleteAll.hidden = true;
      return;
    }
    let snapshots: Snapshots;
    try {
      snapshots = await engine.listSnapshots();
    } catch (error) {
      if (ask !== asked) return;
      status.textContent = `${said ? `${said} ` : ''}Cannot list them: ${error instanceof Error ? error.message : String(error)}.`;
      for (const button of details.querySelectorAll('button')) button.disabled = false;
      return;
    }
    if (ask !== asked) return;
    show(snapshots, said);
  };

  const remove = async (ids: string[], what: string) => {
    const engine = store.state.model?.engine;
    if (!engine) return;
    for (const button of details.querySelectorAll('button')) button.disabled = true;
    let said = `Deleted ${what}.`;
    try {
      await engine.deleteSnapshots(ids);
    } catch (error) {
      said = `${error instanceof Error ? error.message : String(error)}.`.replace(/^./, (c) => c.toUpperCase());
    }
    // The shown model's own snapshot may be one of them: the diagnostics say so.
    const snapshot = await engine.snapshotState().catch(() => undefined);
    if (snapshot && store.state.model?.engine === engine && store.state.snapshot) store.set({ snapshot });
    await refresh(said);
  };

  const show = ({ entries, usedBytes, quotaBytes }: Snapshots, said?: string) => {
    const total = entries.reduce((sum, entry) => sum + (entry.bytes ?? 0), 0);
    const storage =
      usedBytes !== undefined && quotaBytes !== undefined
        ? ` This site stores ${formatBytes(usedBytes)} in all, of the ${formatBytes(quotaBytes)} the browser lets it.`
        : '';
    const listed =
      entries.length === 0
        ? 'None: a model loaded from this server is saved once loaded, to load faster next time.'
        : `${entries.length} saved, ${formatBytes(total)}.`;
    status.textContent = `${said ? `${said} ` : ''}${listed}${storage}`;
    list.replaceChildren(...entries.map((entry) => row(entry)));
    deleteAll.hidden = entries.length < 2;
    deleteAll.disabled = false;
    deleteAll.onclick = () => void remove(entries.map(({ id }) => id), `${entries.length} saved models`);
  };

  const row = (entry: SnapshotEntry) => {
    const name = entry.key === undefined ? 'a model saved without its address' : fileOfSnapshotKey(entry.key).name;
    const facts = [
      entry.bytes === undefined ? undefined : formatBytes(entry.bytes),
      `saved ${new Date(entry.written).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' })}`,
      entry.current ? 'the model shown' : undefined,
      entry.unusable === undefined ? undefined : `cannot be loaded: ${entry.unusable}`,
    ].filter((fact) => fact !== undefined);
    return h(
      'li',
      { 'data-testid': 'saved-model' },
      h('span', { class: 'saved-name', title: entry.key === undefined ? undefined : fileOfSnapshotKey(entry.key).url }, name),
      h('small', {}, facts.join(' · ')),
      h('button', { type: 'button', 'aria-label': `Delete the saved copy of ${name}`, onclick: () => void remove([entry.id], `the saved copy of ${name}`) }, 'Delete'),
    );
  };

  details.addEventListener('toggle', () => {
    if (details.open) void refresh();
  });
  store.subscribe((_, changed) => {
    if (details.open && touched(changed, 'model', 'snapshot')) void refresh();
  });
}
