// A file's bytes as they arrive, from a ReadableStream (a fetch's body, `file.stream()`) or any
// async iterable of Uint8Arrays (Node's streams), read the same way by the direct API and the
// worker client.

export type Pieces = ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>;

/** The pieces in order; a ReadableStream is read with its reader (not every runtime iterates one). */
export async function* iteratePieces(pieces: Pieces): AsyncGenerator<Uint8Array> {
  if (!('getReader' in pieces)) {
    yield* pieces;
    return;
  }
  const reader = pieces.getReader();
  let ended = false;
  try {
    for (let piece = await reader.read(); !piece.done; piece = await reader.read()) yield piece.value;
    ended = true;
  } finally {
    await releaseReader(reader, ended);
  }
}

/**
 * Releases a reader, cancelling its stream first when it was left before its end (a load that
 * failed or stopped early): an unlocked, unread body would hold its connection and whatever it
 * had buffered of a 100–250 MB file until collected. (An async iterable is closed by `for await`.)
 */
async function releaseReader(reader: ReadableStreamDefaultReader<Uint8Array> | ReadableStreamBYOBReader, ended: boolean): Promise<void> {
  if (!ended) await reader.cancel().catch(() => {});
  reader.releaseLock();
}

/** Pieces that will not be read (a load that used a snapshot instead): a stream is cancelled, an iterator closed. */
export async function letGo(pieces: Pieces): Promise<void> {
  if ('getReader' in pieces) await pieces.cancel().catch(() => {});
  else await pieces[Symbol.asyncIterator]().return?.();
}

/**
 * The pieces regrouped into batches of `batchBytes` (the last may be shorter), each a view over the
 * start of an ArrayBuffer of its own, so it can be moved to a worker. A byte stream (a fetch's
 * body, a Blob's stream in browsers) is read straight into the batch: copying ~100 MB of pieces
 * into batches cost the page's main thread 0.15 s of a cold start in Chromium. `returned` holds
 * batches the worker is done with and gave back: they are filled again before any new one is made.
 */
export async function* readBatches(pieces: Pieces, batchBytes: number, returned: Uint8Array[] = []): AsyncGenerator<Uint8Array> {
  const reader = byteReader(pieces);
  const empty = () => {
    const reused = returned.pop()?.buffer;
    return reused instanceof ArrayBuffer && reused.byteLength === batchBytes ? new Uint8Array(reused) : new Uint8Array(batchBytes);
  };
  let batch = empty();
  let filled = 0;
  if (reader) {
    let ended = false;
    try {
      for (;;) {
        const { value, done } = await reader.read(batch.subarray(filled));
        // No view back: the stream was cancelled (not through this reader, which holds its lock),
        // and what it had read is gone with it.
        if (!value) throw new Error(`the stream was cancelled after ${filled} bytes of a batch; the file is incomplete`);
        // The read moved the batch's buffer into `value`.
        batch = new Uint8Array(value.buffer, 0, batchBytes);
        filled += value.byteLength;
        if (done) break;
        if (filled === batchBytes) {
          yield batch;
          batch = empty();
          filled = 0;
        }
      }
      ended = true;
    } finally {
      await releaseReader(reader, ended);
    }
  } else {
    for await (const piece of iteratePieces(pieces)) {
      for (let at = 0; at < piece.byteLength; ) {
        const n = Math.min(piece.byteLength - at, batchBytes - filled);
        batch.set(piece.subarray(at, at + n), filled);
        filled += n;
        at += n;
        if (filled === batchBytes) {
          yield batch;
          batch = empty();
          filled = 0;
        }
      }
    }
  }
  if (filled > 0) yield batch.subarray(0, filled);
}

/** A reader that fills the caller's buffers, when `pieces` is a byte stream; else undefined. */
function byteReader(pieces: Pieces): ReadableStreamBYOBReader | undefined {
  if (!('getReader' in pieces)) return undefined;
  try {
    return pieces.getReader({ mode: 'byob' });
  } catch {
    // A TypeError: not a byte stream. It is left unlocked, for its default reader.
    return undefined;
  }
}
