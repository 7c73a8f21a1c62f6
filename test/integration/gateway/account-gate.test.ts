// The Account gate, end to end: real kube-apiserver → operator → kubelet-style projector → a gateway process →
// loopback upstream, with both API doors (REST and aggregated) over one service runtime. A namespace holding a
// Secret, a BYOKCredential, a default Workspace and a GatewayAPIKey but no Account is not compiled: the credential
// and the key are Ready=False AccountMissing with a Warning Event naming the Account to create, the gateway answers
// the key 401 as an unknown key, and both doors show the same status. Creating the Account brings the namespace in
// (Delivered, then 200 with the tenant's own key upstream); deleting it takes it out again (401, AccountMissing).

import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { EventsV1Api } from '@kubernetes/client-node';
import { pino } from 'pino';
import { DEFAULT_SERVICE } from '../../../src/aggregated/register.ts';
import { type AggregatedServer, startAggregatedServer } from '../../../src/aggregated/server.ts';
import { type ApiServer, startApiServer } from '../../../src/api/server.ts';
import { createServingCertificate } from '../../../src/controlplane/pki.ts';
import { parseEgressAllowList, publicId } from '../../../src/domain/index.ts';
import type { Projector } from '../../../src/kube/projector.ts';
import { loadRoutingConfig } from '../../../src/sdk/index.ts';
import { createManagementKey } from '../../../src/service/management-keys.ts';
import { type ServiceRuntime, startServiceRuntime } from '../../../src/service/runtime.ts';
import { asAggregator } from '../../support/aggregated.ts';
import { asDefault, credential, gatewayKey, keyHash, secret, workspace } from '../../support/builders.ts';
import { writeGatewayFiles } from '../../support/catalog.ts';
import { type GatewayProcess, spawnProjectedGateways, stopProcess } from '../../support/gateway-process.ts';
import { createTestNamespace, testKubeConfig } from '../../support/kube.ts';
import { type CapturedOperator, cond, resource, startTestOperator } from '../../support/operator.ts';
import { createAccount, createTenant } from '../../support/tenant.ts';
import { until } from '../../support/until.ts';
import { startUpstreams, type Upstreams } from '../../support/upstreams.ts';

const kc = testKubeConfig();
const TOKEN = 'status-token-account-gate';
const GATEWAY_KEY = 'sk-byok-gw-v1-account-gate-0123456789abcdef0123456789';
const UPSTREAM_KEY = 'sk-account-gate-openai-canary-7d1e';
const AGG = '/apis/api.byok.gateway.dev/v1';
const silent = pino({ level: 'silent' });

describe('a namespace without an Account is not routed', () => {
  let ns = '';
  let routingNs = '';
  let run: CapturedOperator;
  let up: Upstreams;
  let runtime: ServiceRuntime;
  let api: ApiServer;
  let agg: AggregatedServer;
  let managementKey = '';
  let gw: GatewayProcess;
  const projectors: Projector[] = [];
  const running = new Set<ChildProcess>();
  const root = mkdtempSync(join(tmpdir(), 'byok-int-account-gate-'));

  const chat = async () => {
    const before = up.hits.length;
    const res = await fetch(`${gw.url}/api/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${GATEWAY_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai/gpt-4o', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] }),
    });
    const body = await res.text();
    return {
      status: res.status,
      message: res.status === 200 ? '' : (JSON.parse(body) as { error: { message: string } }).error.message,
      upstream: up.hits.slice(before).map((h) => h.auth),
    };
  };
  /** Whether the routing the gateway's projector holds carries the namespace at all. */
  const projected = async (): Promise<boolean> => {
    await projectors[0]!.sync();
    try {
      return loadRoutingConfig(join(root, 'routing-0')).accounts.has(ns);
    } catch {
      return false;
    }
  };
  const warning = (kind: string, name: string) =>
    until(
      `a Warning AccountMissing Event on ${kind} ${name}`,
      async () => {
        const events = await kc.makeApiClient(EventsV1Api).listNamespacedEvent({ namespace: ns });
        return events.items.find(
          (e) =>
            e.regarding?.name === name &&
            e.regarding.kind === kind &&
            e.type === 'Warning' &&
            e.reason === 'AccountMissing',
        );
      },
      15_000,
      200,
    );
  const restKey = async (id: string) => {
    const res = await fetch(`${api.url}/byok/${id}`, { headers: { authorization: `Bearer ${managementKey}` } });
    return {
      status: res.status,
      data: (
        (await res.json()) as {
          data: { status: { ready: boolean | null; reason: string | null; message: string | null } };
        }
      ).data,
    };
  };
  const aggregatedKey = async (id: string) =>
    (await asAggregator(agg.url, 'GET', `${AGG}/namespaces/${ns}/byokkeys/${id}`)).json as {
      status?: { ready?: boolean | null; reason?: string | null; message?: string | null };
    };

  beforeAll(async () => {
    up = await startUpstreams();
    routingNs = await createTestNamespace('gate-routing');
    ns = await createTestNamespace('gate-team');
    writeGatewayFiles(root, up, { statusToken: TOKEN });
    const pods = await spawnProjectedGateways(
      kc,
      routingNs,
      root,
      running,
      () => ['--ledger-snapshot', join(root, 'ledger.json')],
      1,
    );
    projectors.push(...pods.projectors);
    gw = pods.gateways[0]!;
    run = await startTestOperator(kc, {
      routingNamespace: routingNs,
      watchNamespaces: [ns],
      compile: { coalesceMs: 10 },
      egress: parseEgressAllowList(['127.0.0.1']),
      gatewayStatus: {
        token: TOKEN,
        service: { namespace: routingNs, name: 'byok-gateway', port: 'ops' },
        pollMs: 300,
        pendingPollMs: 100,
        writeIntervalMs: 500,
      },
    });
    runtime = startServiceRuntime({ kubeConfig: kc, logger: silent, watchNamespaces: [ns] });
    api = await startApiServer({ runtime, rateLimit: false });
    agg = await startAggregatedServer({
      kubeConfig: kc,
      runtime,
      tls: await createServingCertificate(DEFAULT_SERVICE),
      logger: silent,
      host: '127.0.0.1',
      port: 0,
    });
    await runtime.whenSynced();
    managementKey = (await createManagementKey(kc, ns, { description: 'account gate' })).key;
    // Everything a team needs, except the Account.
    await createTenant(ns, {
      account: false,
      secrets: [secret('oa-key', UPSTREAM_KEY)],
      workspaces: [workspace('main', asDefault())],
      gatewayKeys: [gatewayKey('k', keyHash(GATEWAY_KEY))],
      credentials: [credential('oa', (c) => void (c.spec.isByokOnly = true))],
    });
  }, 90_000);

  afterAll(async () => {
    await Promise.all([...running].map((c) => stopProcess(c)));
    for (const p of projectors) await p.stop();
    await agg?.close();
    await api?.close();
    await runtime?.close();
    await run?.op.stop();
    await up?.close();
    rmSync(root, { recursive: true, force: true });
  });

  test('without an Account: AccountMissing on the credential and the key, with Events; not compiled; the gateway answers 401', async () => {
    const oa = await resource('byokcredentials', ns).waitReady('oa', 'False', 'AccountMissing');
    const k = await resource('gatewayapikeys', ns).waitReady('k', 'False', 'AccountMissing');
    for (const message of [cond(oa, 'Ready')!.message, cond(k, 'Ready')!.message]) {
      expect(message).toContain(`namespace ${ns} has no Account`);
      expect(message).toContain(
        `create an Account (apiVersion byok.gateway.dev/v1alpha1, kind Account) in namespace ${ns}`,
      );
    }
    // The other checks still ran: the payload is valid and only its masked label is shown.
    expect(cond(oa, 'PayloadValid')).toMatchObject({ status: 'True' });
    expect(JSON.stringify(oa)).not.toContain(UPSTREAM_KEY);
    expect((await warning('BYOKCredential', 'oa')).note).toContain('has no Account');
    expect((await warning('GatewayAPIKey', 'k')).note).toContain('has no Account');
    // The routing the gateway loads holds other compile runs' output (the operator has written its index), never this namespace.
    // The gateway serves the routing the operator wrote (an index of other runs' output), which never carries this namespace.
    await until(
      'the gateway on the projected routing',
      async () => {
        await projectors[0]!.sync();
        const report = (await (
          await fetch(`${gw.opsUrl}/byok/status`, { headers: { authorization: `Bearer ${TOKEN}` } })
        ).json()) as { routing: { version: string | null } };
        return (
          report.routing.version !== null &&
          report.routing.version === loadRoutingConfig(join(root, 'routing-0')).version
        );
      },
      30_000,
      100,
    );
    expect(await projected()).toBe(false);
    expect(await chat()).toEqual({
      status: 401,
      message: expect.stringContaining('invalid gateway API key'),
      upstream: [],
    });
  }, 60_000);

  test('both doors take a credential in such a namespace and show the same AccountMissing status', async () => {
    const created = await fetch(`${api.url}/byok`, {
      method: 'POST',
      headers: { authorization: `Bearer ${managementKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ provider: 'groq', key: 'gsk_account_gate_rest_00000001', name: 'via rest' }),
    });
    expect(created.status).toBe(201);
    const { data } = (await created.json()) as { data: { id: string } };
    const rest = await until(
      'the REST door showing AccountMissing',
      async () => {
        const r = await restKey(data.id);
        return r.data.status.reason === 'AccountMissing' ? r : undefined;
      },
      15_000,
      100,
    );
    expect(rest.data.status).toMatchObject({
      ready: false,
      reason: 'AccountMissing',
      message: expect.stringContaining(`namespace ${ns} has no Account`),
    });
    const viaAggregated = await until(
      'the aggregated door showing AccountMissing',
      async () => {
        const o = await aggregatedKey(data.id);
        return o.status?.reason === 'AccountMissing' ? o : undefined;
      },
      15_000,
      100,
    );
    expect(viaAggregated.status).toMatchObject({
      ready: false,
      reason: 'AccountMissing',
      message: rest.data.status.message,
    });
    expect(
      (
        await fetch(`${api.url}/byok/${data.id}`, {
          method: 'DELETE',
          headers: { authorization: `Bearer ${managementKey}` },
        })
      ).status,
    ).toBe(200);
  }, 60_000);

  test('creating the Account brings the namespace in: Ready, Delivered, then 200 with the tenant key upstream', async () => {
    await createAccount(ns);
    await resource('byokcredentials', ns).waitReady('oa', 'True', undefined, 30_000);
    await resource('gatewayapikeys', ns).waitReady('k', 'True', undefined, 30_000);
    const delivered = await until(
      'the key Delivered',
      async () => {
        const k = await resource('gatewayapikeys', ns).get('k');
        return cond(k, 'Delivered')?.status === 'True' ? k : undefined;
      },
      30_000,
      100,
    );
    expect(cond(delivered, 'Delivered')).toMatchObject({ reason: 'Delivered' });
    expect(await projected()).toBe(true);
    expect(
      await until(
        'a 200 on the gateway',
        async () => {
          const r = await chat();
          return r.status === 200 ? r : undefined;
        },
        10_000,
        100,
      ),
    ).toEqual({ status: 200, message: '', upstream: [UPSTREAM_KEY] });
    const id = publicId('BYOKCredential', ns, 'oa');
    expect((await restKey(id)).data.status).toMatchObject({ ready: true, reason: 'Ready' });
  }, 90_000);

  test('deleting the Account takes it out again: AccountMissing, out of the routing, 401', async () => {
    await resource('accounts', ns).delete(ns);
    await resource('byokcredentials', ns).waitReady('oa', 'False', 'AccountMissing', 30_000);
    await resource('gatewayapikeys', ns).waitReady('k', 'False', 'AccountMissing', 30_000);
    await until('the namespace out of the projected routing', async () => !(await projected()), 30_000, 100);
    expect(
      await until(
        'a 401 on the gateway',
        async () => {
          const r = await chat();
          return r.status === 401 ? r : undefined;
        },
        10_000,
        100,
      ),
    ).toEqual({ status: 401, message: expect.stringContaining('invalid gateway API key'), upstream: [] });
  }, 90_000);
});
