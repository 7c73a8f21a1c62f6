import { describe, expect, test } from '@jest/globals';
import { Registry } from 'prom-client';
import { buildConditions, readyFrom, sameStatus } from '../../../src/operator/conditions.ts';
import { createOperatorMetrics } from '../../../src/operator/metrics.ts';
import { effectiveSortOrder } from '../../../src/operator/reconcile/sort-order.ts';
import { WorkQueue } from '../../../src/operator/workqueue.ts';
import type { BYOKCredential } from '../../../src/schema/generated/types.ts';
import { credential, inNamespace, withMetadata, withSecret, withSpec } from '../../support/builders.ts';
import { beforeCap } from '../../support/order.ts';
import { sleep } from '../../support/until.ts';

describe('WorkQueue', () => {
  test('dedupes keys that are queued', async () => {
    const q = new WorkQueue({ name: 't', concurrency: 2 });
    const seen: string[] = [];
    q.add('a');
    q.add('a');
    q.add('b');
    q.start(async (k) => void seen.push(k));
    await q.waitForIdle();
    expect(seen.sort()).toEqual(['a', 'b']);
    await q.shutdown();
  });

  test('addAllInOrder adds new keys and reorders queued ones ahead of the rest', async () => {
    const q = new WorkQueue({ name: 't', concurrency: 1 });
    const seen: string[] = [];
    for (const k of ['x', 'c', 'a', 'y']) q.add(k);
    q.addAllInOrder(['a', 'b', 'c']);
    expect(q.len()).toBe(5);
    q.start(async (k) => void seen.push(k));
    await q.waitForIdle();
    expect(seen).toEqual(['a', 'b', 'c', 'x', 'y']);
    await q.shutdown();
  });

  test('one reconcile per key at a time; a key re-added while in flight runs again afterwards', async () => {
    const q = new WorkQueue({ name: 't', concurrency: 4 });
    let inFlight = 0;
    let maxInFlight = 0;
    let runs = 0;
    // Each run waits for the test to let it finish, so "in flight" is a state the test holds, not a timing.
    const releases: Array<() => void> = [];
    let started: () => void = () => {};
    const nextStart = () => new Promise<void>((r) => (started = r));
    q.start(async () => {
      runs++;
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      started();
      await new Promise<void>((r) => releases.push(r));
      inFlight--;
    });
    let first = nextStart();
    q.add('k');
    await first;
    q.add('k');
    q.add('k');
    first = nextStart();
    releases.shift()!();
    await first;
    releases.shift()!();
    await q.waitForIdle();
    expect(maxInFlight).toBe(1);
    expect(runs).toBe(2);
    await q.shutdown();
  });

  test('bounded concurrency', async () => {
    const q = new WorkQueue({ name: 't', concurrency: 3 });
    let inFlight = 0;
    let maxInFlight = 0;
    for (let i = 0; i < 20; i++) q.add(`k${i}`);
    q.start(async () => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      await sleep(5);
      inFlight--;
    });
    await q.waitForIdle();
    expect(maxInFlight).toBe(3);
    await q.shutdown();
  });

  test('errors back off exponentially per key, capped, and success forgets', async () => {
    const metrics = createOperatorMetrics(new Registry(), { defaultMetrics: false });
    const q = new WorkQueue({ name: 't', baseDelayMs: 10, maxDelayMs: 40, metrics });
    expect([0, 1, 2, 3, 4].map((n) => q.backoffFor(n))).toEqual([10, 20, 40, 40, 40]);
    const times: number[] = [];
    q.start(async () => {
      times.push(Date.now());
      if (times.length < 4) throw new Error('boom');
    });
    q.add('k');
    while (times.length < 4) await sleep(5);
    await q.waitForIdle();
    const gaps = times.slice(1).map((t, i) => t - times[i]!);
    expect(gaps[0]).toBeGreaterThanOrEqual(8);
    expect(gaps[1]).toBeGreaterThanOrEqual(18);
    expect(gaps[2]).toBeGreaterThanOrEqual(36);
    expect(q.numRequeues('k')).toBe(0);
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/workqueue_retries_total\{name="t",controller="t"\} 3/);
    expect(text).toMatch(/controller_runtime_reconcile_total\{controller="t",result="error"\} 3/);
    expect(text).toMatch(/controller_runtime_reconcile_total\{controller="t",result="success"\} 1/);
    await q.shutdown();
  });

  test('addAfter delays; the earliest pending time wins; requeueAfter results reschedule', async () => {
    const q = new WorkQueue({ name: 't' });
    const seen: number[] = [];
    const t0 = Date.now();
    q.start(async () => {
      seen.push(Date.now() - t0);
      return seen.length === 1 ? { requeueAfterMs: 30 } : undefined;
    });
    // Both runs (at 20 ms and its requeue 30 ms later) come before a cap of half the later time (5 s) fires.
    const bothRuns = beforeCap(2_500, 'the later time', async () => {
      while (seen.length < 2) await sleep(5);
    });
    q.addAfter('k', 5_000);
    q.addAfter('k', 20);
    await bothRuns;
    expect(seen[0]).toBeGreaterThanOrEqual(15);
    expect(seen[1]! - seen[0]!).toBeGreaterThanOrEqual(25);
    await q.shutdown();
  });

  test('yieldWhile holds queued keys back while it is true (statuses stand aside for a credential backlog)', async () => {
    const credentials = new WorkQueue({ name: 'credentials', concurrency: 1 });
    const others = new WorkQueue({ name: 'others', concurrency: 2, yieldWhile: () => credentials.len() > 2 });
    const order: string[] = [];
    for (let i = 0; i < 6; i++) credentials.add(`cred-${i}`);
    others.add('account');
    others.start(async (k) => void order.push(k));
    await sleep(150);
    expect(order).toEqual([]);
    credentials.start(async (k) => {
      await sleep(20);
      order.push(k);
    });
    await credentials.waitForIdle();
    await others.waitForIdle();
    // The account ran only once the credential backlog was down to 2 queued keys.
    expect(order.indexOf('account')).toBeGreaterThanOrEqual(3);
    await Promise.all([credentials.shutdown(), others.shutdown()]);
  });

  test('background keys (periodic resync) never stand in front of a real change', async () => {
    const q = new WorkQueue({ name: 't', concurrency: 1 });
    const seen: string[] = [];
    q.addBackground(Array.from({ length: 1000 }, (_, i) => `bg-${i}`));
    expect(q.len()).toBe(0);
    q.start(async (k) => {
      seen.push(k);
      if (k === 'bg-2') q.add('change');
      await sleep(0);
    });
    await q.waitForIdle();
    // The change ran right after the background key in flight, not after the other 997.
    expect(seen.indexOf('change')).toBe(3);
    expect(seen.length).toBe(1001);
    // A key that is queued for real is not queued again in the background, nor twice.
    q.add('x');
    q.addBackground(['x', 'y', 'y']);
    seen.length = 0;
    await q.waitForIdle();
    expect(seen).toEqual(['x', 'y']);
    await q.shutdown();
  });

  test('reconciles that resolve at once still let timers and I/O run (a resync of no-op reconciles)', async () => {
    const q = new WorkQueue({ name: 't', concurrency: 2 });
    const total = 5000;
    let done = 0;
    q.addBackground(Array.from({ length: total }, (_, i) => `k${i}`));
    let doneWhenTimerFired = -1;
    // Each reconcile takes ~20 µs of CPU and never awaits anything real: 5,000 of them are ~100 ms of microtasks.
    // The timer is armed by the first reconcile, so it is due while the run holds the loop, whatever the load.
    q.start(async () => {
      if (done === 0 && doneWhenTimerFired === -1) setTimeout(() => (doneWhenTimerFired = done), 1);
      const until = performance.now() + 0.02;
      while (performance.now() < until);
      done++;
    });
    await q.waitForIdle();
    expect(done).toBe(total);
    // Without a yield the timer could only fire after the last reconcile.
    expect(doneWhenTimerFired).toBeGreaterThan(0);
    expect(doneWhenTimerFired).toBeLessThan(total / 2);
    await q.shutdown();
  });

  test('stop keeps queued keys for the next start', async () => {
    const q = new WorkQueue({ name: 't' });
    q.add('x');
    const seen: string[] = [];
    q.start(async (k) => void seen.push(k));
    await q.waitForIdle();
    await q.stop();
    q.add('y');
    await sleep(10);
    expect(seen).toEqual(['x']);
    q.start(async (k) => void seen.push(k));
    await q.waitForIdle();
    expect(seen).toEqual(['x', 'y']);
    await q.shutdown();
  });
});

describe('status helpers', () => {
  const cred = (name: string, created: string, spec: Partial<BYOKCredential['spec']> = {}): BYOKCredential =>
    credential(
      name,
      inNamespace('n'),
      withMetadata({ creationTimestamp: created as unknown as Date }),
      withSecret('s'),
      withSpec(spec),
    );

  test('effective sortOrder: explicit positions, then the rest after them by age, per provider and section', () => {
    const all = [
      cred('b', '2024-01-01T00:00:02Z'),
      cred('a', '2024-01-01T00:00:01Z'),
      cred('pinned', '2024-01-01T00:00:03Z', { sortOrder: 4 }),
      cred('fb', '2024-01-01T00:00:00Z', { isFallback: true }),
      cred('other', '2024-01-01T00:00:00Z', { provider: 'groq' }),
    ];
    const order = Object.fromEntries(all.map((c) => [c.metadata.name, effectiveSortOrder(c, all)]));
    expect(order).toEqual({ a: 5, b: 6, pinned: 4, fb: 0, other: 0 });
  });

  test('conditions keep lastTransitionTime while the status is unchanged, so identical inputs give identical status', () => {
    const desired = [{ type: 'SecretResolved', status: 'True' as const, reason: 'Resolved', message: 'ok' }];
    const ready = readyFrom(desired, 'fine');
    const first = buildConditions(undefined, [ready, ...desired], 1, new Date('2024-01-01T00:00:00Z'));
    const again = buildConditions(first, [ready, ...desired], 1, new Date('2024-06-01T00:00:00Z'));
    expect(sameStatus({ conditions: first }, { conditions: again })).toBe(true);
    const failing = [
      { type: 'SecretResolved', status: 'False' as const, reason: 'SecretNotFound', message: 'missing' },
    ];
    const flipped = buildConditions(
      first,
      [readyFrom(failing, 'fine'), ...failing],
      2,
      new Date('2024-06-01T00:00:00Z'),
    );
    expect(flipped[0]).toMatchObject({
      type: 'Ready',
      status: 'False',
      reason: 'SecretNotFound',
      observedGeneration: 2,
      lastTransitionTime: '2024-06-01T00:00:00Z',
    });
  });
});
