// Admission: check-and-reserve against every budget with a limit (embedded ledger), the read-only check without a
// maximum, and the outage rule (closed by default, open when configured; a timed-out reservation is given up).
import { describe, expect, test } from '@jest/globals';
import { Registry } from 'prom-client';
import type { Reservation } from '../../../src/contract/spend-gate.ts';
import { Admission, holdChecks } from '../../../src/ledger/gate/admission.ts';
import { GateKeyCache } from '../../../src/ledger/gate/key-cache.ts';
import { createGateMetrics } from '../../../src/ledger/gate/metrics.ts';
import { keySpace, LedgerUnavailableError, windowsAt } from '../../../src/ledger/index.ts';
import { budgetGuardrail, ctx, ledgerAccount, USD, WS1 } from '../../support/ledger-fixtures.ts';
import { switchedLedger } from './outage.ts';

const keys = keySpace();
const AT = new Date('2026-11-23T10:00:00Z');
const W = windowsAt(AT);

function setup(failOpen = false) {
  const registry = new Registry();
  const ledger = switchedLedger();
  const held: Reservation[] = [];
  const cache = new GateKeyCache(keys);
  const admission = new Admission({
    ledger,
    keys: cache,
    metrics: createGateMetrics(registry),
    failOpen,
    reservationTtlMs: 60_000,
    retry: { minMs: 5, maxMs: 20 },
    stopped: () => false,
    held: (r) => held.push(r),
  });
  return { registry, ledger, admission, held, cache };
}

describe('Admission', () => {
  // A guardrail of 10 USD excluding BYOK, a workspace of 4 USD a day including it.
  const acc = ledgerAccount({
    guardrails: [budgetGuardrail('g', 10, 'daily', false)],
    keyGuardrail: 'g',
    workspace: { budgets: [{ interval: 'daily', limitUsd: 4 }], includeByokInBudgets: true },
  });

  test('holdChecks: one check per budget with a limit; a BYOK-only request is checked, not held, where BYOK is excluded', () => {
    const { checks, meta } = holdChecks(
      { ...ctx(acc, AT), maximum: { id: 'x', costMicros: USD, byokOnly: true } },
      { id: 'x', costMicros: USD, byokOnly: true },
      new GateKeyCache(keys),
    );
    expect(meta.map((m) => [m.scope, m.id, m.interval, m.includesByok])).toEqual([
      ['guardrail', 'g', 'daily', false],
      ['workspace', WS1, 'daily', true],
    ]);
    expect(checks[0]).toEqual({
      countedKeys: [keys.budget(acc.accountId, 'guardrail', 'g', W.daily, 'nonbyok')],
      holdKey: keys.hold(acc.accountId, 'guardrail', 'g', W.daily),
      limitMicros: 10 * USD,
      amount: 0,
    });
    expect(checks[1]!.amount).toBe(USD);
    expect(checks[1]!.countedKeys).toHaveLength(2);
  });

  test('reserves the maximum until the budget is full, tells the journal of each hold, and names the budget that refused', async () => {
    const { admission, held } = setup();
    const max = (id: string) => ({ ...ctx(acc, AT), maximum: { id, costMicros: 1.5 * USD, byokOnly: false } });
    const a = await admission.admit(max('gen-1'));
    const b = await admission.admit(max('gen-2'));
    expect(a.allowed && b.allowed).toBe(true);
    expect(held.map((r) => r.id)).toEqual(['gen-1', 'gen-2']);
    expect(held[0]).toEqual({
      id: 'gen-1',
      amountMicros: 1.5 * USD,
      holdKeys: [
        keys.hold(acc.accountId, 'guardrail', 'g', W.daily),
        keys.hold(acc.accountId, 'workspace', WS1, W.daily),
      ],
    });
    // 3 USD held of the workspace's 4: no room for 1.5 more.
    const c = await admission.admit(max('gen-3'));
    expect(c).toMatchObject({
      allowed: false,
      blockedBy: {
        scope: 'workspace',
        id: WS1,
        interval: 'daily',
        limitMicros: 4 * USD,
        countedMicros: 0,
        blocked: false,
      },
      heldMicros: 3 * USD,
      requestMicros: 1.5 * USD,
    });
    expect(held).toHaveLength(2);
  });

  test('without a maximum: the current windows against the limits, nothing held; no budget, no read', async () => {
    const { ledger, admission, held } = setup();
    expect(await admission.admit(ctx(acc, AT))).toEqual({ allowed: true, reservation: null });
    await ledger.add([
      { key: keys.budget(acc.accountId, 'workspace', WS1, W.daily, 'byok'), by: 4 * USD, expiresAt: null },
    ]);
    expect(await admission.admit(ctx(acc, AT))).toMatchObject({
      allowed: false,
      blockedBy: { scope: 'workspace', countedMicros: 4 * USD, blocked: true },
    });
    ledger.down = true;
    expect(await admission.admit(ctx(ledgerAccount(), AT))).toEqual({ allowed: true, reservation: null });
    expect(ledger.refused.read).toBeUndefined();
    expect(held).toEqual([]);
  });

  test('ledger unreachable: closed by default (the error reaches the caller), and the timed-out reservation is released once it is back', async () => {
    const { registry, ledger, admission } = setup();
    ledger.down = true;
    await expect(
      admission.admit({ ...ctx(acc, AT), maximum: { id: 'gen-t', costMicros: USD, byokOnly: false } }),
    ).rejects.toBeInstanceOf(LedgerUnavailableError);
    await expect(admission.admit(ctx(acc, AT))).rejects.toBeInstanceOf(LedgerUnavailableError);
    const unavailable = (await registry.getMetricsAsJSON()).find((m) => m.name === 'byok_ledger_unavailable_total');
    expect(unavailable?.values.find((v) => v.labels.op === 'admit')?.value).toBe(2);
    ledger.down = false;
    await new Promise((r) => setTimeout(r, 50)); // the background release retries with backoff
    // The id is remembered as released: the reservation, run late (a stall), holds nothing.
    await expect(
      ledger.reserve({
        id: 'gen-t',
        checks: [
          {
            countedKeys: [],
            holdKey: keys.hold(acc.accountId, 'guardrail', 'g', W.daily),
            limitMicros: USD,
            amount: 1,
          },
        ],
        ttlMs: 1000,
      }),
    ).rejects.toThrow(/already settled or released/);
  });

  test('fail open when configured: admitted unchecked, counted', async () => {
    const { registry, ledger, admission } = setup(true);
    ledger.down = true;
    expect(
      await admission.admit({ ...ctx(acc, AT), maximum: { id: 'gen-o', costMicros: USD, byokOnly: false } }),
    ).toEqual({ allowed: true, reservation: null });
    expect(
      (await registry.getMetricsAsJSON()).find((m) => m.name === 'byok_ledger_admitted_unchecked_total')?.values[0]
        ?.value,
    ).toBe(1);
  });
});
