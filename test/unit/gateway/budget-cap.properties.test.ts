// The cap of a request without max_tokens (docs/ledger.md, "Requests without max_tokens"), and the max_tokens a 402
// says would fit. The generator draws per-token and per-request prices (cheap, dear, free sides), n, prompt bytes,
// media parts, catalog limits (missing, tiny, larger than the context) and budgets with some room, little room or
// none, and attacks two promises: the max_tokens named is the largest whose maximum cost fits (one more does not),
// and a capped request's maximum cost never exceeds what the ledger granted it, so the hold covers it.
import { describe, expect, test } from '@jest/globals';
import fc from 'fast-check';
import { type EndpointPrice, listCostMicros, type Micros, priceMicros } from '../../../src/domain/index.ts';
import { affordableTokens, CAPPED_SHARE, MIN_CAPPED_TOKENS } from '../../../src/gateway/budget-cap.ts';
import {
  costFields,
  type ModelLimits,
  reservedTokens,
  USAGE_CEILING_TOKENS,
  usageBounds,
} from '../../../src/gateway/usage.ts';
import { createEmbeddedLedger } from '../../../src/ledger/embedded.ts';
import { propertyRuns } from '../../support/properties.ts';

const SEED = 43_0204;
const RUNS = 4000;

const usd = fc.oneof(
  fc.constant('0'),
  fc.integer({ min: 1, max: 150_000_000 }).map((m) => (m / 1_000_000).toFixed(6)),
);
const price: fc.Arbitrary<EndpointPrice> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({ prompt: usd, completion: usd }).map(({ prompt, completion }) =>
      priceMicros({
        kind: 'per-token',
        promptUsdPerMillionTokens: prompt,
        completionUsdPerMillionTokens: completion,
      }),
    ),
  },
  { weight: 1, arbitrary: usd.map((u) => priceMicros({ kind: 'per-request', usdPerRequest: u })) },
);
const request = fc.record({
  prices: fc.array(price, { minLength: 1, maxLength: 3 }),
  n: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 128 })),
  bytes: fc.integer({ min: 2, max: 200_000 }),
  media: fc.nat({ max: 2 }),
  limits: fc.record({
    contextLength: fc.option(fc.integer({ min: 1, max: 2_000_000 }), { nil: null }),
    maxOutputTokens: fc.option(fc.integer({ min: 1, max: 400_000 }), { nil: null }),
  }),
  room: fc.oneof(fc.nat({ max: 1000 }), fc.nat({ max: 5_000_000 }), fc.nat({ max: 2_000_000_000 })),
});
type Req = typeof request extends fc.Arbitrary<infer T> ? T : never;

/** What the gateway prices: the most the request can cost with `perChoice` as its max_tokens, at its priciest endpoint. */
function costAt(r: Req, perChoice: number | null): Micros {
  const cost = costFields({
    n: r.n,
    messages: Array.from({ length: r.media }, () => ({ content: [{ type: 'image_url' }] })),
  });
  if ('error' in cost) throw new Error(cost.error);
  const bounds = usageBounds(r.limits as ModelLimits, { ...cost, maxTokensPerChoice: perChoice }, r.bytes);
  return Math.max(...r.prices.map((p) => listCostMicros(p, reservedTokens(bounds))));
}
const longest = (r: Req) =>
  Math.min(r.limits.maxOutputTokens ?? Infinity, r.limits.contextLength ?? USAGE_CEILING_TOKENS);

describe('the max_tokens that fits', () => {
  test(`is the largest whose maximum cost fits what is left: one more does not (${RUNS} generated requests)`, () => {
    fc.assert(
      fc.property(request, (r) => {
        const n = affordableTokens((t) => costAt(r, t), longest(r), r.room);
        if (n === 0) return expect(costAt(r, 1)).toBeGreaterThan(r.room);
        expect(costAt(r, n)).toBeLessThanOrEqual(r.room);
        if (n < longest(r)) expect(costAt(r, n + 1)).toBeGreaterThan(r.room);
      }),
      { numRuns: propertyRuns(RUNS), seed: SEED },
    );
  });

  test(`a capped request's maximum cost is within what the ledger granted it (${RUNS} generated requests)`, async () => {
    await fc.assert(
      fc.asyncProperty(request, async (r) => {
        const ledger = createEmbeddedLedger();
        try {
          const full = costAt(r, null);
          const floor = costAt(r, MIN_CAPPED_TOKENS);
          // What the gateway asks for: only a request whose answer can be cut (a per-request price cannot).
          fc.pre(longest(r) > MIN_CAPPED_TOKENS && floor < full);
          // As admission passes it: a floor that prices at 0 micros still asks for 1 (a reached budget refuses all).
          const asked = Math.max(1, floor);
          const res = await ledger.reserve({
            id: 'gen-cap',
            checks: [{ countedKeys: ['{a}:c'], holdKey: '{a}:h', limitMicros: r.room, amount: full }],
            floor: asked,
            share: CAPPED_SHARE,
            ttlMs: 60_000,
          });
          if (!res.ok) return expect(r.room).toBeLessThan(asked);
          if (res.granted >= full) return;
          const cap = Math.max(
            MIN_CAPPED_TOKENS,
            affordableTokens((t) => costAt(r, t), longest(r), res.granted),
          );
          expect(cap).toBeLessThan(longest(r));
          expect(costAt(r, cap)).toBeLessThanOrEqual(res.granted);
        } finally {
          await ledger.close();
        }
      }),
      { numRuns: propertyRuns(RUNS), seed: SEED + 1 },
    );
  });
});
