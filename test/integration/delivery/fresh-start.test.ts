// A gateway pod that starts before the operator wrote anything it mounts (a fresh install; every such volume is
// optional in the chart): real apiserver → operator with its delivery stream → real gateway processes started on
// empty directories. The gateway starts cleanly, is unready and answers 503 while it has no config, connects to the
// stream once the bundle key is mounted (nothing verifies without it), takes its first config from the stream while
// the routing and bundle mounts stay empty, and turns ready. With --restart-without-config-after, a gateway that
// loaded nothing exits 75 so the kubelet restarts it and mounts its volumes again.

import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { kubeletWrite } from '../../../src/contract/atomic-dir.ts';
import { DEFAULT_DELIVERY_AUDIENCE } from '../../../src/contract/delivery.ts';
import { DEFAULT_BUNDLE_KEY_SECRET } from '../../../src/contract/envelope.ts';
import { parseEgressAllowList } from '../../../src/domain/index.ts';
import { kubeClient } from '../../../src/kube/client.ts';
import { keyHash } from '../../support/builders.ts';
import { writeGatewayFiles } from '../../support/catalog.ts';
import {
  createDeliveryTenant,
  createServiceAccount,
  gatewayArgs,
  serviceAccountToken,
  streamArgs,
} from '../../support/delivery.ts';
import { type GatewayMounts, type GatewayProcess, spawnGateway, stopProcess } from '../../support/gateway-process.ts';
import { createTestNamespace, testKubeConfig } from '../../support/kube.ts';
import { type CapturedOperator, resource, startTestOperator } from '../../support/operator.ts';
import { until } from '../../support/until.ts';
import { startUpstreams, type Upstreams } from '../../support/upstreams.ts';

const kc = testKubeConfig();
const client = kubeClient(kc);
const API_KEY = 'sk-delivery-fresh-key-0123456789abcdef';

describe('a gateway that starts on empty mounts', () => {
  let ns = '';
  let routingNs = '';
  let run: CapturedOperator;
  let up: Upstreams;
  const running = new Set<ChildProcess>();
  const root = mkdtempSync(join(tmpdir(), 'byok-int-delivery-fresh-'));

  /** Empty routing, bundle and key directories, as the kubelet mounts optional volumes whose objects do not exist. */
  const emptyMounts = (name: string) => {
    const dirs = {
      configDir: join(root, name, 'routing'),
      bundleDir: join(root, name, 'bundles'),
      keyDir: join(root, name, 'key'),
    };
    for (const d of Object.values(dirs)) mkdirSync(d, { recursive: true });
    return dirs;
  };
  const args = (dirs: GatewayMounts, name: string, more: string[]) => gatewayArgs(root, dirs, name, more);
  const chat = async (gw: GatewayProcess) => {
    const res = await fetch(`${gw.url}/api/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'hi' }] }),
    });
    await res.text();
    return res.status;
  };
  const ready = async (gw: GatewayProcess) => (await fetch(`${gw.opsUrl}/readyz`)).status;

  beforeAll(async () => {
    up = await startUpstreams();
    ns = await createTestNamespace('fresh-acct');
    routingNs = await createTestNamespace('fresh-routing');
    await createServiceAccount(kc, routingNs, 'byok-gateway');
    writeGatewayFiles(root, up);
    run = await startTestOperator(kc, {
      routingNamespace: routingNs,
      watchNamespaces: [ns],
      compile: { coalesceMs: 10 },
      egress: parseEgressAllowList(['127.0.0.1']),
      deliveryStream: { port: 0, host: '127.0.0.1', serviceAccounts: [`${routingNs}/byok-gateway`] },
    });
    writeFileSync(
      join(root, 'token'),
      await serviceAccountToken(kc, routingNs, 'byok-gateway', [DEFAULT_DELIVERY_AUDIENCE]),
    );
  }, 60_000);

  afterAll(async () => {
    await Promise.all([...running].map((c) => stopProcess(c)));
    await run?.op.stop();
    await up?.close();
    rmSync(root, { recursive: true, force: true });
  });

  test('starts unready with 503s, waits for the bundle key, then takes its first config from the stream and serves, the routing mount still empty', async () => {
    const dirs = emptyMounts('stream');
    const gw = await spawnGateway(
      args(dirs, 'stream', [...streamArgs(root, run.op.deliveryUrl()!, 'delivered')]),
      running,
    );
    expect(await ready(gw)).toBe(503);
    expect(await chat(gw)).toBe(503);
    // The account arrives; the operator compiles it and writes the key. The pod's key volume is still empty.
    await createDeliveryTenant(ns, keyHash(API_KEY), 'sk-delivery-fresh-openai');
    await resource('byokcredentials', ns).waitReady('oa', 'True');
    await run.op.waitForIdle();
    expect(gw.output.join('')).toContain('no bundle key mounted yet; the delivery stream connects once it is');
    expect(await ready(gw)).toBe(503);
    // The kubelet mounts the key (only the key: the routing and bundle volumes stay empty).
    const key = await client.request<{ data: Record<string, string> }>(
      'GET',
      `/api/v1/namespaces/${routingNs}/secrets/${DEFAULT_BUNDLE_KEY_SECRET}`,
    );
    kubeletWrite(
      dirs.keyDir,
      Object.fromEntries(Object.entries(key.data).map(([k, v]) => [k, Buffer.from(v, 'base64')])),
    );
    await until('ready', async () => (await ready(gw)) === 200, 20_000, 50);
    expect(await chat(gw)).toBe(200);
    expect(up.hits.at(-1)?.auth).toBe('sk-delivery-fresh-openai');
    expect(readdirSync(dirs.configDir)).toEqual([]);
    expect(readdirSync(dirs.bundleDir)).toEqual([]);
  }, 90_000);

  test('--restart-without-config-after: a gateway that loaded nothing exits 75, so the kubelet restarts it and mounts its volumes again', async () => {
    const empty = emptyMounts('restart');
    const gw = await spawnGateway(args(empty, 'restart', ['--restart-without-config-after', '1']), running);
    const code = await new Promise<number | null>((resolve) => gw.child.once('exit', (c) => resolve(c)));
    expect(code).toBe(75);
    expect(gw.output.join('')).toContain('no routing config loaded since start');
  }, 30_000);
});
