// The spend record: what one finished request writes, as plain data (it is journaled and may be applied by a later process).
import { describe, expect, test } from '@jest/globals';
import { GateKeyCache } from '../../../src/ledger/gate/key-cache.ts';
import { spendRecordOf } from '../../../src/ledger/gate/spend-record.ts';
import { keySpace, windowsAt } from '../../../src/ledger/index.ts';
import { budgetGuardrail, ctx, finished, ledgerAccount, USD, WS1 } from '../../support/ledger-fixtures.ts';

const keys = keySpace();
const AT = new Date('2026-11-23T10:00:00Z');
const W = windowsAt(AT);

describe('spendRecordOf', () => {
  const acc = ledgerAccount({ guardrails: [budgetGuardrail('g', 100, 'daily', false)], keyGuardrail: 'g' });

  test('shared capacity: the nonbyok part in every window of every scope, then the month charge', () => {
    const plan = spendRecordOf(
      { ...finished(ctx(acc, AT), 3 * USD, false), generationId: 'gen-a' },
      new GateKeyCache(keys),
    );
    expect(plan.id).toBe('gen-a');
    expect(plan.byok).toBeUndefined();
    expect(plan.chargedMicros).toBe(3 * USD);
    expect(plan.settle).toBeUndefined();
    // Guardrail g and the workspace, 4 windows each, nonbyok only; the account's charged meter last.
    expect(plan.increments).toHaveLength(9);
    expect(plan.increments[0]).toEqual({
      key: keys.budget(acc.accountId, 'guardrail', 'g', W.daily, 'nonbyok'),
      by: 3 * USD,
      expiresAt: keys.expiresAt(W.daily),
    });
    expect(plan.increments.slice(4, 8).map((i) => i.key)).toEqual(
      (['daily', 'weekly', 'monthly', 'lifetime'] as const).map((i) =>
        keys.budget(acc.accountId, 'workspace', WS1, W[i], 'nonbyok'),
      ),
    );
    expect(plan.increments.at(-1)).toEqual({
      key: keys.account(acc.accountId, W.monthly, 'charged'),
      by: 3 * USD,
      expiresAt: keys.expiresAt(W.monthly),
    });
  });

  test('BYOK: the month list cost first (its total gives the month-to-date), the byok part in every window, the fee key', () => {
    const plan = spendRecordOf(finished(ctx(acc, AT), 2 * USD, true), new GateKeyCache(keys));
    expect(plan.chargedMicros).toBe(0);
    expect(plan.increments[0]).toEqual({
      key: keys.account(acc.accountId, W.monthly, 'byok_list'),
      by: 2 * USD,
      expiresAt: keys.expiresAt(W.monthly),
    });
    expect(plan.increments.slice(1).every((i) => i.key.endsWith(':byok') && i.by === 2 * USD)).toBe(true);
    expect(plan.increments).toHaveLength(9);
    expect(plan.byok).toEqual({
      plan: 'pay-as-you-go',
      listCostMicros: 2 * USD,
      feeKey: keys.account(acc.accountId, W.monthly, 'fee'),
      feeExpiresAt: keys.expiresAt(W.monthly),
    });
  });

  test('the reservation is settled in the same write; a plan survives JSON unchanged (the journal)', () => {
    const reservation = {
      id: 'gen-r',
      amountMicros: 5 * USD,
      holdKeys: [keys.hold(acc.accountId, 'guardrail', 'g', W.daily)],
    };
    const plan = spendRecordOf(
      { ...finished(ctx(acc, AT), 1 * USD, true), generationId: 'gen-r', reservation },
      new GateKeyCache(keys),
    );
    expect(plan.settle).toEqual({ id: 'gen-r', amount: 5 * USD, holdKeys: reservation.holdKeys });
    expect(JSON.parse(JSON.stringify(plan))).toEqual(plan);
    // A reservation that held nothing (no budget with a limit took a hold) settles nothing.
    expect(
      spendRecordOf(
        { ...finished(ctx(acc, AT), 1, false), reservation: { ...reservation, holdKeys: [] } },
        new GateKeyCache(keys),
      ).settle,
    ).toBeUndefined();
  });

  test('a zero cost writes nothing to the windows; a negative or fractional one is refused', () => {
    const plan = spendRecordOf(finished(ctx(acc, AT), 0, false), new GateKeyCache(keys));
    expect(plan.increments).toEqual([
      { key: keys.account(acc.accountId, W.monthly, 'charged'), by: 0, expiresAt: keys.expiresAt(W.monthly) },
    ]);
    expect(() => spendRecordOf(finished(ctx(acc, AT), -1, false), new GateKeyCache(keys))).toThrow(RangeError);
    expect(() => spendRecordOf(finished(ctx(acc, AT), 0.5, true), new GateKeyCache(keys))).toThrow(RangeError);
  });
});
