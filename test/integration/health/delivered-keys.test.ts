// Everything a user waits on is waitable, end to end: real apiserver → operator (health writer, and the spend writer
// on a real redis-server) → two kubelet-style projectors → two gateway processes metering into that Redis. A new
// GatewayAPIKey of a brand-new account with a budget: once `kubectl wait --for=condition=Delivered` says so, the
// first call on each gateway is 200 (not 401 before the pods load the key, not 503 before the account's budgets are
// validated in the ledger). `bundle-key rotate`: when it returns, the Account already shows the new version with
// Delivered=False, so a wait issued right after it cannot answer from the old key's True.

import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { Watch } from '@kubernetes/client-node';
import { bundleKeyCommand } from '../../../src/cli/bundle-key.ts';
import { parseEgressAllowList, publicId } from '../../../src/domain/index.ts';
import type { Projector } from '../../../src/kube/projector.ts';
import { GROUP, VERSION } from '../../../src/schema/resources.ts';
import {
  account,
  asDefault,
  credential,
  gatewayKey,
  guardrail,
  keyHash,
  withBudget,
  withGuardrail,
  withSpec,
  workspace,
} from '../../support/builders.ts';
import { writeGatewayFiles } from '../../support/catalog.ts';
import { type GatewayProcess, spawnProjectedGateways, stopProcess } from '../../support/gateway-process.ts';
import { createTestNamespace, kubectlAs, testKubeConfig, testKubeconfigPath } from '../../support/kube.ts';
import {
  type CapturedOperator,
  cond,
  createSecret,
  type Obj,
  resource,
  startTestOperator,
} from '../../support/operator.ts';
import { type RedisServer, startRedis } from '../../support/redis.ts';
import { until } from '../../support/until.ts';
import { startUpstreams, type Upstreams } from '../../support/upstreams.ts';

const kc = testKubeConfig();
const TOKEN = 'status-token-delivered-keys';
const versionOf = (o: Obj) => (o.status?.delivery as { configVersion?: string } | undefined)?.configVersion;

describe('Delivered for gateway keys and across a bundle-key rotation', () => {
  let routingNs = '';
  let run: CapturedOperator;
  let up: Upstreams;
  let redis: RedisServer;
  const projectors: Projector[] = [];
  const gateways: GatewayProcess[] = [];
  const running = new Set<ChildProcess>();
  const root = mkdtempSync(join(tmpdir(), 'byok-int-delivered-keys-'));

  const chat = async (gw: GatewayProcess, apiKey: string) => {
    const res = await fetch(`${gw.url}/api/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai/gpt-4o', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] }),
    });
    const body = await res.text();
    return { status: res.status, body: res.status === 200 ? '' : body };
  };
  const statusReport = async (gw: GatewayProcess) =>
    (await (await fetch(`${gw.opsUrl}/byok/status`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as {
      routing: { version: string | null };
      bundle: { credentials: Record<string, string> };
    };
  const kubectlWait = (ns: string, what: string) =>
    kubectlAs(testKubeconfigPath(), 'wait', '-n', ns, '--for=condition=Delivered', what, '--timeout=60s');

  let acctA = '';
  let acctB = '';
  beforeAll(async () => {
    redis = await startRedis();
    up = await startUpstreams();
    routingNs = await createTestNamespace('dk-routing');
    acctA = await createTestNamespace('dk-acct-a');
    acctB = await createTestNamespace('dk-acct-b');
    writeGatewayFiles(root, up, { statusToken: TOKEN });
    const pods = await spawnProjectedGateways(kc, routingNs, root, running, () => [
      '--ledger-redis-url',
      redis.url,
      '--ledger-journal',
      'none',
    ]);
    projectors.push(...pods.projectors);
    gateways.push(...pods.gateways);
    run = await startTestOperator(kc, {
      routingNamespace: routingNs,
      watchNamespaces: [acctA, acctB],
      compile: { coalesceMs: 10 },
      egress: parseEgressAllowList(['127.0.0.1']),
      gatewayStatus: {
        token: TOKEN,
        service: { namespace: routingNs, name: 'byok-gateway', port: 'ops' },
        pollMs: 500,
        pendingPollMs: 100,
        writeIntervalMs: 1000,
      },
      // A spend pass a minute apart: a new account's budgets must open because its compile asked for one, not
      // because the interval came round.
      spendStatus: { redisUrl: redis.url, intervalMs: 60_000 },
    });
  }, 60_000);

  afterAll(async () => {
    await Promise.all([...running].map((c) => stopProcess(c)));
    for (const p of projectors) await p.stop();
    await run?.op.stop();
    await up?.close();
    await redis?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  test('a new key of a brand-new account with a budget: kubectl wait Delivered, then the first call on each gateway is 200', async () => {
    const apiKey = 'sk-delivered-keys-new-account-a-0123456789';
    // The namespace was made in beforeAll (the operator watches a fixed list); everything in it is new here.
    const ns = acctA;
    const createdAt = Date.now();
    await newAccountIn(ns, apiKey);
    for (const what of ['gatewayapikey/k', 'byokcredential/oa']) {
      const waited = await kubectlWait(ns, what);
      expect({ what, code: waited.code, stderr: waited.stderr }).toEqual({ what, code: 0, stderr: '' });
    }
    const waitedMs = Date.now() - createdAt;
    // The very first call on each pod: neither 401 (key not loaded) nor 503 (budget check unavailable).
    for (const gw of gateways) expect(await chat(gw, apiKey)).toEqual({ status: 200, body: '' });
    const key = await resource('gatewayapikeys', ns).get('k');
    const delivery = key.status?.delivery as { configVersion: string; loaded: number; total: number };
    expect(delivery).toMatchObject({ loaded: 2, total: 2 });
    expect(cond(key, 'Delivered')).toMatchObject({
      status: 'True',
      reason: 'Delivered',
      observedGeneration: key.metadata!.generation,
    });
    expect(cond(key, 'Delivered')!.message).toContain(delivery.configVersion);
    process.stderr.write(`[delivered-keys] new key of a new account → kubectl wait condition met in ${waitedMs} ms\n`);
  }, 90_000);

  test('a disabled key moves its version: Delivered waits until every pod refuses it (401)', async () => {
    const ns = acctA;
    const apiKey = 'sk-delivered-keys-new-account-a-0123456789';
    const before = await resource('gatewayapikeys', ns).get('k');
    const oldVersion = (before.status!.delivery as { configVersion: string }).configVersion;
    await kubectlAs(
      testKubeconfigPath(),
      'patch',
      '-n',
      ns,
      'gatewayapikey/k',
      '--type=merge',
      '-p',
      JSON.stringify({ spec: { disabled: true } }),
    );
    const waited = await kubectlWait(ns, 'gatewayapikey/k');
    expect(waited).toMatchObject({ code: 0 });
    const after = await resource('gatewayapikeys', ns).get('k');
    expect((after.status!.delivery as { configVersion: string }).configVersion).not.toBe(oldVersion);
    for (const gw of gateways) expect((await chat(gw, apiKey)).status).toBe(401);
    await kubectlAs(
      testKubeconfigPath(),
      'patch',
      '-n',
      ns,
      'gatewayapikey/k',
      '--type=merge',
      '-p',
      JSON.stringify({ spec: { disabled: false } }),
    );
    expect(await kubectlWait(ns, 'gatewayapikey/k')).toMatchObject({ code: 0 });
    for (const gw of gateways) expect(await chat(gw, apiKey)).toEqual({ status: 200, body: '' });
  }, 90_000);

  test('bundle-key rotate: the first Account status after it returns is the new version, first written with Delivered=False; True only once both pods report the new envelopes', async () => {
    const ns = acctB;
    await newAccountIn(ns, 'sk-delivered-keys-new-account-b-0123456789');
    expect(await kubectlWait(ns, 'account/account')).toMatchObject({ code: 0 });
    const credId = publicId('BYOKCredential', ns, 'oa');
    const before = await resource('accounts', ns).get('account');
    const oldVersion = (before.status!.delivery as { configVersion: string }).configVersion;
    const oldEnvelopes = await Promise.all(
      gateways.map(async (gw) => (await statusReport(gw)).bundle.credentials[credId]),
    );
    // Every Account event from the rotation on, as `kubectl wait` (a list, then a watch) would see it.
    const seen: Obj[] = [];
    const watch = await new Watch(kc).watch(
      `/apis/${GROUP}/${VERSION}/namespaces/${ns}/accounts`,
      { resourceVersion: before.metadata!.resourceVersion! },
      (_type: string, o: Obj) => void seen.push(o),
      () => undefined,
    );
    try {
      const rotatedAt = Date.now();
      const { unrecorded } = await bundleKeyCommand(kc, routingNs, { action: 'rotate' });
      expect(unrecorded).toEqual([]);
      process.stderr.write(`[delivered-keys] bundle-key rotate returned in ${Date.now() - rotatedAt} ms\n`);
      // What a `kubectl wait` issued right now reads first.
      const first = await resource('accounts', ns).get('account');
      const firstVersion = (first.status!.delivery as { configVersion: string }).configVersion;
      expect(firstVersion).not.toBe(oldVersion);
      // Still pending, or already on both pods (they can load it within the command's last 200 ms poll): never the
      // old version's True. The watch below checks that the version's first status carried False.
      const firstDelivered = cond(first, 'Delivered')!;
      if (firstDelivered.status !== 'False')
        expect(firstDelivered).toMatchObject({ status: 'True', reason: 'Delivered' });
      else expect(firstDelivered.reason).toBe('Pending');
      expect(firstDelivered.message).toContain(firstVersion);
      expect(await kubectlWait(ns, 'account/account')).toMatchObject({ code: 0 });
      const reports = await Promise.all(gateways.map(statusReport));
      for (const [i, r] of reports.entries()) expect(r.bundle.credentials[credId]).not.toBe(oldEnvelopes[i]);
      await until(
        'the watch saw the True',
        async () => seen.some((o) => cond(o, 'Delivered')?.status === 'True' && versionOf(o) !== oldVersion),
        10_000,
        50,
      );
    } finally {
      watch.abort();
    }
    // The watch, event by event: once the version moved it never showed the old version's True again, and the first
    // status that carried a new version carried Delivered=False with it, or True for that new version when both pods
    // had already loaded it by the pass that recorded it (a loaded machine: the reseal reaches the pods first).
    const moved = seen.findIndex((o) => versionOf(o) !== oldVersion);
    expect(moved).toBeGreaterThanOrEqual(0);
    const firstMoved = cond(seen[moved]!, 'Delivered')!;
    if (firstMoved.status !== 'False') expect(firstMoved).toMatchObject({ status: 'True', reason: 'Delivered' });
    else expect(firstMoved.reason).toBe('Pending');
    expect(firstMoved.message).toContain(versionOf(seen[moved]!));
    for (const o of seen.slice(moved)) expect(versionOf(o)).not.toBe(oldVersion);
    for (const gw of gateways)
      expect(await chat(gw, 'sk-delivered-keys-new-account-b-0123456789')).toEqual({ status: 200, body: '' });
  }, 90_000);

  /** A brand-new account: its default workspace, a Guardrail with a budget, an OpenAI credential and, last, a key under the budget. */
  async function newAccountIn(ns: string, apiKey: string): Promise<void> {
    await resource('accounts', ns).create(account('account'));
    await resource('workspaces', ns).create(workspace('main', asDefault()));
    await resource('guardrails', ns).create(
      guardrail('capped', withBudget({ limitUsd: 100, resetInterval: 'daily', includeByokInBudgets: true })),
    );
    await createSecret(kc, ns, 'oa-key', `sk-delivered-keys-openai-${ns}`);
    await resource('byokcredentials', ns).create(credential('oa', withSpec({ isByokOnly: true })));
    await resource('gatewayapikeys', ns).create(gatewayKey('k', keyHash(apiKey), withGuardrail('capped')));
  }
});
