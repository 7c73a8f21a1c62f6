// The composed spend gate with a journal (embedded ledger behind an outage switch): a gate that dies without
// close() leaves its unrecorded spend and its unsettled holds in the journal, and the next gate on the same
// directory replays the records (each counted once) and releases the holds.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from '@jest/globals';
import { Registry } from 'prom-client';
import {
  createEmbeddedLedger,
  createSpendGate,
  keySpace,
  LedgerUnavailableError,
  readAccountMonth,
  windowsAt,
} from '../../../src/ledger/index.ts';
import { budgetGuardrail, ctx, finished, ledgerAccount, MONDAY, USD } from '../../support/ledger-fixtures.ts';
import { switchedLedger } from './outage.ts';

const keys = keySpace();
const AT = MONDAY;
const W = windowsAt(AT);
const dirs: string[] = [];
const tmp = () => {
  const d = mkdtempSync(join(tmpdir(), 'byok-gate-journal-'));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const metric = async (registry: Registry, name: string) =>
  Number((await registry.getMetricsAsJSON()).find((m) => m.name === name)?.values[0]?.value ?? 0);
const opts = (dir: string, registry = new Registry()) => ({
  registry,
  retryMinMs: 5,
  retryMaxMs: 20,
  journal: { dir, fsync: 'none' as const },
});

describe('spend gate with a journal', () => {
  test('records queued in an outage survive the process: the next gate replays them, and the ones that had landed count once', async () => {
    const dir = tmp();
    const ledger = switchedLedger();
    const acc = ledgerAccount();
    const dying = createSpendGate(ledger, opts(dir));
    // Landed before the outage (its ack may not be on disk yet: a replay must count nothing).
    await dying.record(finished(ctx(acc, AT), 1 * USD, false));
    ledger.down = true;
    for (let i = 0; i < 5; i++) void dying.record(finished(ctx(acc, AT), 2 * USD, false)).catch(() => {});
    await new Promise((r) => setTimeout(r, 20));
    expect(dying.pendingRecords()).toBe(5);
    // kill -9: no close(). The ledger comes back; a new gate opens the same journal.
    dying.abandon();
    ledger.down = false;
    const registry = new Registry();
    const next = createSpendGate(ledger, opts(dir, registry));
    const later = next.record(finished(ctx(acc, AT), 4 * USD, false));
    await next.drain(2000);
    await later;
    expect(await readAccountMonth(ledger, keys, acc.accountId, 'pay-as-you-go', AT)).toMatchObject({
      chargedMicros: 15 * USD,
    });
    expect(await metric(registry, 'byok_ledger_journal_replayed_total')).toBeGreaterThanOrEqual(5);
    await next.close();
    // Everything done: a third gate has nothing to replay.
    const third = createSpendGate(ledger, opts(dir, new Registry()));
    expect(third.pendingRecords()).toBe(0);
    await third.close();
  });

  test('the holds of requests the dead process never finished are released at start, not charged', async () => {
    const dir = tmp();
    const ledger = switchedLedger();
    const acc = ledgerAccount({ guardrails: [budgetGuardrail('g', 3, 'daily', false)], keyGuardrail: 'g' });
    const dying = createSpendGate(ledger, opts(dir));
    const admit = (gate: typeof dying, id: string) =>
      gate.admit({ ...ctx(acc, AT), maximum: { id, costMicros: 2 * USD, byokOnly: false } });
    expect((await admit(dying, 'gen-inflight')).allowed).toBe(true);
    // The budget has room for one 2 USD maximum: while the dead process's hold lives, the next request is refused.
    expect((await admit(dying, 'gen-next')).allowed).toBe(false);
    dying.abandon();
    const registry = new Registry();
    const next = createSpendGate(ledger, opts(dir, registry));
    await new Promise((r) => setTimeout(r, 20));
    expect(await metric(registry, 'byok_ledger_journal_holds_released_total')).toBe(1);
    expect((await admit(next, 'gen-after')).allowed).toBe(true);
    const hold = keys.hold(acc.accountId, 'guardrail', 'g', W.daily);
    expect(await readAccountMonth(ledger, keys, acc.accountId, 'pay-as-you-go', AT)).toMatchObject({
      chargedMicros: 0,
    });
    await next.release({ id: 'gen-after', amountMicros: 2 * USD, holdKeys: [hold] });
    await next.close();
  });

  test('close() in an outage keeps the waiting records in the journal (not dropped); without a journal they are dropped and counted', async () => {
    const dir = tmp();
    const ledger = switchedLedger();
    const acc = ledgerAccount();
    const registry = new Registry();
    const gate = createSpendGate(ledger, opts(dir, registry));
    ledger.down = true;
    const kept = gate.record(finished(ctx(acc, AT), 3 * USD, true)).catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 10));
    await gate.close();
    expect(await kept).toBeInstanceOf(LedgerUnavailableError);
    expect(await metric(registry, 'byok_ledger_records_dropped_total')).toBe(0);
    ledger.down = false;
    const next = createSpendGate(switchedLedger(ledger.inner), opts(dir));
    await next.drain(2000);
    expect(await readAccountMonth(ledger, keys, acc.accountId, 'pay-as-you-go', AT)).toMatchObject({
      byokListCostMicros: 3 * USD,
    });
    await next.close();

    const plain = switchedLedger();
    const noJournal = new Registry();
    const bare = createSpendGate(plain, { registry: noJournal, retryMinMs: 5, retryMaxMs: 20 });
    plain.down = true;
    const lost = bare.record(finished(ctx(acc, AT), USD, false)).catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 10));
    await bare.close();
    expect(await lost).toBeInstanceOf(LedgerUnavailableError);
    expect(await metric(noJournal, 'byok_ledger_records_dropped_total')).toBe(1);
  });

  test('a journal that cannot be written (its directory gone, the disk full) never costs the request its record', async () => {
    const dir = tmp();
    const ledger = switchedLedger();
    const acc = ledgerAccount();
    const registry = new Registry();
    // Every append starts a new segment (1-byte segments): with the directory gone, each one fails.
    const gate = createSpendGate(ledger, { registry, journal: { dir, fsync: 'none', segmentBytes: 1 } });
    rmSync(dir, { recursive: true, force: true });
    expect(await gate.record(finished(ctx(acc, AT), 2 * USD, false))).toMatchObject({ chargedMicros: 2 * USD });
    expect(await metric(registry, 'byok_ledger_journal_write_failures_total')).toBe(1);
    expect(await readAccountMonth(ledger, keys, acc.accountId, 'pay-as-you-go', AT)).toMatchObject({
      chargedMicros: 2 * USD,
    });
    await gate.close();
  });

  test('past the queue bound a journaled record stays on disk, not done: none is dropped, and all land once the ledger is back', async () => {
    const dir = tmp();
    const ledger = switchedLedger();
    const acc = ledgerAccount();
    const registry = new Registry();
    const gate = createSpendGate(ledger, { ...opts(dir, registry), maxPendingRecords: 2 });
    ledger.down = true;
    const outcomes = Array.from({ length: 6 }, () =>
      gate.record(finished(ctx(acc, AT), USD, false)).then(
        () => 'landed',
        (e: unknown) => (e as Error).message,
      ),
    );
    await new Promise((r) => setTimeout(r, 20));
    expect(gate.pendingRecords()).toBe(2);
    expect(await metric(registry, 'byok_ledger_journal_spilled_total')).toBe(4);
    expect(await metric(registry, 'byok_ledger_records_dropped_total')).toBe(0);
    ledger.down = false;
    await gate.drain(2000);
    // The spilled ones are queued again from the journal when the queue empties (two at a time: the bound).
    for (
      let i = 0;
      i < 100 && (await readAccountMonth(ledger, keys, acc.accountId, 'pay-as-you-go', AT)).chargedMicros < 6 * USD;
      i++
    )
      await new Promise((r) => setTimeout(r, 10));
    expect(await readAccountMonth(ledger, keys, acc.accountId, 'pay-as-you-go', AT)).toMatchObject({
      chargedMicros: 6 * USD,
    });
    const said = await Promise.all(outcomes);
    expect(said.filter((o) => o === 'landed')).toHaveLength(2);
    expect(said.filter((o) => o !== 'landed').every((o) => o.includes('kept in the journal'))).toBe(true);
    await gate.close();
    // Nothing left for the next process.
    const next = createSpendGate(ledger, opts(dir));
    expect(next.pendingRecords()).toBe(0);
    await next.close();
  });

  test('a record that landed just before a kill and is replayed long after the id retention counts once', async () => {
    const dir = tmp();
    let clock = AT.getTime();
    const inner = createEmbeddedLedger({ now: () => clock, idRetentionMs: 60_000 });
    const ledger = switchedLedger(inner);
    const acc = ledgerAccount();
    const dying = createSpendGate(ledger, { ...opts(dir), journal: { dir, fsync: 'none' as const, batchMs: 60_000 } });
    await dying.record(finished(ctx(acc, AT), 3 * USD, true));
    // Landed; its ack is still buffered when the process is killed.
    dying.abandon();
    clock += 10 * 60_000; // the id sets of that time have lapsed
    const next = createSpendGate(ledger, opts(dir));
    await next.drain(2000);
    expect(await readAccountMonth(ledger, keys, acc.accountId, 'pay-as-you-go', AT)).toMatchObject({
      byokListCostMicros: 3 * USD,
    });
    await next.close();
    // The segment is gone, and with it the keep marks: the next start has nothing to replay or keep.
    const third = createSpendGate(ledger, opts(dir));
    expect(third.pendingRecords()).toBe(0);
    await third.close();
  });
});
