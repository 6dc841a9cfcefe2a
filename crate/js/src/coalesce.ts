/**
 * Wraps an async function so that at most one call runs at a time and, of the calls made while
 * it runs, only the newest runs next; the calls it replaced resolve to `undefined`. For
 * "recompute on every keystroke": typing fast never queues up stale forward passes.
 */
export function coalesceLatest<A extends unknown[], R>(
  fn: (...args: A) => Promise<R>,
): (...args: A) => Promise<R | undefined> {
  let running = false;
  let next: { args: A; resolve(value: R | undefined): void; reject(error: unknown): void } | undefined;

  async function drain(): Promise<void> {
    running = true;
    while (next) {
      const { args, resolve, reject } = next;
      next = undefined;
      try {
        resolve(await fn(...args));
      } catch (error) {
        reject(error);
      }
    }
    running = false;
  }

  return (...args) =>
    new Promise((resolve, reject) => {
      next?.resolve(undefined);
      next = { args, resolve, reject };
      if (!running) void drain();
    });
}
