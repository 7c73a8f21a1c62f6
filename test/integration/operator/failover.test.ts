// Two operator instances against one apiserver: only the leader writes; killing it (no lease release) hands
// over within the lease duration; a change made during the handover is not lost; statuses already written are
// not rewritten by the new leader (no duplicate writes); a graceful stop releases the lease at once.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import type { KubeConfig } from '@kubernetes/client-node';
import { crPath, SupervisedInformer } from '../../../src/kube/index.ts';
import type { BYOKCredential } from '../../../src/schema/generated/types.ts';
import { API_VERSION } from '../../../src/schema/resources.ts';
import { createTestNamespace, testKubeConfig } from '../../support/kube.ts';
import {
  type CapturedOperator,
  createSecret,
  metricsText,
  metricValue,
  resource,
  startTestOperator,
} from '../../support/operator.ts';
import { beforeCap } from '../../support/order.ts';
import { createAccountNamespace } from '../../support/tenant.ts';
import { sleep, until } from '../../support/until.ts';

// A lease far longer than the retry period: a released lease is taken at the next retry, long before it would expire.
const LEASE = {
  enabled: true,
  leaseName: 'byok-operator',
  leaseDurationSeconds: 10,
  renewDeadlineSeconds: 2,
  retryPeriodSeconds: 0.5,
};

describe('leader election and failover', () => {
  const kc: KubeConfig = testKubeConfig();
  let ns = '';
  let routing = '';
  const running: CapturedOperator[] = [];
  let watcher: SupervisedInformer<BYOKCredential>;
  const statusWrites = new Map<string, number>();
  const measured: Record<string, number> = {};

  const start = async (identity: string) => {
    const r = await startTestOperator(kc, {
      routingNamespace: routing,
      watchNamespaces: [ns],
      identity,
      leaderElection: { ...LEASE, leaseNamespace: routing },
    });
    running.push(r);
    return r;
  };

  beforeAll(async () => {
    ns = await createAccountNamespace('op-ha');
    routing = await createTestNamespace('op-ha-routing');
    // Counts every change to each credential's status as the apiserver sees it.
    watcher = new SupervisedInformer<BYOKCredential>({
      kubeConfig: kc,
      path: crPath('byokcredentials'),
      namespaces: [ns],
      name: 'test-watch',
    });
    watcher.on('update', (c, old) => {
      if (JSON.stringify(c.status) !== JSON.stringify(old.status))
        statusWrites.set(c.metadata.name!, (statusWrites.get(c.metadata.name!) ?? 0) + 1);
    });
    await watcher.start();
  });
  afterAll(async () => {
    await Promise.all(running.map((r) => r.op.stop()));
    await watcher.stop();
    process.stderr.write(`[failover measurements] ${JSON.stringify(measured)}\n`);
  });

  test('one leader; killing it hands over within the lease duration without lost or duplicate writes', async () => {
    const creds = resource('byokcredentials', ns);
    const a = await start('instance-a');
    await until('a leads', () => a.op.isLeader());
    const b = await start('instance-b');
    await sleep(1200);
    expect(b.op.isLeader()).toBe(false);
    expect(metricValue(await metricsText(a.op), 'leader_election_master_status', {})).toBe(1);
    expect(metricValue(await metricsText(b.op), 'leader_election_master_status', {})).toBe(0);

    for (let i = 0; i < 5; i++) {
      await createSecret(kc, ns, `key-${i}`, `gsk_failover_secret_${i}_0123456789`);
      await creds.create({
        apiVersion: API_VERSION,
        kind: 'BYOKCredential',
        metadata: { name: `cred-${i}` },
        spec: { provider: 'groq', secretRef: { name: `key-${i}` } },
      });
    }
    for (let i = 0; i < 5; i++) await creds.waitReady(`cred-${i}`, 'True');
    await a.op.waitForIdle();
    await sleep(300);
    const writesBefore = Object.fromEntries(statusWrites);
    // The standby reconciled nothing.
    expect(
      metricValue(await metricsText(b.op), 'controller_runtime_reconcile_total', { controller: 'byokcredential' }),
    ).toBe(0);

    // Crash the leader: no lease release.
    const killedAt = Date.now();
    await a.op.stop({ releaseLease: false });
    // A change made while nobody leads must not be lost.
    await createSecret(kc, ns, 'key-during', 'gsk_during_failover_0123456789');
    await creds.create({
      apiVersion: API_VERSION,
      kind: 'BYOKCredential',
      metadata: { name: 'cred-during' },
      spec: { provider: 'groq', secretRef: { name: 'key-during' } },
    });
    await until('b leads', () => b.op.isLeader(), 30_000, 20);
    measured.failoverMs = Date.now() - killedAt;
    await creds.waitReady('cred-during', 'True');
    await b.op.waitForIdle();
    await sleep(500);
    // The new leader re-reconciled everything but wrote nothing for objects whose status was already right.
    for (let i = 0; i < 5; i++) expect(statusWrites.get(`cred-${i}`)).toBe(writesBefore[`cred-${i}`]);
    expect(
      metricValue(await metricsText(b.op), 'controller_runtime_reconcile_total', { controller: 'byokcredential' }),
    ).toBeGreaterThanOrEqual(6);
    expect(metricValue(await metricsText(b.op), 'leader_election_master_status', {})).toBe(1);

    // Graceful hand-back: B releases the lease on stop, a fresh instance takes over at its next retry.
    const c = await start('instance-c');
    await sleep(600);
    expect(c.op.isLeader()).toBe(false);
    const releasedAt = Date.now();
    // At c's next retry (0.5 s), before a cap of half the lease fires: the trap waited for the lease to expire.
    await beforeCap(LEASE.leaseDurationSeconds * 500, 'the lease expiry', async () => {
      await b.op.stop();
      await until('c leads', () => c.op.isLeader(), 30_000, 20);
    });
    measured.handoverAfterReleaseMs = Date.now() - releasedAt;
    await creds.update('cred-0', (o) => (o.spec!.displayName = 'renamed'));
    await until('cred-0 reconciled by c', async () => (await creds.get('cred-0')).status?.observedGeneration === 2);
  }, 90_000);
});
