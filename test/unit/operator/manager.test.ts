// The operator's components from one list (src/operator/manager.ts): every-replica components start
// in order before the lead, leader components start and stop with it, shutdown closes the leader's in order and the
// replica's in reverse, and a failed start closes everything. Leader election itself is the failover suite's.

import { Writable } from 'node:stream';
import { describe, expect, test } from '@jest/globals';
import pino from 'pino';
import { Registry } from 'prom-client';
import { type Component, Manager } from '../../../src/operator/manager.ts';
import { createOperatorMetrics } from '../../../src/operator/metrics.ts';

function setup() {
  const calls: string[] = [];
  const lines: { level: number; msg: string; err?: string }[] = [];
  const log = pino(
    { level: 'info' },
    new Writable({ write: (chunk: Buffer, _enc, done) => (lines.push(JSON.parse(chunk.toString())), done()) }),
  );
  const metrics = createOperatorMetrics(new Registry(), { defaultMetrics: false });
  const manager = new Manager({ log, leaderStatus: metrics.leaderStatus, leaseName: 'lease' });
  const component = (
    name: string,
    everyReplica = false,
    start: () => void | Promise<void> = () => undefined,
  ): Component => ({
    name,
    everyReplica,
    start: () => {
      calls.push(`start ${name}`);
      return start();
    },
    stop: async () => void calls.push(`stop ${name}`),
    close: async () => void calls.push(`close ${name}`),
  });
  const leaderGauge = async () =>
    (await metrics.leaderStatus.get()).values.find((v) => v.labels.name === 'lease')?.value;
  return { calls, lines, manager, component, leaderGauge };
}

describe('Manager', () => {
  test('every-replica components start in order before the lead; leader components after it, in order', async () => {
    const { calls, manager, component, leaderGauge } = setup();
    let informersSynced = false;
    manager.add(
      component('endpoints', true),
      component('informers', true, async () => {
        await new Promise((r) => setTimeout(r, 20));
        informersSynced = true;
      }),
      undefined,
      component('controllers', false, () => {
        // Leading begins only once the caches are warm.
        expect(informersSynced).toBe(true);
      }),
      component('pipeline'),
    );
    expect(manager.leading).toBe(false);
    expect(await leaderGauge()).toBe(0);
    await manager.start();
    await manager.settled();
    expect(manager.leading).toBe(true);
    expect(await leaderGauge()).toBe(1);
    expect(calls).toEqual(['start endpoints', 'start informers', 'start controllers', 'start pipeline']);
  });

  test('shutdown gives up the lead (leader components stop in order), then closes the leader components and the replica ones in reverse, once', async () => {
    const { calls, manager, component, leaderGauge } = setup();
    manager.add(
      component('endpoints', true),
      component('informers', true),
      component('controllers'),
      component('pipeline'),
    );
    await manager.start();
    calls.length = 0;
    const stopping = manager.stop();
    expect(manager.stop()).toBe(stopping);
    await stopping;
    expect(manager.leading).toBe(false);
    expect(await leaderGauge()).toBe(0);
    expect(calls).toEqual([
      'stop controllers',
      'stop pipeline',
      'close controllers',
      'close pipeline',
      'close informers',
      'close endpoints',
    ]);
  });

  test('a failed start closes every component and rethrows, and never leads', async () => {
    const { calls, manager, component } = setup();
    manager.add(
      component('endpoints', true),
      component('informers', true, () => Promise.reject(new Error('forbidden'))),
      component('resync', true),
      component('controllers'),
    );
    await expect(manager.start()).rejects.toThrow('forbidden');
    await manager.settled();
    expect(manager.leading).toBe(false);
    expect(calls).toEqual([
      'start endpoints',
      'start informers',
      'close controllers',
      'close resync',
      'close informers',
      'close endpoints',
    ]);
  });

  test("a leader component's start is not awaited; its failure is logged and the others run", async () => {
    const { calls, lines, manager, component } = setup();
    let release: () => void = () => undefined;
    manager.add(
      component(
        'pipeline',
        false,
        () => new Promise<void>((_, reject) => (release = () => reject(new Error('no bundle key')))),
      ),
      component('health status'),
    );
    await manager.start();
    await manager.settled();
    expect(calls).toEqual(['start pipeline', 'start health status']);
    release();
    await new Promise((r) => setImmediate(r));
    expect(lines.filter((l) => l.level === 50).map((l) => [l.msg, l.err])).toEqual([
      ['pipeline failed to start', 'no bundle key'],
    ]);
  });
});
