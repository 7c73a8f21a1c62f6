// One temporary directory per Jest run, removed when the run ends. Jest's global setup points TMPDIR at it before
// any worker starts, so every os.tmpdir() of a test, and every process a test starts (kubectl, helm, a gateway, the
// CLI), writes under it: nothing a run leaves behind outlives it, whether or not a test cleans up after itself.
// kubectl's cache goes there too (KUBECACHEDIR): in the user's ~/.kube/cache every test apiserver, on a port of its
// own, left a discovery and HTTP cache behind (700 MB after one day of runs here).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Set while a run owns TMPDIR; holds what TMPDIR was before it. */
const OUTER = 'BYOK_TEST_OUTER_TMPDIR';
/** The same for KUBECACHEDIR. */
const OUTER_KUBE_CACHE = 'BYOK_TEST_OUTER_KUBECACHEDIR';

export function claimRunTemp(env: NodeJS.ProcessEnv = process.env): string {
  // A nested run (a test that runs Jest) keeps its parent's directory: the parent removes it.
  if (env[OUTER] !== undefined && env.TMPDIR) return env.TMPDIR;
  const dir = mkdtempSync(join(env.TMPDIR || tmpdir(), 'byok-test-run-'));
  setForRun(env, 'TMPDIR', OUTER, dir);
  setForRun(env, 'KUBECACHEDIR', OUTER_KUBE_CACHE, join(dir, 'kube-cache'));
  return dir;
}

export function releaseRunTemp(env: NodeJS.ProcessEnv = process.env): void {
  const outer = env[OUTER];
  const dir = env.TMPDIR;
  if (outer === undefined || !dir) return;
  restoreAfterRun(env, 'TMPDIR', OUTER);
  restoreAfterRun(env, 'KUBECACHEDIR', OUTER_KUBE_CACHE);
  rmSync(dir, { recursive: true, force: true });
}

/** Gives `name` the run's value, keeping what it held under `outer` ('' when it was unset). */
function setForRun(env: NodeJS.ProcessEnv, name: string, outer: string, value: string): void {
  env[outer] = env[name] ?? '';
  env[name] = value;
}

/** Puts back what `name` held before the run (unset when it was unset or empty). */
function restoreAfterRun(env: NodeJS.ProcessEnv, name: string, outer: string): void {
  const before = env[outer];
  if (!before) delete env[name];
  else env[name] = before;
  delete env[outer];
}
