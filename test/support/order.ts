// Tests assert order and outcome, never a stopwatch reading (speed belongs in bench/). A claim like "the change is
// compiled at once, not after the batch delay" becomes: it happened before a cap fired, where the cap is the trap
// the test guards against (the delay, timeout or period the behaviour must not wait for), started before the work,
// and far longer than the behaviour takes. Only a stall of about the cap on a loaded machine can fail it.

/**
 * The work's result, when it settles before a timer of `capMs` fires; the timer starts first, then the work (so a
 * trap of exactly `capMs` loses the race). When the cap fires first, an error names `trap`.
 */
export async function beforeCap<T>(capMs: number, trap: string, work: () => Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const cap = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${trap} came first: the cap of ${capMs} ms fired before the work settled`)),
      capMs,
    );
  });
  try {
    return await Promise.race([work(), cap]);
  } finally {
    clearTimeout(timer);
  }
}
