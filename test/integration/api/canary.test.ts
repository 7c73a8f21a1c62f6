// A canary key goes in through every door that takes a secret (create, rotation, invalid payloads, malformed
// JSON, wrong fields) and must never come back: not in any response body or header, not in any log line the
// server writes at trace level. Positive control: the Secret in the cluster does hold it.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  type Account,
  credentialObject,
  expectContract,
  type Harness,
  many,
  one,
  seedAccount,
  startHarness,
} from '../../support/api-harness.ts';
import { core } from '../../support/kube.ts';

describe('BYOK REST API: secrets never leave', () => {
  const CANARY = `sk-canary-${randomBytes(12).toString('hex')}`;
  const CANARY2 = `sk-canary2-${randomBytes(12).toString('hex')}`;
  const CANARY3 = `canary3${randomBytes(12).toString('hex')}`;
  const canaries = [CANARY, CANARY2, CANARY3];
  let a: Account;
  let h: Harness;
  beforeAll(async () => {
    a = await seedAccount('api-canary');
    h = await startHarness([a.namespace]);
  });
  afterAll(async () => {
    await h?.close();
  });

  test('the canary passes through every door and comes back nowhere', async () => {
    const mk = a.managementKey;
    // Create, read, list.
    const created = await h.call('POST', '/byok', {
      key: mk,
      body: { provider: 'openai', key: CANARY, name: 'canary' },
    });
    expect(created.status).toBe(201);
    const id = one(created).id;
    await h.call('GET', `/byok/${id}`, { key: mk });
    await h.call('GET', '/byok', { key: mk });
    // Rotate, then echo the label.
    expect((await h.call('PATCH', `/byok/${id}`, { key: mk, body: { key: CANARY2 } })).status).toBe(200);
    expect(
      (
        await h.call('PATCH', `/byok/${id}`, {
          key: mk,
          body: { key: one(await h.call('GET', `/byok/${id}`, { key: mk })).label },
        })
      ).status,
    ).toBe(200);
    // Invalid payloads for JSON-shaped providers, with the canary inside.
    for (const [provider, key] of [
      ['amazon-bedrock', JSON.stringify({ accessKeyId: CANARY3, secretAccessKey: CANARY })],
      ['azure', JSON.stringify([{ api_key: CANARY, resource_name: 'bad name with spaces', resource_type: 'nope' }])],
      ['google-vertex', JSON.stringify({ private_key: CANARY, client_email: CANARY3 })],
      ['google-vertex', `{"private_key":"${CANARY}"`],
    ] as const) {
      const r = await h.call('POST', '/byok', { key: mk, body: { provider, key } });
      expect(r.status).toBe(400);
    }
    // Malformed JSON, wrong types and unknown fields carrying the canary.
    expect((await h.call('POST', '/byok', { key: mk, rawBody: `{"provider":"openai","key":"${CANARY}"` })).status).toBe(
      400,
    );
    expect(
      (await h.call('POST', '/byok', { key: mk, rawBody: `{"provider":"openai","key":"${CANARY}",}` })).status,
    ).toBe(400);
    expect(
      (await h.call('POST', '/byok', { key: mk, body: { provider: 'openai', key: CANARY, secret: CANARY } })).status,
    ).toBe(400);
    expect(
      (await h.call('POST', '/byok', { key: mk, body: { provider: 'openai', key: CANARY, allowed_models: CANARY } }))
        .status,
    ).toBe(400);
    expect((await h.call('POST', '/byok', { key: mk, body: { provider: 'openai', key: [CANARY] } })).status).toBe(400);
    expect((await h.call('POST', '/byok', { key: mk, body: { provider: CANARY, key: CANARY } })).status).toBe(400);
    expect(
      (await h.call('PATCH', `/byok/${id}`, { key: mk, body: { key: `   ${CANARY}\u0000` } })).status,
    ).toBeGreaterThanOrEqual(200);
    expect(
      (await h.call('POST', '/byok', { key: mk, body: { provider: 'openai', key: CANARY.repeat(10_000) } })).status,
    ).toBe(413);
    // The canary as a bearer token.
    expect((await h.call('GET', '/byok', { key: CANARY })).status).toBe(401);
    expect((await h.call('GET', '/byok', { key: a.gatewayKey })).status).toBe(403);

    // Positive control: the rotated canary is what the cluster stores.
    const cr = await credentialObject(a.namespace, id);
    const secret = await core().readNamespacedSecret({ namespace: a.namespace, name: cr?.spec.secretRef.name ?? '' });
    expect(Buffer.from(secret.data?.key ?? '', 'base64').toString('utf8')).toMatch(/sk-canary/);

    for (const ex of h.exchanges) {
      const everything = ex.text + JSON.stringify(ex.headers);
      for (const c of canaries) expect(everything.includes(c)).toBe(false);
    }
    // The server did log (trace level), and no line holds a canary, the management key or a bearer header.
    expect(h.logLines.length).toBeGreaterThan(10);
    const logs = h.logLines.join('');
    for (const c of canaries) expect(logs.includes(c)).toBe(false);
    expect(logs.includes(mk)).toBe(false);
    expect(logs.includes(a.gatewayKey)).toBe(false);
    expect(/Bearer /i.test(logs)).toBe(false);
  });

  test('list responses never contain Secret content', async () => {
    const all = many(await h.call('GET', '/byok?limit=100', { key: a.managementKey }));
    for (const k of all) for (const c of canaries) expect(JSON.stringify(k)).not.toContain(c);
  });

  test('contract: every response of this suite validates against the served OpenAPI document', async () => {
    await expectContract(h);
  });
});
