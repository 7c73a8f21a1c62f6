// The chart's ValidatingAdmissionPolicy on the real apiserver, in cluster-wide mode (where RBAC alone lets the
// API delete any Secret): the API's and operator's identities (impersonated) do their normal Secret work and
// are refused everything else, kube-system first.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { helmTemplate } from '../../support/helm.ts';
import { core, createTestNamespace, kubectl } from '../../support/kube.ts';

const dir = mkdtempSync(join(tmpdir(), 'chart-vap-'));

describe('chart admission policy: Secret writes by the byok ServiceAccounts', () => {
  let releaseNs: string;
  let accountNs: string;
  let release: string;
  let victim: string;
  let api: string;
  let operator: string;
  /** Runs kubectl as a ServiceAccount; resolves to '' on success or to the refusal text. */
  const as =
    (user: string) =>
    async (...args: string[]) =>
      kubectl(...args, `--as=${user}`).then(
        () => '',
        (e: { stderr?: string }) => e.stderr ?? String(e),
      );
  const applyFile = (name: string, body: object) => {
    const file = join(dir, `${name}.json`);
    writeFileSync(file, JSON.stringify(body));
    return file;
  };
  const secret = (namespace: string, name: string, labels: Record<string, string> = {}) =>
    applyFile(`${namespace}-${name}`, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name, namespace, labels },
      stringData: { key: 'sk-test-not-a-real-key' },
    });

  beforeAll(async () => {
    releaseNs = await createTestNamespace('vap');
    accountNs = await createTestNamespace('vap-acct');
    release = `vap${releaseNs.slice(-8)}`;
    api = `system:serviceaccount:${releaseNs}:${release}-byok-api`;
    operator = `system:serviceaccount:${releaseNs}:${release}-byok-operator`;
    // Without the aggregated API: its APIService and user ClusterRoles are cluster-wide and would collide with the
    // releases other tests install with helm (test/integration/aggregated installs the chart's own).
    const rendered = await helmTemplate({ release, namespace: releaseNs, set: ['aggregatedApi.enabled=false'] });
    writeFileSync(join(dir, 'rendered.yaml'), rendered);
    await kubectl('apply', '-n', releaseNs, '-f', join(dir, 'rendered.yaml'));
    victim = `victim-${releaseNs.slice(-8)}`;
    await core().createNamespacedSecret({
      namespace: 'kube-system',
      body: { metadata: { name: victim }, stringData: { token: 'keep-me' } },
    });
    // Policies load asynchronously: wait (with dry runs, which admission also judges) until it is enforced.
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      if ((await as(api)('delete', 'secret', victim, '-n', 'kube-system', '--dry-run=server')).includes('denied'))
        return;
      await new Promise((r) => setTimeout(r, 250));
    }
    throw new Error('the ValidatingAdmissionPolicy was not enforced within 30 s');
  }, 60_000);

  afterAll(async () => {
    await core()
      .deleteNamespacedSecret({ name: victim, namespace: 'kube-system' })
      .catch(() => undefined);
    await kubectl(
      'delete',
      'validatingadmissionpolicybinding,validatingadmissionpolicy',
      `${release}-byok-secret-writes`,
      '--ignore-not-found',
    ).catch(() => undefined);
  });

  test('RBAC alone would allow it: the API may delete kube-system Secrets cluster-wide', async () => {
    expect((await kubectl('auth', 'can-i', 'delete', 'secrets', '-n', 'kube-system', `--as=${api}`)).trim()).toBe(
      'yes',
    );
  });

  test('the API identity deleting a kube-system Secret is refused, and the Secret stays', async () => {
    const refusal = await as(api)('delete', 'secret', victim, '-n', 'kube-system');
    expect(refusal).toMatch(
      /denied request: byok-operator ServiceAccounts never write Secrets in the system namespace kube-system/,
    );
    expect((await core().readNamespacedSecret({ name: victim, namespace: 'kube-system' })).metadata?.name).toBe(victim);
    expect(
      await as(api)(
        'apply',
        '-f',
        secret('kube-system', `x-${victim}`, { 'byok.gateway.dev/credential-secret': 'true' }),
      ),
    ).toMatch(/denied request/);
    expect(
      await as(operator)('label', 'secret', victim, '-n', 'kube-system', 'byok.gateway.dev/credential-secret=true'),
    ).toMatch(/denied request/);
  });

  test("the API's normal work passes: create, rotate and delete a labelled credential Secret", async () => {
    const labels = { 'byok.gateway.dev/credential-secret': 'true', 'app.kubernetes.io/managed-by': 'byok-api' };
    expect(await as(api)('create', '-f', secret(accountNs, 'cred-a', labels))).toBe('');
    expect(
      await as(api)('patch', 'secret', 'cred-a', '-n', accountNs, '-p', '{"stringData":{"key":"sk-test-rotated"}}'),
    ).toBe('');
    expect(await as(api)('delete', 'secret', 'cred-a', '-n', accountNs)).toBe('');
  });

  test('the API may not touch unlabelled Secrets in account namespaces, nor adopt one by labelling it', async () => {
    expect(await as(api)('create', '-f', secret(accountNs, 'plain'))).toMatch(
      /may only write Secrets labelled byok.gateway.dev\/credential-secret=true/,
    );
    await core().createNamespacedSecret({
      namespace: accountNs,
      body: { metadata: { name: 'other-app' }, stringData: { password: 'x' } },
    });
    expect(await as(api)('delete', 'secret', 'other-app', '-n', accountNs)).toMatch(/denied request/);
    expect(
      await as(api)('label', 'secret', 'other-app', '-n', accountNs, 'byok.gateway.dev/credential-secret=true'),
    ).toMatch(/denied request/);
    expect(
      (await core().readNamespacedSecret({ name: 'other-app', namespace: accountNs })).metadata?.labels,
    ).toBeUndefined();
  });

  test('the operator labels a referenced Secret but may not change its data; it writes bundles in its namespace', async () => {
    await core().createNamespacedSecret({
      namespace: accountNs,
      body: { metadata: { name: 'from-git' }, stringData: { key: 'sk-test-git' } },
    });
    expect(
      await as(operator)('label', 'secret', 'from-git', '-n', accountNs, 'byok.gateway.dev/credential-secret=true'),
    ).toBe('');
    expect(
      await as(operator)(
        'patch',
        'secret',
        'from-git',
        '-n',
        accountNs,
        '-p',
        '{"stringData":{"key":"sk-test-changed"}}',
      ),
    ).toMatch(/may only label credential Secrets/);
    const bundle = secret(releaseNs, 'byok-bundle-0', { 'byok.gateway.dev/routing': 'bundle' });
    expect(await as(operator)('create', '-f', bundle)).toBe('');
    expect(await as(operator)('delete', 'secret', 'byok-bundle-0', '-n', releaseNs)).toBe('');
    expect(await as(operator)('create', '-f', secret(releaseNs, 'unlabelled'))).toMatch(/denied request/);
  });
});
