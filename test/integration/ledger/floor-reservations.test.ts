// Shrinking reservations (a request without max_tokens under a small budget, docs/ledger.md "Requests without
// max_tokens"): the ledger grants what the budgets have room for, down to a floor, in its atomic check-and-reserve.
// The generator attacks "concurrency cannot multiply a limit" with floors: random limits and spend already counted,
// one or two budgets per request, bursts of concurrent reservations of random maxima and floors over two Redis
// connections (two gateway replicas) or the embedded ledger, each settled at a random cost within its grant or
// released, each asking for a random share of a short room. After every burst: what is counted plus what is held never
// passes a limit, every grant lies between its floor and its maximum (and within its share), and a request is refused
// only when its floor did not fit.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import fc from 'fast-check';
import { createEmbeddedLedger, createRedisLedger, type Ledger } from '../../../src/ledger/index.ts';
import type { HoldCheck } from '../../../src/ledger/ledger.ts';
import { type RedisServer, startRedis } from '../../support/redis.ts';

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

interface Ask {
  cost: number;
  floor: number;
  /** The share of a short room granted (the gateway asks for half). */
  share: number;
  /** Which budgets it is under: the first, the second, or both. */
  under: 0 | 1 | 2;
  /** Settled at this fraction of its grant, or released (null). */
  settle: number | null;
}

const ask: fc.Arbitrary<Ask> = fc
  .record({
    cost: fc.integer({ min: 2, max: 2_000_000 }),
    floorPart: fc.double({ min: 0.0001, max: 1, noNaN: true }),
    share: fc.oneof(fc.constant(1), fc.constant(0.5), fc.double({ min: 0.01, max: 1, noNaN: true })),
    under: fc.constantFrom(0 as const, 1 as const, 2 as const),
    settle: fc.option(fc.double({ min: 0, max: 1, noNaN: true }), { nil: null }),
  })
  .map(({ cost, floorPart, share, under, settle }) => ({
    cost,
    floor: Math.max(1, Math.floor(cost * floorPart)),
    share,
    under,
    settle,
  }));

interface Scenario {
  limits: [number, number];
  spent: [number, number];
  bursts: Ask[][];
}

const scenario: fc.Arbitrary<Scenario> = fc.record({
  limits: fc.tuple(fc.integer({ min: 1, max: 5_000_000 }), fc.integer({ min: 1, max: 5_000_000 })),
  spent: fc.tuple(fc.integer({ min: 0, max: 5_000_000 }), fc.integer({ min: 0, max: 5_000_000 })),
  bursts: fc.array(fc.array(ask, { minLength: 1, maxLength: 12 }), { minLength: 1, maxLength: 4 }),
});

let run = 0;

/** One scenario on fresh keys; throws on the first broken invariant. */
async function check(ledgers: Ledger[], s: Scenario): Promise<void> {
  const acct = `{floor-${++run}}`;
  const counted = [0, 1].map((i) => `byok:ledger:${acct}:b${i}:counted`);
  const hold = [0, 1].map((i) => `byok:ledger:${acct}:b${i}:holds`);
  await ledgers[0]!.add(
    [0, 1].map((i) => ({ key: counted[i]!, by: s.spent[i]!, expiresAt: null })).filter((x) => x.by > 0),
  );
  let seq = 0;
  for (const burst of s.bursts) {
    const results = await Promise.all(
      burst.map(async (a, j) => {
        const id = `gen-${acct}-${++seq}`;
        const budgets = a.under === 2 ? [0, 1] : [a.under];
        const checks: HoldCheck[] = budgets.map((b) => ({
          countedKeys: [counted[b]!],
          holdKey: hold[b]!,
          limitMicros: s.limits[b]!,
          amount: a.cost,
        }));
        const result = await ledgers[j % ledgers.length]!.reserve({
          id,
          checks,
          floor: a.floor,
          share: a.share,
          ttlMs: 60_000,
        });
        return { a, id, budgets, checks, result };
      }),
    );
    // While every grant of the burst is held: counted + held within each limit. Broken rules are collected and
    // asserted once per burst (an expect per grant cost more than the ledger call it checks).
    const [c0, c1] = await ledgers[0]!.read(counted);
    const held = [0, 0];
    const broken: string[] = [];
    for (const r of results) {
      if (!r.result.ok) {
        // Refused only when its floor did not fit what that budget had left.
        const b = r.budgets[r.result.index]!;
        const left = s.limits[b]! - r.result.countedMicros - r.result.heldMicros;
        if (!(left < Math.min(r.a.floor, r.a.cost)))
          broken.push(`${r.id} refused with ${left} left for floor ${r.a.floor}, cost ${r.a.cost}`);
        continue;
      }
      const granted = r.result.granted;
      if (granted < r.a.floor || granted > r.a.cost)
        broken.push(`${r.id} granted ${granted} outside [${r.a.floor}, ${r.a.cost}]`);
      // Short of its maximum: at most its share of what that budget had, unless that is below its floor.
      if (granted < r.a.cost && granted > r.a.floor) {
        for (const b of r.budgets)
          if (granted > Math.floor(s.limits[b]! * r.a.share))
            broken.push(`${r.id} granted ${granted} past its share ${r.a.share} of ${s.limits[b]}`);
      }
      for (const b of r.budgets) held[b]! += granted;
    }
    expect(broken).toEqual([]);
    expect((c0 ?? 0) + held[0]!).toBeLessThanOrEqual(Math.max(s.limits[0], s.spent[0]));
    expect((c1 ?? 0) + held[1]!).toBeLessThanOrEqual(Math.max(s.limits[1], s.spent[1]));
    // Settle each at a cost within its grant (the spend and the dropped hold in one step), or release it; the
    // grants of a burst are settled side by side, as replicas answering at once do.
    await Promise.all(
      results.map(async (r) => {
        if (!r.result.ok) return;
        const holdKeys = r.budgets.map((b) => hold[b]!);
        const granted = r.result.granted;
        const settle = r.a.settle;
        if (settle === null) return ledgers[0]!.release(r.id, granted, holdKeys);
        return ledgers[0]!.add(
          r.budgets.map((b) => ({ key: counted[b]!, by: Math.floor(granted * settle), expiresAt: null })),
          { id: r.id, amount: granted, holdKeys },
        );
      }),
    );
  }
}

describe('shrinking reservations never pass a limit', () => {
  test('the embedded ledger: 2,000 generated scenarios', async () => {
    const ledger = createEmbeddedLedger();
    try {
      await fc.assert(
        fc.asyncProperty(scenario, (s) => check([ledger], s)),
        { numRuns: 2000, seed: 4302 },
      );
    } finally {
      await ledger.close();
    }
  });

  test('two replicas on one redis-server: 300 generated scenarios', async () => {
    const ledgers = [await createRedisLedger({ url: redis.url }), await createRedisLedger({ url: redis.url })];
    try {
      await fc.assert(
        fc.asyncProperty(scenario, (s) => check(ledgers, s)),
        { numRuns: 300, seed: 4303 },
      );
    } finally {
      for (const l of ledgers) await l.close();
    }
    // Work-bounded, not timed: about 5 s on a quiet machine, over 60 s once beside a loaded suite.
  }, 180_000);

  test('a reservation given up before its answer is released by its id, whatever it was granted', async () => {
    const ledger = await createRedisLedger({ url: redis.url });
    try {
      const checks: HoldCheck[] = [
        { countedKeys: ['byok:ledger:{giveup}:c'], holdKey: 'byok:ledger:{giveup}:h', limitMicros: 1000, amount: 5000 },
      ];
      expect(await ledger.reserve({ id: 'gen-giveup', checks, floor: 10, share: 0.5, ttlMs: 60_000 })).toEqual({
        ok: true,
        granted: 500,
      });
      // The caller timed out and knows only the maximum it asked for.
      await ledger.release('gen-giveup', 5000, ['byok:ledger:{giveup}:h']);
      // Its 500 is free again: the next is granted its full share of all 1000.
      expect(await ledger.reserve({ id: 'gen-next', checks, floor: 10, share: 0.5, ttlMs: 60_000 })).toEqual({
        ok: true,
        granted: 500,
      });
      expect(await ledger.reserve({ id: 'gen-third', checks, floor: 10, share: 0.5, ttlMs: 60_000 })).toEqual({
        ok: true,
        granted: 250,
      });
    } finally {
      await ledger.close();
    }
  });
});
