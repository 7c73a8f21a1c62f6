// Every operation of /api/v1/byok against the real apiserver over real HTTP: create, read, list, update,
// rotate, delete; default-workspace and global rules; read-your-writes; Git-created credentials and the GitOps
// guard; cross-account isolation. Ends with the contract check of every response.

import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { publicId } from '../../../src/domain/ids.ts';
import { maskLabel } from '../../../src/domain/label.ts';
import {
  type Account,
  API_VERSION,
  credentialObject,
  err,
  expectContract,
  type Harness,
  many,
  one,
  seedAccount,
  startHarness,
} from '../../support/api-harness.ts';
import { credential, withLabels, withProvider, withSecret, withSpec } from '../../support/builders.ts';
import { core, crApi, createTestNamespace, kubectl, testKubeConfig } from '../../support/kube.ts';
import { type CapturedOperator, startTestOperator } from '../../support/operator.ts';
import { until } from '../../support/until.ts';

const KEY = 'sk-proj-abcdefghijklmnopqrstuvwxyz0123456789';

async function secretValue(ns: string, name: string): Promise<string | undefined> {
  const s = await core().readNamespacedSecret({ namespace: ns, name });
  const v = s.data?.key;
  return v === undefined ? undefined : Buffer.from(v, 'base64').toString('utf8');
}

describe('BYOK REST API: operations', () => {
  let a: Account;
  let b: Account;
  let h: Harness;
  beforeAll(async () => {
    [a, b] = await Promise.all([seedAccount('api-crud-a'), seedAccount('api-crud-b')]);
    h = await startHarness([a.namespace, b.namespace]);
  });
  afterAll(async () => {
    await h?.close();
  });

  const post = (body: unknown, key = a.managementKey) => h.call('POST', '/byok', { key, body });
  const list = (query = '', key = a.managementKey) => h.call('GET', `/byok${query}`, { key });

  describe('create', () => {
    test('201 with every BYOKKey field, the label computed at once, in the default workspace', async () => {
      const r = await post({ provider: 'openai', key: KEY, name: 'Prod' });
      expect(r.status).toBe(201);
      const k = one(r);
      expect(Object.keys(k).sort()).toEqual(
        [
          'allowed_api_key_hashes',
          'allowed_models',
          'allowed_user_ids',
          'created_at',
          'declared_zdr',
          'disabled',
          'id',
          'is_byok_only',
          'is_fallback',
          'is_required',
          'label',
          'name',
          'provider',
          'sort_order',
          'status',
          'workspace_id',
        ].sort(),
      );
      // No operator runs in this suite: the status extension says so instead of pretending the key is fine.
      expect(k.status).toEqual({
        ready: null,
        reason: 'Reconciling',
        message: 'not reconciled by the operator yet',
        upstream: null,
        last_used_at: null,
        delivered: null,
        delivered_version: null,
      });
      expect(k).toMatchObject({
        provider: 'openai',
        workspace_id: a.defaultWorkspaceId,
        label: maskLabel('openai', KEY),
        name: 'Prod',
        disabled: false,
        is_fallback: false,
        is_required: false,
        is_byok_only: false,
        allowed_models: null,
        allowed_api_key_hashes: null,
        allowed_user_ids: null,
        declared_zdr: null,
      });
      expect(new Date(k.created_at).toISOString()).toBe(k.created_at);
      expect(r.text).not.toContain(KEY);
    });

    test('writes a labelled Secret holding the key and a BYOKCredential managed by the API, named from its id', async () => {
      const k = one(await post({ provider: 'anthropic', key: 'sk-ant-0123456789abcdef' }));
      const cr = await credentialObject(a.namespace, k.id);
      expect(cr).toBeDefined();
      expect(cr?.metadata.name).toMatch(/^byok-[0-9a-f]{10}$/);
      expect(cr?.metadata.labels?.['app.kubernetes.io/managed-by']).toBe('byok-api');
      const secretName = cr?.spec.secretRef.name ?? '';
      expect(secretName).toMatch(new RegExp(`^${cr?.metadata.name}-key-[0-9a-f]{6}$`));
      const secret = await core().readNamespacedSecret({ namespace: a.namespace, name: secretName });
      expect(secret.metadata?.labels).toMatchObject({
        'byok.gateway.dev/credential-secret': 'true',
        'app.kubernetes.io/managed-by': 'byok-api',
      });
      expect(await secretValue(a.namespace, secretName)).toBe('sk-ant-0123456789abcdef');
    });

    test('sort_order is the next free position within the provider', async () => {
      const first = one(await post({ provider: 'groq', key: 'gsk_aaaaaaaaaaaaaaaaaaaa' }));
      const second = one(await post({ provider: 'groq', key: 'gsk_bbbbbbbbbbbbbbbbbbbb', is_fallback: true }));
      const other = one(await post({ provider: 'mistral', key: 'mistral-cccccccccccccccc' }));
      expect([first.sort_order, second.sort_order, other.sort_order]).toEqual([0, 1, 0]);
    });

    test('accepts every writable field', async () => {
      const r = await post({
        provider: 'together',
        key: 'tok-1234567890abcdef1234',
        name: 'All fields',
        disabled: true,
        is_fallback: false,
        is_required: true,
        is_byok_only: true,
        declared_zdr: true,
        allowed_models: ['meta-llama/llama-3-70b', 'qwen/qwen3'],
        allowed_api_key_hashes: [a.gatewayKeyHash],
        allowed_user_ids: ['user_1', 'user_2'],
      });
      expect(r.status).toBe(201);
      expect(one(r)).toMatchObject({
        name: 'All fields',
        disabled: true,
        is_required: true,
        is_byok_only: true,
        declared_zdr: true,
        allowed_models: ['meta-llama/llama-3-70b', 'qwen/qwen3'],
        allowed_api_key_hashes: [a.gatewayKeyHash],
        allowed_user_ids: ['user_1', 'user_2'],
      });
    });

    test('workspace_id selects a workspace; null makes a global credential', async () => {
      const scoped = one(
        await post({ provider: 'deepseek', key: 'sk-deepseek-scoped-000001', workspace_id: a.otherWorkspaceId }),
      );
      expect(scoped.workspace_id).toBe(a.otherWorkspaceId);
      const global = one(await post({ provider: 'deepseek', key: 'sk-deepseek-global-000002', workspace_id: null }));
      expect(global.workspace_id).toBeNull();
    });

    test.each([
      ['missing provider', { key: KEY }, 'provider'],
      ['missing key', { provider: 'openai' }, 'key'],
      ['an unknown provider', { provider: 'not-a-provider', key: KEY }, 'provider'],
      ['an unknown field', { provider: 'openai', key: KEY, sort_order: 3 }, 'sort_order'],
      ['a wrong type', { provider: 'openai', key: KEY, disabled: 'yes' }, 'disabled'],
      ['a non-string key', { provider: 'openai', key: 12345 }, 'key'],
      ['a name over 256 characters', { provider: 'openai', key: KEY, name: 'n'.repeat(257) }, 'name'],
      ['a malformed workspace_id', { provider: 'openai', key: KEY, workspace_id: 'main' }, 'workspace_id'],
      ['an unknown workspace_id', { provider: 'openai', key: KEY, workspace_id: randomUUID() }, 'workspace_id'],
      [
        'more than 100 models',
        { provider: 'openai', key: KEY, allowed_models: Array.from({ length: 101 }, (_, i) => `v/m${i}`) },
        'allowed_models',
      ],
      [
        'more than 100 user ids',
        { provider: 'openai', key: KEY, allowed_user_ids: Array.from({ length: 101 }, (_, i) => `u${i}`) },
        'allowed_user_ids',
      ],
      ['an empty hash list', { provider: 'openai', key: KEY, allowed_api_key_hashes: [] }, 'allowed_api_key_hashes'],
      [
        'a hash that is not 64 lowercase hex',
        { provider: 'openai', key: KEY, allowed_api_key_hashes: ['A'.repeat(64)] },
        'allowed_api_key_hashes[0]',
      ],
      [
        'a hash of no API key',
        { provider: 'openai', key: KEY, allowed_api_key_hashes: ['0'.repeat(64)] },
        'allowed_api_key_hashes[0]',
      ],
      [
        'a model that is not vendor/model',
        { provider: 'openai', key: KEY, allowed_models: ['gpt-5'] },
        'allowed_models[0]',
      ],
      [
        'is_byok_only with is_fallback',
        { provider: 'openai', key: KEY, is_byok_only: true, is_fallback: true },
        'is_byok_only',
      ],
      ['an invalid provider payload', { provider: 'amazon-bedrock', key: '{"accessKeyId":"AKIA0000"}' }, 'key'],
      ['the read-only status', { provider: 'openai', key: KEY, status: { ready: true } }, 'status'],
    ])('400 for %s, naming the field', async (_what, body, field) => {
      const r = await post(body);
      expect(r.status).toBe(400);
      const e = err(r);
      expect(e.code).toBe(400);
      expect(e.message).toContain(field.replace(/\[\d+\]$/, ''));
      expect(String(e.metadata?.field)).toBe(field);
    });

    test('400 for hashes of a disabled, an expired and another account’s key (live keys of the same account only)', async () => {
      for (const hash of [a.disabledKeyHash, a.expiredKeyHash, b.gatewayKeyHash]) {
        const r = await post({ provider: 'openai', key: KEY, allowed_api_key_hashes: [hash] });
        expect(r.status).toBe(400);
        expect(err(r).metadata).toMatchObject({ field: 'allowed_api_key_hashes[0]', code: 'unknown_api_key_hash' });
      }
    });
  });

  describe('read and list', () => {
    test('GET /byok/{id} returns what POST returned (read-your-writes)', async () => {
      const created = one(await post({ provider: 'xai', key: 'xai-000000000000000000001' }));
      const got = await h.call('GET', `/byok/${created.id}`, { key: a.managementKey });
      expect(got.status).toBe(200);
      expect(one(got)).toEqual(created);
      const listed = many(await list('?provider=xai'));
      expect(listed.map((k) => k.id)).toContain(created.id);
    });

    test('404 for an unknown id, a malformed id, and an id of another account', async () => {
      const mine = one(await post({ provider: 'cohere', key: 'co-0000000000000000000001' }));
      for (const [id, key] of [
        [randomUUID(), a.managementKey],
        ['not-a-uuid', a.managementKey],
        [mine.id, b.managementKey],
      ] as const) {
        for (const method of ['GET', 'PATCH', 'DELETE']) {
          const r = await h.call(method, `/byok/${id}`, {
            key,
            ...(method === 'PATCH' ? { body: { disabled: true } } : {}),
          });
          expect(r.status).toBe(404);
          expect(err(r).code).toBe(404);
        }
      }
      expect(one(await h.call('GET', `/byok/${mine.id}`, { key: a.managementKey })).disabled).toBe(false);
    });

    test('the default workspace lists its own and the global credentials; another workspace its own and the global ones', async () => {
      const inDefault = one(await post({ provider: 'fireworks', key: 'fw-default-000000000001' }));
      const inOther = one(
        await post({ provider: 'fireworks', key: 'fw-other-0000000000002', workspace_id: a.otherWorkspaceId }),
      );
      const global = one(await post({ provider: 'fireworks', key: 'fw-global-000000000003', workspace_id: null }));
      const ids = (r: Awaited<ReturnType<typeof list>>) => many(r).map((k) => k.id);
      const def = await list('?provider=fireworks');
      expect(def.status).toBe(200);
      expect(ids(def).sort()).toEqual([inDefault.id, global.id].sort());
      expect(def.body?.total_count).toBe(2);
      const explicitDefault = await list(`?provider=fireworks&workspace_id=${a.defaultWorkspaceId}`);
      expect(ids(explicitDefault)).toEqual(ids(def));
      const other = await list(`?provider=fireworks&workspace_id=${a.otherWorkspaceId}`);
      expect(ids(other).sort()).toEqual([inOther.id, global.id].sort());
    });

    test('pagination: offset/limit over a stable order, total_count counts every match', async () => {
      for (let i = 0; i < 7; i++) await post({ provider: 'sambanova', key: `sn-page-${String(i).padStart(16, '0')}` });
      const all = many(await list('?provider=sambanova&limit=100'));
      expect(all).toHaveLength(7);
      expect(all.map((k) => k.sort_order)).toEqual([0, 1, 2, 3, 4, 5, 6]);
      const again = many(await list('?provider=sambanova&limit=100'));
      expect(again.map((k) => k.id)).toEqual(all.map((k) => k.id));
      const page = await list('?provider=sambanova&offset=2&limit=3');
      expect(many(page).map((k) => k.id)).toEqual(all.slice(2, 5).map((k) => k.id));
      expect(page.body?.total_count).toBe(7);
      const past = await list('?provider=sambanova&offset=50');
      expect(many(past)).toEqual([]);
      expect(past.body?.total_count).toBe(7);
      const whole = await list('?limit=100');
      const order = many(whole).map(
        (k) => `${k.provider}|${k.is_fallback ? 1 : 0}|${String(k.sort_order).padStart(7, '0')}`,
      );
      expect(order).toEqual([...order].sort());
    });

    test('limit defaults to 50 and is bounded 1-100; offset >= 0', async () => {
      for (let i = 0; i < 52; i++)
        await post({ provider: 'nebius', key: `nb-default-limit-${String(i).padStart(8, '0')}` });
      expect(many(await list('?provider=nebius'))).toHaveLength(50);
      expect(many(await list('?provider=nebius&limit=100'))).toHaveLength(52);
      expect(many(await list('?provider=nebius&limit=1'))).toHaveLength(1);
      for (const q of [
        'limit=0',
        'limit=101',
        'limit=-1',
        'limit=abc',
        'limit=1.5',
        'offset=-1',
        'offset=x',
        'limit=1&limit=2',
      ]) {
        const r = await list(`?${q}`);
        expect(r.status).toBe(400);
        expect(err(r).metadata?.field).toBe(q.split('=')[0]);
      }
    });

    test('400 for an unknown provider filter, an unknown or foreign workspace_id', async () => {
      expect((await list('?provider=nope')).status).toBe(400);
      expect((await list(`?workspace_id=${randomUUID()}`)).status).toBe(400);
      expect((await list(`?workspace_id=${b.defaultWorkspaceId}`)).status).toBe(400);
      expect((await list('?workspace_id=main')).status).toBe(400);
    });

    test('accounts are isolated: each lists only its own credentials', async () => {
      const mine = one(await post({ provider: 'perplexity', key: 'pplx-a-0000000000000001' }));
      const theirs = one(await post({ provider: 'perplexity', key: 'pplx-b-0000000000000002' }, b.managementKey));
      expect(many(await list('?provider=perplexity')).map((k) => k.id)).toEqual([mine.id]);
      expect(many(await list('?provider=perplexity', b.managementKey)).map((k) => k.id)).toEqual([theirs.id]);
      expect(theirs.workspace_id).toBe(b.defaultWorkspaceId);
    });
  });

  describe('update', () => {
    test('changes only the fields sent; null clears name, declared_zdr and filters', async () => {
      const k = one(
        await post({
          provider: 'baseten',
          key: 'bt-0000000000000000000001',
          name: 'n1',
          declared_zdr: true,
          allowed_models: ['a/b'],
          allowed_user_ids: ['u1'],
          allowed_api_key_hashes: [a.gatewayKeyHash],
        }),
      );
      const patch = (body: unknown) => h.call('PATCH', `/byok/${k.id}`, { key: a.managementKey, body });
      let r = await patch({ disabled: true, is_required: true, allowed_models: ['c/d', 'e/f'] });
      expect(r.status).toBe(200);
      expect(one(r)).toEqual({ ...k, disabled: true, is_required: true, allowed_models: ['c/d', 'e/f'] });
      r = await patch({ name: null, declared_zdr: null, allowed_models: null, allowed_api_key_hashes: null });
      expect(one(r)).toEqual({
        ...k,
        disabled: true,
        is_required: true,
        name: null,
        declared_zdr: null,
        allowed_models: null,
        allowed_api_key_hashes: null,
      });
      r = await patch({ name: 'renamed', sort_order: 42, is_fallback: true, declared_zdr: false });
      expect(one(r)).toMatchObject({
        name: 'renamed',
        sort_order: 42,
        is_fallback: true,
        declared_zdr: false,
        allowed_user_ids: ['u1'],
      });
      // Read-your-writes after an update.
      expect(one(await h.call('GET', `/byok/${k.id}`, { key: a.managementKey }))).toEqual(one(r));
      // An empty patch changes nothing.
      const same = await patch({});
      expect(same.status).toBe(200);
      expect(one(same)).toEqual(one(r));
    });

    test('is_byok_only with is_fallback is rejected within a request and against the stored flag', async () => {
      const fallback = one(await post({ provider: 'novita', key: 'nv-0000000000000000000001', is_fallback: true }));
      let r = await h.call('PATCH', `/byok/${fallback.id}`, { key: a.managementKey, body: { is_byok_only: true } });
      expect(r.status).toBe(400);
      expect(err(r).metadata).toMatchObject({ field: 'is_byok_only', code: 'byok_only_with_fallback' });
      const byokOnly = one(await post({ provider: 'novita', key: 'nv-0000000000000000000002', is_byok_only: true }));
      r = await h.call('PATCH', `/byok/${byokOnly.id}`, { key: a.managementKey, body: { is_fallback: true } });
      expect(r.status).toBe(400);
      expect(err(r).metadata?.code).toBe('byok_only_with_fallback');
      r = await h.call('PATCH', `/byok/${byokOnly.id}`, {
        key: a.managementKey,
        body: { is_fallback: true, is_byok_only: false },
      });
      expect(r.status).toBe(200);
      expect(one(r)).toMatchObject({ is_fallback: true, is_byok_only: false });
    });

    test('provider and workspace_id cannot change (400); sending the stored value is accepted', async () => {
      const k = one(await post({ provider: 'cerebras', key: 'csk-00000000000000000001' }));
      const patch = (body: unknown) => h.call('PATCH', `/byok/${k.id}`, { key: a.managementKey, body });
      expect(err(await patch({ provider: 'groq' })).metadata?.field).toBe('provider');
      expect(err(await patch({ workspace_id: a.otherWorkspaceId })).metadata?.field).toBe('workspace_id');
      expect(err(await patch({ workspace_id: null })).metadata?.field).toBe('workspace_id');
      expect((await patch({ provider: 'cerebras', workspace_id: a.defaultWorkspaceId })).status).toBe(200);
    });

    test.each([
      ['an unknown field', { label: 'x' }, 'label'],
      ['the read-only status', { status: { ready: true, reason: 'Ready' } }, 'status'],
      ['a negative sort_order', { sort_order: -1 }, 'sort_order'],
      ['a wrong type', { is_required: 1 }, 'is_required'],
      ['an empty hash list', { allowed_api_key_hashes: [] }, 'allowed_api_key_hashes'],
      ['a hash of another account', { allowed_api_key_hashes: ['f'.repeat(64)] }, 'allowed_api_key_hashes[0]'],
      ['an invalid rotated key', { key: '   ' }, 'key'],
    ])('400 for %s', async (_what, body, field) => {
      const k = one(await post({ provider: 'openai', key: KEY }));
      const r = await h.call('PATCH', `/byok/${k.id}`, { key: a.managementKey, body });
      expect(r.status).toBe(400);
      expect(String(err(r).metadata?.field)).toBe(field);
    });

    test('key rotates into a new Secret, removes the old one and regenerates the label; echoing the masked label changes nothing', async () => {
      const k = one(await post({ provider: 'deepinfra', key: 'di-old-000000000000000AAAA' }));
      const secretName = (await credentialObject(a.namespace, k.id))?.spec.secretRef.name ?? '';
      expect(k.label).toBe(maskLabel('deepinfra', 'di-old-000000000000000AAAA'));

      let r = await h.call('PATCH', `/byok/${k.id}`, { key: a.managementKey, body: { key: k.label } });
      expect(r.status).toBe(200);
      expect(one(r).label).toBe(k.label);
      expect(await secretValue(a.namespace, secretName)).toBe('di-old-000000000000000AAAA');

      r = await h.call('PATCH', `/byok/${k.id}`, { key: a.managementKey, body: { key: 'di-new-111111111111111BBBB' } });
      expect(r.status).toBe(200);
      expect(one(r)).toEqual({ ...k, label: maskLabel('deepinfra', 'di-new-111111111111111BBBB') });
      expect(one(r).label).not.toBe(k.label);
      const rotatedName = (await credentialObject(a.namespace, k.id))?.spec.secretRef.name ?? '';
      expect(rotatedName).not.toBe(secretName);
      expect(await secretValue(a.namespace, rotatedName)).toBe('di-new-111111111111111BBBB');
      await until(
        'the replaced key Secret to be deleted',
        async () =>
          await core()
            .readNamespacedSecret({ namespace: a.namespace, name: secretName })
            .then(
              () => false,
              (e: { code?: number }) => e.code === 404,
            ),
      );
      expect(one(await h.call('GET', `/byok/${k.id}`, { key: a.managementKey })).label).toBe(one(r).label);
    });
  });

  describe('delete', () => {
    test('200 {deleted: true}; the credential and its Secret are gone; later calls 404', async () => {
      const k = one(await post({ provider: 'parasail', key: 'ps-0000000000000000000001' }));
      const cr = await credentialObject(a.namespace, k.id);
      const r = await h.call('DELETE', `/byok/${k.id}`, { key: a.managementKey });
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ deleted: true });
      expect((await h.call('GET', `/byok/${k.id}`, { key: a.managementKey })).status).toBe(404);
      expect(many(await list('?provider=parasail'))).toEqual([]);
      expect((await h.call('DELETE', `/byok/${k.id}`, { key: a.managementKey })).status).toBe(404);
      await expect(
        core().readNamespacedSecret({ namespace: a.namespace, name: cr?.spec.secretRef.name ?? '' }),
      ).rejects.toMatchObject({ code: 404 });
      await expect(crApi('byokcredentials', a.namespace).get(cr?.metadata.name ?? '')).rejects.toMatchObject({
        code: 404,
      });
    });
  });

  describe('Git-managed credentials (created with kubectl / Argo CD)', () => {
    let gitId: string;
    beforeAll(async () => {
      await core().createNamespacedSecret({
        namespace: a.namespace,
        body: { metadata: { name: 'git-openai' }, stringData: { key: 'sk-git-managed-000000000000' } },
      });
      await crApi('byokcredentials', a.namespace).create(
        credential(
          'from-git',
          withLabels({ 'app.kubernetes.io/managed-by': 'argocd' }),
          withProvider('wandb'),
          withSecret('git-openai'),
          withSpec({ displayName: 'From Git', sortOrder: 5 }),
        ),
      );
      gitId = publicId('BYOKCredential', a.namespace, 'from-git');
    });

    test('appear in the list and read like any other (global: no workspace)', async () => {
      await until('the GitOps credential in the list', async () =>
        many(await list('?provider=wandb')).some((k) => k.id === gitId),
      );
      const k = one(await h.call('GET', `/byok/${gitId}`, { key: a.managementKey }));
      expect(k).toMatchObject({
        id: gitId,
        provider: 'wandb',
        name: 'From Git',
        workspace_id: null,
        sort_order: 5,
        disabled: false,
      });
      expect(typeof k.label).toBe('string');
    });

    test('a manifest applied with kubectl shows up too', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'byok-api-'));
      const file = join(dir, 'cred.yaml');
      writeFileSync(
        file,
        [
          'apiVersion: v1',
          'kind: Secret',
          'metadata: {name: kubectl-groq-key}',
          'stringData: {key: gsk_kubectl_applied_0000000}',
          '---',
          `apiVersion: ${API_VERSION}`,
          'kind: BYOKCredential',
          'metadata: {name: kubectl-groq}',
          'spec: {provider: groq, secretRef: {name: kubectl-groq-key}, workspace: main, isFallback: true}',
          '',
        ].join('\n'),
      );
      await kubectl('apply', '-n', a.namespace, '-f', file);
      const id = publicId('BYOKCredential', a.namespace, 'kubectl-groq');
      await until('the credential in the list', async () =>
        many(await list('?provider=groq')).some((k) => k.id === id),
      );
      const k = many(await list('?provider=groq')).find((x) => x.id === id);
      expect(k).toMatchObject({ workspace_id: a.defaultWorkspaceId, is_fallback: true, name: null });
      expect((await h.call('PATCH', `/byok/${id}`, { key: a.managementKey, body: { name: 'x' } })).status).toBe(409);
    });

    test('writes give 409 saying Git manages them; nothing changes', async () => {
      const p = await h.call('PATCH', `/byok/${gitId}`, { key: a.managementKey, body: { disabled: true } });
      expect(p.status).toBe(409);
      expect(err(p).message).toMatch(/managed by Git/);
      const d = await h.call('DELETE', `/byok/${gitId}`, { key: a.managementKey });
      expect(d.status).toBe(409);
      expect(one(await h.call('GET', `/byok/${gitId}`, { key: a.managementKey })).disabled).toBe(false);
    });

    test('with the guard off, the API may write them (and leaves their Secret alone on delete)', async () => {
      const open = await startHarness([a.namespace], { gitopsGuard: false });
      try {
        const p = await open.call('PATCH', `/byok/${gitId}`, { key: a.managementKey, body: { disabled: true } });
        expect(p.status).toBe(200);
        expect(one(p).disabled).toBe(true);
        const d = await open.call('DELETE', `/byok/${gitId}`, { key: a.managementKey });
        expect(d.status).toBe(200);
        expect(await secretValue(a.namespace, 'git-openai')).toBe('sk-git-managed-000000000000');
        await expectContract(open);
      } finally {
        await open.close();
      }
    });
  });

  describe('health and readiness (the status extension), with the operator running', () => {
    const BAD = 'sk-CANARY-crud-status-two\nlines-0000000000';
    let c: Account;
    let hc: Harness;
    let op: CapturedOperator | undefined;
    const ids = { good: '', bad: '', nokey: '' };
    beforeAll(async () => {
      c = await seedAccount('api-crud-health');
      const routing = await createTestNamespace('api-crud-health-routing');
      hc = await startHarness([c.namespace]);
      op = await startTestOperator(testKubeConfig(), { routingNamespace: routing, watchNamespaces: [c.namespace] });
      ids.good = one(
        await hc.call('POST', '/byok', { key: c.managementKey, body: { provider: 'openai', key: KEY } }),
      ).id;
      // What the REST door refuses can still arrive through Git: a Secret whose payload is invalid, one without the key.
      await core().createNamespacedSecret({
        namespace: c.namespace,
        body: { metadata: { name: 'bad-key' }, stringData: { key: BAD } },
      });
      await core().createNamespacedSecret({
        namespace: c.namespace,
        body: { metadata: { name: 'other-key' }, stringData: { other: 'sk-other-0000000000000000' } },
      });
      const creds = crApi('byokcredentials', c.namespace);
      await creds.create(credential('bad'));
      await creds.create(credential('nokey', withProvider('groq'), withSecret('other-key')));
      ids.bad = publicId('BYOKCredential', c.namespace, 'bad');
      ids.nokey = publicId('BYOKCredential', c.namespace, 'nokey');
    }, 60_000);
    afterAll(async () => {
      await op?.op.stop();
      await hc?.close();
    });

    const byId = async () => {
      const listed = many(await hc.call('GET', '/byok', { key: c.managementKey }));
      return new Map(listed.map((k) => [k.id, k]));
    };

    test('list and get show ready true for a good key, false with PayloadInvalid / KeyNotFound for broken ones', async () => {
      await until(
        'every credential reconciled',
        async () => {
          const m = await byId();
          return [ids.good, ids.bad, ids.nokey].every((id) => m.get(id)?.status.reason !== 'Reconciling')
            ? m
            : undefined;
        },
        30_000,
      );
      const m = await byId();
      expect(m.get(ids.good)?.status).toMatchObject({
        ready: true,
        reason: 'Ready',
        upstream: null,
        last_used_at: null,
      });
      expect(m.get(ids.bad)?.status).toMatchObject({
        ready: false,
        reason: 'PayloadInvalid',
        message: expect.stringContaining('PayloadValid'),
      });
      expect(m.get(ids.bad)?.label).toBe('');
      expect(m.get(ids.nokey)?.status).toMatchObject({ ready: false, reason: 'KeyNotFound' });
      // The single read agrees with the list.
      expect(one(await hc.call('GET', `/byok/${ids.bad}`, { key: c.managementKey })).status).toEqual(
        m.get(ids.bad)?.status,
      );
    });

    test('a PATCH cannot set status (400, nothing changes); an accepted PATCH is Reconciling until the operator catches up', async () => {
      const before = one(await hc.call('GET', `/byok/${ids.good}`, { key: c.managementKey }));
      const refused = await hc.call('PATCH', `/byok/${ids.good}`, {
        key: c.managementKey,
        body: { status: { ready: false, reason: 'Forged' } },
      });
      expect(refused.status).toBe(400);
      expect(err(refused).metadata?.field).toBe('status');
      expect(one(await hc.call('GET', `/byok/${ids.good}`, { key: c.managementKey })).status).toEqual(before.status);
      const renamed = await hc.call('PATCH', `/byok/${ids.good}`, { key: c.managementKey, body: { name: 'renamed' } });
      expect(renamed.status).toBe(200);
      // The response describes the new generation, which the operator has not judged yet, unless it already has.
      expect(['Reconciling', 'Ready']).toContain(one(renamed).status.reason);
      await until(
        'Ready again for the new generation',
        async () => (await byId()).get(ids.good)?.status.ready === true,
        30_000,
      );
    });

    test('no response carries the broken key; the contract holds', async () => {
      const all = hc.exchanges.map((e) => e.text).join('\n');
      expect(all).not.toContain('CANARY-crud-status');
      await expectContract(hc);
    });
  });

  describe('default workspace deleted', () => {
    test('list and create without workspace_id give 400; with workspace_id they work', async () => {
      const c = await seedAccount('api-crud-c');
      const hc = await startHarness([c.namespace]);
      try {
        await crApi('workspaces', c.namespace).delete('main');
        await until(
          'the list to refuse an account without a default workspace',
          async () => (await hc.call('GET', '/byok', { key: c.managementKey })).status === 400,
        );
        const l = await hc.call('GET', '/byok', { key: c.managementKey });
        expect(err(l).message).toMatch(/default workspace/);
        const p = await hc.call('POST', '/byok', { key: c.managementKey, body: { provider: 'openai', key: KEY } });
        expect(p.status).toBe(400);
        expect(err(p).metadata?.field).toBe('workspace_id');
        const ok = await hc.call('POST', '/byok', {
          key: c.managementKey,
          body: { provider: 'openai', key: KEY, workspace_id: c.otherWorkspaceId },
        });
        expect(ok.status).toBe(201);
        const g = await hc.call('POST', '/byok', {
          key: c.managementKey,
          body: { provider: 'openai', key: KEY, workspace_id: null },
        });
        expect(g.status).toBe(201);
        const listed = await hc.call('GET', `/byok?workspace_id=${c.otherWorkspaceId}`, { key: c.managementKey });
        expect(
          many(listed)
            .map((k) => k.id)
            .sort(),
        ).toEqual([one(ok).id, one(g).id].sort());
        await expectContract(hc);
      } finally {
        await hc.close();
      }
    });
  });

  test('contract: every response of this suite validates against the served OpenAPI document', async () => {
    await expectContract(h);
  });
});
