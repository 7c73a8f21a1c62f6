// Key rate limits in the ledger (docs/ledger.md, "Key rate limits"): requests per minute, tokens per minute and
// requests in flight, each check-and-count one atomic step. The generator attacks "a limit of N never admits N+1":
// random limits, bursts of concurrent admissions over two Redis connections (two gateway replicas) or the embedded
// ledger, between bursts random settlements (a used token count, or never served). After every burst, against a
// model of what was admitted: no limit is passed, and a refusal names a limit that really was full.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import fc from 'fast-check';
import { createEmbeddedLedger, createRedisLedger, type Ledger } from '../../../src/ledger/index.ts';
import type { RateCheck, RateResult } from '../../../src/ledger/ledger.ts';
import { type RedisServer, startRedis } from '../../support/redis.ts';

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

interface Scenario {
  rpm: number;
  tpm: number;
  flight: number;
  bursts: { tokens: number }[][];
  /** Per burst, per admitted request: settled with this share of its tokens, or never served (null), or left in flight (undefined). */
  settles: (number | null | undefined)[];
}

const scenario: fc.Arbitrary<Scenario> = fc.record({
  rpm: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 20 })),
  tpm: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 5000 })),
  flight: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 8 })),
  bursts: fc.array(
    fc.array(fc.record({ tokens: fc.integer({ min: 1, max: 2000 }) }), { minLength: 1, maxLength: 12 }),
    { minLength: 1, maxLength: 4 },
  ),
  settles: fc.array(
    fc.option(fc.option(fc.double({ min: 0, max: 1, noNaN: true }), { nil: null }), { nil: undefined }),
    { minLength: 48, maxLength: 48 },
  ),
});

let run = 0;

interface Admitted {
  check: RateCheck;
  /** Tokens it counts now; -1 once it left every set. */
  tokens: number;
  inFlight: boolean;
}

async function check(ledgers: Ledger[], s: Scenario): Promise<void> {
  const acct = `{rate-${++run}}`;
  const keys = {
    requests: `byok:ledger:${acct}:key:k:rpm`,
    tokens: `byok:ledger:${acct}:key:k:tpm`,
    tokensSum: `byok:ledger:${acct}:key:k:tpmsum`,
    inFlight: `byok:ledger:${acct}:key:k:inflight`,
  };
  const admitted: Admitted[] = [];
  let seq = 0;
  let settleIndex = 0;
  for (const burst of s.bursts) {
    const results: { check: RateCheck; result: RateResult }[] = await Promise.all(
      burst.map(async (a, j) => {
        const c: RateCheck = {
          id: `gen-${acct}-${++seq}`,
          keys,
          requestsPerWindow: s.rpm,
          tokensPerWindow: s.tpm,
          tokens: a.tokens,
          maxInFlight: s.flight,
          windowMs: 600_000,
          lapseMs: 600_000,
        };
        return { check: c, result: await ledgers[j % ledgers.length]!.admitRate(c) };
      }),
    );
    for (const r of results) if (r.result.ok) admitted.push({ check: r.check, tokens: r.check.tokens, inFlight: true });
    const counted = admitted.filter((a) => a.tokens >= 0);
    const requests = counted.length;
    const tokens = counted.reduce((sum, a) => sum + a.tokens, 0);
    const flying = admitted.filter((a) => a.inFlight).length;
    if (s.rpm > 0) expect(requests).toBeLessThanOrEqual(s.rpm);
    if (s.tpm > 0) expect(tokens).toBeLessThanOrEqual(s.tpm);
    if (s.flight > 0) expect(flying).toBeLessThanOrEqual(s.flight);
    for (const r of results) {
      if (r.result.ok) continue;
      // Nothing left any set during the burst: a refusal is exact only if its limit is full at the burst's end.
      if (r.result.limit === 'requests') {
        expect(requests).toBe(s.rpm);
        expect(r.result.retryAfterMs).toBeGreaterThan(0);
        expect(r.result.retryAfterMs).toBeLessThanOrEqual(600_000);
      }
      if (r.result.limit === 'in_flight') expect(flying).toBe(s.flight);
      if (r.result.limit === 'tokens') expect(tokens + r.check.tokens).toBeGreaterThan(s.tpm);
    }
    // Settle some of what is in flight.
    for (const a of admitted) {
      if (!a.inFlight) continue;
      const how = s.settles[settleIndex++ % s.settles.length];
      if (how === undefined) continue;
      const used = how === null ? null : Math.floor(a.tokens * how);
      await ledgers[settleIndex % ledgers.length]!.settleRate(a.check, used);
      a.inFlight = false;
      a.tokens = used === null ? -1 : used;
    }
  }
}

describe('key rate limits in the ledger', () => {
  test('embedded: 1000 generated scenarios', async () => {
    const ledger = createEmbeddedLedger();
    try {
      await fc.assert(
        fc.asyncProperty(scenario, (s) => check([ledger], s)),
        { numRuns: 1000, seed: 4343 },
      );
    } finally {
      await ledger.close();
    }
  });

  test('two replicas on one redis-server: 200 generated scenarios', async () => {
    const ledgers = [await createRedisLedger({ url: redis.url }), await createRedisLedger({ url: redis.url })];
    try {
      await fc.assert(
        fc.asyncProperty(scenario, (s) => check(ledgers, s)),
        { numRuns: 200, seed: 4344 },
      );
    } finally {
      for (const l of ledgers) await l.close();
    }
    // Work-bounded, not timed: about 1 s on a quiet machine, far longer beside a loaded suite.
  }, 180_000);

  test.each(['embedded', 'redis'] as const)(
    '%s: 20 concurrent requests at a limit of 5 per minute: exactly 5 admitted, the rest told when the oldest leaves the window',
    async (backend) => {
      const ledgers =
        backend === 'embedded'
          ? [createEmbeddedLedger()]
          : [await createRedisLedger({ url: redis.url }), await createRedisLedger({ url: redis.url })];
      try {
        const keys = {
          requests: `byok:ledger:{burst-${backend}}:key:k:rpm`,
          tokens: `byok:ledger:{burst-${backend}}:key:k:tpm`,
          tokensSum: `byok:ledger:{burst-${backend}}:key:k:tpmsum`,
          inFlight: `byok:ledger:{burst-${backend}}:key:k:inflight`,
        };
        const results = await Promise.all(
          Array.from({ length: 20 }, (_, i) =>
            ledgers[i % ledgers.length]!.admitRate({
              id: `gen-${i}`,
              keys,
              requestsPerWindow: 5,
              tokensPerWindow: 0,
              tokens: 10,
              maxInFlight: 0,
              windowMs: 60_000,
              lapseMs: 60_000,
            }),
          ),
        );
        expect(results.filter((r) => r.ok)).toHaveLength(5);
        for (const r of results.filter((x) => !x.ok)) {
          expect(r).toMatchObject({ ok: false, limit: 'requests', used: 5, max: 5 });
          expect((r as { retryAfterMs: number }).retryAfterMs).toBeGreaterThan(0);
          expect((r as { retryAfterMs: number }).retryAfterMs).toBeLessThanOrEqual(60_000);
        }
      } finally {
        for (const l of ledgers) await l.close();
      }
    },
  );

  test('a request that alone needs more tokens than the limit is refused with no retry time', async () => {
    const ledger = createEmbeddedLedger();
    try {
      const keys = {
        requests: 'byok:ledger:{big}:key:k:rpm',
        tokens: 'byok:ledger:{big}:key:k:tpm',
        tokensSum: 'byok:ledger:{big}:key:k:tpmsum',
        inFlight: 'byok:ledger:{big}:key:k:inflight',
      };
      expect(
        await ledger.admitRate({
          id: 'gen-big',
          keys,
          requestsPerWindow: 0,
          tokensPerWindow: 100,
          tokens: 101,
          maxInFlight: 0,
          windowMs: 60_000,
          lapseMs: 60_000,
        }),
      ).toEqual({ ok: false, limit: 'tokens', used: 0, max: 100, retryAfterMs: null });
    } finally {
      await ledger.close();
    }
  });

  test('embedded, on a clock the test controls: tokens leave the window with their admissions, and Retry-After says when', async () => {
    let now = 1_000_000;
    const ledger = createEmbeddedLedger({ now: () => now });
    try {
      const keys = {
        requests: 'byok:ledger:{clock}:key:k:rpm',
        tokens: 'byok:ledger:{clock}:key:k:tpm',
        tokensSum: 'byok:ledger:{clock}:key:k:tpmsum',
        inFlight: 'byok:ledger:{clock}:key:k:inflight',
      };
      const ask = (id: string, tokens: number): RateCheck => ({
        id,
        keys,
        requestsPerWindow: 0,
        tokensPerWindow: 1000,
        tokens,
        maxInFlight: 0,
        windowMs: 60_000,
        lapseMs: 60_000,
      });
      expect(await ledger.admitRate(ask('a', 400))).toEqual({ ok: true });
      now += 10_000;
      expect(await ledger.admitRate(ask('b', 400))).toEqual({ ok: true });
      now += 10_000;
      // 800 counted: 400 more fit once the first admission leaves the window, 40 s from now.
      expect(await ledger.admitRate(ask('c', 400))).toEqual({
        ok: false,
        limit: 'tokens',
        used: 800,
        max: 1000,
        retryAfterMs: 40_000,
      });
      // The first one used 100: 500 counted, room for 400.
      await ledger.settleRate(ask('a', 400), 100);
      expect(await ledger.admitRate(ask('c', 400))).toEqual({ ok: true });
      // 900 counted: 400 fit only once the first two have left (the second, admitted at +10 s, leaves 50 s from now).
      expect(await ledger.admitRate(ask('d', 400))).toMatchObject({ ok: false, used: 900, retryAfterMs: 50_000 });
      now += 40_000;
      // The first (100) left the window: 800 counted.
      expect(await ledger.admitRate(ask('d', 400))).toMatchObject({ ok: false, used: 800, retryAfterMs: 10_000 });
      now += 10_000;
      expect(await ledger.admitRate(ask('d', 400))).toEqual({ ok: true });
    } finally {
      await ledger.close();
    }
  });

  test('redis: tokens that leave the window free room again (Redis keeps time; asserted by outcome, in order)', async () => {
    const ledger = await createRedisLedger({ url: redis.url });
    try {
      const keys = {
        requests: 'byok:ledger:{slide}:key:k:rpm',
        tokens: 'byok:ledger:{slide}:key:k:tpm',
        tokensSum: 'byok:ledger:{slide}:key:k:tpmsum',
        inFlight: 'byok:ledger:{slide}:key:k:inflight',
      };
      const ask = (id: string): RateCheck => ({
        id,
        keys,
        requestsPerWindow: 0,
        tokensPerWindow: 1000,
        tokens: 600,
        maxInFlight: 0,
        windowMs: 300,
        lapseMs: 60_000,
      });
      expect(await ledger.admitRate(ask('a'))).toEqual({ ok: true });
      const refused = await ledger.admitRate(ask('b'));
      expect(refused).toMatchObject({ ok: false, limit: 'tokens', used: 600 });
      expect((refused as { retryAfterMs: number }).retryAfterMs).toBeLessThanOrEqual(300);
      let admitted = false;
      for (let i = 0; i < 200 && !admitted; i++) {
        admitted = (await ledger.admitRate(ask('b'))).ok;
        if (!admitted) await new Promise((r) => setTimeout(r, 20));
      }
      expect(admitted).toBe(true);
      // The sum followed: 600 counted again, not 1,200.
      expect(await ledger.admitRate(ask('c'))).toMatchObject({ ok: false, used: 600 });
    } finally {
      await ledger.close();
    }
  });
});
