// The gateway's delivery sequence (src/gateway/delivered-routing.ts, DeliveryTracker): what a held status request
// waits on. It answers at once when the caller is behind, when the pod loads or refuses a batch, when it goes on or
// off the stream, at the caller's limit, and on shutdown, and keeps no waiter after answering.
import { describe, expect, test } from '@jest/globals';
import { DeliveryTracker } from '../../../src/gateway/delivered-routing.ts';

const settled = async (p: Promise<void>) => {
  let done = false;
  void p.then(() => (done = true));
  await new Promise((r) => setImmediate(r));
  return done;
};

describe('DeliveryTracker', () => {
  test('a caller behind the sequence is answered at once; one at it waits for the next move, which carries the batch outcome', async () => {
    const t = new DeliveryTracker('down');
    expect(t.report()).toEqual({ seq: 0, stream: 'down' });
    t.connection(true);
    expect(await settled(t.waitPast(0, 60_000))).toBe(true);
    const held = t.waitPast(1, 60_000);
    expect(await settled(held)).toBe(false);
    t.batch({ batch: 1, result: 'loaded' });
    expect(await settled(held)).toBe(true);
    expect(t.report()).toEqual({ seq: 2, stream: 'connected', lastBatch: { batch: 1, result: 'loaded' } });
  });

  test('a held caller is answered unchanged at its limit, and every held caller on close', async () => {
    const t = new DeliveryTracker('off');
    // Held while nothing moves (a long limit, so a slow machine cannot reach it first)...
    expect(await settled(t.waitPast(0, 60_000))).toBe(false);
    // ...and answered at its limit with nothing changed: the wait resolves (else the test times out).
    await t.waitPast(0, 5);
    expect(t.report().seq).toBe(0);
    const a = t.waitPast(0, 60_000);
    const b = t.waitPast(0, 60_000);
    t.close();
    expect([await settled(a), await settled(b)]).toEqual([true, true]);
    expect(await settled(t.waitPast(0, 60_000))).toBe(true);
    expect(t.report().seq).toBe(0);
  });
});
