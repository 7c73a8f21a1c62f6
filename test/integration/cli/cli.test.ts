// The CLI's key commands, run as a user would (a child process with --kubeconfig) against the real apiserver.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, test } from '@jest/globals';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { core, createTestNamespace, testKubeConfig, testKubeconfigPath } from '../../support/kube.ts';
import { createAccount } from '../../support/tenant.ts';

const run = promisify(execFile);
const main = join(import.meta.dirname, '..', '..', '..', 'src', 'cli', 'main.ts');
const cliFull = async (...args: string[]) =>
  run(process.execPath, [main, ...args, '--kubeconfig', testKubeconfigPath()], { encoding: 'utf8' });
const cli = async (...args: string[]) => (await cliFull(...args)).stdout.trim();

describe('byok-operator CLI', () => {
  let ns: string;
  beforeAll(async () => {
    ns = await createTestNamespace('cli');
  });

  test('management-key create prints the key once and stores only its SHA-256', async () => {
    const key = await cli('management-key', 'create', '--namespace', ns, '--name', 'ops-key');
    expect(key).toMatch(/^sk-byok-mgmt-v1-[0-9a-f]{64}$/);
    const secret = await core().readNamespacedSecret({ name: 'ops-key', namespace: ns });
    expect(secret.metadata?.labels?.['byok.gateway.dev/management-key']).toBe('true');
    const stored = Object.values(secret.data ?? {}).map((v) => Buffer.from(v, 'base64').toString('utf8'));
    expect(stored).toEqual([createHash('sha256').update(key).digest('hex')]);
    expect(JSON.stringify(secret)).not.toContain(key);
  });

  test('gateway-key create prints the key once, writes a GatewayAPIKey with its SHA-256, and warns when it has no Account or workspace', async () => {
    const custom = testKubeConfig().makeApiClient(CustomObjectsApi);
    const read = async (name: string) =>
      (await custom.getNamespacedCustomObject({
        group: 'byok.gateway.dev',
        version: 'v1alpha1',
        namespace: ns,
        plural: 'gatewayapikeys',
        name,
      })) as { spec: Record<string, unknown> };
    // No default Workspace yet: created all the same, with a warning on stderr that says what to do.
    const bare = await cliFull('gateway-key', 'create', '--namespace', ns, '--name', 'app-key');
    const key = bare.stdout.trim();
    expect(key).toMatch(/^sk-byok-gw-v1-[0-9a-f]{64}$/);
    const hash = createHash('sha256').update(key).digest('hex');
    expect(await read('app-key')).toMatchObject({ spec: { hash } });
    expect(JSON.stringify(await read('app-key'))).not.toContain(key);
    expect(bare.stderr).toContain(`created GatewayAPIKey ${ns}/app-key`);
    expect(bare.stderr).toContain(hash);
    expect(bare.stderr).toMatch(/warning: namespace \S+ has no default Workspace/);
    // Nor an Account: the gate comes first, saying what to create.
    expect(bare.stderr).toMatch(/warning: namespace \S+ has no Account: .*create an Account/);
    expect(bare.stderr).not.toContain(key);

    await createAccount(ns);
    await custom.createNamespacedCustomObject({
      group: 'byok.gateway.dev',
      version: 'v1alpha1',
      namespace: ns,
      plural: 'workspaces',
      body: {
        apiVersion: 'byok.gateway.dev/v1alpha1',
        kind: 'Workspace',
        metadata: { name: 'main' },
        spec: { default: true },
      },
    });
    const scoped = await cliFull(
      'gateway-key',
      'create',
      '--namespace',
      ns,
      '--workspace',
      'main',
      '--guardrail',
      'cap',
      '--name',
      'scoped-key',
    );
    expect((await read('scoped-key')).spec).toMatchObject({
      hash: createHash('sha256').update(scoped.stdout.trim()).digest('hex'),
      workspace: 'main',
      guardrail: 'cap',
    });
    expect(scoped.stderr).not.toContain('warning');
    // A name already taken: the apiserver refuses, exit 1, and no key is printed.
    await expect(cliFull('gateway-key', 'create', '--namespace', ns, '--name', 'app-key')).rejects.toMatchObject({
      code: 1,
      stdout: '',
    });
  });

  test('bundle-key stage then activate switches the active key and keeps the old one', async () => {
    const read = async () => {
      const data = (await core().readNamespacedSecret({ name: 'byok-bundle-key', namespace: ns })).data ?? {};
      return {
        active: Buffer.from(data.active ?? '', 'base64').toString('utf8'),
        ids: Object.keys(data)
          .filter((k) => k !== 'active')
          .sort(),
      };
    };
    const staged = await cli('bundle-key', 'stage', '--routing-namespace', ns);
    const afterStage = await read();
    expect(afterStage.ids).toContain(staged);
    expect(afterStage.ids).toHaveLength(2);
    expect(afterStage.active).not.toBe(staged);

    expect(await cli('bundle-key', 'activate', staged, '--routing-namespace', ns)).toBe(staged);
    const afterActivate = await read();
    expect(afterActivate.active).toBe(staged);
    expect(afterActivate.ids).toEqual(afterStage.ids);

    const rotated = await cli('bundle-key', 'rotate', '--routing-namespace', ns);
    expect((await read()).active).toBe(rotated);
    await expect(cli('bundle-key', 'activate', 'no-such-key', '--routing-namespace', ns)).rejects.toThrow(
      /no-such-key/,
    );
  });
});
