// The CLI's kubeconfig choice: kubectl's order, then the running dev stack's kubeconfig when there is no ~/.kube.
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { chooseKubeconfig } from '../../../src/cli/kubeconfig-choice.ts';

function layout() {
  const root = mkdtempSync(join(tmpdir(), 'kc-choice-'));
  const home = join(root, 'home');
  mkdirSync(home);
  const devKubeconfig = join(root, 'cp', 'kubeconfig');
  mkdirSync(join(root, 'cp'));
  writeFileSync(devKubeconfig, 'apiVersion: v1\n');
  const devConnectionFile = join(root, '.dev', 'connection.json');
  mkdirSync(join(root, '.dev'));
  writeFileSync(
    devConnectionFile,
    JSON.stringify({ kubeconfig: devKubeconfig, apiBaseUrl: 'http://127.0.0.1:1/api/v1' }),
  );
  return { root, home, devKubeconfig, devConnectionFile };
}

describe('chooseKubeconfig', () => {
  test('--kubeconfig wins, then $KUBECONFIG (left to the loader, which reads its list)', () => {
    const l = layout();
    expect(
      chooseKubeconfig({
        explicit: '/x/config',
        env: { KUBECONFIG: '/y' },
        home: l.home,
        devConnectionFile: l.devConnectionFile,
      }),
    ).toEqual({ path: '/x/config', source: '--kubeconfig' });
    expect(
      chooseKubeconfig({ env: { KUBECONFIG: '/y:/z' }, home: l.home, devConnectionFile: l.devConnectionFile }),
    ).toEqual({ path: undefined, source: '$KUBECONFIG (/y:/z)' });
  });

  test('~/.kube/config when it exists, even with a dev stack running', () => {
    const l = layout();
    mkdirSync(join(l.home, '.kube'));
    writeFileSync(join(l.home, '.kube', 'config'), 'apiVersion: v1\n');
    expect(chooseKubeconfig({ env: {}, home: l.home, devConnectionFile: l.devConnectionFile })).toEqual({
      path: join(l.home, '.kube', 'config'),
      source: '~/.kube/config',
    });
  });

  test("without ~/.kube/config: the dev stack's kubeconfig from .dev/connection.json", () => {
    const l = layout();
    expect(chooseKubeconfig({ env: {}, home: l.home, devConnectionFile: l.devConnectionFile })).toEqual({
      path: l.devKubeconfig,
      source: `the dev stack (${l.devConnectionFile})`,
    });
  });

  test("no dev stack, a stale connection file or an unreadable one: the loader's default (and its error)", () => {
    const l = layout();
    expect(chooseKubeconfig({ env: {}, home: l.home, devConnectionFile: join(l.root, 'missing.json') })).toEqual({
      path: undefined,
      source: '~/.kube/config',
    });
    writeFileSync(l.devConnectionFile, JSON.stringify({ kubeconfig: join(l.root, 'gone') }));
    expect(chooseKubeconfig({ env: {}, home: l.home, devConnectionFile: l.devConnectionFile }).path).toBeUndefined();
    writeFileSync(l.devConnectionFile, '{not json');
    expect(chooseKubeconfig({ env: {}, home: l.home, devConnectionFile: l.devConnectionFile }).path).toBeUndefined();
  });

  test('in a pod, the ServiceAccount comes before ~/.kube/config', () => {
    const l = layout();
    const exists = (p: string) => p.endsWith('/serviceaccount/token');
    expect(
      chooseKubeconfig({
        env: { KUBERNETES_SERVICE_HOST: '10.0.0.1' },
        home: l.home,
        devConnectionFile: l.devConnectionFile,
        exists,
      }),
    ).toEqual({ path: undefined, source: 'in-cluster ServiceAccount' });
  });
});
