// One event loop serves every watch, work queue, compile run and HTTP request of the operator. Loops that run
// synchronously or resolve in microtasks only (a resync of no-op reconciles, a compile run over hundreds of
// accounts) hold it until they end unless they step aside now and then.

/**
 * Longest a loop runs back to back before it lets timers and I/O run. Without this a full resync of 100k
 * credentials ran as one 5.5 s task, and the compile run after a cold start (~800 accounts) as one of ~2 s:
 * no watch event, compile timer or HTTP request was served in between.
 */
const MAX_TASK_MS = 10;

/** Shared by every caller: the event loop is one, whichever loop is holding it. */
let taskStartedAt = performance.now();

/** Resolves on the next macrotask when the current one has run for MAX_TASK_MS, at once (undefined) otherwise. */
export function yieldToEventLoop(): Promise<void> | undefined {
  const ran = performance.now() - taskStartedAt;
  // A negative reading means the clock was swapped (a test's fake timers, then the real ones again): yield and start over.
  if (ran >= 0 && ran < MAX_TASK_MS) return undefined;
  return new Promise<void>((resolve) =>
    setImmediate(() => {
      taskStartedAt = performance.now();
      resolve();
    }),
  );
}
