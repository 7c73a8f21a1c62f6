// The egress policy at every hop: both doors refuse a tenant URL that points into the pod's network
// (the REST 400 and the operator's PayloadInvalid come from the same domain check), an operator allow-list lets it
// through, and at connect time the gateway's tenant agent refuses a name that resolves to a forbidden address and an
// IP literal it is handed directly (net.connect skips the lookup for literals). IPv6 forms that carry a
// forbidden IPv4 address, and names with extra trailing dots, are refused at both doors like the address they mean.

import { createServer, request as httpsRequest } from 'node:https';
import { type AddressInfo, createServer as createNetServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { NO_EGRESS_EXCEPTIONS, parseEgressAllowList } from '../../../src/domain/index.ts';
import { egressLookup, tenantHttpsAgent } from '../../../src/gateway/egress.ts';
import { UpstreamTransport } from '../../../src/gateway/transport.ts';
import { type Account, type Harness, seedAccount, startHarness } from '../../support/api-harness.ts';
import { credential, withProvider, withSecret } from '../../support/builders.ts';
import { createTestNamespace, testKubeConfig } from '../../support/kube.ts';
import { type CapturedOperator, cond, createSecret, resource, startTestOperator } from '../../support/operator.ts';
import { until } from '../../support/until.ts';
import { startUpstreams, type Upstreams } from '../../support/upstreams.ts';

const azure = (host: string) =>
  JSON.stringify([
    {
      api_key: 'az-egress-key',
      model_slug: 'openai/gpt-4o',
      endpoint_url: `https://${host}/openai/deployments/d/chat/completions?api-version=2024-10-21`,
      model_id: 'd',
    },
  ]);
const FORBIDDEN = [
  '127.0.0.1:8443',
  '2130706433:8443',
  '0177.0.0.1',
  'localhost:6443',
  '[::1]:443',
  '[::ffff:127.0.0.1]',
  '169.254.169.254',
  '10.96.0.1',
  'kubernetes',
  'kubernetes.default.svc.cluster.local',
];
/** IPv4-compatible, -translated, 6to4, Teredo (client 127.0.0.1, inverted) and NAT64 local-use forms; extra dots. */
const EMBEDDED = [
  '[::127.0.0.1]',
  '[::ffff:0:127.0.0.1]',
  '[2002:a9fe:a9fe::1]',
  '[2001:0:4136:e378:8000:63bf:80ff:fffe]',
  '[64:ff9b:1::a9fe:a9fe]',
  'localhost..',
  '127.0.0.1..:8443',
];

/** A request through `agent` to a literal host; the error it fails with (a response is a failure of the test). */
function literalRequest(
  agent: ReturnType<typeof tenantHttpsAgent>,
  host: string,
  port: number,
): Promise<NodeJS.ErrnoException> {
  return new Promise((resolve) => {
    const req = httpsRequest({ host, port, path: '/openai/v1/models', method: 'GET', agent }, (res) => {
      res.resume();
      resolve(new Error(`connected: ${res.statusCode}`));
    });
    req.on('error', resolve);
    req.end();
  });
}

describe('egress policy for tenant URLs', () => {
  let acct: Account;
  let rest: Harness;
  let op: CapturedOperator;
  let up: Upstreams;

  beforeAll(async () => {
    acct = await seedAccount('egress');
    rest = await startHarness([acct.namespace]);
    const routing = await createTestNamespace('egress-routing');
    op = await startTestOperator(testKubeConfig(), {
      routingNamespace: routing,
      watchNamespaces: [acct.namespace],
      compile: { enabled: false },
    });
    up = await startUpstreams();
  }, 60_000);

  afterAll(async () => {
    await op?.op.stop();
    await rest?.close();
    await up?.close();
  });

  test.each(FORBIDDEN)(
    'REST door: an Azure endpoint_url at %s is a 400 naming the field; nothing is stored',
    async (host) => {
      const r = await rest.call('POST', '/byok', {
        key: acct.managementKey,
        body: { provider: 'azure', key: azure(host) },
      });
      expect(r.status).toBe(400);
      expect(JSON.stringify(r.body)).toMatch(/\[0\]\.endpoint_url.*must not point at a/);
      const list = await rest.call('GET', '/byok?provider=azure', { key: acct.managementKey });
      expect((list.body as { total_count: number }).total_count).toBe(0);
    },
  );

  test.each(EMBEDDED)(
    'REST door: an Azure endpoint_url at %s (a forbidden IPv4 inside, or extra dots) is a 400',
    async (host) => {
      const r = await rest.call('POST', '/byok', {
        key: acct.managementKey,
        body: { provider: 'azure', key: azure(host) },
      });
      expect(r.status).toBe(400);
      expect(JSON.stringify(r.body)).toMatch(/\[0\]\.endpoint_url.*must not point at a (loopback|link-local|NAT64)/);
    },
  );

  test('Git door: a 6to4 address around 169.254.169.254 makes the credential PayloadInvalid, judged by that IPv4', async () => {
    const kc = testKubeConfig();
    await createSecret(kc, acct.namespace, 'az-6to4', azure('[2002:a9fe:a9fe::1]'));
    const creds = resource('byokcredentials', acct.namespace);
    await creds.create(credential('az-6to4', withProvider('azure'), withSecret('az-6to4')));
    const o = await until(
      'PayloadInvalid',
      async () => {
        const c = cond(await creds.get('az-6to4'), 'PayloadValid');
        return c?.status === 'False' ? c : undefined;
      },
      20_000,
      100,
    );
    expect(o).toMatchObject({
      reason: 'PayloadInvalid',
      message: expect.stringContaining('must not point at a link-local (cloud metadata) (6to4) address'),
    });
  });

  test('Git door: the same URL makes the credential PayloadInvalid, with the same reason', async () => {
    const kc = testKubeConfig();
    await createSecret(kc, acct.namespace, 'az-loopback', azure('127.0.0.1:8443'));
    const creds = resource('byokcredentials', acct.namespace);
    await creds.create(credential('az-loopback', withProvider('azure'), withSecret('az-loopback')));
    const o = await until(
      'PayloadInvalid',
      async () => {
        const c = cond(await creds.get('az-loopback'), 'PayloadValid');
        return c?.status === 'False' ? c : undefined;
      },
      20_000,
      100,
    );
    expect(o).toMatchObject({
      reason: 'PayloadInvalid',
      message: expect.stringContaining('must not point at a loopback address'),
    });
  });

  test('an operator allow-list lets exactly the allowed range through at the REST door', async () => {
    const allowed = await startHarness([acct.namespace], { egress: parseEgressAllowList(['127.0.0.1/32']) });
    try {
      expect(
        (
          await allowed.call('POST', '/byok', {
            key: acct.managementKey,
            body: { provider: 'azure', key: azure('127.0.0.1:8443') },
          })
        ).status,
      ).toBe(201);
      expect(
        (
          await allowed.call('POST', '/byok', {
            key: acct.managementKey,
            body: { provider: 'azure', key: azure('127.0.0.2:8443') },
          })
        ).status,
      ).toBe(400);
    } finally {
      await allowed.close();
    }
  });

  test('connect time: a name that resolves to loopback is refused by the tenant agent, whatever validation said', async () => {
    // localhost resolves through /etc/hosts: the same path a rebinding name takes through DNS.
    const looked = await new Promise<{ code?: string }>((resolve) =>
      egressLookup(NO_EGRESS_EXCEPTIONS)('localhost', {}, (err) => resolve((err ?? {}) as { code?: string })),
    );
    expect(looked.code).toBe('EGRESS_DENIED');
    const port = Number(new URL(up.base).port);
    const agent = tenantHttpsAgent(NO_EGRESS_EXCEPTIONS, { ca: up.caPem });
    const before = up.hits.length;
    const err = await new Promise<NodeJS.ErrnoException>((resolve) => {
      const req = httpsRequest(
        { host: 'localhost', port, path: '/openai/v1/chat/completions', method: 'POST', agent },
        () => resolve(new Error('connected')),
      );
      req.on('error', resolve);
      req.end('{}');
    });
    expect(err.code).toBe('EGRESS_DENIED');
    expect(up.hits.length).toBe(before);
    // With the host allow-listed the same agent connects.
    const allowedAgent = tenantHttpsAgent(parseEgressAllowList(['localhost']), { ca: up.caPem });
    const status = await new Promise<number>((resolve, reject) => {
      const req = httpsRequest(
        { host: 'localhost', port, path: '/openai/v1/models', method: 'GET', agent: allowedAgent },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      req.end();
    });
    expect(status).toBeGreaterThan(0);
    agent.destroy();
    allowedAgent.destroy();
  });

  test("connect time: an IP literal handed to the gateway's agents is judged too, though no lookup runs for it", async () => {
    // A bare TCP listener on loopback: it counts sockets, so a refusal must come before connect(), not after.
    let sockets = 0;
    const listener = createNetServer((s) => {
      sockets++;
      s.destroy();
    });
    const tcpPort = await new Promise<number>((r) =>
      listener.listen(0, '127.0.0.1', () => r((listener.address() as AddressInfo).port)),
    );
    const agent = tenantHttpsAgent(NO_EGRESS_EXCEPTIONS, { ca: up.caPem });
    for (const host of ['127.0.0.1', '::ffff:127.0.0.1', '::ffff:7f00:1', '[::ffff:127.0.0.1]']) {
      const err = await literalRequest(agent, host, tcpPort);
      expect({ host, code: err.code, message: err.message }).toMatchObject({
        host,
        code: 'EGRESS_DENIED',
        message: expect.stringContaining('loopback'),
      });
    }
    expect(sockets).toBe(0);
    agent.destroy();
    await new Promise<void>((r) => listener.close(() => r()));
    // The gateway's own transport, as an Azure endpoint_url takes it (past the per-attempt re-validation): validation
    // let 127.0.0.1 through above with an allow-list, the gateway's policy does not.
    const seen = up.bodies.length;
    const models = { url: new URL(`${up.base}/openai/v1/models`), headers: {}, tenantUrl: true as const };
    const refused = new UpstreamTransport({ egress: NO_EGRESS_EXCEPTIONS, upstreamCaPem: up.caPem });
    expect(await refused.status(models, 5_000)).toBeNull();
    refused.close();
    expect(up.bodies.length).toBe(seen);
    // Allow-listed, the same literal connects: the check is the policy, not a blanket refusal of literals.
    const allowed = new UpstreamTransport({ egress: parseEgressAllowList(['127.0.0.1/32']), upstreamCaPem: up.caPem });
    expect(await allowed.status(models, 5_000)).toEqual(expect.any(Number));
    allowed.close();
    expect(up.bodies.length).toBeGreaterThan(seen);
  });

  test('a plain HTTPS server on loopback is never reached by a default agent', async () => {
    let reached = 0;
    const server = createServer({ key: '', cert: '' }, () => reached++);
    server.on('error', () => undefined);
    const port = await new Promise<number>((r) =>
      server.listen(0, '127.0.0.1', () => r((server.address() as AddressInfo).port)),
    );
    const agent = tenantHttpsAgent(NO_EGRESS_EXCEPTIONS, {});
    const err = await new Promise<NodeJS.ErrnoException>((resolve) => {
      const req = httpsRequest({ host: 'localhost', port, method: 'GET', agent }, () =>
        resolve(new Error('connected')),
      );
      req.on('error', resolve);
      req.end();
    });
    expect(err.code).toBe('EGRESS_DENIED');
    expect(reached).toBe(0);
    agent.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  });
});
