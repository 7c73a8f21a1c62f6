// Authentication (management keys only), the error body on every failure status, rate limiting and the
// served OpenAPI document.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { byokCredential } from '../../../src/schema/resources.ts';
import {
  type Account,
  err,
  expectContract,
  type Harness,
  many,
  one,
  seedAccount,
  startHarness,
} from '../../support/api-harness.ts';
import { core, testKubeConfig } from '../../support/kube.ts';
import { until } from '../../support/until.ts';

const KEY = 'sk-proj-abcdefghijklmnopqrstuvwxyz0123456789';

describe('BYOK REST API: auth, errors, limits', () => {
  let a: Account;
  let h: Harness;
  beforeAll(async () => {
    a = await seedAccount('api-auth');
    h = await startHarness([a.namespace]);
  });
  afterAll(async () => {
    await h?.close();
  });

  describe('authentication', () => {
    test.each([
      ['no Authorization header', {}],
      ['a non-Bearer scheme', { headers: { authorization: `Basic ${Buffer.from('u:p').toString('base64')}` } }],
      ['an empty bearer token', { headers: { authorization: 'Bearer ' } }],
      ['an unknown key', { key: 'sk-byok-mgmt-v1-unknown' }],
    ])('401 for %s, on every operation', async (_what, opts) => {
      for (const [method, path] of [
        ['GET', '/byok'],
        ['POST', '/byok'],
        ['GET', '/byok/00000000-0000-4000-8000-000000000000'],
        ['DELETE', '/byok/00000000-0000-4000-8000-000000000000'],
      ]) {
        const r = await h.call(method as string, path as string, {
          ...opts,
          ...(method === 'POST' ? { body: { provider: 'openai', key: KEY } } : {}),
        });
        expect(r.status).toBe(401);
        expect(err(r).code).toBe(401);
      }
    });

    test('403 for a live gateway API key that is not a management key', async () => {
      const r = await h.call('GET', '/byok', { key: a.gatewayKey });
      expect(r.status).toBe(403);
      expect(err(r).message).toBe('Only management keys can perform this operation');
      const w = await h.call('POST', '/byok', { key: a.gatewayKey, body: { provider: 'openai', key: KEY } });
      expect(w.status).toBe(403);
    });

    test('the management key of the account authenticates', async () => {
      const r = await h.call('GET', '/byok', { key: a.managementKey });
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ data: [], total_count: 0 });
      // The scheme is case-insensitive (RFC 9110), as at the gateway.
      for (const scheme of ['bearer', 'BEARER'])
        expect(
          (await h.call('GET', '/byok', { headers: { authorization: `${scheme} ${a.managementKey}` } })).status,
        ).toBe(200);
    });

    test('a management key revoked by deleting its Secret stops working', async () => {
      const { createManagementKey } = await import('../../../src/service/management-keys.ts');
      const { key, secretName } = await createManagementKey(testKubeConfig(), a.namespace);
      await until(
        'the new management key to be accepted',
        async () => (await h.call('GET', '/byok', { key })).status === 200,
      );
      await core().deleteNamespacedSecret({ namespace: a.namespace, name: secretName });
      await until(
        'the deleted management key to be refused',
        async () => (await h.call('GET', '/byok', { key })).status === 401,
      );
    });
  });

  describe('error body on every failure', () => {
    test('404 for an unknown route, with the error body', async () => {
      for (const path of ['/nope', '/byok/a/b', '/byokx']) {
        const r = await h.call('GET', path, { key: a.managementKey });
        expect(r.status).toBe(404);
        expect(err(r)).toMatchObject({ code: 404 });
      }
    });

    test('405 with Allow for a known path and an unsupported method', async () => {
      const r = await h.call('PUT', '/byok', { key: a.managementKey, body: {} });
      expect(r.status).toBe(405);
      expect(r.headers.get('allow')).toBe('GET, HEAD, POST');
      expect(err(r).code).toBe(405);
      const r2 = await h.call('POST', '/byok/00000000-0000-4000-8000-000000000000', { key: a.managementKey, body: {} });
      expect(r2.status).toBe(405);
      expect(r2.headers.get('allow')).toBe('GET, HEAD, PATCH, DELETE');
    });

    test('415 for a body that is not application/json', async () => {
      const r = await h.call('POST', '/byok', {
        key: a.managementKey,
        rawBody: 'provider=openai',
        contentType: 'application/x-www-form-urlencoded',
      });
      expect(r.status).toBe(415);
      expect(err(r).code).toBe(415);
      const t = await h.call('POST', '/byok', {
        key: a.managementKey,
        rawBody: JSON.stringify({ provider: 'openai', key: KEY }),
        contentType: 'text/plain',
      });
      expect(t.status).toBe(415);
    });

    test('413 for a body over the limit', async () => {
      const r = await h.call('POST', '/byok', {
        key: a.managementKey,
        body: { provider: 'openai', key: 'x'.repeat(200_000) },
      });
      expect(r.status).toBe(413);
      expect(err(r).code).toBe(413);
    });

    test('400 (never 500) for malformed JSON, an empty body, and a body that is not an object', async () => {
      for (const rawBody of [
        '{"provider":"openai",',
        '',
        '[]',
        '"text"',
        'null',
        '{"provider":"openai","key":"k"} trailing',
      ]) {
        const r = await h.call('POST', '/byok', { key: a.managementKey, rawBody });
        expect(r.status).toBe(400);
        expect(err(r).code).toBe(400);
      }
      const none = await h.call('POST', '/byok', { key: a.managementKey });
      expect(none.status).toBe(400);
    });

    test('a charset parameter on the content type is fine', async () => {
      const r = await h.call('POST', '/byok', {
        key: a.managementKey,
        body: { provider: 'openai', key: KEY },
        contentType: 'application/json; charset=utf-8',
      });
      expect(r.status).toBe(201);
      const p = await h.call('PATCH', `/byok/${one(r).id}`, {
        key: a.managementKey,
        body: { disabled: true },
        contentType: 'application/json;charset=UTF-8',
      });
      expect(p.status).toBe(200);
    });
  });

  describe('rate limiting', () => {
    test('429 with the error body once a key exceeds its limit; other keys are unaffected', async () => {
      const other = await seedAccount('api-auth-rl');
      const limited = await startHarness([a.namespace, other.namespace], {
        rateLimit: { max: 3, timeWindowMs: 60_000 },
      });
      try {
        const statuses: number[] = [];
        for (let i = 0; i < 5; i++)
          statuses.push((await limited.call('GET', '/byok', { key: a.managementKey })).status);
        expect(statuses).toEqual([200, 200, 200, 429, 429]);
        const r = await limited.call('GET', '/byok', { key: a.managementKey });
        expect(err(r)).toMatchObject({ code: 429 });
        expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
        expect((await limited.call('GET', '/byok', { key: other.managementKey })).status).toBe(200);
        await expectContract(limited);
      } finally {
        await limited.close();
      }
    });
  });

  describe('OpenAPI document', () => {
    test('is served at /api/v1/openapi.json without auth, with descriptions from the CRD schema', async () => {
      const res = await fetch(`${h.base}/openapi.json`);
      expect(res.status).toBe(200);
      const doc = (await res.json()) as {
        openapi: string;
        paths: Record<string, Record<string, unknown>>;
        components: { schemas: Record<string, { properties: Record<string, { description?: string }> }> };
      };
      expect(doc.openapi).toBe('3.1.0');
      expect(Object.keys(doc.paths).sort()).toEqual(['/byok', '/byok/{id}']);
      expect(Object.keys(doc.paths['/byok'] ?? {}).sort()).toEqual(['get', 'post']);
      expect(Object.keys(doc.paths['/byok/{id}'] ?? {}).sort()).toEqual(['delete', 'get', 'patch']);
      const isRequired = byokCredential.spec.properties?.isRequired?.description;
      expect(doc.components.schemas.BYOKKey?.properties.is_required?.description).toBe(isRequired);
    });
  });

  test('a burst of concurrent creates: distinct sort orders, and a list right after sees all (read-your-writes)', async () => {
    const created = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        h
          .call('POST', '/byok', {
            key: a.managementKey,
            body: { provider: 'ai21', key: `ai21-burst-key-${i}-0000000000` },
          })
          .then(one),
      ),
    );
    expect(created.map((k) => k.sort_order).sort((x, y) => x - y)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    const listed = many(await h.call('GET', '/byok?provider=ai21&limit=100', { key: a.managementKey }));
    expect(listed.map((k) => k.id)).toEqual([...created].sort((x, y) => x.sort_order - y.sort_order).map((k) => k.id));
  });

  test('contract: every response of this suite validates against the served OpenAPI document', async () => {
    await expectContract(h);
  });
});
