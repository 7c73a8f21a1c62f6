// The run's own TMPDIR: every test of this run writes under it, and the run's end removes it.
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { claimRunTemp, releaseRunTemp } from '../../support/run-temp.ts';

describe('the run temp directory', () => {
  test('this test runs under it, as every test and the processes tests start do', () => {
    expect(basename(tmpdir())).toMatch(/^byok-test-run-/);
    expect(process.env.BYOK_TEST_OUTER_TMPDIR).toBeDefined();
    // kubectl's cache too, not the user's ~/.kube/cache.
    expect(process.env.KUBECACHEDIR).toBe(join(tmpdir(), 'kube-cache'));
  });

  test('claiming points TMPDIR at a new directory; releasing removes it with what tests left and restores TMPDIR', () => {
    const outer = join(tmpdir(), 'outer');
    mkdirSync(outer);
    const env: NodeJS.ProcessEnv = { TMPDIR: outer };
    const dir = claimRunTemp(env);
    expect(env.TMPDIR).toBe(dir);
    expect(env.KUBECACHEDIR).toBe(join(dir, 'kube-cache'));
    expect(dir.startsWith(join(outer, 'byok-test-run-'))).toBe(true);
    mkdirSync(join(dir, 'left-behind'));
    writeFileSync(join(dir, 'left-behind', 'file'), 'x');
    releaseRunTemp(env);
    expect(existsSync(dir)).toBe(false);
    expect(env).toEqual({ TMPDIR: outer });
  });

  test("a KUBECACHEDIR set before the run is the run's own while it lasts, and is restored after", () => {
    const env: NodeJS.ProcessEnv = { KUBECACHEDIR: '/somewhere/kube-cache' };
    const dir = claimRunTemp(env);
    expect(env.KUBECACHEDIR).toBe(join(dir, 'kube-cache'));
    releaseRunTemp(env);
    expect(env).toEqual({ KUBECACHEDIR: '/somewhere/kube-cache' });
  });

  test('a run without TMPDIR gets it unset again', () => {
    const env: NodeJS.ProcessEnv = {};
    // Without TMPDIR, the directory lands in os.tmpdir() (here this run's own).
    const dir = claimRunTemp(env);
    expect(existsSync(dir)).toBe(true);
    releaseRunTemp(env);
    expect(existsSync(dir)).toBe(false);
    expect(env).toEqual({});
  });
});
