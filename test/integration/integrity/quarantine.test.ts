// Per-account isolation of the compile pipeline against the real apiserver. All accounts share ONE routing shard
// (one bucket, plain-JSON shards without splitting), so an account whose part the apiserver refuses would freeze
// everyone. Part 1 drives the pipeline through its source (bypassing both doors, as a future door bug would):
// tenant text YAML refuses is written exactly, and an oversize account is quarantined with its last good state
// (or left out when it never had one) while the other account keeps compiling; a changed input is retried.
// Part 2 runs the whole operator with an oversize account built through the real door (two big Workspaces):
// the Account gets Compiled=False/Quarantined, a Warning Event, the metric counts it, and it is released when
// its input changes.
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { EventsV1Api } from '@kubernetes/client-node';
import pino from 'pino';
import { Registry } from 'prom-client';
import type { AccountSnapshot } from '../../../src/compiler/snapshot.ts';
import { CompilePipeline, type Quarantine } from '../../../src/operator/compile/pipeline.ts';
import { account, credential, inNamespace, withMetadata, withSpec, workspace } from '../../support/builders.ts';
import { crApi, createTestNamespace, testKubeConfig } from '../../support/kube.ts';
import {
  type CapturedOperator,
  cond,
  createSecret,
  metricsText,
  metricValue,
  resource,
  startTestOperator,
} from '../../support/operator.ts';
import { beforeCap } from '../../support/order.ts';
import { createAccountNamespace } from '../../support/tenant.ts';
import { until } from '../../support/until.ts';
import { readRouting, routedCredentials } from './helpers.ts';

const kc = testKubeConfig();
/** One bucket, one plain-JSON ConfigMap per shard: the layout where one account's bytes reach everyone's write. */
const ONE_SHARD = { targetBytes: 1 << 30, gzipAboveBytes: 64 << 20, maxPartBytes: 64 << 20 };
const YAML_HOSTILE = 'c1\u0096 nel\u0085 del\u007f ls\u2028 ps\u2029 nonchar\ufffe';
/** Larger than a ConfigMap may be (1 MiB), and incompressible. */
const oversize = () => randomBytes(900_000).toString('base64');

interface Cred {
  name: string;
  displayName?: string;
}

function snapshot(namespace: string, creds: readonly Cred[]): AccountSnapshot {
  return {
    namespace,
    workspaces: [],
    guardrails: [],
    apiKeys: [],
    credentials: creds.map((c, i) => ({
      resource: credential(
        c.name,
        inNamespace(namespace),
        withMetadata({ creationTimestamp: new Date('2026-01-01T00:00:00Z') }),
        withSpec(c.displayName !== undefined ? { displayName: c.displayName } : {}),
      ),
      verdict: { valid: true, label: 'sk-...wxyz', sortOrder: i, payload: `sk-${c.name}-0123456789abcdef` },
    })),
    now: new Date(),
  };
}

describe('compile pipeline: per-account quarantine (driven through its source)', () => {
  let routing = '';
  let pipeline: CompilePipeline;
  const registry = new Registry();
  const state = new Map<string, Cred[]>();
  const reported: [string, Quarantine | undefined][] = [];
  const logs: string[] = [];
  const set = (ns: string, creds: Cred[] | undefined) => {
    if (creds) state.set(ns, creds);
    else state.delete(ns);
    pipeline.markDirty(ns);
  };
  const gauge = async () => metricValue(await registry.metrics(), 'byok_quarantined_accounts', {});

  beforeAll(async () => {
    routing = await createTestNamespace('integ-q-routing');
    const sink = new Writable({
      write(chunk: Buffer, _e, cb) {
        logs.push(chunk.toString('utf8'));
        cb();
      },
    });
    pipeline = new CompilePipeline({
      kubeConfig: kc,
      routingNamespace: routing,
      source: { accountNamespaces: () => [...state.keys()], snapshot: (ns) => snapshot(ns, state.get(ns) ?? []) },
      logger: pino({ level: 'debug' }, sink),
      registry,
      coalesceMs: 5,
      shardOptions: ONE_SHARD,
      onQuarantine: (ns, q) => reported.push([ns, q]),
    });
    state.set('victim', [{ name: 'keep' }]);
    state.set('hostile', [{ name: 'h1', displayName: YAML_HOSTILE }]);
    await pipeline.start();
    await pipeline.flush();
  });
  afterAll(() => pipeline?.stop());

  test('text the apiserver YAML decoder refuses is written exactly into the shared shard', async () => {
    const routed = await readRouting(kc, routing);
    expect(routed.get('hostile')?.credentials[0]?.displayName).toBe(YAML_HOSTILE);
    expect(routed.get('victim')?.credentials.map((c) => c.name)).toEqual(['keep']);
    expect(pipeline.current().configMaps.filter((n) => n !== 'byok-routing-index')).toHaveLength(1);
    expect(pipeline.quarantined().size).toBe(0);
  });

  test('an oversize account is quarantined with its last good state; the other account keeps compiling', async () => {
    set('hostile', [
      { name: 'h1', displayName: YAML_HOSTILE },
      { name: 'h2', displayName: oversize() },
    ]);
    set('victim', [{ name: 'keep' }, { name: 'v2' }]);
    await pipeline.flush();
    expect(await routedCredentials(kc, routing, 'victim')).toEqual(['keep', 'v2']);
    expect(await routedCredentials(kc, routing, 'hostile')).toEqual(['h1']);
    const q = pipeline.quarantined().get('hostile');
    expect(q).toMatchObject({ kind: 'ConfigMap', status: 422, keptLastGood: true });
    expect(q?.message).toMatch(/refused this account's part of routing shard ConfigMap .*keeps its last good routing/);
    expect(reported.filter(([ns]) => ns === 'hostile').map(([, x]) => x?.keptLastGood)).toEqual([true]);
    expect(await gauge()).toBe(1);

    // The victim's delete reaches the shared shard while the hostile account stays quarantined.
    // In the first pass, before a cap of 5 s fires: the trap retried the whole pass with backoff (up to 10 s).
    set('victim', [{ name: 'v2' }]);
    await beforeCap(5000, 'a retried pass', () => pipeline.flush());
    expect(await routedCredentials(kc, routing, 'victim')).toEqual(['v2']);
  });

  test('re-marking a quarantined account with the same input does not retry the refused write', async () => {
    const writesBefore = metricValue(await registry.metrics(), 'byok_configmap_writes_total', { object: 'shard' });
    pipeline.markDirty('hostile');
    await pipeline.flush();
    expect(pipeline.quarantined().has('hostile')).toBe(true);
    expect(reported.filter(([ns]) => ns === 'hostile')).toHaveLength(1);
    expect(metricValue(await registry.metrics(), 'byok_configmap_writes_total', { object: 'shard' })).toBe(
      writesBefore,
    );
  });

  test('an account refused from its first compile is left out (no last good state)', async () => {
    set('fresh', [{ name: 'f1', displayName: oversize() }]);
    await pipeline.flush();
    expect((await readRouting(kc, routing)).has('fresh')).toBe(false);
    expect(pipeline.quarantined().get('fresh')).toMatchObject({ keptLastGood: false });
    expect(await gauge()).toBe(2);
  });

  test('a changed input is retried and releases the account; an account that goes away is released too', async () => {
    set('hostile', [{ name: 'h1', displayName: YAML_HOSTILE }, { name: 'h3' }]);
    await pipeline.flush();
    expect(await routedCredentials(kc, routing, 'hostile')).toEqual(['h1', 'h3']);
    expect(pipeline.quarantined().has('hostile')).toBe(false);
    expect(reported.at(-1)).toEqual(['hostile', undefined]);
    set('fresh', undefined);
    await pipeline.flush();
    expect(pipeline.quarantined().size).toBe(0);
    expect(await gauge()).toBe(0);
    // Key material (bundle payloads) never reaches a log line.
    expect(logs.join('\n')).not.toContain('0123456789abcdef');
  });
});

describe('operator: a quarantined account is visible on its Account object', () => {
  let routing = '';
  let victim = '';
  let hostile = '';
  let run: CapturedOperator;

  const bigWorkspace = (name: string) =>
    workspace(
      name,
      // ~600 KB of incompressible member ids: one such workspace fits a ConfigMap, two do not.
      withSpec({ members: Array.from({ length: 2500 }, () => ({ userId: randomBytes(180).toString('base64') })) }),
    );

  beforeAll(async () => {
    [routing, victim, hostile] = await Promise.all([
      createTestNamespace('integ-q2-routing'),
      createAccountNamespace('integ-q2-victim'),
      createTestNamespace('integ-q2-hostile'),
    ]);
    await createSecret(kc, victim, 'keep-key', 'sk-victim-keep-0123456789');
    await crApi('byokcredentials', victim).create(credential('keep'));
    await createSecret(kc, victim, 'gone-key', 'sk-victim-gone-0123456789');
    await crApi('byokcredentials', victim).create(credential('gone'));
    await crApi('accounts', hostile).create(account('acct'));
    await crApi('workspaces', hostile).create(bigWorkspace('big-1'));
    run = await startTestOperator(kc, {
      routingNamespace: routing,
      watchNamespaces: [victim, hostile],
      compile: { shardOptions: ONE_SHARD },
    });
    await until(
      'both accounts routed',
      async () => {
        const r = await readRouting(kc, routing);
        return r.get(victim)?.credentials.length === 2 && r.get(hostile)?.workspaces.length === 1;
      },
      30_000,
    );
  });
  afterAll(() => run?.op.stop());

  test('Compiled=False (Quarantined) on the Account, a Warning Event, the metric; the victim keeps compiling', async () => {
    await crApi('workspaces', hostile).create(bigWorkspace('big-2'));
    const accounts = resource('accounts', hostile);
    const a = await accounts.waitReady('acct', 'False', 'Quarantined', 30_000);
    expect(cond(a, 'Compiled')).toMatchObject({ status: 'False', reason: 'Quarantined' });
    expect(cond(a, 'Compiled')?.message).toMatch(/routing shard ConfigMap .*422.*last good routing/);
    const events = kc.makeApiClient(EventsV1Api);
    await until('a Quarantined Warning Event on the Account', async () => {
      const list = await events.listNamespacedEvent({ namespace: hostile });
      return list.items.some(
        (e) =>
          e.regarding?.kind === 'Account' &&
          e.regarding?.name === 'acct' &&
          e.type === 'Warning' &&
          e.reason === 'Quarantined',
      );
    });
    expect(metricValue(await metricsText(run.op), 'byok_quarantined_accounts', {})).toBe(1);

    const t0 = Date.now();
    await crApi('byokcredentials', victim).delete('gone');
    await until(
      "the victim's delete in the shared shard",
      async () => (await routedCredentials(kc, routing, victim)).join() === 'keep',
    );
    process.stderr.write(
      `[integrity quarantine] victim delete -> routed while a neighbour is quarantined: ${Date.now() - t0} ms\n`,
    );
    // The quarantined account keeps its last good routing (one workspace).
    expect((await readRouting(kc, routing)).get(hostile)?.workspaces.map((w) => w.name)).toEqual(['big-1']);
  });

  test('deleting the extra workspace (a changed input) releases the account', async () => {
    await crApi('workspaces', hostile).delete('big-2');
    const a = await resource('accounts', hostile).waitReady('acct', 'True', undefined, 30_000);
    expect(cond(a, 'Compiled')).toBeUndefined();
    expect(metricValue(await metricsText(run.op), 'byok_quarantined_accounts', {})).toBe(0);
    const events = kc.makeApiClient(EventsV1Api);
    await until('a QuarantineLifted Event', async () =>
      (await events.listNamespacedEvent({ namespace: hostile })).items.some((e) => e.reason === 'QuarantineLifted'),
    );
  });
});
