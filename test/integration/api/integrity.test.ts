// Hostile input and faults at the REST door, against the real apiserver and the real HTTP server: rate limiting
// before authentication, framing errors on raw sockets, Idempotency-Key across two replicas, the orphan Secret
// collector, backend outages (a stopped port and a black hole), the per-account quota and the query rules.

import { connect, createServer, type Server, type Socket } from 'node:net';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { buildApp } from '../../../src/api/server.ts';
import { kubeClient } from '../../../src/kube/client.ts';
import { kubeBackend } from '../../../src/service/backend.ts';
import { sweepOrphanSecrets } from '../../../src/service/orphans.ts';
import {
  type Account,
  credentialObject,
  err,
  expectContract,
  type Harness,
  many,
  one,
  seedAccount,
  startHarness,
} from '../../support/api-harness.ts';
import { credential, withProvider, withSecret } from '../../support/builders.ts';
import { core, crApi, testKubeConfig } from '../../support/kube.ts';
import { resource } from '../../support/operator.ts';
import { beforeCap } from '../../support/order.ts';
import { until } from '../../support/until.ts';

/** One raw HTTP exchange: what the server writes back before closing (or after a short idle). */
function rawExchange(port: number, request: string | Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const s: Socket = connect(port, '127.0.0.1', () => s.write(request));
    const done = () => resolve(Buffer.concat(chunks).toString('utf8'));
    s.setTimeout(3000, () => (s.destroy(), done()));
    s.on('data', (c: Buffer) => chunks.push(c));
    s.on('end', done);
    s.on('close', done);
    s.on('error', (e) => (chunks.length > 0 ? done() : reject(e)));
  });
}

function parseRaw(text: string): { status: number; headers: string; body: unknown } {
  const [head = '', ...rest] = text.split('\r\n\r\n');
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
  let body: unknown;
  try {
    body = JSON.parse(rest.join('\r\n\r\n'));
  } catch {
    body = undefined;
  }
  return { status, headers: head, body };
}

function kubeConfigAt(server: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server, skipTLSVerify: true }],
    users: [{ name: 'u', token: 'x' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return kc;
}

describe('REST API integrity under hostile input and faults', () => {
  let a: Account;
  let q: Account;
  let h: Harness;
  let h2: Harness;
  let port: number;
  beforeAll(async () => {
    [a, q] = await Promise.all([seedAccount('api-integ'), seedAccount('api-quota')]);
    // The seeded Account, with a limit.
    await resource('accounts', q.namespace).update(
      q.namespace,
      (o) => void (o.spec = { limits: { maxCredentials: 2 } }),
    );
    [h, h2] = await Promise.all([startHarness([a.namespace, q.namespace]), startHarness([a.namespace, q.namespace])]);
    port = Number(new URL(h.base).port);
  });
  afterAll(async () => {
    await Promise.all([h?.close(), h2?.close()]);
  });

  describe('rate limiting counts refused requests', () => {
    test('a burst of wrong-key and no-key requests gets 429 with the error body; a valid key keeps its own budget', async () => {
      const limited = await startHarness([a.namespace], { rateLimit: { max: 20, timeWindowMs: 60_000 } });
      try {
        const replies = [];
        for (let i = 0; i < 40; i++)
          replies.push(await limited.call('GET', '/byok', i % 2 === 0 ? { key: `sk-wrong-${i}` } : {}));
        const statuses = replies.map((r) => r.status);
        expect(statuses.filter((s) => s === 401).length).toBe(20);
        expect(statuses.filter((s) => s === 429).length).toBe(20);
        const tooMany = replies.find((r) => r.status === 429);
        expect(err(tooMany as NonNullable<typeof tooMany>)).toMatchObject({ code: 429, metadata: { limit: 20 } });
        expect((await limited.call('GET', '/byok', { key: a.managementKey })).status).toBe(200);
        await expectContract(limited);
      } finally {
        await limited.close();
      }
    });
  });

  describe('DELETE with Content-Type: application/json and no body', () => {
    test('is accepted (200)', async () => {
      const k = one(
        await h.call('POST', '/byok', {
          key: a.managementKey,
          body: { provider: 'groq', key: 'gsk_delete_with_json_header_0001' },
        }),
      );
      const r = await h.call('DELETE', `/byok/${k.id}`, {
        key: a.managementKey,
        headers: { 'content-type': 'application/json' },
      });
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ deleted: true });
    });
  });

  describe('framework errors on raw sockets use the error body and never echo the request', () => {
    const auth = () => `Authorization: Bearer ${a.managementKey}\r\n`;
    test('an over-long id is a plain 404', async () => {
      const id = 'a'.repeat(300);
      const r = parseRaw(
        await rawExchange(port, `GET /api/v1/byok/${id} HTTP/1.1\r\nHost: x\r\n${auth()}Connection: close\r\n\r\n`),
      );
      expect(r.status).toBe(404);
      expect(r.body).toEqual({ error: { code: 404, message: 'BYOK credential not found', metadata: null } });
      expect(JSON.stringify(r.body)).not.toContain('aaaa');
    });
    test('over-large headers get 431', async () => {
      const raw = await rawExchange(
        port,
        `GET /api/v1/byok/${'b'.repeat(100)} HTTP/1.1\r\nHost: x\r\nX-Big: ${'c'.repeat(40_000)}\r\n\r\n`,
      );
      const r = parseRaw(raw);
      expect(r.status).toBe(431);
      expect(r.body).toMatchObject({ error: { code: 431, metadata: null } });
      expect(raw).not.toContain('bbbb');
      expect(raw).not.toContain('cccc');
    });
    test.each([
      ['a non-numeric Content-Length', 'POST /api/v1/byok/dddd HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n'],
      ['a request line that is not HTTP', 'dddd /api/v1/byok/dddd\r\n\r\n'],
      [
        'both Content-Length and chunked',
        'POST /api/v1/byok/dddd HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
      ],
      ['a bare LF in a header', 'GET /api/v1/byok/dddd HTTP/1.1\r\nHost: x\nX: y\r\n\r\n'],
    ])('malformed framing (%s) gets 400', async (_what, request) => {
      const raw = await rawExchange(port, request);
      const r = parseRaw(raw);
      expect(r.status).toBe(400);
      expect(r.body).toMatchObject({ error: { code: 400, message: 'Malformed HTTP request', metadata: null } });
      expect(raw).not.toContain('dddd');
    });
    test('a malformed percent-encoding in the path is a 400 with the error body', async () => {
      const r = parseRaw(
        await rawExchange(port, `GET /api/v1/byok/%E0%A4%A HTTP/1.1\r\nHost: x\r\n${auth()}Connection: close\r\n\r\n`),
      );
      expect([400, 404]).toContain(r.status);
      expect(r.body).toMatchObject({ error: { code: r.status } });
    });
  });

  describe('Idempotency-Key on POST /byok', () => {
    const body = { provider: 'mistral', key: 'mistral-idempotent-000000000001', name: 'retry-safe' };
    test('concurrent retries over two replicas create one credential and all get the same 201 body', async () => {
      const idem = `idem-${Date.now()}`;
      const replies = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          (i % 2 === 0 ? h : h2).call('POST', '/byok', {
            key: a.managementKey,
            body,
            headers: { 'idempotency-key': idem },
          }),
        ),
      );
      expect(replies.map((r) => r.status)).toEqual(Array(8).fill(201));
      const ids = new Set(replies.map((r) => one(r).id));
      expect(ids.size).toBe(1);
      for (const r of replies) expect(one(r)).toEqual(one(replies[0] as (typeof replies)[number]));
      const all = many(await h.call('GET', '/byok?provider=mistral&limit=100', { key: a.managementKey })).filter(
        (k) => k.name === 'retry-safe',
      );
      expect(all).toHaveLength(1);
      // The losers' Secrets are removed: one Secret for the one credential.
      const cr = await credentialObject(a.namespace, [...ids][0] as string);
      await until('one key Secret left for the credential', async () => {
        const secrets = await core().listNamespacedSecret({
          namespace: a.namespace,
          labelSelector: 'app.kubernetes.io/managed-by=byok-api',
        });
        return secrets.items.filter((s) => s.metadata?.name?.startsWith(`${cr?.metadata.name}-key-`)).length === 1;
      });
      // A later retry (read model path) replays too.
      const again = await h2.call('POST', '/byok', {
        key: a.managementKey,
        body: { name: 'retry-safe', key: body.key, provider: 'mistral' },
        headers: { 'idempotency-key': idem },
      });
      expect(again.status).toBe(201);
      expect(one(again).id).toBe([...ids][0]);
    });
    test('the same key with a different body is 422 and creates nothing', async () => {
      const idem = `idem-diff-${Date.now()}`;
      expect(
        (await h.call('POST', '/byok', { key: a.managementKey, body, headers: { 'idempotency-key': idem } })).status,
      ).toBe(201);
      const before = many(await h.call('GET', '/byok?limit=100', { key: a.managementKey })).length;
      const r = await h2.call('POST', '/byok', {
        key: a.managementKey,
        body: { ...body, key: 'mistral-idempotent-000000000002' },
        headers: { 'idempotency-key': idem },
      });
      expect(r.status).toBe(422);
      expect(err(r).metadata).toMatchObject({ field: 'Idempotency-Key', reason: 'IdempotencyKeyReused' });
      expect(r.text).not.toContain('mistral-idempotent');
      expect(many(await h.call('GET', '/byok?limit=100', { key: a.managementKey })).length).toBe(before);
    });
    test('without the header, two identical POSTs are two credentials; a malformed key is 400', async () => {
      const x = one(await h.call('POST', '/byok', { key: a.managementKey, body }));
      const y = one(await h.call('POST', '/byok', { key: a.managementKey, body }));
      expect(x.id).not.toBe(y.id);
      const bad = await h.call('POST', '/byok', {
        key: a.managementKey,
        body,
        headers: { 'idempotency-key': 'x'.repeat(256) },
      });
      expect(bad.status).toBe(400);
      expect(err(bad).metadata).toMatchObject({ field: 'Idempotency-Key' });
    });
  });

  describe('orphan key Secrets', () => {
    test('an API-managed key Secret no credential references is deleted after the grace period; referenced, young and Git Secrets stay', async () => {
      const ns = a.namespace;
      const managed = { 'app.kubernetes.io/managed-by': 'byok-api', 'byok.gateway.dev/credential-secret': 'true' };
      // What a crash between the Secret create and the credential create leaves behind.
      await core().createNamespacedSecret({
        namespace: ns,
        body: {
          metadata: { name: 'byok-crashed-key-000001', labels: managed },
          stringData: { key: 'sk-orphan-live-key-material' },
        },
      });
      await core().createNamespacedSecret({
        namespace: ns,
        body: {
          metadata: { name: 'git-owned-key', labels: { 'byok.gateway.dev/credential-secret': 'true' } },
          stringData: { key: 'sk-git' },
        },
      });
      const live = one(
        await h.call('POST', '/byok', {
          key: a.managementKey,
          body: { provider: 'groq', key: 'gsk_referenced_secret_stays_01' },
        }),
      );
      const liveSecret = (await credentialObject(ns, live.id))?.spec.secretRef.name ?? '';
      const backend = kubeBackend(kubeClient(testKubeConfig()));

      const young = await sweepOrphanSecrets({ backend, state: h.server.state, namespaces: [ns] });
      expect(young.deleted).toEqual([]);
      expect(young.scanned).toBeGreaterThan(1);

      const swept = await sweepOrphanSecrets({ backend, state: h.server.state, namespaces: [ns], graceMs: 0 });
      expect(swept.deleted).toContain(`${ns}/byok-crashed-key-000001`);
      expect(swept.deleted).not.toContain(`${ns}/${liveSecret}`);
      await expect(
        core().readNamespacedSecret({ namespace: ns, name: 'byok-crashed-key-000001' }),
      ).rejects.toMatchObject({ code: 404 });
      expect((await core().readNamespacedSecret({ namespace: ns, name: liveSecret })).metadata?.name).toBe(liveSecret);
      expect((await core().readNamespacedSecret({ namespace: ns, name: 'git-owned-key' })).metadata?.name).toBe(
        'git-owned-key',
      );
      expect(one(await h.call('GET', `/byok/${live.id}`, { key: a.managementKey })).label).toBe(live.label);
    });
  });

  describe('backend outages', () => {
    async function appOver(server: string, timeoutMs?: number) {
      const logger = pino({ level: 'silent' }, new Writable({ write: (_c, _e, cb) => cb() }));
      const backend = kubeBackend(kubeClient(kubeConfigAt(server)), timeoutMs);
      // The read model of the healthy replica: what a replica still has cached when its apiserver goes away.
      return buildApp({
        state: h.server.state,
        backend,
        observe: () => undefined,
        observeDeleted: () => undefined,
        logger,
        rateLimit: false,
      });
    }
    const auth = () => ({ authorization: `Bearer ${a.managementKey}` });

    test('apiserver unreachable (stopped port): writes get 503 + Retry-After at once, reads still work from the cache', async () => {
      const closed: Server = createServer();
      await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
      const deadPort = (closed.address() as { port: number }).port;
      await new Promise<void>((r) => closed.close(() => r()));
      const app = await appOver(`http://127.0.0.1:${deadPort}`);
      const existing = one(
        await h.call('POST', '/byok', {
          key: a.managementKey,
          body: { provider: 'groq', key: 'gsk_outage_existing_0000001' },
        }),
      );
      const post = await app.inject({
        method: 'POST',
        url: '/api/v1/byok',
        headers: auth(),
        payload: { provider: 'groq', key: 'gsk_outage_new_00000000001' },
      });
      expect(post.statusCode).toBe(503);
      expect(post.headers['retry-after']).toBe('5');
      expect(post.json()).toEqual({
        error: { code: 503, message: expect.stringContaining('unavailable'), metadata: { retry_after_seconds: 5 } },
      });
      const patch = await app.inject({
        method: 'PATCH',
        url: `/api/v1/byok/${existing.id}`,
        headers: auth(),
        payload: { key: 'gsk_outage_rotated_000000001' },
      });
      expect(patch.statusCode).toBe(503);
      const del = await app.inject({ method: 'DELETE', url: `/api/v1/byok/${existing.id}`, headers: auth() });
      expect(del.statusCode).toBe(503);
      const get = await app.inject({ method: 'GET', url: `/api/v1/byok/${existing.id}`, headers: auth() });
      expect(get.statusCode).toBe(200);
      expect(
        (await app.inject({ method: 'GET', url: '/api/v1/readyz'.replace('/api/v1', ''), headers: auth() })).statusCode,
      ).toBe(200);
      // Nothing changed behind the refused writes.
      expect(one(await h.call('GET', `/byok/${existing.id}`, { key: a.managementKey })).label).toBe(existing.label);
      await app.close();
    });

    test('apiserver hanging (accepts, never answers): the write times out and answers 503 well before 30 s', async () => {
      const sockets: Socket[] = [];
      const hole: Server = createServer((s) => sockets.push(s));
      await new Promise<void>((r) => hole.listen(0, '127.0.0.1', r));
      const app = await appOver(`http://127.0.0.1:${(hole.address() as { port: number }).port}`, 500);
      // Answered at the 500 ms request timeout, before a cap of 10 s (a third of the 30 s trap) fires.
      const post = await beforeCap(10_000, 'a hanging write', () =>
        app.inject({
          method: 'POST',
          url: '/api/v1/byok',
          headers: auth(),
          payload: { provider: 'groq', key: 'gsk_blackhole_000000000001' },
        }),
      );
      expect(post.statusCode).toBe(503);
      expect(post.headers['retry-after']).toBe('5');
      await app.close();
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => hole.close(() => r()));
    });
  });

  describe('per-account credential quota', () => {
    test('Git-created credentials count; REST create beyond spec.limits.maxCredentials is 403 naming the limit', async () => {
      await core().createNamespacedSecret({
        namespace: q.namespace,
        body: { metadata: { name: 'git-quota' }, stringData: { key: 'sk-git-quota' } },
      });
      await crApi('byokcredentials', q.namespace).create(
        credential('from-git', withProvider('groq'), withSecret('git-quota')),
      );
      await until(
        'the read model to count one credential of a limit of two',
        () => h.server.state.credentialCount(q.namespace) === 1 && h.server.state.credentialLimit(q.namespace) === 2,
      );
      expect(
        (
          await h.call('POST', '/byok', {
            key: q.managementKey,
            body: { provider: 'groq', key: 'gsk_quota_first_0000000001' },
          })
        ).status,
      ).toBe(201);
      const over = await h.call('POST', '/byok', {
        key: q.managementKey,
        body: { provider: 'groq', key: 'gsk_quota_second_000000001' },
      });
      expect(over.status).toBe(403);
      expect(err(over).metadata).toMatchObject({
        reason: 'QuotaExceeded',
        limit: 'maxCredentials',
        max_credentials: 2,
        credentials: 2,
      });
      expect(many(await h.call('GET', '/byok', { key: q.managementKey }))).toHaveLength(2);
    });
    test('an Account without a limit: the API default applies', async () => {
      const tight = await startHarness([a.namespace], { defaultMaxCredentials: 1 });
      try {
        const r = await tight.call('POST', '/byok', {
          key: a.managementKey,
          body: { provider: 'groq', key: 'gsk_default_quota_00000001' },
        });
        expect(r.status).toBe(403);
        expect(err(r).metadata).toMatchObject({ max_credentials: 1 });
      } finally {
        await tight.close();
      }
    });
  });

  describe('list query parameters agree with the OpenAPI document', () => {
    test.each([
      ['limit=', 400],
      ['limit=null', 400],
      ['limit=0', 400],
      ['offset=', 400],
      ['offset=null', 400],
      [`offset=${Number.MAX_SAFE_INTEGER}`, 200],
      [`offset=${Number.MAX_SAFE_INTEGER + 1}`, 400],
    ])('%s → %i', async (query, status) => {
      const r = await h.call('GET', `/byok?${query}`, { key: a.managementKey });
      expect(r.status).toBe(status);
      if (status === 400) expect(err(r).metadata).toMatchObject({ field: query.split('=')[0] });
    });
  });

  test('every response matches the OpenAPI document', async () => {
    await expectContract(h);
    await expectContract(h2);
  });
});
