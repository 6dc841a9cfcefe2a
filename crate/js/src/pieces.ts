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
  try {
    for (let piece = await reader.read(); !piece.done; piece = await reader.read()) yield piece.value;
  } finally {
    reader.releaseLock();
  }
}
