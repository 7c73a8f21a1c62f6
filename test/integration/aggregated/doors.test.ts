// Each API door over a service runtime with the other door not started, against the real kube-apiserver; and both
// doors listening (liveness) while the runtime cannot reach the apiserver yet, ready only once its caches synced.
// The aggregated door is reached directly here, as the kube-aggregator reaches it (the front-proxy client
// certificate and X-Remote-* headers): an APIService is cluster-wide, and aggregated.test.ts owns the registration.
import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { DEFAULT_SERVICE } from '../../../src/aggregated/register.ts';
import { type AggregatedServer, startAggregatedServer } from '../../../src/aggregated/server.ts';
import { type ApiServer, startApiServer } from '../../../src/api/server.ts';
import { createServingCertificate } from '../../../src/controlplane/pki.ts';
import { kubeClient } from '../../../src/kube/client.ts';
import { API_VERSION } from '../../../src/schema/resources.ts';
import { type ServiceRuntime, startServiceRuntime } from '../../../src/service/runtime.ts';
import { asAggregator } from '../../support/aggregated.ts';
import { type Account, seedAccount } from '../../support/api-harness.ts';
import { testKubeConfig } from '../../support/kube.ts';

const P = '/apis/api.byok.gateway.dev/v1';
const silent = pino({ level: 'silent' });

/** The BYOKCredentials stored in the apiserver (not a cache). */
const storedCredentials = (namespace: string) =>
  kubeClient(testKubeConfig()).request<{ items: { spec: { displayName?: string } }[] }>(
    'GET',
    `/apis/${API_VERSION}/namespaces/${namespace}/byokcredentials`,
  );

async function get(url: string, key?: string): Promise<{ status: number; retryAfter: string | null }> {
  const res = await fetch(url, key ? { headers: { authorization: `Bearer ${key}` } } : {});
  await res.arrayBuffer();
  return { status: res.status, retryAfter: res.headers.get('retry-after') };
}

describe('the aggregated door alone (no REST door)', () => {
  let a: Account;
  let runtime: ServiceRuntime;
  let agg: AggregatedServer;
  beforeAll(async () => {
    a = await seedAccount('doors-agg');
    runtime = startServiceRuntime({ kubeConfig: testKubeConfig(), logger: silent, watchNamespaces: [a.namespace] });
    await runtime.whenSynced();
    agg = await startAggregatedServer({
      kubeConfig: testKubeConfig(),
      runtime,
      tls: await createServingCertificate(DEFAULT_SERVICE),
      logger: silent,
      host: '127.0.0.1',
      port: 0,
    });
  }, 60_000);
  afterAll(async () => {
    await agg?.close();
    await runtime?.close();
  });

  test('create, list, get and delete a BYOKKey: written as a BYOKCredential through the runtime, served from its cache', async () => {
    const created = await asAggregator(agg.url, 'POST', `${P}/namespaces/${a.namespace}/byokkeys`, {
      apiVersion: 'api.byok.gateway.dev/v1',
      kind: 'BYOKKey',
      metadata: { generateName: 'x-' },
      spec: { provider: 'openai', key: 'sk-doors-aggregated-only-0123456789', displayName: 'aggregated only' },
    });
    expect(created.status).toBe(201);
    const id = (created.json.metadata as { name: string }).name;
    const credentials = await storedCredentials(a.namespace);
    expect(credentials.items.map((c) => c.spec.displayName)).toContain('aggregated only');

    const list = await asAggregator(agg.url, 'GET', `${P}/namespaces/${a.namespace}/byokkeys`);
    expect(list.status).toBe(200);
    expect((list.json.items as { metadata: { name: string } }[]).map((o) => o.metadata.name)).toEqual([id]);
    const one = await asAggregator(agg.url, 'GET', `${P}/namespaces/${a.namespace}/byokkeys/${id}`);
    expect(one.json).toMatchObject({ kind: 'BYOKKey', spec: { provider: 'openai', displayName: 'aggregated only' } });
    expect(one.json.spec).not.toHaveProperty('key');

    const deleted = await asAggregator(agg.url, 'DELETE', `${P}/namespaces/${a.namespace}/byokkeys/${id}`);
    expect(deleted.json).toMatchObject({ kind: 'Status', status: 'Success', details: { name: id } });
    expect((await asAggregator(agg.url, 'GET', `${P}/namespaces/${a.namespace}/byokkeys/${id}`)).status).toBe(404);
  }, 30_000);
});

describe('the REST door alone (no aggregated door)', () => {
  let a: Account;
  let runtime: ServiceRuntime;
  let api: ApiServer;
  let apiClosed = false;
  beforeAll(async () => {
    a = await seedAccount('doors-rest');
    runtime = startServiceRuntime({ kubeConfig: testKubeConfig(), logger: silent, watchNamespaces: [a.namespace] });
    api = await startApiServer({ runtime, rateLimit: false });
    await runtime.whenSynced();
  }, 60_000);
  afterAll(async () => {
    if (!apiClosed) await api?.close();
    await runtime?.close();
  });

  test('create, list and delete through /api/v1/byok over a runtime it does not own', async () => {
    const auth = { authorization: `Bearer ${a.managementKey}`, 'content-type': 'application/json' };
    const created = await fetch(`${api.url}/byok`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ provider: 'groq', key: 'gsk_doors_rest_only_000000001', name: 'rest only' }),
    });
    expect(created.status).toBe(201);
    const { data } = (await created.json()) as { data: { id: string } };
    const credentials = await storedCredentials(a.namespace);
    expect(credentials.items.map((c) => c.spec.displayName)).toContain('rest only');
    const list = (await (await fetch(`${api.url}/byok`, { headers: auth })).json()) as { data: { id: string }[] };
    expect(list.data.map((k) => k.id)).toEqual([data.id]);
    expect((await fetch(`${api.url}/byok/${data.id}`, { method: 'DELETE', headers: auth })).status).toBe(200);
    // Closing the door leaves the runtime to its owner: its cache still serves.
    await api.close();
    apiClosed = true;
    expect(runtime.ready()).toBe(true);
    expect(runtime.state.allCredentials(a.namespace)).toEqual([]);
  }, 30_000);
});

/** A TCP path to the real kube-apiserver that can be opened later: until then the apiserver is unreachable. */
function apiserverPath(target: URL): { port: Promise<number>; open(): Promise<void>; close(): Promise<void> } {
  let server: Server | undefined;
  const sockets = new Set<Socket>();
  const probe = createServer();
  const port = new Promise<number>((resolve) =>
    probe.listen(0, '127.0.0.1', () => {
      const p = (probe.address() as { port: number }).port;
      probe.close(() => resolve(p));
    }),
  );
  return {
    port,
    open: async () => {
      const p = await port;
      server = createServer((client) => {
        const upstream = connect(Number(target.port), target.hostname);
        for (const s of [client, upstream]) {
          sockets.add(s);
          s.on('close', () => sockets.delete(s));
          s.on('error', () => s.destroy());
        }
        client.pipe(upstream).pipe(client);
      });
      await new Promise<void>((resolve) => server?.listen(p, '127.0.0.1', resolve));
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    },
  };
}

describe('both doors listen before the caches sync', () => {
  let a: Account;
  let path: ReturnType<typeof apiserverPath>;
  let runtime: ServiceRuntime;
  let api: ApiServer;
  let agg: AggregatedServer;
  beforeAll(async () => {
    a = await seedAccount('doors-sync');
    const real = testKubeConfig();
    const cluster = real.getCurrentCluster();
    if (!cluster) throw new Error('no cluster in the test kubeconfig');
    path = apiserverPath(new URL(cluster.server));
    const unreachable = new KubeConfig();
    unreachable.loadFromOptions({
      clusters: [{ ...cluster, server: `https://127.0.0.1:${await path.port}` }],
      users: real.users,
      contexts: real.contexts,
      currentContext: real.currentContext,
    });
    runtime = startServiceRuntime({ kubeConfig: unreachable, logger: silent, watchNamespaces: [a.namespace] });
    api = await startApiServer({ runtime, rateLimit: false });
    // The door's own identity (TokenReview, SubjectAccessReview) reaches the apiserver; only the runtime does not.
    agg = await startAggregatedServer({
      kubeConfig: real,
      runtime,
      tls: await createServingCertificate(DEFAULT_SERVICE),
      logger: silent,
      host: '127.0.0.1',
      port: 0,
    });
  }, 60_000);
  afterAll(async () => {
    await agg?.close();
    await api?.close();
    await runtime?.close();
    await path?.close();
  });

  test('alive and not ready while the apiserver is unreachable; requests get 503 with Retry-After, never an answer from an empty cache; ready once it is reachable', async () => {
    const root = api.url.replace(/\/api\/v1$/, '');
    expect((await get(`${root}/healthz`)).status).toBe(200);
    expect((await get(`${root}/readyz`)).status).toBe(503);
    // A real management key: before the sync no key is known, and the answer says retry rather than 401.
    expect(await get(`${api.url}/byok`, a.managementKey)).toEqual({ status: 503, retryAfter: '5' });
    const aggHealth = await asAggregator(agg.url, 'GET', '/healthz');
    expect(aggHealth.status).toBe(200);
    expect((await asAggregator(agg.url, 'GET', '/readyz')).status).toBe(503);
    const early = await asAggregator(agg.url, 'GET', `${P}/namespaces/${a.namespace}/byokkeys`);
    expect([early.status, early.json.reason, early.headers['retry-after']]).toEqual([503, 'ServiceUnavailable', '5']);
    expect(runtime.ready()).toBe(false);

    await path.open();
    await runtime.whenSynced();
    expect((await get(`${root}/readyz`)).status).toBe(200);
    expect((await get(`${api.url}/byok`, a.managementKey)).status).toBe(200);
    expect((await asAggregator(agg.url, 'GET', '/readyz')).status).toBe(200);
    const later = await asAggregator(agg.url, 'GET', `${P}/namespaces/${a.namespace}/byokkeys`);
    expect([later.status, later.json.kind]).toEqual([200, 'BYOKKeyList']);
  }, 60_000);
});
