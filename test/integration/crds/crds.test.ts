// The CRDs enforce every single-object rule in the apiserver itself, with messages a kubectl user can act on.
import { beforeAll, describe, expect, test } from '@jest/globals';
import { crApi, createTestNamespace, kubectl, rejection } from '../../support/kube.ts';

const HASH = 'a'.repeat(64);

function credential(name: string, spec: Record<string, unknown>) {
  return {
    apiVersion: 'byok.gateway.dev/v1alpha1',
    kind: 'BYOKCredential',
    metadata: { name },
    spec: { provider: 'openai', secretRef: { name: 'openai-key' }, ...spec },
  };
}

describe('BYOKCredential CRD', () => {
  let ns: string;
  let api: ReturnType<typeof crApi>;
  beforeAll(async () => {
    ns = await createTestNamespace('crds');
    api = crApi('byokcredentials', ns);
  });

  test('accepts a valid credential and applies defaults', async () => {
    const created = (await api.create(
      credential('valid', { allowedApiKeyHashes: [HASH], allowedModels: ['openai/gpt-5'] }),
    )) as {
      spec: Record<string, unknown>;
    };
    expect(created.spec).toMatchObject({
      disabled: false,
      isFallback: false,
      isRequired: false,
      isByokOnly: false,
      secretRef: { name: 'openai-key', key: 'key' },
    });
  });

  test.each([
    [
      'isByokOnly with isFallback',
      { isFallback: true, isByokOnly: true },
      'isByokOnly cannot be combined with isFallback',
    ],
    ['a hash that is not 64 lowercase hex', { allowedApiKeyHashes: ['A'.repeat(64)] }, 'spec.allowedApiKeyHashes[0]'],
    [
      'an empty hash list',
      { allowedApiKeyHashes: [] },
      'spec.allowedApiKeyHashes: Invalid value: 0: spec.allowedApiKeyHashes in body should have at least 1 items',
    ],
    [
      'more than 100 models',
      { allowedModels: Array.from({ length: 101 }, (_, i) => `v/m${i}`) },
      'must have at most 100 items',
    ],
    [
      'more than 100 user ids',
      { allowedUserIds: Array.from({ length: 101 }, (_, i) => `user-${i}`) },
      'must have at most 100 items',
    ],
    ['an unknown provider', { provider: 'not-a-provider' }, 'spec.provider: Unsupported value: "not-a-provider"'],
    ['a negative sortOrder', { sortOrder: -1 }, 'spec.sortOrder: Invalid value: -1'],
  ])('rejects %s', async (_what, spec, expected) => {
    const { code, message } = await rejection(
      api.create(credential(`bad-${Math.random().toString(36).slice(2, 8)}`, spec)),
    );
    expect(code).toBe(422);
    expect(message).toContain(expected);
  });

  test('provider and workspace are immutable', async () => {
    await api.create(credential('immutable', { workspace: 'team-a' }));
    const live = (await api.get('immutable')) as { spec: Record<string, unknown> };
    const changedProvider = await rejection(
      api.replace('immutable', { ...live, spec: { ...live.spec, provider: 'anthropic' } }),
    );
    expect(changedProvider.message).toContain('provider is immutable');
    const changedWorkspace = await rejection(
      api.replace('immutable', { ...live, spec: { ...live.spec, workspace: 'team-b' } }),
    );
    expect(changedWorkspace.message).toContain('workspace is immutable');
    const { workspace: _dropped, ...withoutWorkspace } = live.spec;
    const removedWorkspace = await rejection(api.replace('immutable', { ...live, spec: withoutWorkspace }));
    expect(removedWorkspace.message).toContain('workspace is immutable');
  });

  test('kubectl get byok shows the printer columns', async () => {
    const out = await kubectl('get', 'byok', '-n', ns);
    const header = out.split('\n')[0] ?? '';
    for (const column of ['NAME', 'PROVIDER', 'LABEL', 'WORKSPACE', 'FALLBACK', 'ORDER', 'READY', 'REASON', 'AGE'])
      expect(header).toContain(column);
    expect(out).toMatch(/valid\s+openai/);
    const wide = (await kubectl('get', 'byok', '-n', ns, '-o', 'wide')).split('\n')[0] ?? '';
    expect(wide).toContain('DISABLED');
    expect(wide).toContain('ID');
  });

  test('kubectl explain documents every field', async () => {
    const out = await kubectl('explain', 'byokcredential.spec');
    expect(out).toContain('Upstream provider slug');
    expect(out).toContain('allowedApiKeyHashes');
    expect(out).toContain('SHA-256 hashes (64 lowercase hex)');
    const secretRef = await kubectl('explain', 'byok.spec.secretRef.key');
    expect(secretRef).toContain('Key within the Secret data that holds the payload');
  });
});

describe('other kinds', () => {
  test.each([
    ['gatewayapikeys', 'GatewayAPIKey', { hash: 'XYZ' }, 'spec.hash'],
    ['accounts', 'Account', { plan: 'free' }, 'spec.plan: Unsupported value: "free"'],
    ['guardrails', 'Guardrail', { budget: { limitUsd: -5 } }, 'spec.budget.limitUsd'],
    ['workspaces', 'Workspace', { budgets: { daily: -1 } }, 'spec.budgets.daily'],
  ])('%s rejects invalid specs', async (plural, kind, spec, expected) => {
    const ns = await createTestNamespace('kinds');
    const { message } = await rejection(
      crApi(plural, ns).create({ apiVersion: 'byok.gateway.dev/v1alpha1', kind, metadata: { name: 'x' }, spec }),
    );
    expect(message).toContain(expected);
  });

  test('every kind has a short name, and the byok-all category lists every kind', async () => {
    const out = await kubectl('api-resources', '--api-group=byok.gateway.dev', '--no-headers');
    for (const short of ['byok', 'byokws', 'byokgr', 'gwkey', 'byokacct']) expect(out).toContain(short);
    const ns = await createTestNamespace('category');
    await crApi('accounts', ns).create({
      apiVersion: 'byok.gateway.dev/v1alpha1',
      kind: 'Account',
      metadata: { name: 'a' },
      spec: {},
    });
    await crApi('workspaces', ns).create({
      apiVersion: 'byok.gateway.dev/v1alpha1',
      kind: 'Workspace',
      metadata: { name: 'w' },
      spec: {},
    });
    const all = await kubectl('get', 'byok-all', '-n', ns, '-o', 'name');
    expect(all.trim().split('\n').sort()).toEqual(['account.byok.gateway.dev/a', 'workspace.byok.gateway.dev/w']);
  });
});

describe('the cluster OpenAPI with our CRDs installed', () => {
  // kubectl's client-side validation downloads /openapi/v2 as protobuf, which the apiserver converts through a YAML
  // reader: one raw noncharacter in a CRD pattern made it answer 503 for every kubectl apply in the cluster.
  test('kubectl create with client-side validation works, and refuses hostile text server-side', async () => {
    const ns = await createTestNamespace('crds-openapi');
    const manifest = (displayName: string) =>
      JSON.stringify({
        ...credential(`validated-${Math.random().toString(36).slice(2, 8)}`, { displayName }),
        metadata: { name: `validated-${Math.random().toString(36).slice(2, 8)}`, namespace: ns },
      });
    const { writeFileSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { tmpdir } = await import('node:os');
    const ok = join(tmpdir(), `crd-ok-${process.pid}.json`);
    writeFileSync(ok, manifest('Primary key — ünïcode ✓ 😀'));
    await expect(kubectl('create', '--validate=strict', '-f', ok)).resolves.toContain('created');
    const bad = join(tmpdir(), `crd-bad-${process.pid}.json`);
    writeFileSync(bad, manifest('bell\u0007 and c1\u0096'));
    await expect(kubectl('create', '--validate=strict', '-f', bad)).rejects.toThrow(/spec\.displayName/);
  });
});
