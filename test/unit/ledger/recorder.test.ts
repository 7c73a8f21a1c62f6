// The recorder: one idempotent add per plan, and the BYOK fee as a write of its own, retried through an outage.
import { describe, expect, test } from '@jest/globals';
import { byokFeeMicros, FREE_ALLOWANCE_MICROS } from '../../../src/domain/billing.ts';
import { GateKeyCache } from '../../../src/ledger/gate/key-cache.ts';
import { createGateMetrics } from '../../../src/ledger/gate/metrics.ts';
import { FeeNotRecordedError, Recorder } from '../../../src/ledger/gate/recorder.ts';
import { spendRecordOf } from '../../../src/ledger/gate/spend-record.ts';
import { keySpace, readAccountMonth } from '../../../src/ledger/index.ts';
import { ctx, finished, ledgerAccount, MONDAY, USD } from '../../support/ledger-fixtures.ts';
import { switchedLedger } from './outage.ts';

const keys = keySpace();
const AT = MONDAY;
const ALLOWANCE = FREE_ALLOWANCE_MICROS['pay-as-you-go'];

function setup(stopped = () => false) {
  const ledger = switchedLedger();
  const recorder = new Recorder({
    ledger,
    metrics: createGateMetrics(undefined),
    retry: { minMs: 5, maxMs: 20 },
    stopped,
  });
  return { ledger, recorder, cache: new GateKeyCache(keys) };
}

describe('Recorder', () => {
  test('shared capacity is charged its list cost; BYOK inside the allowance is free, past it pays the fee on the part above', async () => {
    const { ledger, recorder, cache } = setup();
    const acc = ledgerAccount();
    expect(await recorder.apply(spendRecordOf(finished(ctx(acc, AT), 7 * USD, false), cache))).toEqual({
      feeMicros: 0,
      chargedMicros: 7 * USD,
      freeListCostMicros: 0,
    });
    expect(await recorder.apply(spendRecordOf(finished(ctx(acc, AT), ALLOWANCE - USD, true), cache))).toEqual({
      feeMicros: 0,
      chargedMicros: 0,
      freeListCostMicros: ALLOWANCE - USD,
    });
    // Straddles the allowance: 1 USD free, 3 USD billed.
    expect(await recorder.apply(spendRecordOf(finished(ctx(acc, AT), 4 * USD, true), cache))).toEqual({
      feeMicros: byokFeeMicros(3 * USD),
      chargedMicros: 0,
      freeListCostMicros: USD,
    });
    expect(await readAccountMonth(ledger, keys, acc.accountId, 'pay-as-you-go', AT)).toMatchObject({
      byokListCostMicros: ALLOWANCE + 3 * USD,
      feesMicros: byokFeeMicros(3 * USD),
      chargedMicros: 7 * USD,
    });
  });

  test('a plan applied twice (a replay) counts once and answers the same fee', async () => {
    const { ledger, recorder, cache } = setup();
    const acc = ledgerAccount();
    await recorder.apply(spendRecordOf(finished(ctx(acc, AT), ALLOWANCE, true), cache));
    const plan = spendRecordOf(finished(ctx(acc, AT), 2 * USD, true), cache);
    const first = await recorder.apply(plan);
    // Another request lands between the first application and the replay: the replay's fee still uses its own month-to-date.
    await recorder.apply(spendRecordOf(finished(ctx(acc, AT), 5 * USD, true), cache));
    expect(await recorder.apply(JSON.parse(JSON.stringify(plan)))).toEqual(first);
    expect(first.feeMicros).toBe(byokFeeMicros(2 * USD));
    expect(await readAccountMonth(ledger, keys, acc.accountId, 'pay-as-you-go', AT)).toMatchObject({
      byokListCostMicros: ALLOWANCE + 7 * USD,
      feesMicros: byokFeeMicros(2 * USD) + byokFeeMicros(5 * USD),
    });
  });

  test('the fee is retried alone through an outage (the list cost is not written again), and given up when the gate stops', async () => {
    let stop = false;
    const { ledger, recorder, cache } = setup(() => stop);
    const acc = ledgerAccount();
    await recorder.apply(spendRecordOf(finished(ctx(acc, AT), ALLOWANCE, true), cache));
    const inner = ledger.inner;
    // The list cost lands, then the ledger goes down before the fee: the add of the list cost passes, the fee waits.
    const add = inner.add.bind(inner);
    let calls = 0;
    inner.add = async (incs, settle, id) => {
      const out = await add(incs, settle, id);
      if (++calls === 1) ledger.down = true;
      return out;
    };
    const pending = recorder.apply(spendRecordOf(finished(ctx(acc, AT), 2 * USD, true), cache));
    await new Promise((r) => setTimeout(r, 60));
    expect(ledger.refused.add).toBeGreaterThan(1);
    ledger.down = false;
    expect((await pending).feeMicros).toBe(byokFeeMicros(2 * USD));
    expect(await readAccountMonth(ledger, keys, acc.accountId, 'pay-as-you-go', AT)).toMatchObject({
      byokListCostMicros: ALLOWANCE + 2 * USD,
      feesMicros: byokFeeMicros(2 * USD),
    });

    calls = 0;
    const cut = recorder.apply(spendRecordOf(finished(ctx(acc, AT), USD, true), cache));
    await new Promise((r) => setTimeout(r, 20));
    stop = true;
    await expect(cut).rejects.toBeInstanceOf(FeeNotRecordedError);
    ledger.down = false;
  });
});
