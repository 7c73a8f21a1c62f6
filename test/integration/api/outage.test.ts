// A real kube-apiserver outage (a private control plane whose apiserver is stopped and started again, same
// etcd): while it is down, writes answer 503 with Retry-After (never 500) and reads keep working from the cache;
// afterwards writes work again and no refused create left a credential behind.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { type ApiServer, startApiServer } from '../../../src/api/server.ts';
import { type ControlPlane, startControlPlane } from '../../../src/controlplane/control-plane.ts';
import { installCrds } from '../../../src/controlplane/install-crds.ts';
import { API_VERSION, GROUP, VERSION } from '../../../src/schema/resources.ts';
import { createManagementKey } from '../../../src/service/management-keys.ts';

describe('REST API during a kube-apiserver outage', () => {
  let cp: ControlPlane;
  let api: ApiServer;
  let key = '';
  const ns = 'outage-account';

  beforeAll(async () => {
    cp = await startControlPlane();
    await installCrds(cp.kubeconfigPath);
    const kc = new KubeConfig();
    kc.loadFromFile(cp.kubeconfigPath);
    await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: ns } } });
    await kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: ns,
      plural: 'workspaces',
      body: { apiVersion: API_VERSION, kind: 'Workspace', metadata: { name: 'main' }, spec: { default: true } },
    });
    key = (await createManagementKey(kc, ns, { description: 'outage test' })).key;
    api = await startApiServer({
      kubeConfig: kc,
      watchNamespaces: [ns],
      logger: pino({ level: 'silent' }),
      rateLimit: false,
    });
  }, 120_000);
  afterAll(async () => {
    await api?.close();
    await cp?.stop();
  });

  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${api.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return {
      status: res.status,
      retryAfter: res.headers.get('retry-after'),
      json: (await res.json()) as { data?: { id: string }; error?: { code: number; metadata: unknown } },
    };
  };

  test('writes: 503 + Retry-After while it is down; reads: 200 from the cache; afterwards all is well', async () => {
    const before = await call('POST', '/byok', { provider: 'groq', key: 'gsk_before_outage_000000001' });
    expect(before.status).toBe(201);
    const id = before.json.data?.id ?? '';

    let restarted = false;
    const restart = cp.restartApiServer().finally(() => (restarted = true));
    const writes: { status: number; retryAfter: string | null; code?: number }[] = [];
    const reads: number[] = [];
    let i = 0;
    while (!restarted) {
      const w = await call('POST', '/byok', {
        provider: 'groq',
        key: `gsk_during_outage_${String(i++).padStart(9, '0')}`,
      });
      writes.push({ status: w.status, retryAfter: w.retryAfter, ...(w.json.error ? { code: w.json.error.code } : {}) });
      reads.push((await call('GET', `/byok/${id}`)).status);
      await new Promise((r) => setTimeout(r, 100));
    }
    await restart;
    const refused = writes.filter((w) => w.status === 503);
    process.stdout.write(`outage: ${writes.length} writes (${refused.length} answered 503), ${reads.length} reads\n`);
    expect(refused.length).toBeGreaterThan(0);
    for (const w of writes) expect([201, 503]).toContain(w.status);
    for (const w of refused) expect(w).toMatchObject({ retryAfter: '5', code: 503 });
    expect(reads.every((s) => s === 200)).toBe(true);

    // Back: writes work again (the client's connection pool recovers), and only answered creates exist.
    let after = await call('POST', '/byok', { provider: 'groq', key: 'gsk_after_outage_0000000001' });
    for (let n = 0; after.status !== 201 && n < 50; n++) {
      await new Promise((r) => setTimeout(r, 200));
      after = await call('POST', '/byok', { provider: 'groq', key: 'gsk_after_outage_0000000001' });
    }
    expect(after.status).toBe(201);
    const created = writes.filter((w) => w.status === 201).length;
    const list = await call('GET', '/byok?limit=100');
    expect((list.json as unknown as { total_count: number }).total_count).toBe(2 + created);
  }, 120_000);
});
