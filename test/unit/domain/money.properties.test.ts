// the money functions take integer micros, and prices and limits are converted once, at load. These
// properties check that the micros path gives exactly what the former per-request path gave (amounts went
// micros → decimal text → micros, prices and limits USD → micros on every call), for random prices and limits.
import { describe, expect, test } from '@jest/globals';
import fc from 'fast-check';
import {
  type BudgetInterval,
  byokCharge,
  decideBudget,
  type EndpointPricing,
  FREE_ALLOWANCE_MICROS,
  listCostMicros,
  type Micros,
  mulDivRound,
  type PlanName,
  prepareGuardrail,
  prepareWorkspace,
  priceMicros,
  usdToMicros,
} from '../../../src/domain/index.ts';
import { guardrail, WS1, workspace } from '../../support/fixtures/domain.ts';
import { expectEqual, expectIs, propertyRuns } from '../../support/properties.ts';

/** The former ledger → domain hand-over: exact decimal text of micros. */
const decimal = (m: Micros): string =>
  `${m < 0 ? '-' : ''}${Math.trunc(Math.abs(m) / 1e6)}.${String(Math.abs(m) % 1e6).padStart(6, '0')}`;

/** The former listCostMicros: USD prices converted on every call. */
function formerListCost(p: EndpointPricing, u: { promptTokens: number; completionTokens: number }): Micros {
  if (p.kind === 'per-request') return usdToMicros(p.usdPerRequest);
  return (
    mulDivRound(usdToMicros(p.promptUsdPerMillionTokens), u.promptTokens, 1_000_000) +
    mulDivRound(usdToMicros(p.completionUsdPerMillionTokens), u.completionTokens, 1_000_000)
  );
}

/** The former byokCharge core: month-to-date and cost arrived as decimal text. */
function formerFee(plan: PlanName, before: Micros, cost: Micros): { free: Micros; fee: Micros } {
  const b = usdToMicros(decimal(before));
  const c = usdToMicros(decimal(cost));
  const left = Math.max(0, FREE_ALLOWANCE_MICROS[plan] - b);
  const free = Math.min(c, left);
  return { free, fee: mulDivRound(c - free, 5, 100) };
}

const micros = fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER });
const amount = fc.integer({ min: 0, max: 2_000_000_000_000 }); // up to 2 million USD
/** USD as configured: a decimal string with up to 9 fraction digits, or a number (shortest decimal form). */
const usd = fc.oneof(
  fc
    .tuple(
      fc.integer({ min: 0, max: 100_000 }),
      fc.integer({ min: 0, max: 999_999_999 }),
      fc.integer({ min: 0, max: 9 }),
    )
    .map(([whole, frac, digits]) =>
      digits === 0 ? String(whole) : `${whole}.${String(frac).padStart(9, '0').slice(0, digits)}`,
    ),
  fc.double({ min: 0, max: 100_000, noNaN: true, noDefaultInfinity: true }),
  fc.integer({ min: 0, max: 100_000 }),
);
const tokens = fc.integer({ min: 0, max: 2_000_000 });
const interval = fc.constantFrom<BudgetInterval>('daily', 'weekly', 'monthly', 'lifetime');

describe('money on integer micros (properties)', () => {
  test('decimal text of any safe amount of micros reads back unchanged (the former hand-over lost nothing)', () => {
    fc.assert(fc.property(micros, (m) => expect(usdToMicros(decimal(m))).toBe(m)));
  });

  test('list cost from prices converted at load equals list cost converted per request', () => {
    const pricing = fc.oneof(
      fc.record({
        kind: fc.constant('per-token' as const),
        promptUsdPerMillionTokens: usd,
        completionUsdPerMillionTokens: usd,
      }),
      fc.record({ kind: fc.constant('per-request' as const), usdPerRequest: usd }),
    );
    fc.assert(
      fc.property(pricing, tokens, tokens, (p, promptTokens, completionTokens) => {
        const usage = { promptTokens, completionTokens };
        expectIs(listCostMicros(priceMicros(p), usage), formerListCost(p, usage));
      }),
      { numRuns: propertyRuns(500) },
    );
  });

  test('the BYOK charge on micros equals the charge computed from decimal text', () => {
    fc.assert(
      fc.property(
        fc.constantFrom<PlanName>('pay-as-you-go', 'enterprise'),
        fc.oneof(
          amount,
          micros.map((m) => Math.floor(m / 2)),
        ),
        amount,
        (plan, before, cost) => {
          const charge = byokCharge({ plan, monthToDateListCostMicros: before, requestListCostMicros: cost });
          const former = formerFee(plan, before, cost);
          expectEqual([charge.freeListCostMicros, charge.feeMicros], [former.free, former.fee]);
        },
      ),
      { numRuns: propertyRuns(500) },
    );
  });

  test('budget decisions with limits converted at load equal decisions converting limits per request', () => {
    fc.assert(
      fc.property(usd, usd, amount, amount, fc.boolean(), interval, (gLimit, wLimit, nonByok, byok, include, i) => {
        const spend = { nonByokMicros: nonByok, byokMicros: byok };
        const g = guardrail('g', {}, { limitUsd: gLimit as number, resetInterval: i, includeByokInBudgets: include });
        const w = workspace(WS1, {
          budgets: [{ limitUsd: wLimit as number, interval: i }],
          includeByokInBudgets: include,
        });
        const d = decideBudget({
          guardrails: [{ guardrail: prepareGuardrail(g), spend }],
          workspace: { workspace: prepareWorkspace(w), spend: { [i]: spend } },
        });
        const counted = usdToMicros(decimal(nonByok)) + (include ? usdToMicros(decimal(byok)) : 0);
        const formerLimits = [usdToMicros(gLimit), usdToMicros(wLimit)];
        expectEqual(
          d.checks.map((c) => [c.limitMicros, c.countedMicros, c.blocked]),
          formerLimits.map((l) => [l, counted, counted >= l]),
        );
      }),
      { numRuns: propertyRuns(500) },
    );
  });

  test('a limit beyond the exact range is refused by the budget check that reads it, as before, not at load', () => {
    const g = guardrail('g', {}, { limitUsd: 1e12, resetInterval: 'daily', includeByokInBudgets: false });
    const prepared = prepareGuardrail(g);
    expect(() => usdToMicros(1e12)).toThrow(RangeError);
    expect(() =>
      decideBudget({
        guardrails: [{ guardrail: prepared, spend: { nonByokMicros: 0, byokMicros: 0 } }],
        workspace: null,
      }),
    ).toThrow(RangeError);
  });
});

describe('mulDivRound', () => {
  /** The BigInt definition, for every input. */
  const exact = (m: number, num: number, den: number): number => {
    const n = BigInt(m) * BigInt(num);
    const d = BigInt(den);
    const r = n % d;
    return Number(n / d + (r * 2n >= d ? 1n : r * 2n <= -d ? -1n : 0n));
  };
  test('the double fast path equals the BigInt result, at and around the safe-integer edge and on halves', () => {
    const edge = fc.integer({ min: Number.MAX_SAFE_INTEGER - 1_000, max: Number.MAX_SAFE_INTEGER });
    const signed = fc.integer({ min: -Number.MAX_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER });
    fc.assert(
      fc.property(
        fc.oneof(micros, edge, signed),
        fc.integer({ min: -2_000_000, max: 2_000_000 }),
        fc.integer({ min: 1, max: 1_000_000_000 }),
        (m, num, den) => {
          expectIs(mulDivRound(m, num, den), exact(m, num, den));
        },
      ),
      { numRuns: propertyRuns(20_000) },
    );
    // Exact halves round up (away from zero for negatives, as the BigInt path does).
    for (const [m, num, den] of [
      [1, 1, 2],
      [3, 1, 2],
      [-1, 1, 2],
      [-3, 1, 2],
      [5, 5, 100],
      [15, 5, 100],
      [Number.MAX_SAFE_INTEGER, 1, 2],
    ] as const) {
      expectIs(mulDivRound(m, num, den), exact(m, num, den));
    }
  });
});
