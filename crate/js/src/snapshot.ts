// Snapshots of .gguf models' weights, kept by the engine's worker in the origin-private file system
// (OPFS): a model loaded again from its snapshot skips reading the file through the page, copying
// it into the engine and decoding and packing its tensors — the weights are read straight into
// place (the layout: crate/src/checkpoint/snapshot.rs). Only a dedicated Worker can read and write
// OPFS files synchronously, into and out of the engine's memory with no copy; elsewhere (Node, a
// page's main thread) nothing is kept and loads read the file.
import { engineBytes, glue } from './backend.js';
import { intoEngine } from './crash.js';
import { Model, places } from './model.js';
import type { LoadOptions, SnapshotEntry, Snapshots, SnapshotState } from './types.js';

/** The folder in OPFS that holds the snapshots, and nothing else. */
const FOLDER = 'gptlens-snapshots';
/** A snapshot's file is named by the hash of its key, with this ending. */
const SNAPSHOT = '.snapshot';
/** Beside it, the key itself (a URL with its validators), for a list of snapshots to name them. */
const KEY = '.key';
/** Snapshots kept: the newest written (SmolLM2's is 98 MB). */
const KEPT = 3;
/**
 * Bytes written at a time, only while no request is waiting or has just finished: a piece took
 * ~10 ms here, the most a keystroke that arrives during one waits.
 */
const WRITE_PIECE = 1 << 20;
/** Quiet this long after the last request before a piece is written: between keystrokes typed at 8 keys/s there is less. */
const QUIET_MS = 150;
/** Bytes read into the engine's memory at a time (each through a fresh view of it). */
const READ_PIECE = 16 << 20;

/** What of OPFS is used (declared here: TypeScript's DOM library lacks the Worker-only parts). */
interface SyncHandle {
  read(into: Uint8Array, options: { at: number }): number;
  write(from: Uint8Array, options: { at: number }): number;
  truncate(size: number): void;
  getSize(): number;
  flush(): void;
  close(): void;
}
interface OpfsFile {
  kind: 'file';
  name: string;
  createSyncAccessHandle(): Promise<SyncHandle>;
  getFile(): Promise<File>;
}
interface OpfsFolder {
  getDirectoryHandle(name: string, options: { create: boolean }): Promise<OpfsFolder>;
  getFileHandle(name: string, options?: { create: boolean }): Promise<OpfsFile>;
  removeEntry(name: string): Promise<void>;
  values(): AsyncIterable<OpfsFile | { kind: 'directory'; name: string }>;
}

let state: SnapshotState = { state: 'none' };
/** Stops the snapshot of the worker's model being written, if any (at its next piece). */
let stopWriting = (): void => {};
/**
 * The writes that have not ended, by file name: the current model's, and one told to stop that
 * still holds its file open until its next piece. Another write, a restore or a delete of that
 * file waits for it to end.
 */
const writes = new Map<string, { stop: () => void; ended: Promise<void> }>();

/** Stops the write of file `name`, if any, and waits until it has closed the file. */
async function writeEnded(name: string): Promise<void> {
  const write = writes.get(name);
  if (!write) return;
  write.stop();
  await write.ended;
}

/** Where the snapshot of the worker's model stands. */
export function snapshotState(): SnapshotState {
  return state;
}

/** The worker's model has no snapshot (it was loaded without a key, or trained): none is written. */
export function noSnapshot(): void {
  stopWriting();
  state = { state: 'none' };
}

const message = (error: unknown): string => (error instanceof Error ? error.message : String(error)).replace(/\.$/, '');

async function folder(): Promise<OpfsFolder> {
  const storage = (globalThis as unknown as { navigator?: { storage?: { getDirectory?: () => Promise<OpfsFolder> } } }).navigator?.storage;
  if (typeof storage?.getDirectory !== 'function' || !('FileSystemSyncAccessHandle' in globalThis)) {
    throw new Error('this runtime has no origin-private file system with synchronous access (a browser Worker has one)');
  }
  return (await storage.getDirectory()).getDirectoryHandle(FOLDER, { create: true });
}

/** The file name of `key`'s snapshot: a hash, since keys are URLs with their validators. */
async function fileName(key: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(key)));
  return `${Array.from(digest.subarray(0, 16), (byte) => byte.toString(16).padStart(2, '0')).join('')}${SNAPSHOT}`;
}

/** The name of the file beside snapshot `name` that holds its key. */
const keyFile = (name: string): string => name.slice(0, -SNAPSHOT.length) + KEY;

/** Deletes snapshot `name` and its key; throws why the snapshot could not be (one that is not there is deleted). */
async function remove(snapshots: OpfsFolder, name: string): Promise<void> {
  await snapshots.removeEntry(name).catch((error: unknown) => {
    if (!(error instanceof DOMException && error.name === 'NotFoundError')) throw error;
  });
  await snapshots.removeEntry(keyFile(name)).catch(() => {});
}

/** `length` bytes of the snapshot from `at`, into the engine's memory at `ptr`. */
function readInto(handle: SyncHandle, ptr: number, at: number, length: number): void {
  for (let done = 0; done < length; ) {
    const n = Math.min(READ_PIECE, length - done);
    const got = handle.read(engineBytes(ptr + done, n), { at: at + done });
    if (got !== n) throw new Error(`it ended at byte ${at + done + got}, inside its weights`);
    done += n;
  }
}

function readAt(handle: SyncHandle, length: number): Uint8Array {
  const bytes = new Uint8Array(length);
  const got = handle.read(bytes, { at: 0 });
  if (got !== length) throw new Error(`it is ${handle.getSize()} bytes long, shorter than its start`);
  return bytes;
}

/** The model in an open snapshot; throws what is wrong with it. */
function readModel(handle: SyncHandle) {
  const { SnapshotRestore } = glue();
  const start = readAt(handle, SnapshotRestore.startBytes(readAt(handle, SnapshotRestore.prefixBytes())));
  const restore = new SnapshotRestore(start, handle.getSize());
  try {
    const at = places(restore.buffers());
    readInto(handle, at.floatsPtr, at.floatsAt, at.floatsBytes);
    readInto(handle, at.blocksPtr, at.blocksAt, at.blocksBytes);
    return restore.finish();
  } finally {
    restore.free();
  }
}

/**
 * The model of the snapshot kept under `key`, on `options.backend`; or, when there is none or it
 * cannot be used, why (a snapshot that cannot be used is deleted). Stops a snapshot being written.
 */
export async function restoreSnapshot(key: string, options: LoadOptions): Promise<Model | string> {
  stopWriting();
  let why: string;
  try {
    const snapshots = await folder();
    const name = await fileName(key);
    await writeEnded(name);
    const file = await snapshots.getFileHandle(name).catch(() => undefined);
    if (!file) {
      why = 'no snapshot is kept for this file';
    } else {
      const handle = await file.createSyncAccessHandle();
      let raw;
      try {
        raw = intoEngine(() => readModel(handle));
      } catch (error) {
        handle.close();
        await remove(snapshots, name).catch(() => {});
        throw error;
      }
      handle.close();
      const model = await Model.placed(raw, options);
      state = { state: 'restored', key };
      return model;
    }
  } catch (error) {
    why = message(error);
  }
  state = { state: 'none', key, missed: why };
  return why;
}

/**
 * Writes a snapshot of `model` (loaded by a `GgufLoader` made `forSnapshot`) under `key`, in the
 * background: a piece at a time once the worker has been quiet (`quietFor()`: ms without a
 * request) for `QUIET_MS`, as long as `current()` (the model is still the worker's). Its start is
 * written last, so a snapshot cut short is refused. The oldest snapshots beyond `KEPT` are deleted.
 */
export function keepSnapshot(model: Model, key: string, current: () => boolean, quietFor: () => number): void {
  stopWriting();
  let stopped = false;
  const stop = () => (stopped = true);
  stopWriting = stop;
  const missed = state.key === key ? state.missed : undefined;
  let parts: ReturnType<Model['snapshotParts']>;
  try {
    parts = model.snapshotParts();
  } catch (error) {
    // The model is loaded whatever becomes of its snapshot.
    state = { state: 'failed', key, missed, why: message(error) };
    return;
  }
  const ours: SnapshotState = { state: 'writing', key, missed };
  state = ours;
  const going = () => {
    if (stopped || !current()) throw new Error('the model was replaced before its snapshot was written');
  };
  // Only this write's own state is updated: a later load's is not this one's to change.
  write(key, parts, going, stop, quietFor).then(
    () => {
      if (state === ours) state = { state: 'kept', key, missed };
    },
    (error: unknown) => {
      if (state === ours) state = { state: 'failed', key, missed, why: message(error) };
    },
  );
}

/** Writes `bytes` whole at `at`. */
function put(handle: SyncHandle, bytes: Uint8Array, at: number): void {
  const wrote = handle.write(bytes, { at });
  if (wrote !== bytes.byteLength) throw new Error(`only ${wrote} of ${bytes.byteLength} bytes were written at ${at} (is the storage full?)`);
}

async function write(
  key: string,
  { start, buffers }: ReturnType<Model['snapshotParts']>,
  going: () => void,
  stop: () => void,
  quietFor: () => number,
): Promise<void> {
  const snapshots = await folder();
  const name = await fileName(key);
  // An earlier write of this file (the same file loaded again) closes it first.
  await writeEnded(name);
  let ended = () => {};
  const entry = { stop, ended: new Promise<void>((resolve) => (ended = resolve)) };
  writes.set(name, entry);
  try {
    await writeFiles(snapshots, name, key, start, buffers, going, quietFor);
  } finally {
    if (writes.get(name) === entry) writes.delete(name);
    ended();
  }
  await keepNewest(snapshots, name);
}

async function writeFiles(
  snapshots: OpfsFolder,
  name: string,
  key: string,
  start: Uint8Array,
  buffers: ReturnType<Model['snapshotParts']>['buffers'],
  going: () => void,
  quietFor: () => number,
): Promise<void> {
  // The snapshot's file first, then its key, so that a key is never there without its snapshot
  // for long (a list deletes a key it finds alone, having looked again).
  const file = await snapshots.getFileHandle(name, { create: true });
  let handle: SyncHandle | undefined;
  try {
    const keyHandle = await (await snapshots.getFileHandle(keyFile(name), { create: true })).createSyncAccessHandle();
    try {
      keyHandle.truncate(0);
      put(keyHandle, new TextEncoder().encode(key), 0);
      keyHandle.flush();
    } finally {
      keyHandle.close();
    }
    handle = await file.createSyncAccessHandle();
    handle.truncate(0);
    const parts = [
      [buffers.floatsPtr, buffers.floatsAt, buffers.floatsBytes],
      [buffers.blocksPtr, buffers.blocksAt, buffers.blocksBytes],
    ] as const;
    for (const [ptr, at, length] of parts) {
      for (let done = 0; done < length; done += WRITE_PIECE) {
        // A task of its own each time, so requests that arrived meanwhile run first (and one that
        // waits for this write to stop does not wait for quiet).
        do {
          await new Promise((resolve) => setTimeout(resolve, Math.max(0, QUIET_MS - quietFor())));
          going();
        } while (quietFor() < QUIET_MS);
        put(handle, engineBytes(ptr + done, Math.min(WRITE_PIECE, length - done)), at + done);
      }
    }
    handle.flush();
    put(handle, start, 0);
    handle.flush();
    handle.close();
  } catch (error) {
    handle?.close();
    await remove(snapshots, name).catch(() => {});
    throw error;
  }
}

/** Deletes all but the `KEPT` newest snapshots (`written` is one of them). */
async function keepNewest(snapshots: OpfsFolder, written: string): Promise<void> {
  const others: { name: string; modified: number }[] = [];
  for await (const entry of snapshots.values()) {
    if (entry.kind !== 'file' || !entry.name.endsWith(SNAPSHOT) || entry.name === written) continue;
    // One another tab is writing cannot be read (nor deleted): it is the newest.
    const modified = await entry.getFile().then((file) => file.lastModified, () => Infinity);
    others.push({ name: entry.name, modified });
  }
  others.sort((a, b) => b.modified - a.modified);
  for (const { name } of others.slice(KEPT - 1)) await remove(snapshots, name).catch(() => {});
}

/** The snapshots kept in this origin, newest first, and its storage's use and quota. */
export async function listSnapshots(): Promise<Snapshots> {
  const snapshots = await folder();
  const ours = state.state === 'restored' || state.state === 'writing' || state.state === 'kept';
  const current = ours && state.key !== undefined ? await fileName(state.key) : undefined;
  const names = new Set<string>();
  for await (const entry of snapshots.values()) if (entry.kind === 'file') names.add(entry.name);
  const entries: SnapshotEntry[] = [];
  for (const name of names) {
    if (name.endsWith(SNAPSHOT)) {
      const entry = await describe(snapshots, name, name === current);
      if (entry) entries.push(entry);
    } else if (name.endsWith(KEY)) {
      // A key whose snapshot is gone (deleted by an older version, or by hand), unless another
      // tab has made that snapshot since the folder was read.
      const snapshot = name.slice(0, -KEY.length) + SNAPSHOT;
      if (!names.has(snapshot) && !(await snapshots.getFileHandle(snapshot).then(() => true, () => false))) {
        await snapshots.removeEntry(name).catch(() => {});
      }
    }
  }
  entries.sort((a, b) => b.written - a.written);
  const estimate = await (navigator as { storage: { estimate?: () => Promise<{ usage?: number; quota?: number }> } }).storage
    .estimate?.()
    .catch(() => undefined);
  return { entries, usedBytes: estimate?.usage, quotaBytes: estimate?.quota };
}

/** Snapshot `name` as a list shows it; undefined when it was deleted meanwhile (by another tab). */
async function describe(snapshots: OpfsFolder, name: string, current: boolean): Promise<SnapshotEntry | undefined> {
  const keyed = await snapshots.getFileHandle(keyFile(name)).catch(() => undefined);
  const key = await keyed?.getFile().then((file) => file.text()).catch(() => undefined);
  const entry = { id: name, key: key || undefined, current };
  if (writes.has(name)) return { ...entry, bytes: undefined, written: Date.now(), unusable: 'it is being written' };
  const { SnapshotRestore } = glue();
  let file: File;
  let prefix: Uint8Array;
  try {
    file = await (await snapshots.getFileHandle(name)).getFile();
    prefix = new Uint8Array(await file.slice(0, SnapshotRestore.prefixBytes()).arrayBuffer());
  } catch (error) {
    if (error instanceof DOMException && error.name === 'NotFoundError') return undefined;
    // Another tab holds it open: it is being written, or read.
    return { ...entry, bytes: undefined, written: Date.now(), unusable: `another tab is using it (${message(error)})` };
  }
  let unusable: string | undefined;
  try {
    intoEngine(() => SnapshotRestore.check(prefix, file.size));
  } catch (error) {
    unusable = message(error);
  }
  return { ...entry, bytes: file.size, written: file.lastModified, unusable };
}

/**
 * Deletes the snapshots `ids` (their file names), having stopped writing any of them; the model
 * the worker holds stays. Throws naming those that could not be deleted, having deleted the rest.
 */
export async function deleteSnapshots(ids: readonly string[]): Promise<void> {
  const snapshots = await folder();
  const failed: string[] = [];
  for (const id of ids) {
    const { key, state: was } = state;
    if (key !== undefined && (was === 'restored' || was === 'writing' || was === 'kept') && (await fileName(key)) === id) {
      // Said before the write is stopped, so that it does not say it failed.
      state = { state: 'deleted', key };
    }
    await writeEnded(id);
    await remove(snapshots, id).catch((error: unknown) => failed.push(`${id} (${message(error)})`));
  }
  if (failed.length > 0) throw new Error(`could not delete ${failed.join(', ')}: another tab may be using ${failed.length === 1 ? 'it' : 'them'}`);
}
