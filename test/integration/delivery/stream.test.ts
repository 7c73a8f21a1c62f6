// The delivery stream end to end: real apiserver → operator (compile pipeline, and its own stream server) → a
// second stream server (what any non-leader replica runs, from its own informer cache) → two real gateway
// processes (`node src/cli/main.ts gateway --delivery-stream …`) with projected ServiceAccount tokens from the
// TokenRequest API → loopback upstreams. The mounted directories are projected once and then frozen, so a rotated key
// that reaches the upstream can only have come through the stream. A foreign or wrongly audienced token is refused,
// and a stream outage falls back to the mount once the kubelet (the projector here) moves it.

import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import pino from 'pino';
import { Registry } from 'prom-client';
import { DEFAULT_DELIVERY_AUDIENCE, DELIVERY_FORMAT, DELIVERY_STREAM_PATH } from '../../../src/contract/delivery.ts';
import { parseEgressAllowList, publicId } from '../../../src/domain/index.ts';
import type { Projector } from '../../../src/kube/projector.ts';
import { DeliveryStreamServer } from '../../../src/operator/delivery/server.ts';
import { keyHash } from '../../support/builders.ts';
import { writeGatewayFiles } from '../../support/catalog.ts';
import {
  createDeliveryTenant,
  createServiceAccount,
  projectOnce,
  rotateDeliveryKey,
  serviceAccountToken,
  spawnStreamGateways,
} from '../../support/delivery.ts';
import { type GatewayProcess, publishGatewayEndpoints, stopProcess } from '../../support/gateway-process.ts';
import { createTestNamespace, testKubeConfig } from '../../support/kube.ts';
import { type CapturedOperator, cond, resource, startTestOperator } from '../../support/operator.ts';
import { until } from '../../support/until.ts';
import { startUpstreams, type Upstreams } from '../../support/upstreams.ts';

const kc = testKubeConfig();
const API_KEY = 'sk-delivery-test-key-0123456789abcdef';
const STATUS_TOKEN = 'status-token-delivery-test';
const ROTATIONS = 10;

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)]!;
};

describe('the delivery stream', () => {
  let ns = '';
  let routingNs = '';
  let run: CapturedOperator;
  let up: Upstreams;
  let replica: DeliveryStreamServer;
  let projector: Projector;
  const gateways: GatewayProcess[] = [];
  const running = new Set<ChildProcess>();
  const root = mkdtempSync(join(tmpdir(), 'byok-int-delivery-'));
  const mount = { configDir: join(root, 'routing'), bundleDir: join(root, 'bundles'), keyDir: join(root, 'key') };
  let secretVersion = 0;

  const token = (namespace: string, sa: string, audiences: string[] | undefined) =>
    serviceAccountToken(kc, namespace, sa, audiences);
  /** One chat through a gateway; the key the upstream saw. */
  const keySent = async (gw: GatewayProcess): Promise<string | undefined> => {
    const before = up.hits.length;
    const res = await fetch(`${gw.url}/api/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'hi' }] }),
    });
    await res.text();
    return up.hits.slice(before).find((h) => h.provider === 'openai')?.auth;
  };
  const rotate = async (): Promise<string> => {
    secretVersion++;
    const key = `sk-delivery-openai-v${secretVersion}`;
    await rotateDeliveryKey(kc, ns, secretVersion, key);
    return key;
  };
  const mountedBundle = () => readFileSync(join(mount.bundleDir, publicId('BYOKCredential', ns, 'oa')), 'utf8');
  const metric = async (gw: GatewayProcess, name: string) =>
    Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(await (await fetch(`${gw.opsUrl}/metrics`)).text())?.[1] ?? NaN);

  beforeAll(async () => {
    up = await startUpstreams();
    ns = await createTestNamespace('delivery-acct');
    routingNs = await createTestNamespace('delivery-routing');
    await createServiceAccount(kc, routingNs, 'byok-gateway');
    await createServiceAccount(kc, routingNs, 'someone-else');
    writeGatewayFiles(root, up, { statusToken: STATUS_TOKEN });
    const serviceAccounts = [`${routingNs}/byok-gateway`];
    run = await startTestOperator(kc, {
      routingNamespace: routingNs,
      watchNamespaces: [ns],
      compile: { coalesceMs: 10 },
      egress: parseEgressAllowList(['127.0.0.1']),
      deliveryStream: { port: 0, host: '127.0.0.1', serviceAccounts },
      // Delivered from the pods' status reports, as without the stream: what each pod has loaded, whatever the source.
      gatewayStatus: {
        token: STATUS_TOKEN,
        service: { namespace: routingNs, name: 'byok-gateway', port: 'ops' },
        pollMs: 500,
        pendingPollMs: 100,
        writeIntervalMs: 1000,
      },
    });
    // What a second, non-leading replica serves: its own informer cache of the routing namespace.
    replica = new DeliveryStreamServer(
      { port: 0, host: '127.0.0.1', serviceAccounts },
      { kubeConfig: kc, routingNamespace: routingNs, logger: pino({ level: 'silent' }), registry: new Registry() },
    );
    await replica.start();
    await createDeliveryTenant(ns, keyHash(API_KEY), 'sk-delivery-openai-v0');
    await resource('byokcredentials', ns).waitReady('oa', 'True');
    await run.op.waitForIdle();
    // The kubelet's one projection at pod start; then it "sleeps" (stopped), so the mount is frozen at v0.
    projector = await projectOnce(kc, routingNs, mount);
    const urls = [run.op.deliveryUrl()!, replica.url];
    gateways.push(...(await spawnStreamGateways(kc, routingNs, root, mount, urls, running)));
    await publishGatewayEndpoints(kc, routingNs, gateways);
  }, 90_000);

  afterAll(async () => {
    await Promise.all([...running].map(stopProcess));
    await replica?.close();
    await run?.op.stop();
    await up?.close();
    rmSync(root, { recursive: true, force: true });
  });

  test('both gateways connect (to the leader and to another replica), load and acknowledge', async () => {
    for (const gw of gateways) {
      await until(
        'connected',
        async () => (await metric(gw, 'byok_gateway_delivery_stream_connected')) === 1,
        20_000,
        100,
      );
      expect(
        await until('the v0 key upstream', async () => (await keySent(gw)) === 'sk-delivery-openai-v0', 20_000, 100),
      ).toBe(true);
    }
    expect([...replica.acks().values()]).toEqual([
      expect.objectContaining({
        result: 'loaded',
        who: expect.objectContaining({ username: `system:serviceaccount:${routingNs}:byok-gateway` }),
      }),
    ]);
  }, 60_000);

  /** The credential's Delivered=True at a version other than `old`, with `pods` counted. */
  const delivered = (old: string | undefined, pods = 2) =>
    until(
      `Delivered=True ${pods}/${pods} at the new version`,
      async () => {
        const o = await resource('byokcredentials', ns).get('oa');
        const d = o.status?.delivery as { configVersion?: string; loaded?: number; total?: number } | undefined;
        const c = cond(o, 'Delivered');
        if (c?.status === 'True' && d?.configVersion !== old && d?.loaded === pods && d.total === pods)
          return d.configVersion;
        // What a timeout reports: the last state seen.
        throw new Error(`Delivered=${c?.status} (${c?.reason}: ${c?.message}), delivery ${JSON.stringify(d)}`);
      },
      20_000,
      20,
    );

  test(`${ROTATIONS} rotations reach both gateways through the stream while the mount stays at v0: Delivered=True 2/2, the new key upstream (p50/p99)`, async () => {
    const frozen = mountedBundle();
    // Before the rotations, both pods counted on the Account. The credential's record may say 1/1: a delivered
    // credential keeps its record when only the pod count moves, and the two pods' EndpointSlices are published
    // one after the other.
    await until(
      'the Account Delivered=True 2/2',
      async () => {
        const a = await resource('accounts', ns).get('account');
        const d = a.status?.delivery as { loaded?: number; total?: number } | undefined;
        return cond(a, 'Delivered')?.status === 'True' && d?.loaded === 2 && d.total === 2;
      },
      20_000,
      20,
    );
    let version = await until(
      'the credential Delivered=True',
      async () => {
        const o = await resource('byokcredentials', ns).get('oa');
        const d = o.status?.delivery as { configVersion?: string } | undefined;
        return cond(o, 'Delivered')?.status === 'True' ? d?.configVersion : undefined;
      },
      20_000,
      20,
    );
    const toDelivered: number[] = [];
    const toNewKey: number[] = [];
    for (let r = 0; r < ROTATIONS; r++) {
      const t0 = performance.now();
      const key = await rotate();
      await Promise.all([
        delivered(version).then((v) => {
          version = v;
          toDelivered.push(performance.now() - t0);
        }),
        ...gateways.map(async (gw) => {
          await until(`key ${key} upstream`, async () => (await keySent(gw)) === key, 20_000, 20);
          toNewKey.push(performance.now() - t0);
        }),
      ]);
      // Delivered=True means every pod serves the key: the next request through either sends it.
      for (const gw of gateways) expect(await keySent(gw)).toBe(key);
    }
    // The mounted volume never moved: what reached the upstream, and what the pods reported, came through the stream.
    expect(mountedBundle()).toBe(frozen);
    expect(readdirSync(join(root, 'stream-0', 'bundles')).some((f) => f === '..data')).toBe(true);
    const line = (xs: number[]) =>
      `p50 ${quantile(xs, 0.5).toFixed(0)} ms, p99 ${quantile(xs, 0.99).toFixed(0)} ms, worst ${Math.max(...xs).toFixed(0)} ms`;
    process.stdout.write(
      `delivery stream, ${ROTATIONS} rotations, 2 gateways, mount frozen: apply → Delivered=True ${line(toDelivered)}; apply → new key upstream ${line(toNewKey)}\n`,
    );
    // Key material never reaches a log: the operator's, the gateways' stdout and stderr.
    for (const text of [run.logs.join('\n'), ...gateways.map((gw) => gw.output.join(''))])
      expect(text).not.toContain('sk-delivery-openai');
    expect(toDelivered).toHaveLength(ROTATIONS);
    expect(toNewKey).toHaveLength(ROTATIONS * 2);
  }, 240_000);

  test('a foreign ServiceAccount, a token for another audience and no token are refused', async () => {
    const open = async (url: string, bearer: string | undefined) => {
      const res = await fetch(`${url}${DELIVERY_STREAM_PATH}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(bearer ? { authorization: `Bearer ${bearer}` } : {}) },
        body: JSON.stringify({ format: DELIVERY_FORMAT, instance: 'probe', held: [] }),
      });
      const body = await res.text();
      return { status: res.status, body };
    };
    for (const url of [run.op.deliveryUrl()!, replica.url]) {
      const foreign = await open(url, await token(routingNs, 'someone-else', [DEFAULT_DELIVERY_AUDIENCE]));
      expect(foreign.status).toBe(403);
      expect(foreign.body).toContain('is not a gateway ServiceAccount');
      expect(foreign.body).not.toContain('sk-delivery');
      expect((await open(url, await token(routingNs, 'byok-gateway', undefined))).status).toBe(401);
      expect((await open(url, undefined)).status).toBe(401);
      expect((await open(url, 'not-a-token')).status).toBe(401);
    }
  }, 60_000);

  test('a stream outage keeps the last streamed key until the mount moves, then serves the mount', async () => {
    const frozenAtStart = mountedBundle();
    const streamed = await rotate();
    const gw = gateways[1]!;
    await until('the streamed key upstream', async () => (await keySent(gw)) === streamed, 20_000, 20);
    await replica.close();
    await until(
      'disconnected',
      async () => (await metric(gw, 'byok_gateway_delivery_stream_connected')) === 0,
      20_000,
      100,
    );
    // Down, with the mount still at v0: the pod does not go back to the older mount.
    expect(await keySent(gw)).toBe(streamed);
    const next = await rotate();
    // The kubelet catches up (the projector syncs as it would): the mount moved while the stream is down, so the
    // mount wins, and the pod serves the rotation without the stream.
    await until(
      'the mounted key upstream',
      async () => {
        await projector.sync();
        return (await keySent(gw)) === next;
      },
      20_000,
      200,
    );
    expect(mountedBundle()).not.toBe(frozenAtStart);
  }, 90_000);
});
