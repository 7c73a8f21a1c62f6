// BYOK fee, free allowance, exact money, and budget decisions (rule 12).
import { describe, expect, test } from '@jest/globals';
import fc from 'fast-check';
import {
  budgetContributionMicros,
  budgetScopes,
  byokCharge,
  byokFee,
  byokFeeMicros,
  createCatalog,
  decideBudget,
  isApiKeyLive,
  listCostMicros,
  microsToUsd,
  prepareGuardrail,
  prepareWorkspace,
  priceMicros,
  usdToMicros,
} from '../../../src/domain/index.ts';
import { account, ep, guardrail, K1, K2, WS1, workspace } from '../../support/fixtures/domain.ts';

describe('money', () => {
  test('USD to micros is exact for decimal strings and for numbers via their shortest decimal form', () => {
    expect(usdToMicros('0.01')).toBe(10_000);
    expect(usdToMicros(0.0000025)).toBe(3); // half up at the micro, not 2 from binary 2.4999...
    expect(usdToMicros('0.0000024')).toBe(2);
    expect(usdToMicros(1e-7)).toBe(0);
    expect(usdToMicros('25000')).toBe(25_000_000_000);
    expect(usdToMicros(' 1.5e3 ')).toBe(1_500_000_000);
    expect(usdToMicros('-0.5')).toBe(-500_000);
  });
  test('invalid amounts throw', () => {
    expect(() => usdToMicros(Number.NaN)).toThrow(RangeError);
    expect(() => usdToMicros(Number.POSITIVE_INFINITY)).toThrow(RangeError);
    expect(() => usdToMicros('1,5')).toThrow(RangeError);
    expect(() => usdToMicros('1e40')).toThrow(RangeError);
  });
  test('list cost per token and per request', () => {
    expect(
      listCostMicros(
        priceMicros({ kind: 'per-token', promptUsdPerMillionTokens: '2.5', completionUsdPerMillionTokens: 10 }),
        { promptTokens: 1000, completionTokens: 500 },
      ),
    ).toBe(2_500 + 5_000);
    expect(
      listCostMicros(priceMicros({ kind: 'per-request', usdPerRequest: '0.04' }), {
        promptTokens: 0,
        completionTokens: 0,
      }),
    ).toBe(40_000);
  });
});

describe('BYOK fee', () => {
  test('5% of the list cost', () => {
    expect(byokFee(1)).toBe(0.05);
    expect(byokFee('0.01')).toBe(0.0005);
    expect(byokFee(0.03)).toBe(0.0015); // 0.03 * 0.05 in floating point is 0.0015000000000000002
    expect(byokFeeMicros(10)).toBe(1); // 0.5 micro rounds half up
    expect(byokFeeMicros(9)).toBe(0);
  });
  test('5% of cents never drifts when summed', () => {
    let total = 0;
    for (let i = 0; i < 10_000; i++) total += byokFeeMicros(usdToMicros(0.01));
    expect(total).toBe(5_000_000);
    expect(microsToUsd(total)).toBe(5);
  });
  test('fee of a whole-cent amount is exact (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10_000_000 }), (cents) => {
        expect(byokFeeMicros(usdToMicros((cents / 100).toFixed(2)))).toBe(cents * 500);
      }),
    );
  });
});

describe('free monthly allowance', () => {
  test('below the allowance no fee is charged', () => {
    expect(
      byokCharge({ plan: 'pay-as-you-go', monthToDateListCostMicros: 100_000_000, requestListCostMicros: 10_000_000 }),
    ).toMatchObject({ feeMicros: 0, billableListCostMicros: 0 });
  });
  test('a request straddling the allowance pays only for the part above it', () => {
    expect(
      byokCharge({
        plan: 'pay-as-you-go',
        monthToDateListCostMicros: usdToMicros('24999.99'),
        requestListCostMicros: usdToMicros('0.05'),
      }),
    ).toEqual({
      freeListCostMicros: 10_000,
      billableListCostMicros: 40_000,
      feeMicros: 2_000,
      feeUsd: 0.002,
      allowanceRemainingMicros: 0,
    });
  });
  test('above the allowance the whole request is billable; enterprise allows 200,000 USD', () => {
    expect(
      byokCharge({ plan: 'pay-as-you-go', monthToDateListCostMicros: 30_000_000_000, requestListCostMicros: 2_000_000 })
        .feeUsd,
    ).toBe(0.1);
    expect(
      byokCharge({ plan: 'enterprise', monthToDateListCostMicros: 30_000_000_000, requestListCostMicros: 2_000_000 })
        .feeUsd,
    ).toBe(0);
    expect(
      byokCharge({ plan: 'enterprise', monthToDateListCostMicros: 199_999_000_000, requestListCostMicros: 3_000_000 }),
    ).toMatchObject({
      billableListCostMicros: 2_000_000,
      feeMicros: 100_000,
    });
  });
  test('negative amounts are rejected', () => {
    expect(() =>
      byokCharge({ plan: 'enterprise', monthToDateListCostMicros: 0, requestListCostMicros: -1_000_000 }),
    ).toThrow(RangeError);
  });
});

describe('budgets (rule 12)', () => {
  const spend = { nonByokMicros: 60_000_000, byokMicros: 50_000_000 };
  test('BYOK spend is excluded by default', () => {
    const g = guardrail('g', {}, { limitUsd: 100, resetInterval: 'monthly', includeByokInBudgets: false });
    const d = decideBudget({ guardrails: [{ guardrail: prepareGuardrail(g), spend }], workspace: null });
    expect(d.allowed).toBe(true);
    expect(d.checks).toEqual([
      {
        scope: 'guardrail',
        id: 'g',
        name: 'g',
        interval: 'monthly',
        limitMicros: 100_000_000,
        countedMicros: 60_000_000,
        includesByok: false,
        blocked: false,
      },
    ]);
  });
  test('with include_byok_in_budgets the would-have-charged amount counts and the combined total blocks', () => {
    const g = guardrail('g', {}, { limitUsd: 100, resetInterval: 'weekly', includeByokInBudgets: true });
    const d = decideBudget({ guardrails: [{ guardrail: prepareGuardrail(g), spend }], workspace: null });
    expect(d.allowed).toBe(false);
    expect(d.blockedBy).toMatchObject({ countedMicros: 110_000_000, blocked: true });
  });
  test('blocked when the total reaches the limit exactly', () => {
    const g = guardrail('g', {}, { limitUsd: 110, resetInterval: 'daily', includeByokInBudgets: true });
    expect(decideBudget({ guardrails: [{ guardrail: prepareGuardrail(g), spend }], workspace: null }).allowed).toBe(
      false,
    );
    const g2 = guardrail('g', {}, {
      limitUsd: '110.000001',
      resetInterval: 'daily',
      includeByokInBudgets: true,
    } as never);
    expect(decideBudget({ guardrails: [{ guardrail: prepareGuardrail(g2), spend }], workspace: null }).allowed).toBe(
      true,
    );
  });
  test('the flag has no effect without a budget limit', () => {
    const g = guardrail('g', { requireZdr: true });
    expect(decideBudget({ guardrails: [{ guardrail: prepareGuardrail(g), spend }], workspace: null })).toEqual({
      allowed: true,
      checks: [],
      blockedBy: null,
    });
  });
  test('a workspace budget has one flag for the daily, weekly, monthly and lifetime intervals', () => {
    const budgets = [
      { limitUsd: 100, interval: 'daily' as const },
      { limitUsd: 1000, interval: 'weekly' as const },
      { limitUsd: 105, interval: 'monthly' as const },
      { limitUsd: 10_000, interval: 'lifetime' as const },
    ];
    const perInterval = { daily: spend, weekly: spend, monthly: spend, lifetime: spend };
    const off = decideBudget({
      guardrails: [],
      workspace: { workspace: prepareWorkspace(workspace(WS1, { budgets })), spend: perInterval },
    });
    expect(off.allowed).toBe(true);
    expect(off.checks.map((c) => c.countedMicros)).toEqual([60e6, 60e6, 60e6, 60e6]);
    const on = decideBudget({
      guardrails: [],
      workspace: {
        workspace: prepareWorkspace(workspace(WS1, { budgets, includeByokInBudgets: true })),
        spend: perInterval,
      },
    });
    expect(on.checks.map((c) => [c.interval, c.countedMicros, c.blocked])).toEqual([
      ['daily', 110e6, true],
      ['weekly', 110e6, false],
      ['monthly', 110e6, true],
      ['lifetime', 110e6, false],
    ]);
    expect(on.blockedBy?.interval).toBe('daily');
  });
  test('what a finished request adds to a budget', () => {
    expect(
      budgetContributionMicros({
        isByok: false,
        chargedMicros: 1_200_000,
        wouldHaveChargedMicros: 0,
        includeByokInBudgets: false,
      }),
    ).toBe(1_200_000);
    expect(
      budgetContributionMicros({
        isByok: true,
        chargedMicros: 60_000,
        wouldHaveChargedMicros: 1_200_000,
        includeByokInBudgets: false,
      }),
    ).toBe(0);
    expect(
      budgetContributionMicros({
        isByok: true,
        chargedMicros: 60_000,
        wouldHaveChargedMicros: 1_200_000,
        includeByokInBudgets: true,
      }),
    ).toBe(1_200_000);
  });
  test('budget scopes: the API key guardrail and the workspace default guardrail (member without own guardrail)', () => {
    const acc = account([], {
      guardrails: [guardrail('g-def'), guardrail('g-key'), guardrail('g-u2')],
      workspaces: [
        workspace(WS1, {
          defaultGuardrailId: 'g-def',
          members: [
            { userId: 'u1', guardrailId: null },
            { userId: 'u2', guardrailId: 'g-u2' },
          ],
        }),
      ],
      apiKeys: [
        { hash: K1, workspaceId: WS1, guardrailId: 'g-key', expiresAt: null },
        { hash: K2, workspaceId: WS1, guardrailId: 'g-def', expiresAt: null },
      ],
    });
    expect(budgetScopes(acc, { apiKeyHash: K1, workspaceId: WS1, userId: 'u1' }).guardrails.map((g) => g.id)).toEqual([
      'g-key',
      'g-def',
    ]);
    expect(budgetScopes(acc, { apiKeyHash: K1, workspaceId: WS1, userId: 'u2' }).guardrails.map((g) => g.id)).toEqual([
      'g-key',
      'g-u2',
    ]);
    // The same guardrail reached twice is checked once.
    expect(budgetScopes(acc, { apiKeyHash: K2, workspaceId: WS1, userId: null }).guardrails.map((g) => g.id)).toEqual([
      'g-def',
    ]);
    expect(budgetScopes(acc, { apiKeyHash: K1, workspaceId: 'nope', userId: 'u1' })).toEqual({
      guardrails: [expect.objectContaining({ id: 'g-key' })],
      workspace: null,
    });
  });
});

describe('catalog', () => {
  test('rejects duplicates and unknown providers', () => {
    expect(() => createCatalog([{ model: 'm', endpoints: [ep('a', 'openai'), ep('a', 'openai')] }])).toThrow(TypeError);
    expect(() => createCatalog([{ model: 'm', endpoints: [ep('a', 'nope' as never)] }])).toThrow(TypeError);
    expect(() =>
      createCatalog([
        { model: 'm', endpoints: [] },
        { model: 'm', endpoints: [] },
      ]),
    ).toThrow(TypeError);
  });
});

describe('isApiKeyLive', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');
  test.each([
    [{}, true],
    [{ expiresAt: null }, true],
    [{ disabled: true }, false],
    [{ expiresAt: '2026-01-01T00:00:01Z' }, true],
    [{ expiresAt: '2026-01-01T00:00:00Z' }, false],
    [{ expiresAt: 'not a date' }, false],
  ])('%j -> %s', (key, live) => {
    expect(isApiKeyLive(key, now)).toBe(live);
  });
});
