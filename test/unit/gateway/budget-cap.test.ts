// The 402's words (src/gateway/budget-cap.ts): the two reasons, what the app can do in each case, the window in words
// and never the ledger's window id.
import { describe, expect, test } from '@jest/globals';
import type { BudgetCheck } from '../../../src/domain/index.ts';
import { type BudgetRefusal, describeBudget, refusalReason } from '../../../src/gateway/budget-cap.ts';

const END = Date.UTC(2026, 10, 28);
const check = (over: Partial<BudgetCheck> = {}): BudgetCheck => ({
  scope: 'guardrail',
  id: 'g',
  name: 'pilot',
  interval: 'daily',
  limitMicros: 1_000_000,
  countedMicros: 105,
  includesByok: true,
  blocked: false,
  ...over,
});
const refusal = (over: Partial<BudgetRefusal> = {}): BudgetRefusal => ({
  check: check(),
  heldMicros: 0,
  requestMicros: 1_280_089,
  endsAt: END,
  fitsMaxTokens: 99_980,
  uncapped: false,
  ...over,
});

describe('the 402 message', () => {
  test('request over budget: what it would need, what is left, the max_tokens that fits', () => {
    expect(describeBudget(refusal())).toBe(
      `request over budget: this request would need up to 1.280089 USD and today's (UTC) daily budget of guardrail "pilot" has 0.999895 USD left (0.000105 of 1 USD counted, BYOK included); a max_tokens of at most 99980 would fit, or wait: it resets at 2026-11-28T00:00:00Z`,
    );
    expect(refusalReason(check())).toBe('request_over_budget');
  });

  test('without max_tokens: the least it needs; held by requests in flight: said, and what to do', () => {
    expect(describeBudget(refusal({ uncapped: true, requestMicros: 385, fitsMaxTokens: 0, heldMicros: 999_800 }))).toBe(
      `request over budget: this request needs at least 0.000385 USD (its prompt and a 16-token answer) and today's (UTC) daily budget of guardrail "pilot" has 0.000095 USD left (0.000105 of 1 USD counted, BYOK included, 0.9998 USD held by requests in flight); nothing fits while requests in flight hold the rest: retry when they finish, or wait: it resets at 2026-11-28T00:00:00Z`,
    );
    expect(describeBudget(refusal({ fitsMaxTokens: 0 }))).toContain(
      '; not even its prompt fits: shorten it, or wait: it resets at',
    );
  });

  test('budget reached: every request is refused until the reset; a lifetime budget never resets', () => {
    const reached = check({ countedMicros: 1_000_000, blocked: true, interval: 'monthly' });
    expect(refusalReason(reached)).toBe('budget_reached');
    expect(describeBudget(refusal({ check: reached, endsAt: Date.UTC(2026, 11, 1) }))).toBe(
      `budget reached: this month's (UTC) monthly budget of guardrail "pilot" has reached its limit (1 of 1 USD counted, BYOK included); requests under it are refused: it resets at 2026-12-01T00:00:00Z`,
    );
    expect(
      describeBudget(refusal({ check: check({ countedMicros: 2_000_000, interval: 'lifetime' }), endsAt: null })),
    ).toContain('requests under it are refused: a lifetime budget never resets');
  });

  test('no window id reaches the text', () => {
    for (const interval of ['daily', 'weekly', 'monthly', 'lifetime'] as const) {
      expect(describeBudget(refusal({ check: check({ interval }) }))).not.toMatch(/\b(d|w|m)20\d\d-|\blife\b|window/);
    }
  });
});
