// kubectl as the tests run it keeps its discovery cache in the run's own directory (test/support/run-temp.ts), not in
// the user's ~/.kube/cache, where every test apiserver, on a port of its own, would leave a cache behind.
import { existsSync, readdirSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { kubectl, testKubeConfig } from '../../support/kube.ts';

/** kubectl's name for a server's cache directory: host_port, as `--cache-dir`'s discovery subfolder spells it. */
const cacheDirOf = (server: string) => new URL(server).host.replace(':', '_');

describe("kubectl's cache", () => {
  test("a kubectl call caches this apiserver's discovery under the run's directory and not under ~/.kube", async () => {
    const server = testKubeConfig().getCurrentCluster()?.server ?? '';
    expect(server).not.toBe('');
    await kubectl('get', 'byokcredentials', '-A', '-o', 'name');
    const discovery = join(tmpdir(), 'kube-cache', 'discovery');
    expect(readdirSync(discovery)).toContain(cacheDirOf(server));
    expect(existsSync(join(homedir(), '.kube', 'cache', 'discovery', cacheDirOf(server)))).toBe(false);
  });
});
