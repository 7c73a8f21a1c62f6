// Delivered from the pods' acknowledgements, end to end: real apiserver → operator (compile pipeline, health writer,
// its own stream server) and a second stream server (a non-leading replica) → two real gateway processes on the
// stream, whose mounted volumes are projected once and then frozen. The health writer polls only every 10 minutes
// here, so a Delivered=True within the test can only come from a pod's answer to the leader's held status request,
// the moment the pod loaded (acknowledged) the batch. A pod that refuses a batch (signed with a bundle key it does not
// hold yet) puts a Warning Event with the reason on the Account and keeps Delivered False until it loads the version.
// A watch on every Account, BYOKCredential and GatewayAPIKey checks, event by event, that a status which moves the
// delivery version never carries the old version's True.

import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { Watch } from '@kubernetes/client-node';
import pino from 'pino';
import { Registry } from 'prom-client';
import { bundleKeyCommand } from '../../../src/cli/bundle-key.ts';
import { parseEgressAllowList } from '../../../src/domain/index.ts';
import { kubeClient } from '../../../src/kube/client.ts';
import type { Projector } from '../../../src/kube/projector.ts';
import { DeliveryStreamServer } from '../../../src/operator/delivery/server.ts';
import { GROUP, VERSION } from '../../../src/schema/resources.ts';
import { keyHash } from '../../support/builders.ts';
import { writeGatewayFiles } from '../../support/catalog.ts';
import {
  createDeliveryTenant,
  createServiceAccount,
  projectOnce,
  rotateDeliveryKey,
  spawnStreamGateways,
} from '../../support/delivery.ts';
import { type GatewayProcess, publishGatewayEndpoints, stopProcess } from '../../support/gateway-process.ts';
import { createTestNamespace, testKubeConfig } from '../../support/kube.ts';
import { type CapturedOperator, cond, type Obj, resource, startTestOperator } from '../../support/operator.ts';
import { until } from '../../support/until.ts';
import { startUpstreams, type Upstreams } from '../../support/upstreams.ts';

const kc = testKubeConfig();
const client = kubeClient(kc);
const API_KEY = 'sk-delivery-acks-key-0123456789abcdef';
const STATUS_TOKEN = 'status-token-delivery-acks';
const versionOf = (o: Obj) => (o.status?.delivery as { configVersion?: string } | undefined)?.configVersion;
const deliveryOf = (o: Obj) =>
  o.status?.delivery as { configVersion: string; loaded: number; total: number } | undefined;
const KINDS = ['accounts', 'byokcredentials', 'gatewayapikeys'] as const;

describe('Delivered from the acknowledgements', () => {
  let ns = '';
  let routingNs = '';
  let run: CapturedOperator;
  let up: Upstreams;
  let replica: DeliveryStreamServer;
  let projector: Projector;
  const gateways: GatewayProcess[] = [];
  const running = new Set<ChildProcess>();
  const root = mkdtempSync(join(tmpdir(), 'byok-int-delivery-acks-'));
  const mount = { configDir: join(root, 'routing'), bundleDir: join(root, 'bundles'), keyDir: join(root, 'key') };
  /** Every status the watches saw, per object, in order. */
  const seen = new Map<string, Obj[]>();
  const watches: { abort(): void }[] = [];
  let secretVersion = 0;

  const rotate = async (): Promise<void> => {
    secretVersion++;
    await rotateDeliveryKey(kc, ns, secretVersion, `sk-delivery-acks-openai-v${secretVersion}`);
  };
  const statusOf = async (gw: GatewayProcess) =>
    (await (
      await fetch(`${gw.opsUrl}/byok/status`, { headers: { authorization: `Bearer ${STATUS_TOKEN}` } })
    ).json()) as { delivery?: { seq: number; stream: string; lastBatch?: { result: string; reason?: string } } };
  /** Delivered=True on `plural/name` at a version other than `old`, every pod counted. */
  const deliveredPast = (plural: string, name: string, old: string | undefined, timeoutMs = 30_000) =>
    until(
      `${plural}/${name} Delivered=True past ${old}`,
      async () => {
        const o = await resource(plural, ns).get(name);
        const d = deliveryOf(o);
        return cond(o, 'Delivered')?.status === 'True' && d?.configVersion !== old && d?.loaded === 2 && d.total === 2
          ? d.configVersion
          : undefined;
      },
      timeoutMs,
      50,
    );
  const accountEvents = async () =>
    (
      JSON.parse(
        JSON.stringify(
          await client.request<{
            items: { reason?: string; type?: string; note?: string; regarding?: { kind?: string; name?: string } }[];
          }>('GET', `/apis/events.k8s.io/v1/namespaces/${ns}/events`),
        ),
      ) as { items: { reason?: string; type?: string; note?: string; regarding?: { kind?: string } }[] }
    ).items.filter((e) => e.regarding?.kind === 'Account');

  beforeAll(async () => {
    up = await startUpstreams();
    ns = await createTestNamespace('acks-acct');
    routingNs = await createTestNamespace('acks-routing');
    await createServiceAccount(kc, routingNs, 'byok-gateway');
    writeGatewayFiles(root, up, { statusToken: STATUS_TOKEN });
    const serviceAccounts = [`${routingNs}/byok-gateway`];
    // A burst is pushed 1.5 s after its last change: the pass a compile asks for records the new version before the
    // pods can have it, so the True that follows is the pods' answer.
    const stream = { port: 0, host: '127.0.0.1', serviceAccounts, debounceMs: 1500, maxDelayMs: 3000 };
    run = await startTestOperator(kc, {
      routingNamespace: routingNs,
      watchNamespaces: [ns],
      compile: { coalesceMs: 10 },
      egress: parseEgressAllowList(['127.0.0.1']),
      deliveryStream: stream,
      gatewayStatus: {
        token: STATUS_TOKEN,
        service: { namespace: routingNs, name: 'byok-gateway', port: 'ops' },
        pollMs: 600_000,
        pendingPollMs: 600_000,
        writeIntervalMs: 1000,
      },
    });
    replica = new DeliveryStreamServer(stream, {
      kubeConfig: kc,
      routingNamespace: routingNs,
      logger: pino({ level: 'silent' }),
      registry: new Registry(),
    });
    await replica.start();
    await createDeliveryTenant(ns, keyHash(API_KEY), 'sk-delivery-acks-openai-v0');
    await resource('byokcredentials', ns).waitReady('oa', 'True');
    await run.op.waitForIdle();
    projector = await projectOnce(kc, routingNs, mount);
    const urls = [run.op.deliveryUrl()!, replica.url];
    gateways.push(...(await spawnStreamGateways(kc, routingNs, root, mount, urls, running)));
    for (const gw of gateways)
      await until('on the stream', async () => (await statusOf(gw)).delivery?.stream === 'connected', 20_000, 100);
    await publishGatewayEndpoints(kc, routingNs, gateways);
    for (const plural of KINDS) {
      const list = await client.request<{ metadata: { resourceVersion: string } }>(
        'GET',
        `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${plural}`,
      );
      watches.push(
        await new Watch(kc).watch(
          `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${plural}`,
          { resourceVersion: list.metadata.resourceVersion },
          (_type: string, o: Obj) => {
            const id = `${plural}/${o.metadata.name}`;
            seen.set(id, [...(seen.get(id) ?? []), o]);
          },
          () => undefined,
        ),
      );
    }
  }, 120_000);

  afterAll(async () => {
    for (const w of watches) w.abort();
    await Promise.all([...running].map((c) => stopProcess(c)));
    await replica?.close();
    await run?.op.stop();
    await up?.close();
    rmSync(root, { recursive: true, force: true });
  });

  test("a rotation: the compile records the new version with Delivered=False, and the pods' acknowledgements (not a poll) turn it True", async () => {
    const oldCredential = versionOf(await resource('byokcredentials', ns).get('oa'));
    const oldAccount = versionOf(await resource('accounts', ns).get('account'));
    await rotate();
    const version = await deliveredPast('byokcredentials', 'oa', oldCredential);
    const account = await deliveredPast('accounts', 'account', oldAccount);
    // Each pod acknowledged a batch as loaded: one on the leader's stream, one on the other replica's.
    for (const gw of gateways)
      expect((await statusOf(gw)).delivery).toMatchObject({ stream: 'connected', lastBatch: { result: 'loaded' } });
    // The version was first written False, then True: the True came after the pass that recorded it.
    const history = seen.get('byokcredentials/oa') ?? [];
    const first = history.findIndex((o) => versionOf(o) === version);
    expect(cond(history[first]!, 'Delivered')).toMatchObject({ status: 'False', reason: 'Pending' });
    expect(history.slice(first).some((o) => cond(o, 'Delivered')?.status === 'True')).toBe(true);
    const accountHistory = seen.get('accounts/account') ?? [];
    expect(cond(accountHistory.find((o) => versionOf(o) === account)!, 'Delivered')?.status).toBe('False');
    // A second rotation, the same way.
    await rotate();
    await deliveredPast('byokcredentials', 'oa', version);
  }, 90_000);

  test('bundle-key rotate with the new key not yet mounted: each pod refuses, a Warning Event on the Account says why, Delivered stays False; once the key is mounted the pods load it and Delivered turns True', async () => {
    const old = versionOf(await resource('accounts', ns).get('account'));
    const { unrecorded } = await bundleKeyCommand(kc, routingNs, { action: 'rotate' });
    expect(unrecorded).toEqual([]);
    // Both pods refuse the resealed objects: they are signed with a key id the frozen key volume lacks.
    for (const gw of gateways) {
      await until('refused', async () => (await statusOf(gw)).delivery?.lastBatch?.result === 'refused', 20_000, 50);
      expect((await statusOf(gw)).delivery!.lastBatch!.reason).toMatch(
        /signed with key id \S+, which this pod does not hold/,
      );
    }
    const warnings = await until(
      'DeliveryRefused on the Account',
      async () => {
        const found = (await accountEvents()).filter((e) => e.reason === 'DeliveryRefused');
        return found.length >= 2 ? found : undefined;
      },
      20_000,
      100,
    );
    for (const e of warnings) {
      expect(e.type).toBe('Warning');
      expect(e.note).toMatch(
        /gateway pod gateway-[01] refused delivery batch \d+ and does not serve this account's current credentials \(version [0-9a-f]+\): \S+: signed with key id/,
      );
      expect(e.note).not.toContain('sk-delivery-acks');
    }
    const account = await resource('accounts', ns).get('account');
    expect(versionOf(account)).not.toBe(old);
    expect(cond(account, 'Delivered')).toMatchObject({ status: 'False', reason: 'Pending' });
    // The kubelet mounts the new key (and the rest): the pods serve the version (from the mount, or from the stream
    // once they reconnect and load what they refused), and acknowledge it on their next connect.
    await projector.sync();
    await deliveredPast('accounts', 'account', old);
    for (const gw of gateways)
      await until(
        'loaded on the stream again',
        async () => (await statusOf(gw)).delivery?.lastBatch?.result === 'loaded',
        20_000,
        100,
      );
  }, 90_000);

  test('a disabled gateway key moves its version: Delivered False in that write, True once both pods acknowledged', async () => {
    const old = versionOf(await resource('gatewayapikeys', ns).get('k'));
    await client.request('PATCH', `/apis/${GROUP}/${VERSION}/namespaces/${ns}/gatewayapikeys/k`, {
      body: { spec: { disabled: true } },
      contentType: 'application/merge-patch+json',
    });
    await deliveredPast('gatewayapikeys', 'k', old);
  }, 60_000);

  test('event by event, on every Account, BYOKCredential and GatewayAPIKey: a True always names the version of its own status, and no status goes back to an older version', async () => {
    expect([...seen.keys()].sort()).toEqual(['accounts/account', 'byokcredentials/oa', 'gatewayapikeys/k']);
    for (const [id, history] of seen) {
      const versions: string[] = [];
      for (const o of history) {
        const d = cond(o, 'Delivered');
        const v = versionOf(o);
        if (d?.status === 'True')
          expect({ id, message: d.message, names: v !== undefined && d.message.includes(v) }).toMatchObject({
            id,
            names: true,
          });
        if (v === undefined) continue;
        if (versions.at(-1) !== v) {
          expect({ id, back: versions.includes(v) }).toEqual({ id, back: false });
          // The write that moves the version carries Delivered for that version: False, or True only if every pod
          // already loaded it (both name the new version, checked above).
          if (versions.length > 0)
            expect({ id, status: d?.status, names: d?.message.includes(v) }).toMatchObject({ id, names: true });
          versions.push(v);
        }
      }
      // Every object moved version at least once under the watch.
      expect({ id, moves: versions.length >= 2 }).toEqual({ id, moves: true });
    }
  });
});
