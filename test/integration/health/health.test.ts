// The data plane reports back, end to end: real apiserver → operator → two kubelet-style projectors → two gateway
// processes (`node src/cli/main.ts gateway`, each on its own projected directories, embedded ledger) → loopback
// upstreams; the operator's leader finds the gateways through EndpointSlices it reads (written here: the harness has
// no kube-controller-manager) and writes UpstreamHealthy, lastUsedTime and Delivered. The canary is also looked for
// in both processes' stdout and stderr.

import { type ChildProcess, spawn } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { CoreV1Api, DiscoveryV1Api, EventsV1Api } from '@kubernetes/client-node';
import { INDEX_NAME, SHA_ANNOTATION } from '../../../src/contract/routing.ts';
import { parseEgressAllowList, publicId } from '../../../src/domain/index.ts';
import { loopbackEndpointSlice } from '../../../src/kube/loopback-endpoints.ts';
import { type Projector, startProjector } from '../../../src/kube/projector.ts';
import type { BYOKCredential } from '../../../src/schema/generated/types.ts';
import { createManagementKey } from '../../../src/service/management-keys.ts';
import { credentialObject, one, startHarness } from '../../support/api-harness.ts';
import {
  account,
  asDefault,
  credential as byokCredential,
  gatewayKey,
  keyHash,
  secret,
  withAnnotations,
  withProvider,
  withSpec,
  workspace,
} from '../../support/builders.ts';
import {
  type GatewayProcess,
  gatewayCommand,
  spawnGateway,
  spawnProjectedGateways,
  stopProcess,
} from '../../support/gateway-process.ts';
import { createTestNamespace, kubectlAs, testKubeConfig, testKubeconfigPath } from '../../support/kube.ts';
import {
  type CapturedOperator,
  cond,
  createSecret,
  metricsText,
  type Obj,
  resource,
  setSecret,
  startTestOperator,
} from '../../support/operator.ts';
import { beforeCap } from '../../support/order.ts';
import { createObjects, createTenant } from '../../support/tenant.ts';
import { until } from '../../support/until.ts';
import { publicKeyOf, startUpstreams, type Upstreams } from '../../support/upstreams.ts';

const kc = testKubeConfig();
const CANARY = 'sk-CANARY-health-7f3e9a1b2c4d5e6f';
const API_KEY = 'sk-health-test-key-0123456789abcdef';
const TOKEN = 'status-token-health-test';
const WRITE_INTERVAL_MS = 5000;

describe('credential health and delivery from the gateways', () => {
  let ns = '';
  let routingNs = '';
  let run: CapturedOperator;
  let up: Upstreams;
  const projectors: Projector[] = [];
  const gateways: GatewayProcess[] = [];
  const running = new Set<ChildProcess>();
  // Last line of defence if Jest dies without running afterAll: no gateway outlives the test process.
  const root = mkdtempSync(join(tmpdir(), 'byok-int-health-'));
  let creds: ReturnType<typeof resource>;
  const credId = (name: string) => publicId('BYOKCredential', ns, name);

  const chat = async (gw: GatewayProcess, model: string) => {
    const res = await fetch(`${gw.url}/api/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
    });
    await res.text();
    return res.status;
  };
  const traffic = async (model: string, n: number) => {
    for (let i = 0; i < n; i++) await chat(gateways[i % 2]!, model);
  };
  const statusReport = async (gw: GatewayProcess) =>
    (await (await fetch(`${gw.opsUrl}/byok/status`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as {
      routing: { version: string | null };
      bundle: { credentials: Record<string, string> };
    };
  const gatewayMetrics = async (gw: GatewayProcess) => (await fetch(`${gw.opsUrl}/metrics`)).text();
  const events = async (name: string) => {
    const list = await kc
      .makeApiClient(EventsV1Api)
      .listNamespacedEvent({ namespace: ns, fieldSelector: `regarding.name=${name}` });
    return list.items.map((e) => ({ type: e.type, reason: e.reason, note: e.note ?? '' }));
  };
  const waitCond = (name: string, type: string, status: string, reason?: string, timeoutMs = 30_000) =>
    until(
      `${name} ${type}=${status}${reason ? ` (${reason})` : ''}`,
      async () => {
        const o = await creds.get(name);
        const c = cond(o, type);
        return c && c.status === status && (!reason || c.reason === reason) ? o : undefined;
      },
      timeoutMs,
      200,
    );
  const credential = async (name: string, provider: string, key: string, annotations?: Record<string, string>) => {
    await createObjects(
      ns,
      secret(`${name}-key`, key),
      byokCredential(
        name,
        withProvider(provider),
        withSpec({ isRequired: true }),
        ...(annotations ? [withAnnotations<BYOKCredential>(annotations)] : []),
      ),
    );
  };

  beforeAll(async () => {
    up = await startUpstreams();
    ns = await createTestNamespace('health-acct');
    routingNs = await createTestNamespace('health-routing');
    creds = resource('byokcredentials', ns);
    const pricing = { kind: 'per-token', promptUsdPerMillionTokens: '1', completionUsdPerMillionTokens: '1' };
    const ep = (provider: string) => ({
      id: provider,
      provider,
      pricing,
      upstream: { baseUrl: `${up.base}/${provider}/v1` },
    });
    writeFileSync(
      join(root, 'catalog.json'),
      JSON.stringify({
        format: 'byok-gateway-catalog/v1',
        models: [
          { model: 'openai/gpt-4o', endpoints: [ep('openai')] },
          { model: 'meta/llama-3.3-70b', endpoints: [ep('groq')] },
          { model: 'mistral/large', endpoints: [ep('mistral')] },
          { model: 'deepseek/chat', endpoints: [ep('deepseek')] },
          { model: 'cohere/command-r', endpoints: [ep('cohere')] },
          {
            model: 'amazon/nova-pro',
            endpoints: [
              {
                id: 'amazon-bedrock',
                provider: 'amazon-bedrock',
                pricing,
                upstream: { baseUrl: `${up.base}/bedrock/{region}/openai/v1`, defaultRegion: 'us-east-1' },
              },
            ],
          },
          {
            model: 'google/gemini-2.5-pro',
            endpoints: [
              {
                id: 'google-vertex',
                provider: 'google-vertex',
                pricing,
                upstream: { baseUrl: `${up.base}/vertex/v1/projects/{project}/locations/{location}/endpoints/openapi` },
              },
            ],
          },
        ],
      }),
    );
    writeFileSync(join(root, 'upstream-ca.pem'), up.caPem);
    writeFileSync(join(root, 'status-token'), `${TOKEN}\n`);
    const pods = await spawnProjectedGateways(kc, routingNs, root, running, (i) => [
      '--ledger-snapshot',
      join(root, `ledger-${i}.json`),
    ]);
    projectors.push(...pods.projectors);
    gateways.push(...pods.gateways);
    run = await startTestOperator(kc, {
      routingNamespace: routingNs,
      watchNamespaces: [ns],
      compile: { coalesceMs: 10 },
      egress: parseEgressAllowList(['127.0.0.1']),
      gatewayStatus: {
        token: TOKEN,
        service: { namespace: routingNs, name: 'byok-gateway', port: 'ops' },
        pollMs: 500,
        // Long enough that a version change reaching status before it fires proves the exemption on a loaded machine.
        writeIntervalMs: WRITE_INTERVAL_MS,
        thresholds: { windowMs: 8000 },
        staleAfterMs: 3000,
        probe: { idleMs: 1500, perProviderIntervalMs: 500 },
      },
    });
    await createTenant(ns, {
      account: account('account'),
      workspaces: [workspace('main', asDefault())],
      gatewayKeys: [gatewayKey('k', keyHash(API_KEY))],
    });
    await credential('oa', 'openai', `${CANARY}-openai-old`);
    await credential('gq', 'groq', 'gsk-health-groq-key');
    await credential('idle', 'mistral', 'sk-health-mistral-idle');
    up.behavior.set('sk-health-deepseek-revoked', '401');
    await credential('probed', 'deepseek', 'sk-health-deepseek-revoked', { 'byok.gateway.dev/probe': 'true' });
    // Probes of the other auth shapes: a SigV4-signed models list (Bedrock IAM) and a token exchange (Vertex).
    up.iamSecrets.set('AKIAHEALTHPROBE00001', 'iam-secret-health-probe');
    await credential(
      'br',
      'amazon-bedrock',
      JSON.stringify({
        accessKeyId: 'AKIAHEALTHPROBE00001',
        secretAccessKey: 'iam-secret-health-probe',
        region: 'eu-west-1',
      }),
      { 'byok.gateway.dev/probe': 'true' },
    );
    const vertexKey = generateKeyPairSync('rsa', {
      modulusLength: 2048,
      privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
      publicKeyEncoding: { type: 'spki', format: 'pem' },
    });
    const email = 'health-probe@proj-1.iam.gserviceaccount.com';
    up.vertexKeys.set(email, publicKeyOf(vertexKey.privateKey));
    await credential(
      'vx',
      'google-vertex',
      JSON.stringify({
        type: 'service_account',
        project_id: 'proj-1',
        private_key_id: 'b1c2d3e4f5a60718',
        private_key: vertexKey.privateKey,
        client_email: email,
        client_id: '1234567890',
        auth_uri: 'https://accounts.google.com/o/oauth2/auth',
        token_uri: `${up.base}/token`,
        auth_provider_x509_cert_url: 'https://www.googleapis.com/oauth2/v1/certs',
        client_x509_cert_url: 'https://www.googleapis.com/robot/v1/metadata/x509/health-probe',
        region: 'us-central1',
      }),
      { 'byok.gateway.dev/probe': 'true' },
    );
  }, 60_000);

  afterAll(async () => {
    await Promise.all([...running].map(stopProcess));
    for (const p of projectors) await p.stop();
    await run?.op.stop();
    await up?.close();
    rmSync(root, { recursive: true, force: true });
  });

  test('every credential reaches Delivered=True with 2/2 pods; an unused credential stays Unknown (Unused)', async () => {
    for (const name of ['oa', 'gq', 'idle']) {
      const o = await waitCond(name, 'Delivered', 'True');
      expect(o.status?.delivery).toMatchObject({ loaded: 2, total: 2 });
    }
    const idle = await waitCond('idle', 'UpstreamHealthy', 'Unknown', 'Unused');
    expect(idle.status?.lastUsedTime).toBeUndefined();
    const account = await until(
      'Account Delivered=True',
      async () => {
        const a = await resource('accounts', ns).get('account');
        return cond(a, 'Delivered')?.status === 'True' ? a : undefined;
      },
      30_000,
      200,
    );
    expect(account.status?.delivery).toMatchObject({ loaded: 2, total: 2 });
    // Delivered counts only pods that have loaded a routing config (the last test shows one that has not).
    for (const gw of gateways) {
      await until(`${gw.opsUrl}/readyz`, async () => (await fetch(`${gw.opsUrl}/readyz`)).status === 200, 15_000, 100);
      expect(await gatewayMetrics(gw)).toMatch(/byok_gateway_routing_config_info\{version="[0-9a-f]+"\} 1/);
    }
  }, 60_000);

  test('401s → UpstreamHealthy=False (Unauthorized) with a Warning; a rotated accepted key → True with UpstreamRecovered and Delivered 2/2 at the new version', async () => {
    await traffic('openai/gpt-4o', 2);
    await waitCond('oa', 'UpstreamHealthy', 'True', 'Serving');
    up.behavior.set(`${CANARY}-openai-old`, '401');
    // Within waitCond's cap of 30 s.
    await traffic('openai/gpt-4o', 6);
    const bad = await waitCond('oa', 'UpstreamHealthy', 'False', 'Unauthorized');
    expect(bad.status?.lastUsedTime).toEqual(expect.any(String));
    await until(
      'UpstreamUnauthorized Event',
      async () => (await events('oa')).find((e) => e.type === 'Warning' && e.reason === 'UpstreamUnauthorized'),
      15_000,
      200,
    );
    // The sentence once, then the counts (it used to wrap the condition's message, which says it already).
    const note = (await events('oa')).find((e) => e.reason === 'UpstreamUnauthorized')!.note;
    expect(note).toMatch(/^the provider refused this key \(401\/403\): rotate it: \d+ ok, \d+ refused/);
    expect(note.match(/refused this key/g)).toHaveLength(1);
    const oldVersion = (bad.status!.delivery as { configVersion: string }).configVersion;

    await setSecret(kc, ns, 'oa-key', 'sk-health-openai-new-accepted');
    const rotated = await until(
      'Delivered at a new version',
      async () => {
        const o = await creds.get('oa');
        const d = o.status?.delivery as { configVersion?: string; loaded?: number; total?: number } | undefined;
        return cond(o, 'Delivered')?.status === 'True' && d?.configVersion !== oldVersion ? o : undefined;
      },
      30_000,
      200,
    );
    expect(rotated.status?.delivery).toMatchObject({ loaded: 2, total: 2 });
    // the old key's 401s do not count against the new one; it is untried until traffic says otherwise.
    expect(cond(rotated, 'UpstreamHealthy')).toMatchObject({ status: 'Unknown', reason: 'Unused' });
    await traffic('openai/gpt-4o', 6);
    await waitCond('oa', 'UpstreamHealthy', 'True', 'Serving');
    await until(
      'UpstreamRecovered Event',
      async () => (await events('oa')).find((e) => e.type === 'Normal' && e.reason === 'UpstreamRecovered'),
      15_000,
      200,
    );
  }, 90_000);

  /** After `kubectl wait` said Delivered: every pod sends exactly this key upstream for the model. */
  const everyPodSends = async (model: string, provider: string, key: string) => {
    for (const gw of gateways) {
      const seen = up.hits.length;
      const res = await fetch(`${gw.url}/api/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }),
      });
      const text = await res.text();
      expect({ status: res.status, body: res.status === 200 ? '' : text }).toEqual({ status: 200, body: '' });
      expect(
        up.hits
          .slice(seen)
          .filter((h) => h.provider === provider)
          .map((h) => h.auth),
      ).toEqual([key]);
    }
  };
  const waitDelivered = (name: string) =>
    kubectlAs(
      testKubeconfigPath(),
      'wait',
      '-n',
      ns,
      '--for=condition=Delivered',
      `byokcredential/${name}`,
      '--timeout=60s',
    );
  /** `kubectl wait` answered; the credential is now at a new version, on both pods, named in the condition. */
  const expectNewVersionDelivered = async (
    name: string,
    waited: Awaited<ReturnType<typeof waitDelivered>>,
    oldVersion: string,
  ) => {
    expect(waited.stderr).toBe('');
    expect(waited).toMatchObject({ code: 0 });
    const after = await creds.get(name);
    const delivery = after.status!.delivery as { configVersion: string; loaded: number; total: number };
    expect(delivery.configVersion).not.toBe(oldVersion);
    expect(delivery).toMatchObject({ loaded: 2, total: 2 });
    const delivered = cond(after, 'Delivered')!;
    expect(delivered.message).toContain(delivery.configVersion);
    expect(delivered.observedGeneration).toBe(after.metadata!.generation);
    return after;
  };

  // The rotation runbook's primary form: a rotation that changes the credential's spec (a new Secret, then
  // spec.secretRef pointed at it, as kustomize's secretGenerator and immutable Secrets do, and as both API doors do
  // on a key change). The generation moves with the patch and Delivered carries observedGeneration, so kubectl wait
  // cannot answer from the old status, however fast it runs after the patch.
  test('rotation runbook: a new Secret, kubectl patch secretRef, kubectl wait --for=condition=Delivered, then every pod serves the new key', async () => {
    const before = await waitCond('oa', 'Delivered', 'True');
    const oldVersion = (before.status!.delivery as { configVersion: string }).configVersion;
    const rotatedAt = Date.now();
    await createSecret(kc, ns, 'oa-key-r1', 'sk-health-openai-runbook-rotated');
    const patched = await kubectlAs(
      testKubeconfigPath(),
      'patch',
      '-n',
      ns,
      'byokcredential/oa',
      '--type=merge',
      '-p',
      JSON.stringify({ spec: { secretRef: { name: 'oa-key-r1' } } }),
    );
    expect(patched).toMatchObject({ code: 0 });
    await expectNewVersionDelivered('oa', await waitDelivered('oa'), oldVersion);
    // What `condition met` promises: both pods now send the new key upstream.
    await everyPodSends('openai/gpt-4o', 'openai', 'sk-health-openai-runbook-rotated');
    process.stderr.write(`[health] secretRef rotation → kubectl wait condition met in ${Date.now() - rotatedAt} ms\n`);
  }, 90_000);

  // An in-place patch of the Secret moves no generation, so a bare `kubectl wait` may still read the old True
  // within the operator's reaction time. The form docs/operator.md gives for it, run here as written (with -n).
  test('in-place Secret rotation: the documented exact form (compare configVersion, then kubectl wait) waits for every pod', async () => {
    await waitCond('oa', 'Delivered', 'True');
    const script = [
      'set -euo pipefail',
      'old=$(kubectl -n "$NS" get byok/oa -o jsonpath="{.status.delivery.configVersion}")',
      `kubectl -n "$NS" patch secret oa-key-r1 --type=merge -p '{"stringData":{"key":"sk-health-openai-in-place-rotated"}}' >/dev/null`,
      'until [ "$(kubectl -n "$NS" get byok/oa -o jsonpath="{.status.delivery.configVersion}")" != "$old" ]; do sleep 0.2; done',
      'kubectl -n "$NS" wait --for=condition=Delivered byok/oa --timeout=60s',
    ].join('\n');
    const bin = process.env.BYOK_CONTROL_PLANE_BIN ?? '';
    const result = await new Promise<{ code: number | null; out: string }>((resolve) => {
      const child = spawn('bash', ['-c', script], {
        env: { ...process.env, PATH: `${bin}:${process.env.PATH ?? ''}`, KUBECONFIG: testKubeconfigPath(), NS: ns },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
      child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
      const timer = setTimeout(() => child.kill('SIGKILL'), 70_000);
      child.once('exit', (code) => {
        clearTimeout(timer);
        resolve({ code, out });
      });
    });
    expect(result).toMatchObject({ code: 0 });
    expect(result.out).toContain('condition met');
    await everyPodSends('openai/gpt-4o', 'openai', 'sk-health-openai-in-place-rotated');
  }, 90_000);

  // The same promise through the REST door: PATCH /byok/{id} with a new key writes a new Secret and repoints the
  // credential (a new generation), so `kubectl wait byok/<name>` right after the 200 waits for the pods.
  test('REST rotation: PATCH key, then kubectl wait byok/<name> --for=condition=Delivered, then every pod serves the new key', async () => {
    // The key exists before the API starts: its informer's first sync then knows it (a key created after the
    // start reaches the index one watch event later, and a request in that window gets 401).
    const { key: managementKey } = await createManagementKey(kc, ns, { description: 'health runbook' });
    const rest = await startHarness([ns]);
    try {
      const created = await rest.call('POST', '/byok', {
        key: managementKey,
        body: { provider: 'cohere', key: 'co-health-rest-first-0123456789' },
      });
      expect(created.status).toBe(201);
      const id = one(created).id;
      const name = (await credentialObject(ns, id))!.metadata.name!;
      await waitCond(name, 'Delivered', 'True');
      await everyPodSends('cohere/command-r', 'cohere', 'co-health-rest-first-0123456789');
      const rotated = await rest.call('PATCH', `/byok/${id}`, {
        key: managementKey,
        body: { key: 'co-health-rest-rotated-0123456789' },
      });
      expect(rotated.status).toBe(200);
      const waited = await waitDelivered(name);
      expect(waited).toMatchObject({ code: 0 });
      await everyPodSends('cohere/command-r', 'cohere', 'co-health-rest-rotated-0123456789');
      expect((await rest.call('DELETE', `/byok/${id}`, { key: managementKey })).status).toBeLessThan(300);
    } finally {
      await rest.close();
    }
  }, 90_000);

  test('a new version reaches status as Delivered=False (Pending) before the status write interval', async () => {
    const before = await waitCond('oa', 'Delivered', 'True');
    const oldVersion = (before.status!.delivery as { configVersion: string }).configVersion;
    const rotatedAt = Date.now();
    // The write interval (5 s here, 30 s by default) does not hold back a version change: it reaches status before
    // a cap of that interval, started first, fires.
    const moved = await beforeCap(WRITE_INTERVAL_MS, 'the status write interval', async () => {
      await setSecret(kc, ns, 'oa-key-r1', 'sk-health-openai-runbook-second');
      return until(
        'a new configVersion in status',
        async () => {
          const o = await creds.get('oa');
          return (o.status?.delivery as { configVersion?: string } | undefined)?.configVersion !== oldVersion
            ? o
            : undefined;
        },
        10_000,
        20,
      );
    });
    process.stderr.write(`[health] Secret change → new configVersion in status in ${Date.now() - rotatedAt} ms\n`);
    const d = cond(moved, 'Delivered')!;
    // Either still pending (named version), or already on every pod: never the old version's True.
    if (d.status === 'False') expect(d).toMatchObject({ reason: 'Pending' });
    expect(d.message).toContain((moved.status!.delivery as { configVersion: string }).configVersion);
    await waitCond('oa', 'Delivered', 'True');
  }, 60_000);

  // a spec change that alters the credential's compiled routing entry (here allowedModels) moves the
  // delivery version like a rotation does, so `kubectl wait` after `kubectl patch` waits until the pods load it.
  test('spec change runbook: kubectl patch allowedModels, kubectl wait --for=condition=Delivered, then every pod has loaded the new routing', async () => {
    const before = await waitCond('oa', 'Delivered', 'True');
    const oldVersion = (before.status!.delivery as { configVersion: string }).configVersion;
    const oldEnvelopes = await Promise.all(
      gateways.map(async (gw) => (await statusReport(gw)).bundle.credentials[credId('oa')]),
    );
    const patchedAt = Date.now();
    const patched = await kubectlAs(
      testKubeconfigPath(),
      'patch',
      '-n',
      ns,
      'byokcredential/oa',
      '--type=merge',
      '-p',
      JSON.stringify({ spec: { allowedModels: ['openai/gpt-4o'] } }),
    );
    expect(patched).toMatchObject({ code: 0 });
    // The key did not change, the routing entry did: the version moved all the same.
    await expectNewVersionDelivered('oa', await waitDelivered('oa'), oldVersion);
    // What `condition met` promises: both pods serve the routing index that carries the patched entry (nothing else
    // changed since), with the same envelope as before.
    const index = await kc.makeApiClient(CoreV1Api).readNamespacedConfigMap({ name: INDEX_NAME, namespace: routingNs });
    const indexVersion = index.metadata?.annotations?.[SHA_ANNOTATION];
    expect(indexVersion).toEqual(expect.any(String));
    for (const [i, gw] of gateways.entries()) {
      const report = await statusReport(gw);
      expect(report.routing.version).toBe(indexVersion);
      expect(report.bundle.credentials[credId('oa')]).toBe(oldEnvelopes[i]);
    }
    expect(await chat(gateways[0]!, 'openai/gpt-4o')).toBe(200);
    process.stderr.write(`[health] allowedModels patch → kubectl wait condition met in ${Date.now() - patchedAt} ms\n`);
  }, 90_000);

  test('after a spec change, a pod that has not loaded the new routing is not counted: 1/2 Pending, then 2/2 once it has', async () => {
    const before = await waitCond('oa', 'Delivered', 'True');
    const oldVersion = (before.status!.delivery as { configVersion: string }).configVersion;
    // Gateway 1's projected directories stop following the apiserver: it keeps the envelope, not the new routing.
    await projectors[1]!.stop();
    await creds.update('oa', (o) => {
      (o as { spec: Record<string, unknown> }).spec.allowedModels = ['openai/gpt-4o', 'openai/gpt-4o-mini'];
    });
    const stuck = await until(
      'oa delivery 1/2 at a new version',
      async () => {
        const o = await creds.get('oa');
        const d = o.status?.delivery as { configVersion?: string; loaded?: number; total?: number } | undefined;
        return d && d.configVersion !== oldVersion && d.loaded === 1 && d.total === 2 ? o : undefined;
      },
      30_000,
      200,
    );
    const pending = cond(stuck, 'Delivered')!;
    expect(pending).toMatchObject({ status: 'False', reason: 'Pending' });
    expect(pending.message).toContain((stuck.status!.delivery as { configVersion: string }).configVersion);
    // The gateway catches up: Delivered follows.
    projectors[1] = startProjector({
      kubeConfig: kc,
      routingNamespace: routingNs,
      configDir: join(root, 'routing-1'),
      bundleDir: join(root, 'bundles-1'),
      keyDir: join(root, 'key-1'),
      pollMs: 100,
    });
    const done = await waitCond('oa', 'Delivered', 'True');
    expect(done.status?.delivery).toMatchObject({ loaded: 2, total: 2 });
  }, 60_000);

  test('429s → RateLimited; the metric counts credentials by reason', async () => {
    up.behavior.set('gsk-health-groq-key', '429');
    await traffic('meta/llama-3.3-70b', 6);
    await waitCond('gq', 'UpstreamHealthy', 'False', 'RateLimited');
    const text = await metricsText(run.op);
    expect(text).toContain(
      `byok_credential_upstream_healthy{namespace="${ns}",provider="groq",reason="RateLimited"} 1`,
    );
    expect(text).toContain(`byok_credential_upstream_healthy{namespace="${ns}",provider="mistral",reason="Unused"} 1`);
    // Both processes carried the 429s (traffic alternates between them): each counts them on its own /metrics.
    for (const gw of gateways)
      expect(await gatewayMetrics(gw)).toMatch(
        /byok_gateway_attempts_total\{provider="groq",kind="byok",outcome="rate_limited"\} [1-9]/,
      );
  }, 60_000);

  test('a gateway whose projected directories are frozen stays on the old version: 1/2 and a Warning on the Account', async () => {
    await projectors[1]!.stop();
    const before = (await creds.get('idle')).status?.delivery as { configVersion: string };
    await setSecret(kc, ns, 'idle-key', 'sk-health-mistral-rotated');
    const stuck = await until(
      'idle delivery 1/2 at a new version',
      async () => {
        const o = await creds.get('idle');
        const d = o.status?.delivery as { configVersion?: string; loaded?: number; total?: number } | undefined;
        return d && d.configVersion !== before.configVersion && d.loaded === 1 && d.total === 2 ? o : undefined;
      },
      30_000,
      200,
    );
    expect(cond(stuck, 'Delivered')).toMatchObject({ status: 'False', reason: 'Pending' });
    // The frozen pod is named (a loaded machine may first name the other pod for a moment: it catches up).
    const warning = await until(
      'GatewayPodStale naming gateway-1 on the Account',
      async () =>
        (await events('account')).find(
          (e) => e.type === 'Warning' && e.reason === 'GatewayPodStale' && e.note?.includes('gateway-1'),
        ),
      30_000,
      200,
    );
    expect(warning.note).toContain('gateway-1');
    await until(
      'byok_gateway_pods_stale 1',
      async () => /byok_gateway_pods_stale 1\b/.test(await metricsText(run.op)),
      15_000,
      200,
    );
    const a = await resource('accounts', ns).get('account');
    expect(a.status?.delivery).toMatchObject({ loaded: 1, total: 2 });
    // The operator's delivery metrics, from the Account's Delivered condition in its cache: one waits, and for how long.
    await until(
      'byok_account_delivery Pending with a lag',
      async () => {
        const t = await metricsText(run.op);
        return (
          /byok_account_delivery\{status="False",reason="Pending"\} [1-9]/.test(t) &&
          Number(/^byok_account_delivery_lag_seconds (\S+)/m.exec(t)?.[1]) > 0
        );
      },
      15_000,
      200,
    );
  }, 60_000);

  test('an opt-in probe finds a revoked idle key with no user traffic; unannotated credentials are never probed', async () => {
    const o = await waitCond('probed', 'UpstreamHealthy', 'False', 'Unauthorized');
    expect(cond(o, 'UpstreamHealthy')!.message).toContain('probe');
    expect(o.status?.lastUsedTime).toBeUndefined();
    expect(up.hits.filter((h) => h.auth === 'sk-health-deepseek-revoked')).toEqual([]);
    const probes = up.probes.filter((p) => p.auth === 'sk-health-deepseek-revoked');
    expect(probes.length).toBeGreaterThan(0);
    expect(probes.every((p) => p.path === '/deepseek/v1/models')).toBe(true);
    // Only annotated credentials are probed: nothing with the unannotated credentials' keys.
    expect(
      up.probes.filter(
        (p) => p.auth.startsWith('sk-health-mistral') || p.auth.startsWith('gsk-health') || p.auth.includes('openai'),
      ),
    ).toEqual([]);
    const probedEvent = await until(
      'UpstreamUnauthorized Event for the probed credential',
      async () => (await events('probed')).find((e) => e.reason === 'UpstreamUnauthorized'),
      15_000,
      200,
    );
    expect(probedEvent.note.match(/rotate it/g)).toHaveLength(1);
    expect(cond(await creds.get('idle'), 'UpstreamHealthy')?.reason).toBe('Unused');
  }, 60_000);

  test('probes of Bedrock IAM (a SigV4-signed models list) and Vertex (a fresh token exchange) report accepted keys as Serving', async () => {
    const br = await waitCond('br', 'UpstreamHealthy', 'True', 'Serving');
    expect(cond(br, 'UpstreamHealthy')!.message).toContain('probe was accepted');
    expect(
      up.probes.some(
        (p) => p.path === '/bedrock/eu-west-1/openai/v1/models' && p.auth === 'sigv4:AKIAHEALTHPROBE00001:eu-west-1',
      ),
    ).toBe(true);
    const vx = await waitCond('vx', 'UpstreamHealthy', 'True', 'Serving');
    expect(cond(vx, 'UpstreamHealthy')!.message).toContain('probe was accepted');
    expect(up.tokenExchanges).toBeGreaterThan(0);
    expect(up.hits.filter((h) => h.provider === 'bedrock' || h.provider === 'vertex')).toEqual([]);
  }, 60_000);

  test('a pod that holds the bundles but has loaded no routing config is counted in the total, never as delivered', async () => {
    // Gateway 0's bundle and key volumes, but an empty routing volume: it would answer 503 to every request.
    const emptyRouting = join(root, 'routing-empty');
    mkdirSync(emptyRouting, { recursive: true });
    const cold = await spawnGateway(
      gatewayCommand(
        root,
        { configDir: emptyRouting, bundleDir: join(root, 'bundles-0'), keyDir: join(root, 'key-0') },
        ['--status-token-file', join(root, 'status-token')],
      ),
      running,
    );
    expect((await fetch(`${cold.opsUrl}/readyz`)).status).toBe(503);
    const report = (await (
      await fetch(`${cold.opsUrl}/byok/status`, { headers: { authorization: `Bearer ${TOKEN}` } })
    ).json()) as { routing: { version: string | null }; bundle: { credentials: Record<string, string> } };
    expect(report.routing.version).toBeNull();
    expect(report.bundle.credentials[credId('gq')]).toBeDefined();
    await kc.makeApiClient(DiscoveryV1Api).createNamespacedEndpointSlice({
      namespace: routingNs,
      body: loopbackEndpointSlice({
        namespace: routingNs,
        name: 'byok-gateway-cold',
        service: 'byok-gateway',
        portName: 'ops',
        port: Number(new URL(cold.opsUrl).port),
        pod: 'gateway-cold',
      }),
    });
    // gq did not change since gateway 1 was frozen: gateways 0 and 1 serve it, the cold pod does not.
    const o = await until(
      'gq delivery 2/3',
      async () => {
        const c = await creds.get('gq');
        const d = c.status?.delivery as { loaded?: number; total?: number } | undefined;
        return d?.total === 3 ? c : undefined;
      },
      30_000,
      200,
    );
    expect(o.status?.delivery).toMatchObject({ loaded: 2, total: 3 });
    expect(cond(o, 'Delivered')?.status).toBe('False');
    await stopProcess(cold.child);
  }, 60_000);

  test('no key material in the status endpoint, status or Events; the endpoint needs the token', async () => {
    expect((await fetch(`${gateways[0]!.opsUrl}/byok/status`)).status).toBe(401);
    // Never on the tenant-facing port: neither the status endpoint nor metrics.
    expect(
      (await fetch(`${gateways[0]!.url}/byok/status`, { headers: { authorization: `Bearer ${TOKEN}` } })).status,
    ).toBe(404);
    expect((await fetch(`${gateways[0]!.url}/metrics`)).status).toBe(404);
    const report = await (
      await fetch(`${gateways[0]!.opsUrl}/byok/status`, { headers: { authorization: `Bearer ${TOKEN}` } })
    ).text();
    expect(report).toContain(credId('oa'));
    const processOutput = gateways.map((gw) => gw.output.join(''));
    // The scan reads real logs: each process logged its config loads and its listening address.
    for (const text of processOutput) expect(text).toContain('routing config loaded');
    const everything = [
      report,
      JSON.stringify(await creds.get('oa')),
      JSON.stringify(await events('oa')),
      JSON.stringify(await events('account')),
      ...run.logs,
      ...processOutput,
    ];
    for (const text of everything) expect(text).not.toContain('CANARY');
    const o: Obj = await creds.get('oa');
    expect(cond(o, 'Ready')?.status).toBe('True');
  });
});
