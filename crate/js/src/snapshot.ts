// Snapshots of .gguf models' weights, kept by the engine's worker in the origin-private file system
// (OPFS): a model loaded again from its snapshot skips reading the file through the page, copying
// it into the engine and decoding and packing its tensors — the weights are read straight into
// place (the layout: crate/src/checkpoint/snapshot.rs). Only a dedicated Worker can read and write
// OPFS files synchronously, into and out of the engine's memory with no copy; elsewhere (Node, a
// page's main thread) nothing is kept and loads read the file.
import { engineBytes, glue } from './backend.js';
import { intoEngine } from './crash.js';
import { Model, places } from './model.js';
import type { LoadOptions, SnapshotState } from './types.js';

/** The folder in OPFS that holds the snapshots, and nothing else. */
const FOLDER = 'gptlens-snapshots';
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
/** Stops the snapshot being written, if any. */
let stopWriting = (): void => {};

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
  return `${Array.from(digest.subarray(0, 16), (byte) => byte.toString(16).padStart(2, '0')).join('')}.snapshot`;
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
        await snapshots.removeEntry(name).catch(() => {});
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
  stopWriting = () => (stopped = true);
  const missed = state.key === key ? state.missed : undefined;
  let parts: ReturnType<Model['snapshotParts']>;
  try {
    parts = model.snapshotParts();
  } catch (error) {
    // The model is loaded whatever becomes of its snapshot.
    state = { state: 'failed', key, missed, why: message(error) };
    return;
  }
  const writing: SnapshotState = { state: 'writing', key, missed };
  state = writing;
  const going = () => {
    if (stopped || !current()) throw new Error('the model was replaced before its snapshot was written');
  };
  // Only this write's own state is updated: a later load's is not this one's to change.
  write(key, parts, going, quietFor).then(
    () => {
      if (state === writing) state = { state: 'kept', key, missed };
    },
    (error: unknown) => {
      if (state === writing) state = { state: 'failed', key, missed, why: message(error) };
    },
  );
}

async function write(key: string, { start, buffers }: ReturnType<Model['snapshotParts']>, going: () => void, quietFor: () => number): Promise<void> {
  const snapshots = await folder();
  const name = await fileName(key);
  const handle = await (await snapshots.getFileHandle(name, { create: true })).createSyncAccessHandle();
  const put = (from: Uint8Array, at: number) => {
    const wrote = handle.write(from, { at });
    if (wrote !== from.byteLength) throw new Error(`only ${wrote} of ${from.byteLength} bytes were written at ${at} (is the storage full?)`);
  };
  try {
    handle.truncate(0);
    const parts = [
      [buffers.floatsPtr, buffers.floatsAt, buffers.floatsBytes],
      [buffers.blocksPtr, buffers.blocksAt, buffers.blocksBytes],
    ] as const;
    for (const [ptr, at, length] of parts) {
      for (let done = 0; done < length; done += WRITE_PIECE) {
        // A task of its own each time, so requests that arrived meanwhile run first.
        do await new Promise((resolve) => setTimeout(resolve, Math.max(0, QUIET_MS - quietFor())));
        while (quietFor() < QUIET_MS);
        going();
        put(engineBytes(ptr + done, Math.min(WRITE_PIECE, length - done)), at + done);
      }
    }
    handle.flush();
    put(start, 0);
    handle.flush();
    handle.close();
  } catch (error) {
    handle.close();
    await snapshots.removeEntry(name).catch(() => {});
    throw error;
  }
  await keepNewest(snapshots, name);
}

/** Deletes all but the `KEPT` newest snapshots (`written` is one of them). */
async function keepNewest(snapshots: OpfsFolder, written: string): Promise<void> {
  const others: { name: string; modified: number }[] = [];
  for await (const entry of snapshots.values()) {
    if (entry.kind !== 'file') continue;
    const file = await entry.getFile();
    if (file.name !== written) others.push({ name: file.name, modified: file.lastModified });
  }
  others.sort((a, b) => b.modified - a.modified);
  for (const { name } of others.slice(KEPT - 1)) await snapshots.removeEntry(name).catch(() => {});
}
