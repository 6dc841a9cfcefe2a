// Comparing sentence embeddings (`Model.embed`): plain arithmetic, no engine needed.

/**
 * The cosine similarity of two vectors of the same length: their dot product over the product of
 * their lengths, in [−1, 1] (for `embed`'s unit vectors, just the dot product). Accumulated in
 * double precision. Throws for vectors of different lengths, empty ones, or a zero vector.
 */
export function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  for (const [v, name] of [[a, 'a'], [b, 'b']] as const) {
    if (v === null || typeof v !== 'object' || typeof v.length !== 'number') throw new TypeError(`${name} must be an array or a typed array of numbers`);
  }
  if (a.length !== b.length) throw new RangeError(`cosine: the vectors differ in length (${a.length} and ${b.length})`);
  if (a.length === 0) throw new RangeError('cosine: the vectors are empty');
  let dot = 0;
  let aa = 0;
  let bb = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    dot += x * y;
    aa += x * x;
    bb += y * y;
  }
  if (aa === 0 || bb === 0) throw new RangeError('cosine: a zero vector has no direction');
  return dot / Math.sqrt(aa * bb);
}
