// The one way a test waits: `until` polls a check until it returns a truthy value (returned) or the time runs out
// (an error naming what was awaited and the check's last error). `sleep` is for pacing between steps only, never
// for waiting on an outcome.
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export async function until<T>(
  what: string,
  check: () => Promise<T | undefined | false | null> | T | undefined | false | null,
  timeoutMs = 15_000,
  everyMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${String(last)})` : ''}`,
      );
    await sleep(everyMs);
  }
}
