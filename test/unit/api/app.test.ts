// buildApp with an in-memory backend: request handling, validation messages and the error paths that the real
// apiserver cannot easily produce (a failing write, a 500), including that a secret never reaches a log line.
import { Writable } from 'node:stream';
import { describe, expect, test } from '@jest/globals';
import type { V1Secret } from '@kubernetes/client-node';
import { pino } from 'pino';
import { buildApp } from '../../../src/api/server.ts';
import { KubeApiError } from '../../../src/kube/client.ts';
import type { BYOKCredential } from '../../../src/schema/generated/types.ts';
import type { Backend } from '../../../src/service/backend.ts';
import {
  ManagementKeyIndex,
  managementKeyHash,
  managementKeySecret,
  sha256Hex,
} from '../../../src/service/management-keys.ts';
import { ApiState } from '../../../src/service/read-model.ts';
import { ByokService } from '../../../src/service/service.ts';
import { parseListQuery } from '../../../src/service/validate.ts';

const MK = 'sk-byok-mgmt-v1-unit';
const SECRET = 'sk-unit-canary-0123456789abcdef';

function memoryBackend(
  overrides: Partial<Backend> = {},
): Backend & { secrets: Map<string, V1Secret>; creds: Map<string, BYOKCredential> } {
  let rv = 100;
  const secrets = new Map<string, V1Secret>();
  const creds = new Map<string, BYOKCredential>();
  const stamp = <T extends { metadata?: object }>(o: T): T => ({
    ...o,
    metadata: {
      ...o.metadata,
      resourceVersion: String(++rv),
      uid: `uid-${rv}`,
      creationTimestamp: new Date().toISOString(),
    },
  });
  return {
    secrets,
    creds,
    createSecret: async (_ns, body) => {
      const s = stamp(body);
      secrets.set(body.metadata?.name ?? '', s);
      return s;
    },
    patchSecret: async (_ns, name) =>
      secrets.get(name) ?? Promise.reject(new KubeApiError(404, { reason: 'NotFound' }, 'patch')),
    deleteSecret: async (_ns, name) => {
      secrets.delete(name);
    },
    listSecrets: async () => [...secrets.values()],
    createCredential: async (_ns, body) => {
      const c = stamp(body);
      creds.set(body.metadata.name ?? '', c);
      return c;
    },
    getCredential: async (_ns, name) => creds.get(name),
    patchCredential: async (_ns, name) => creds.get(name) as BYOKCredential,
    deleteCredential: async (_ns, name) => {
      creds.delete(name);
    },
    ...overrides,
  };
}

async function app(backend: Backend = memoryBackend()) {
  const lines: string[] = [];
  const logger = pino(
    { level: 'trace' },
    new Writable({ write: (c: Buffer, _e, cb) => (lines.push(c.toString()), cb()) }),
  );
  const state = new ApiState();
  state.upsertManagementSecret(managementKeySecret('acct', 'mk', sha256Hex(MK)));
  state.upsertWorkspace({
    apiVersion: 'byok.gateway.dev/v1alpha1',
    kind: 'Workspace',
    metadata: { namespace: 'acct', name: 'main' },
    spec: { default: true },
  });
  const a = await buildApp({
    state,
    backend,
    observe: (o) => state.upsertCredential(o),
    observeDeleted: () => undefined,
    logger,
    rateLimit: false,
  });
  return { a, lines, state };
}

const auth = { authorization: `Bearer ${MK}` };

describe('buildApp (in-memory backend)', () => {
  test('create → get → list round trip', async () => {
    const { a } = await app();
    const created = await a.inject({
      method: 'POST',
      url: '/api/v1/byok',
      headers: auth,
      payload: { provider: 'openai', key: SECRET },
    });
    expect(created.statusCode).toBe(201);
    const id = (created.json() as { data: { id: string } }).data.id;
    const got = await a.inject({ method: 'GET', url: `/api/v1/byok/${id}`, headers: auth });
    expect(got.json()).toEqual(created.json());
    const listed = await a.inject({ method: 'GET', url: '/api/v1/byok', headers: auth });
    expect((listed.json() as { total_count: number }).total_count).toBe(1);
  });

  test('a create without workspace_id lands in the default workspace and says so in X-Byok-Workspace-Defaulted; an explicit workspace_id or null does not', async () => {
    const { a, state } = await app();
    const main = state.defaultWorkspace('acct');
    const defaulted = await a.inject({
      method: 'POST',
      url: '/api/v1/byok',
      headers: auth,
      payload: { provider: 'openai', key: SECRET },
    });
    const data = (defaulted.json() as { data: { workspace_id: string | null } }).data;
    expect(data.workspace_id).not.toBeNull();
    expect(main).toBeDefined();
    // The YAML door's default differs (a BYOKCredential without spec.workspace is global): the header names the workspace chosen.
    expect(defaulted.headers['x-byok-workspace-defaulted']).toBe(data.workspace_id);
    const global = await a.inject({
      method: 'POST',
      url: '/api/v1/byok',
      headers: auth,
      payload: { provider: 'openai', key: SECRET, workspace_id: null },
    });
    expect((global.json() as { data: { workspace_id: string | null } }).data.workspace_id).toBeNull();
    expect(global.headers).not.toHaveProperty(['x-byok-workspace-defaulted']);
    const chosen = await a.inject({
      method: 'POST',
      url: '/api/v1/byok',
      headers: auth,
      payload: { provider: 'openai', key: SECRET, workspace_id: data.workspace_id },
    });
    expect(chosen.statusCode).toBe(201);
    expect(chosen.headers).not.toHaveProperty(['x-byok-workspace-defaulted']);
    // The OpenAPI document declares it on the create's 201.
    const doc = (await a.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json() as {
      paths: Record<string, Record<string, { responses: Record<string, { headers?: object }> }>>;
    };
    expect(doc.paths['/byok']?.post?.responses['201']?.headers).toHaveProperty(['X-Byok-Workspace-Defaulted']);
  });

  test('an unexpected failure is a 500 with the error body, and the log line has the secret scrubbed', async () => {
    const backend = memoryBackend({
      createCredential: async () => {
        throw new Error(`boom while writing ${SECRET}`);
      },
    });
    const { a, lines } = await app(backend);
    const r = await a.inject({
      method: 'POST',
      url: '/api/v1/byok',
      headers: auth,
      payload: { provider: 'openai', key: SECRET },
    });
    expect(r.statusCode).toBe(500);
    expect(r.json()).toEqual({ error: { code: 500, message: 'Internal server error', metadata: null } });
    expect(lines.some((l) => l.includes('boom while writing [REDACTED]'))).toBe(true);
    expect(lines.join('')).not.toContain(SECRET);
    // The Secret written before the failure is cleaned up.
    expect(backend.secrets.size).toBe(0);
  });

  test('an apiserver 422 becomes a 400; 409 from a stale cache is retried after a reload', async () => {
    const backend = memoryBackend({
      createCredential: async () => {
        throw new KubeApiError(422, { message: 'spec.displayName: Too long' }, 'create');
      },
    });
    const { a } = await app(backend);
    const r = await a.inject({
      method: 'POST',
      url: '/api/v1/byok',
      headers: auth,
      payload: { provider: 'openai', key: SECRET },
    });
    expect(r.statusCode).toBe(400);
    expect((r.json() as { error: { message: string } }).error.message).toContain('spec.displayName');

    let calls = 0;
    const b2 = memoryBackend();
    b2.patchCredential = async (_ns, name) => {
      if (++calls === 1) throw new KubeApiError(409, { reason: 'Conflict' }, 'patch');
      const c = b2.creds.get(name) as BYOKCredential;
      return { ...c, metadata: { ...c.metadata, resourceVersion: '999' }, spec: { ...c.spec, disabled: true } };
    };
    const { a: a2 } = await app(b2);
    const c = await a2.inject({
      method: 'POST',
      url: '/api/v1/byok',
      headers: auth,
      payload: { provider: 'openai', key: SECRET },
    });
    const id = (c.json() as { data: { id: string } }).data.id;
    const p = await a2.inject({
      method: 'PATCH',
      url: `/api/v1/byok/${id}`,
      headers: auth,
      payload: { disabled: true },
    });
    expect(p.statusCode).toBe(200);
    expect(calls).toBe(2);
  });

  test('validation messages name the field and never quote values', async () => {
    const { a } = await app();
    const r = await a.inject({
      method: 'POST',
      url: '/api/v1/byok',
      headers: auth,
      payload: { provider: 'openai', key: SECRET, extra: SECRET, allowed_models: SECRET },
    });
    expect(r.statusCode).toBe(400);
    const e = (r.json() as { error: { message: string; metadata: { field: string } } }).error;
    expect(e.metadata.field).toBe('extra');
    expect(e.message).toContain('Unknown field: extra');
    expect(e.message).toContain('allowed_models must be array or null');
    expect(r.body).not.toContain(SECRET);
  });
});

describe('Idempotency-Key window', () => {
  test('a replay after the window is 422 IdempotencyKeyExpired; within it, the same credential', async () => {
    const state = new ApiState();
    state.upsertWorkspace({
      apiVersion: 'byok.gateway.dev/v1alpha1',
      kind: 'Workspace',
      metadata: { namespace: 'acct', name: 'main' },
      spec: { default: true },
    });
    const make = (idempotencyWindowMs: number) =>
      new ByokService({
        state,
        backend: memoryBackend(),
        observe: (o) => state.upsertCredential(o),
        observeDeleted: () => undefined,
        gitopsGuard: true,
        warn: () => undefined,
        idempotencyWindowMs,
      });
    const body = { provider: 'openai', key: SECRET };
    const first = await make(60_000).create('acct', body, { idempotencyKey: 'retry-1' });
    expect((await make(60_000).create('acct', { ...body }, { idempotencyKey: 'retry-1' })).key.id).toBe(first.key.id);
    await new Promise((r) => setTimeout(r, 1100));
    await expect(make(1).create('acct', body, { idempotencyKey: 'retry-1' })).rejects.toMatchObject({
      status: 422,
      metadata: { reason: 'IdempotencyKeyExpired' },
    });
    await expect(
      make(60_000).create('acct', { ...body, name: 'other' }, { idempotencyKey: 'retry-1' }),
    ).rejects.toMatchObject({ status: 422, metadata: { reason: 'IdempotencyKeyReused' } });
  });
});

describe('list query', () => {
  test('defaults and bounds', () => {
    expect(parseListQuery({})).toEqual({ offset: 0, limit: 50, workspaceId: undefined, provider: undefined });
    expect(parseListQuery({ offset: '7', limit: '100', provider: 'openai' })).toMatchObject({
      offset: 7,
      limit: 100,
      provider: 'openai',
    });
    // Integers only, as the OpenAPI document says: no empty value and no literal null.
    const refused = [
      { limit: '0' },
      { limit: '101' },
      { offset: '-1' },
      { limit: ['1', '2'] },
      { provider: 'x' },
      { workspace_id: 'main' },
      { offset: 'null' },
      { offset: '' },
      { limit: 'null' },
      { limit: '' },
    ];
    for (const q of refused) {
      expect(() => parseListQuery(q)).toThrow();
    }
  });
});

describe('management keys', () => {
  test('the Secret holds only the hash; the index maps hash → namespace and forgets deleted or changed keys', () => {
    const s = managementKeySecret('ns1', 'k1', sha256Hex('key-1'));
    expect(JSON.stringify(s)).not.toContain('key-1');
    expect(managementKeyHash(s)).toBe(sha256Hex('key-1'));
    const idx = new ManagementKeyIndex();
    idx.upsert(s);
    expect(idx.namespaceOf(sha256Hex('key-1'))).toBe('ns1');
    idx.upsert(managementKeySecret('ns1', 'k1', sha256Hex('key-2')));
    expect(idx.namespaceOf(sha256Hex('key-1'))).toBeUndefined();
    expect(idx.namespaceOf(sha256Hex('key-2'))).toBe('ns1');
    idx.remove(s);
    expect(idx.size).toBe(0);
    expect(managementKeyHash({ metadata: { labels: {} }, data: {} })).toBeNull();
  });
});
