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
  env[OUTER] = env.TMPDIR ?? '';
  env.TMPDIR = dir;
  env[OUTER_KUBE_CACHE] = env.KUBECACHEDIR ?? '';
  env.KUBECACHEDIR = join(dir, 'kube-cache');
  return dir;
}

export function releaseRunTemp(env: NodeJS.ProcessEnv = process.env): void {
  const outer = env[OUTER];
  const dir = env.TMPDIR;
  if (outer === undefined || !dir) return;
  if (outer === '') delete env.TMPDIR;
  else env.TMPDIR = outer;
  delete env[OUTER];
  const outerKubeCache = env[OUTER_KUBE_CACHE];
  if (!outerKubeCache) delete env.KUBECACHEDIR;
  else env.KUBECACHEDIR = outerKubeCache;
  delete env[OUTER_KUBE_CACHE];
  rmSync(dir, { recursive: true, force: true });
}
