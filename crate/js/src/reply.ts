// Answers in shared memory: a request's result written by the Worker into a SharedArrayBuffer,
// which the page's thread can wait for, blocked, at a moment of its choosing. A page that asks
// on a keystroke and waits at the start of the keystroke's own frame (its animation-frame
// callback) draws a short run's answer in that frame; a message would arrive after it, and its
// answer would be painted a frame later.
//
// The buffer's first word says whose answer it holds. The page swaps the request's id in before
// posting, taking an answer that was written there before (one atomic exchange, so an answer
// written just then is taken, never overwritten). The Worker writes the answer behind the header
// only while that id is still there, swaps it for its negative, and posts a note saying so;
// otherwise (the page has asked again since, the answer does not fit, or this encoding cannot
// carry it) it posts the answer as usual. The page reads a written answer at the first of: its
// own wait, the note, or its next request, and sets the word to 0. So each answer is read once,
// and each comes one way or the other. Only the latest request can be answered here: an earlier
// one's id is gone from the word, and it comes by message.

/** Bytes before the answer: the state word, the JSON's length, the size the next answer needs. */
const HEADER = 16;
const STATE = 0;
const JSON_BYTES = 1;
const NEEDED = 2;
const ARRAYS = [Float32Array, Float64Array, Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array, Uint32Array] as const;
type NumberArray = InstanceType<(typeof ARRAYS)[number]>;

/** Where a value JSON cannot carry sits in the answer (it is `null` in the JSON): a typed array
 * (its kind, and its bytes' place after the JSON) or a special number, or `undefined` in an array. */
type Path = (string | number)[];
type Mark = [path: Path, kind: number, at: number, length: number] | [path: Path, special: keyof typeof SPECIALS];

const SPECIALS = { undefined: undefined, NaN: NaN, Infinity: Infinity, '-Infinity': -Infinity } as const;

/** Raised for a value this encoding does not carry (a Map, a class instance): it goes by message. */
class Unsupported extends Error {}

/** Raised before the JSON is made when the typed arrays alone do not fit: `needed` bytes at least. */
class TooBig extends Error {
  constructor(readonly needed: number) {
    super('the answer does not fit');
  }
}

/**
 * The answer as JSON text, its marks beside it, and the typed arrays whose bytes follow it (each
 * 8-byte aligned). One walk finds what JSON cannot carry, with one path kept as it goes (copied
 * only for a mark); the typed arrays are set to `null` in `value` while the engine's own
 * `JSON.stringify` runs (no replacer, no copy of the answer), then put back. The page sets the
 * marks by path after a plain `JSON.parse`. An answer with the kept tokens' list has ~1,500
 * values (a thousand candidates), so any allocation per value would cost the Worker
 * milliseconds, on the keystroke's path.
 */
function encode(value: unknown, room: number): { json: Uint8Array; arrays: NumberArray[]; offsets: number[]; bytes: number } {
  const arrays: NumberArray[] = [];
  const offsets: number[] = [];
  const marks: Mark[] = [];
  const emptied: [holder: Record<string | number, unknown>, key: string | number, array: NumberArray][] = [];
  let bytes = 0;
  const path: Path = [];
  const visit = (item: unknown, holder: Record<string | number, unknown> | undefined, inArray: boolean): void => {
    if (typeof item === 'number') {
      if (!Number.isFinite(item)) marks.push([[...path], String(item) as keyof typeof SPECIALS]);
      return;
    }
    if (item === undefined) {
      // An undefined property is left out by JSON, as a message leaves it undefined.
      if (inArray || holder === undefined) marks.push([[...path], 'undefined']);
      return;
    }
    if (item === null || typeof item === 'string' || typeof item === 'boolean') return;
    if (typeof item !== 'object') throw new Unsupported(`a ${typeof item}`);
    if (ArrayBuffer.isView(item)) {
      const kind = ARRAYS.findIndex((type) => item instanceof type);
      if (kind < 0) throw new Unsupported('a typed array of 64-bit integers');
      const array = item as NumberArray;
      arrays.push(array);
      offsets.push(bytes);
      marks.push([[...path], kind, bytes, array.length]);
      bytes += aligned(array.byteLength);
      if (holder && Object.isFrozen(holder)) throw new Unsupported('a typed array in a frozen object');
      if (holder) emptied.push([holder, path[path.length - 1]!, array]);
      return;
    }
    const container = item as Record<string | number, unknown>;
    if (Array.isArray(item)) {
      for (let i = 0; i < item.length; i++) {
        path.push(i);
        visit(item[i], container, true);
        path.pop();
      }
      return;
    }
    const prototype = Object.getPrototypeOf(item) as unknown;
    if (prototype !== Object.prototype && prototype !== null) throw new Unsupported(`a ${(item as object).constructor?.name ?? 'class'} object`);
    for (const key in container) {
      path.push(key);
      visit(container[key], container, false);
      path.pop();
    }
  };
  visit(value, undefined, false);
  if (HEADER + bytes > room) throw new TooBig(HEADER + bytes);
  try {
    for (const [holder, key] of emptied) holder[key] = null;
    const text = JSON.stringify({ answer: ArrayBuffer.isView(value) ? null : value, marks });
    return { json: new TextEncoder().encode(text), arrays, offsets, bytes };
  } finally {
    for (const [holder, key, array] of emptied) holder[key] = array;
  }
}

/** The words before the answer: the state, the JSON's length, the size the next answer needs. */
function headerOf(buffer: SharedArrayBuffer): Int32Array {
  return new Int32Array(buffer, 0, HEADER / 4);
}

function aligned(bytes: number): number {
  return Math.ceil(bytes / 8) * 8;
}

/**
 * The Worker's side: writes `result` as the answer to request `id` when the page still expects it
 * there and it fits; true when it did (the page is then sent only a note). False: the answer
 * goes by message, and the page no longer waits for it. An answer that does not fit, or that
 * nearly fills the buffer, records the size the next one needs.
 */
export function writeReply(buffer: SharedArrayBuffer, id: number, result: unknown): boolean {
  const header = headerOf(buffer);
  if (Atomics.load(header, STATE) !== id) return false;
  let encoded: ReturnType<typeof encode>;
  try {
    encoded = encode(result, buffer.byteLength);
  } catch (error) {
    // Whatever this encoding cannot do (a value it does not carry, a cycle) structured clone may.
    if (error instanceof TooBig) Atomics.store(header, NEEDED, error.needed);
    declineReply(buffer, id);
    return false;
  }
  const { json, arrays, offsets, bytes } = encoded;
  const start = HEADER + aligned(json.byteLength);
  if (start + bytes > buffer.byteLength) {
    Atomics.store(header, NEEDED, start + bytes);
    declineReply(buffer, id);
    return false;
  }
  const memory = new Uint8Array(buffer);
  memory.set(json, HEADER);
  arrays.forEach((array, i) => memory.set(new Uint8Array(array.buffer, array.byteOffset, array.byteLength), start + offsets[i]!));
  Atomics.store(header, JSON_BYTES, json.byteLength);
  // A live prompt's answers grow a little with each token, and the one that outgrows its buffer
  // goes by message, a frame late: an answer that leaves less than a quarter free asks for a
  // larger buffer now, which the page makes at its next request.
  const used = start + bytes;
  if (used * 4 > buffer.byteLength * 3) Atomics.store(header, NEEDED, Math.min(MAX_BYTES, Math.ceil((used * 4) / 3)));
  return Atomics.compareExchange(header, STATE, id, -id) === id;
}

/** The Worker's side when request `id`'s answer goes by message: the page stops waiting for it. */
export function declineReply(buffer: SharedArrayBuffer, id: number): void {
  Atomics.compareExchange(headerOf(buffer), STATE, id, 0);
}

/** An answer read from the buffer, and the request it answers. */
export interface Taken {
  id: number;
  result: unknown;
}

/** The page's side: one buffer for answers, replaced by a larger one when an answer did not fit or nearly filled it. */
export class ReplyBuffer {
  private buffer: SharedArrayBuffer;
  /** The buffer's header words, viewed once per buffer (`wait` reads the state word in a loop). */
  private header: Int32Array;
  /**
   * Memory for the next answer's typed arrays, its pages already touched (see `read`), or
   * undefined until it is made. Each answer gets a spare of its own: it is never used twice.
   */
  private spare: ArrayBuffer | undefined;
  /** A spare is being made (at the next idle moment). */
  private spareComing = false;

  /** Undefined where memory cannot be shared with a Worker (a page that is not cross-origin isolated). */
  static create(bytes = INITIAL_BYTES): ReplyBuffer | undefined {
    const isolated = (globalThis as { crossOriginIsolated?: boolean }).crossOriginIsolated;
    if (typeof SharedArrayBuffer === 'undefined' || isolated === false) return undefined;
    return new ReplyBuffer(bytes);
  }

  private constructor(bytes: number) {
    this.buffer = new SharedArrayBuffer(bytes);
    this.header = headerOf(this.buffer);
  }

  /**
   * Promises the buffer to request `id`, in one atomic exchange with what it held; returns the
   * buffer to send with the request, and an answer that was written there before and not yet read
   * (it is read now: the Worker writes only for an id it was sent, and `id` is not sent yet). When
   * the last answer did not fit or nearly filled the buffer, the old buffer is left at 0, so that a
   * write still on its way there fails and goes by message, and a larger buffer is promised instead.
   */
  expect(id: number): { buffer: SharedArrayBuffer; taken: Taken | undefined } {
    const header = this.header;
    const needed = Atomics.load(header, NEEDED);
    const grow = needed > this.buffer.byteLength && needed <= MAX_BYTES;
    const before = Atomics.exchange(header, STATE, grow ? 0 : id);
    const taken = before < 0 ? this.read(before) : undefined;
    if (grow) {
      this.buffer = new SharedArrayBuffer(aligned(Math.min(MAX_BYTES, needed * 1.5)));
      this.header = headerOf(this.buffer);
      Atomics.store(this.header, STATE, id);
    }
    return { buffer: this.buffer, taken };
  }

  /** The request whose answer is expected and not written yet, if any. */
  get awaited(): number | undefined {
    const state = Atomics.load(this.header, STATE);
    return state > 0 ? state : undefined;
  }

  /** The request a wait gave up on: later waits for it return at once (its answer comes by note). */
  private gaveUp = 0;

  /** Blocks this thread until the expected answer is written, or `ms` have passed (once per request). */
  wait(ms: number): void {
    const id = this.awaited;
    if (id === undefined || id === this.gaveUp) return;
    const deadline = performance.now() + ms;
    // Spun, not `Atomics.wait`: a browser does not let a page's own thread block in it.
    while (Atomics.load(this.header, STATE) === id) {
      if (performance.now() >= deadline) {
        this.gaveUp = id;
        return;
      }
    }
  }

  /** The written answer, if there is one (read once: the buffer is free again after). */
  take(): Taken | undefined {
    const state = Atomics.load(this.header, STATE);
    if (state >= 0) return undefined;
    // At 0 the Worker writes nothing (it writes only for its own id), so the answer stays as read.
    Atomics.store(this.header, STATE, 0);
    return this.read(state);
  }

  /** The answer written for the request `-state` (a state word that held a written answer). */
  private read(state: number): Taken {
    const jsonBytes = Atomics.load(this.header, JSON_BYTES);
    const memory = new Uint8Array(this.buffer);
    // Copied out first: TextDecoder does not read shared memory, and the next answer reuses it.
    const text = new TextDecoder().decode(memory.slice(HEADER, HEADER + jsonBytes));
    const start = HEADER + aligned(jsonBytes);
    const { answer, marks } = JSON.parse(text) as { answer: unknown; marks: Mark[] };
    // The typed arrays are copied out, into memory of this answer's own (the next answer reuses
    // the shared buffer). Fresh memory costs more than the copy: Chromium maps its pages on first
    // write, and SmolLM2's 80-token answer (6.9 MB of maps) took 4.4 ms to copy into new arrays,
    // 0.5 ms into arrays already written to. So the arrays are views of a spare made while the
    // page was idle, when it is large enough, and a spare for the next answer is made after.
    let arrayBytes = 0;
    for (const mark of marks) if (mark.length === 4) arrayBytes = Math.max(arrayBytes, mark[2] + mark[3] * ARRAYS[mark[1]]!.BYTES_PER_ELEMENT);
    const into = arrayBytes >= SPARE_FROM && this.spare !== undefined && this.spare.byteLength >= arrayBytes ? this.spare : undefined;
    // (TypeScript's typed-array constructors are declared for ArrayBuffer; a SharedArrayBuffer is
    // viewed the same way.)
    const shared = this.buffer as ArrayBufferLike as ArrayBuffer;
    if (into) {
      this.spare = undefined;
      // Every array at once: the spare keeps their places (and their alignment) from the buffer.
      new Uint8Array(into, 0, arrayBytes).set(new Uint8Array(shared, start, arrayBytes));
    }
    this.prepareSpare(arrayBytes);
    let whole = answer;
    for (const mark of marks) {
      const [path] = mark;
      let value: unknown;
      if (mark.length === 2) {
        value = SPECIALS[mark[1]];
      } else {
        const [, kind, at, length] = mark;
        value = into ? new ARRAYS[kind]!(into, at, length) : new ARRAYS[kind]!(shared, start + at, length).slice();
      }
      if (path.length === 0) {
        whole = value;
        continue;
      }
      let holder = whole as Record<string | number, unknown>;
      for (const key of path.slice(0, -1)) holder = holder[key] as Record<string | number, unknown>;
      holder[path[path.length - 1]!] = value;
    }
    return { id: -state, result: whole };
  }

  /**
   * Makes a spare for answers of up to `bytes` of typed arrays (with room for a prompt that grows),
   * at the next idle moment: after the frame that shows this answer, off the next keystroke's path.
   * Writing one byte of each page is what maps it.
   */
  private prepareSpare(bytes: number): void {
    if (bytes < SPARE_FROM || this.spareComing || (this.spare?.byteLength ?? 0) >= bytes) return;
    this.spareComing = true;
    const make = () => {
      this.spareComing = false;
      const spare = new ArrayBuffer(aligned(bytes * 1.25 + SPARE_FROM));
      const pages = new Uint8Array(spare);
      for (let at = 0; at < pages.length; at += PAGE) pages[at] = 0;
      this.spare = spare;
    };
    const idle = (globalThis as { requestIdleCallback?: (callback: () => void) => number }).requestIdleCallback;
    if (idle) idle(make);
    else setTimeout(make, 0);
  }
}

/** Answers with fewer bytes of typed arrays than this are copied into new arrays: fresh memory
 * that small is quick to map. */
const SPARE_FROM = 64 << 10;
/** Bytes of a memory page (4 KiB, or a multiple: one write each still maps every page). */
const PAGE = 4096;

/** Room for a small model's live answer (the tiny GPT-2's maps, statistics and candidates: ~0.05 MB). */
const INITIAL_BYTES = 128 << 10;
/** The largest buffer an answer may ask for (SmolLM2's 64-token answer is ~5 MB). */
const MAX_BYTES = 64 << 20;
