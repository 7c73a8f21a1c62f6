// The replay queue: records wait in order through an outage, land with backoff, and a full queue drops the oldest visibly.
import { describe, expect, test } from '@jest/globals';
import { Registry } from 'prom-client';
import { GateKeyCache } from '../../../src/ledger/gate/key-cache.ts';
import { createGateMetrics } from '../../../src/ledger/gate/metrics.ts';
import { Recorder } from '../../../src/ledger/gate/recorder.ts';
import { ReplayQueue } from '../../../src/ledger/gate/replay-queue.ts';
import { type SpendRecord, spendRecordOf } from '../../../src/ledger/gate/spend-record.ts';
import { keySpace, LedgerUnavailableError, readAccountMonth } from '../../../src/ledger/index.ts';
import { ctx, finished, ledgerAccount, MONDAY, USD } from '../../support/ledger-fixtures.ts';
import { switchedLedger } from './outage.ts';

const keys = keySpace();
const AT = MONDAY;

async function metric(registry: Registry, name: string): Promise<number> {
  return Number((await registry.getMetricsAsJSON()).find((m) => m.name === name)?.values[0]?.value ?? 0);
}

function setup(max = 100) {
  const registry = new Registry();
  const metrics = createGateMetrics(registry);
  const ledger = switchedLedger();
  const recorder = new Recorder({ ledger, metrics, retry: { minMs: 5, maxMs: 20 }, stopped: () => false });
  const applied: string[] = [];
  const settled: [string, boolean][] = [];
  const queue = new ReplayQueue({
    apply: async (plan) => {
      const spend = await recorder.apply(plan);
      applied.push(plan.id);
      return spend;
    },
    settled: (plan, landed) => settled.push([plan.id, landed]),
    max,
    retry: { minMs: 5, maxMs: 20 },
    metrics,
  });
  return { registry, ledger, queue, applied, settled, cache: new GateKeyCache(keys) };
}

describe('ReplayQueue', () => {
  test('records wait through an outage and land in order once the ledger is back; drain resolves then', async () => {
    const { registry, ledger, queue, applied, settled, cache } = setup();
    const acc = ledgerAccount();
    ledger.down = true;
    const plans: SpendRecord[] = [1, 2, 3].map((n) =>
      spendRecordOf({ ...finished(ctx(acc, AT), n * USD, false), generationId: `gen-q${n}` }, cache),
    );
    const results = plans.map((p) => queue.enqueue(p));
    await new Promise((r) => setTimeout(r, 40));
    expect(queue.size()).toBe(3);
    expect(await metric(registry, 'byok_ledger_pending_records')).toBe(3);
    expect(ledger.refused.add).toBeGreaterThanOrEqual(2); // the head was tried again, with backoff
    ledger.down = false;
    await queue.drain(2000);
    expect((await Promise.all(results)).map((s) => s.chargedMicros)).toEqual([USD, 2 * USD, 3 * USD]);
    expect(applied).toEqual(['gen-q1', 'gen-q2', 'gen-q3']);
    expect(settled).toEqual([
      ['gen-q1', true],
      ['gen-q2', true],
      ['gen-q3', true],
    ]);
    expect(await readAccountMonth(ledger, keys, acc.accountId, 'pay-as-you-go', AT)).toMatchObject({
      chargedMicros: 6 * USD,
    });
    expect(await metric(registry, 'byok_ledger_pending_records')).toBe(0);
  });

  test('past its bound the oldest record is dropped: counted, rejected, reported as not landed', async () => {
    const { registry, ledger, queue, settled, cache } = setup(2);
    const acc = ledgerAccount();
    ledger.down = true;
    const [a, b, c] = [1, 2, 3].map((n) =>
      queue
        .enqueue(spendRecordOf({ ...finished(ctx(acc, AT), USD, false), generationId: `gen-d${n}` }, cache))
        .catch((e: unknown) => e),
    );
    expect(await a).toBeInstanceOf(LedgerUnavailableError);
    expect(settled).toEqual([['gen-d1', false]]);
    expect(await metric(registry, 'byok_ledger_records_dropped_total')).toBe(1);
    const left = await queue.close(() => new LedgerUnavailableError('closed'));
    expect(left.map((w) => w.plan.id)).toEqual(['gen-d2', 'gen-d3']);
    expect(await b).toBeInstanceOf(LedgerUnavailableError);
    expect(await c).toBeInstanceOf(LedgerUnavailableError);
  });

  test('a record refused for good (not an outage) leaves the queue and the ones behind it land', async () => {
    const { ledger, queue, settled, cache } = setup();
    const acc = ledgerAccount();
    ledger.down = true;
    const bad = spendRecordOf(finished(ctx(acc, AT), USD, false), cache);
    bad.increments[0]!.by = Number.MAX_SAFE_INTEGER + 2; // the ledger refuses it (RangeError)
    const failed = queue.enqueue(bad).catch((e: unknown) => e);
    const good = queue.enqueue(spendRecordOf(finished(ctx(acc, AT), USD, false), cache));
    ledger.down = false;
    await queue.drain(2000);
    expect(await failed).toBeInstanceOf(RangeError);
    expect((await good).chargedMicros).toBe(USD);
    expect(settled.map(([, landed]) => landed)).toEqual([false, true]);
  });

  test('drains in chunks sent in queue order; records of a chunk that met the outage stay, in order, for the next try', async () => {
    const { ledger, queue, cache } = setup(1000);
    const acc = ledgerAccount();
    ledger.down = true;
    const plans = Array.from({ length: 600 }, (_, n) =>
      spendRecordOf({ ...finished(ctx(acc, AT), 100 * USD, true), generationId: `gen-c${n}` }, cache),
    );
    const results = plans.map((p) => queue.enqueue(p));
    // The ledger comes back for the first 300 adds only, then goes down again mid-chunk.
    const inner = ledger.inner;
    const add = inner.add.bind(inner);
    let adds = 0;
    inner.add = (incs, settle, id) => {
      if (++adds === 300) ledger.down = true;
      return add(incs, settle, id);
    };
    ledger.down = false;
    await new Promise((r) => setTimeout(r, 40));
    expect(queue.size()).toBeGreaterThan(0);
    expect(queue.size()).toBeLessThan(600);
    ledger.down = false;
    inner.add = add;
    await queue.drain(2000);
    // Each BYOK record saw the month-to-date of exactly the records before it in the queue: the 25,000 USD allowance
    // covers the first 250 of 100 USD, every later one pays the fee on all of it. In order, once each.
    const spends = await Promise.all(results);
    expect(spends.map((s) => s.freeListCostMicros)).toEqual(spends.map((_, i) => (i < 250 ? 100 * USD : 0)));
    expect(spends.map((s) => s.feeMicros > 0)).toEqual(spends.map((_, i) => i >= 250));
    expect(await readAccountMonth(ledger, keys, acc.accountId, 'pay-as-you-go', AT)).toMatchObject({
      byokListCostMicros: 60_000 * USD,
    });
  });
});
