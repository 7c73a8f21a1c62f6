// The e2e's checks: each prints one line (ok or FAIL, with what it saw) and is counted for the closing line.
import { until as pollUntil, sleep } from '../support/until.ts';

export { sleep };
export const log = (line: string) => process.stderr.write(`[e2e] ${line}\n`);
export const results: { name: string; ok: boolean; detail: string }[] = [];

export async function check(name: string, fn: () => Promise<string>): Promise<boolean> {
  const t = Date.now();
  try {
    const detail = await fn();
    results.push({ name, ok: true, detail });
    process.stdout.write(`ok   ${name}${detail ? `: ${detail}` : ''} (${Date.now() - t} ms)\n`);
    return true;
  } catch (err) {
    const detail = err instanceof Error ? err.message : String(err);
    results.push({ name, ok: false, detail });
    process.stdout.write(`FAIL ${name}: ${detail.slice(0, 2000)}\n`);
    return false;
  }
}

/** The kit's one `until`, every 500 ms, for checks whose answer may legitimately be a falsy value. */
export async function until<T>(what: string, timeoutMs: number, fn: () => Promise<T | undefined>): Promise<T> {
  const found = await pollUntil(
    what,
    async () => {
      const v = await fn();
      return v === undefined ? undefined : { v };
    },
    timeoutMs,
    500,
  );
  return found.v;
}
