// kubectl as the tests run it keeps its discovery cache in the run's own directory (test/support/run-temp.ts), not in
// the user's ~/.kube/cache, where every test apiserver, on a port of its own, would leave a cache behind.
import { readdirSync, statSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { kubectl, testKubeConfig } from '../../support/kube.ts';

/** kubectl's name for a server's cache directory: host_port, as `--cache-dir`'s discovery subfolder spells it. */
const cacheDirOf = (server: string) => new URL(server).host.replace(':', '_');

/** The newest change under a directory (ms), or null when it does not exist. */
function newestChange(dir: string): number | null {
  let entries: string[];
  try {
    entries = readdirSync(dir, { recursive: true, encoding: 'utf8' });
  } catch {
    return null;
  }
  return Math.max(statSync(dir).mtimeMs, ...entries.map((e) => statSync(join(dir, e)).mtimeMs));
}

describe("kubectl's cache", () => {
  test("a kubectl call caches this apiserver's discovery under the run's directory and not under ~/.kube", async () => {
    const server = testKubeConfig().getCurrentCluster()?.server ?? '';
    expect(server).not.toBe('');
    // A run from before this rule may have left a directory for the same port: it must not change, not be absent.
    const inHome = join(homedir(), '.kube', 'cache', 'discovery', cacheDirOf(server));
    const before = newestChange(inHome);
    await kubectl('get', 'byokcredentials', '-A', '-o', 'name');
    const discovery = join(tmpdir(), 'kube-cache', 'discovery');
    expect(readdirSync(discovery)).toContain(cacheDirOf(server));
    expect(newestChange(inHome)).toBe(before);
  });
});
