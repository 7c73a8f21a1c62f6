// Redis unreachable: admit fails closed (or open when configured), record queues and replays in order when Redis
// is back, and a full queue drops the oldest record visibly (metric + rejected promise).
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { Registry } from 'prom-client';
import {
  createRedisLedger,
  createSpendGate,
  keySpace,
  LedgerUnavailableError,
  readAccountMonth,
  readWindows,
} from '../../../src/ledger/index.ts';
import { budgetGuardrail, ctx, finished, ledgerAccount, MONDAY, USD } from '../../support/ledger-fixtures.ts';
import { beforeCap } from '../../support/order.ts';
import { type RedisServer, startRedis } from '../../support/redis.ts';

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});
const keys = keySpace();

async function metric(registry: Registry, name: string, labels: Record<string, string> = {}): Promise<number> {
  const m = (await registry.getMetricsAsJSON()).find((x) => x.name === name);
  const v = m?.values.find((x) => Object.entries(labels).every(([k, val]) => x.labels[k] === val));
  return Number(v?.value ?? 0);
}

test('outage: budgeted requests are refused (fail closed), unbudgeted ones pass, records replay in order with exact fees', async () => {
  const registry = new Registry();
  const ledger = await createRedisLedger({ url: redis.url, commandTimeoutMs: 300 });
  const gate = createSpendGate(ledger, { registry, retryMinMs: 20, retryMaxMs: 200 });
  const budgeted = ledgerAccount({ guardrails: [budgetGuardrail('g', 100, 'daily', false)], keyGuardrail: 'g' });
  const free = ledgerAccount();
  try {
    await gate.record(finished(ctx(free, MONDAY), 24_999 * USD, true));
    await redis.kill();

    // Fails fast (300 ms command timeout), before a cap of 5 s fires: no hanging request.
    const refused = await beforeCap(5000, 'a hanging request', () =>
      gate.admit(ctx(budgeted, MONDAY)).catch((err: unknown) => err),
    );
    expect(refused).toBeInstanceOf(LedgerUnavailableError);
    expect((refused as LedgerUnavailableError).statusCode).toBe(503);
    expect(await gate.admit(ctx(free, MONDAY))).toEqual({ allowed: true, reservation: null });
    expect(await metric(registry, 'byok_ledger_unavailable_total', { op: 'admit' })).toBe(1);

    // Two BYOK records during the outage: queued, their promises pending.
    const a = gate.record(finished(ctx(free, MONDAY), 2 * USD, true));
    const b = gate.record(finished(ctx(free, MONDAY), 2 * USD, true));
    const c = gate.record(finished(ctx(budgeted, MONDAY), 7 * USD, false));
    await new Promise((r) => setTimeout(r, 300));
    expect(gate.pendingRecords()).toBe(3);
    expect(await metric(registry, 'byok_ledger_pending_records')).toBe(3);

    // Redis comes back empty (no persistence in the test server): the replay lands on it in order.
    await redis.start();
    await gate.drain(15_000);
    // Month-to-date on the fresh server starts at 0, so both are inside the allowance again; what matters is
    // that each replayed record computed its fee from the month-to-date at replay, in order.
    expect(await a).toEqual({ feeMicros: 0, chargedMicros: 0, freeListCostMicros: 2 * USD });
    expect(await b).toEqual({ feeMicros: 0, chargedMicros: 0, freeListCostMicros: 2 * USD });
    expect(await c).toEqual({ feeMicros: 0, chargedMicros: 7 * USD, freeListCostMicros: 0 });
    expect(await readAccountMonth(ledger, keys, free.accountId, 'pay-as-you-go', MONDAY)).toMatchObject({
      byokListCostMicros: 4 * USD,
    });
    const spend = await readWindows(
      ledger,
      keys,
      budgeted.accountId,
      [{ scope: 'guardrail', id: 'g', intervals: ['daily'] }],
      MONDAY,
    );
    expect(spend.get('guardrail/g')?.daily?.nonByokMicros).toBe(7 * USD);
    expect(await gate.admit(ctx(budgeted, MONDAY))).toEqual({ allowed: true, reservation: null });
    expect(await metric(registry, 'byok_ledger_records_dropped_total')).toBe(0);
  } finally {
    await gate.close();
  }
});

test('fail open when configured: budgeted requests pass unchecked and are counted', async () => {
  const registry = new Registry();
  const ledger = await createRedisLedger({ url: redis.url, commandTimeoutMs: 300 });
  const gate = createSpendGate(ledger, { registry, admitWhenUnavailable: 'open' });
  const budgeted = ledgerAccount({ guardrails: [budgetGuardrail('g', 1, 'daily', false)], keyGuardrail: 'g' });
  try {
    await gate.record(finished(ctx(budgeted, MONDAY), 5 * USD, false));
    expect((await gate.admit(ctx(budgeted, MONDAY))).allowed).toBe(false);
    await redis.kill();
    expect(await gate.admit(ctx(budgeted, MONDAY))).toEqual({ allowed: true, reservation: null });
    expect(await metric(registry, 'byok_ledger_admitted_unchecked_total')).toBe(1);
  } finally {
    await redis.start();
    await gate.close();
  }
});

test('a full replay queue drops the oldest record visibly; close rejects what never landed', async () => {
  const registry = new Registry();
  const ledger = await createRedisLedger({ url: redis.url, commandTimeoutMs: 300 });
  const gate = createSpendGate(ledger, { registry, maxPendingRecords: 2, retryMinMs: 50, retryMaxMs: 100 });
  const acc = ledgerAccount();
  await redis.kill();
  try {
    const first = gate.record(finished(ctx(acc, MONDAY), 1 * USD, false));
    const firstSettled = first.then(
      () => 'resolved',
      (err: unknown) => (err instanceof LedgerUnavailableError ? 'dropped' : 'other'),
    );
    const second = gate.record(finished(ctx(acc, MONDAY), 1 * USD, false)).catch((err: unknown) => err);
    const third = gate.record(finished(ctx(acc, MONDAY), 1 * USD, false)).catch((err: unknown) => err);
    expect(await firstSettled).toBe('dropped');
    expect(gate.pendingRecords()).toBe(2);
    await gate.close();
    expect(await second).toBeInstanceOf(LedgerUnavailableError);
    expect(await third).toBeInstanceOf(LedgerUnavailableError);
    expect(await metric(registry, 'byok_ledger_records_dropped_total')).toBe(3);
  } finally {
    await redis.start();
  }
});
