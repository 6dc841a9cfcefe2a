// A wasm trap (a Rust panic is an `unreachable` trap, and so is running out of memory) leaves the
// instance unusable: its Rust objects stay "borrowed" forever, so every later call would fail
// with wasm-bindgen's misleading "recursive use of an object detected", or hang. The first trap
// marks the engine crashed; from then on every call throws EngineCrashedError at once, naming the
// trap, and the only way on is a fresh instance: a new Worker (the page restarts its own), or a
// reload for the direct API.

/** The engine's wasm instance has trapped; nothing of it can be used any more. */
export class EngineCrashedError extends Error {
  override name = 'EngineCrashedError';
}

let trap: string | undefined;

/** The trap that crashed the engine, if it has crashed. */
export function crashedBy(): string | undefined {
  return trap;
}

/**
 * What a failure means for the engine: a trap (`WebAssembly.RuntimeError`) crashes it and comes
 * back as an EngineCrashedError; any other error is returned as it was.
 */
export function asEngineFailure(error: unknown): unknown {
  if (!(error instanceof WebAssembly.RuntimeError)) return error;
  trap ??= `${error.name}: ${error.message}`;
  return crashError();
}

function crashError(): EngineCrashedError {
  return new EngineCrashedError(
    `the engine crashed (${trap}) and cannot be used any more; start it again (a new Worker, or reload the page) and load the model again`,
  );
}

/** Runs `call` into the engine, unless it has crashed; a trap during it (sync or async) crashes it. */
export function intoEngine<T>(call: () => T): T {
  if (trap !== undefined) throw crashError();
  try {
    const result = call();
    if (result instanceof Promise) {
      return result.catch((error: unknown) => {
        throw asEngineFailure(error);
      }) as T;
    }
    return result;
  } catch (error) {
    throw asEngineFailure(error);
  }
}

/**
 * `raw` (a wasm-bindgen object) with every method and getter called through `intoEngine`;
 * `free()` after a crash does nothing, since the memory it would release is gone with the instance.
 */
export function guarded<T extends object>(raw: T): T {
  return new Proxy(raw, {
    get(target, key) {
      if (key === 'free' && trap !== undefined) return () => {};
      const value: unknown = intoEngine(() => Reflect.get(target, key, target));
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => intoEngine(() => Reflect.apply(value, target, args));
    },
  });
}
