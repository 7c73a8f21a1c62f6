// every record and reservation is idempotent by its generation id (embedded ledger; the Redis scripts
// are exercised against a real redis-server in test/integration/ledger/exactly-once.test.ts).
import { describe, expect, test } from '@jest/globals';
import {
  createEmbeddedLedger,
  createSpendGate,
  ID_RETENTION_MS,
  keySpace,
  RESERVATION_TTL_MS,
  ReservationSettledError,
  readAccountMonth,
  readWindows,
  windowOf,
} from '../../../src/ledger/index.ts';
import { idSets } from '../../../src/ledger/keys.ts';
import type { HoldCheck } from '../../../src/ledger/ledger.ts';
import { ctx, finished, ledgerAccount, MONDAY, USD, WS1 } from '../../support/ledger-fixtures.ts';

const keys = keySpace();
const day = windowOf('daily', MONDAY);
const counter = (account: string, part: 'nonbyok' | 'byok' = 'nonbyok') =>
  keys.budget(account, 'workspace', WS1, day, part);
const holdOf = (account: string) => keys.hold(account, 'workspace', WS1, day);
/** A budget of `limit` micros on one account's daily workspace window, this request holding `amount`. */
const check = (account: string, limit: number, amount: number): HoldCheck => ({
  countedKeys: [counter(account)],
  holdKey: holdOf(account),
  limitMicros: limit,
  amount,
});

describe('records count once per generation id', () => {
  test('the same record twice counts once, and the replay learns the total its first application returned', async () => {
    const ledger = createEmbeddedLedger();
    const inc = (by: number) => [
      { key: counter('a'), by, expiresAt: null },
      { key: counter('a', 'byok'), by: 1, expiresAt: null },
    ];
    expect(await ledger.add(inc(100), undefined, 'gen-1')).toEqual([100, 1]);
    expect(await ledger.add(inc(5), undefined, 'gen-2')).toEqual([105, 2]);
    // gen-1 again (a replay of a call that timed out but ran): nothing changes; its first total, then the current ones.
    expect(await ledger.add(inc(100), undefined, 'gen-1')).toEqual([100, 2]);
    expect(await ledger.read([counter('a'), counter('a', 'byok')])).toEqual([105, 2]);
    // Without an id an add is not deduplicated (the contract's default, for callers with nothing to replay).
    await ledger.add(inc(1));
    await ledger.add(inc(1));
    expect(await ledger.read([counter('a')])).toEqual([107]);
    await ledger.close();
  });

  test("ids are kept per account: one account's id never swallows another's record", async () => {
    const ledger = createEmbeddedLedger();
    await ledger.add([{ key: counter('a'), by: 7, expiresAt: null }], undefined, 'gen-same');
    await ledger.add([{ key: counter('b'), by: 9, expiresAt: null }], undefined, 'gen-same');
    expect(await ledger.read([counter('a'), counter('b')])).toEqual([7, 9]);
    expect(idSets(counter('a'), 0).current).not.toBe(idSets(counter('b'), 0).current);
    expect(idSets(counter('a'), 0).current).toBe(`${keys.prefix}{a}:ids:0`);
    await ledger.close();
  });

  test('the spend gate: a request recorded twice is counted once, its BYOK fee too', async () => {
    const ledger = createEmbeddedLedger();
    const gate = createSpendGate(ledger);
    const acc = ledgerAccount();
    const c = ctx(acc, MONDAY);
    await gate.record(finished(c, 25_000 * USD, true)); // past the free allowance: the next one pays a fee
    const req = finished(c, 2 * USD, true);
    const first = await gate.record(req);
    expect(first.feeMicros).toBe(100_000);
    // A later request moves the month-to-date; the replayed one still computes its fee from its own.
    await gate.record(finished(c, 3 * USD, true));
    expect(await gate.record(req)).toEqual(first);
    const month = await readAccountMonth(ledger, keys, acc.accountId, 'pay-as-you-go', MONDAY);
    expect(month).toMatchObject({ byokListCostMicros: 25_005 * USD, feesMicros: 250_000 });
    const spend = await readWindows(
      ledger,
      keys,
      acc.accountId,
      [{ scope: 'workspace', id: WS1, intervals: ['daily'] }],
      MONDAY,
    );
    expect(spend.get(`workspace/${WS1}`)?.daily?.byokMicros).toBe(25_005 * USD);
    await gate.close();
  });
});

describe('reservations are idempotent and never outlive their request', () => {
  test('a retried reservation holds once and does not count its own hold against itself', async () => {
    const ledger = createEmbeddedLedger();
    const req = { id: 'gen-r', checks: [check('a', 100, 100)], ttlMs: 60_000 };
    expect(await ledger.reserve(req)).toEqual({ ok: true, granted: 100 });
    expect(await ledger.reserve(req)).toEqual({ ok: true, granted: 100 });
    // Room for one: another request sees exactly one hold.
    expect(await ledger.reserve({ ...req, id: 'gen-other' })).toEqual({
      ok: false,
      index: 0,
      countedMicros: 0,
      heldMicros: 100,
    });
    await ledger.close();
  });

  test('a reservation arriving after its release or its record holds nothing; a record after a release still counts', async () => {
    const ledger = createEmbeddedLedger();
    const req = { id: 'gen-late', checks: [check('a', 100, 100)], ttlMs: 60_000 };
    expect(await ledger.reserve(req)).toEqual({ ok: true, granted: 100 });
    await ledger.release('gen-late', 100, [holdOf('a')]);
    // Sent before a stall, run after its caller gave up and released it: refused, nothing held.
    await expect(ledger.reserve(req)).rejects.toBeInstanceOf(ReservationSettledError);
    expect(await ledger.reserve({ ...req, id: 'gen-next' })).toEqual({ ok: true, granted: 100 });
    await ledger.release('gen-next', 100, [holdOf('a')]);
    // Admitted unchecked (fail open) and served: the record counts although the id was released, once.
    const settle = { id: 'gen-late', amount: 100, holdKeys: [holdOf('a')] };
    expect(await ledger.add([{ key: counter('a'), by: 30, expiresAt: null }], settle, 'gen-late')).toEqual([30]);
    expect(await ledger.add([{ key: counter('a'), by: 30, expiresAt: null }], settle, 'gen-late')).toEqual([30]);
    expect(await ledger.read([counter('a')])).toEqual([30]);
    // Recorded, then a late reservation: nothing held, so 70 of room is left for the next request.
    const recorded = { id: 'gen-rec', checks: [check('a', 100, 70)], ttlMs: 60_000 };
    expect(await ledger.reserve(recorded)).toEqual({ ok: true, granted: 70 });
    await ledger.add(
      [{ key: counter('a'), by: 0, expiresAt: null }],
      { id: 'gen-rec', amount: 70, holdKeys: [holdOf('a')] },
      'gen-rec',
    );
    await expect(ledger.reserve(recorded)).rejects.toBeInstanceOf(ReservationSettledError);
    expect(await ledger.reserve({ ...recorded, id: 'gen-after' })).toEqual({ ok: true, granted: 70 });
    await ledger.close();
  });

  test('a spend gate whose reservation was released refuses to reserve the same id again (no hold)', async () => {
    const ledger = createEmbeddedLedger();
    const gate = createSpendGate(ledger);
    const acc = ledgerAccount({
      workspace: { budgets: [{ interval: 'daily', limitUsd: 0.01 }], includeByokInBudgets: false },
    });
    const c = ctx(acc, new Date());
    const maximum = { id: 'gen-g', costMicros: 10_000, byokOnly: false };
    const d = await gate.admit({ ...c, maximum });
    expect(d.allowed).toBe(true);
    await gate.release(d.allowed ? d.reservation : null);
    await expect(gate.admit({ ...c, maximum })).rejects.toBeInstanceOf(ReservationSettledError);
    expect((await gate.admit({ ...c, maximum: { ...maximum, id: 'gen-h' } })).allowed).toBe(true);
    await gate.close();
  });
});

describe('id retention', () => {
  test('longer than any replay: the reservation TTL and the replay backoff (5 s)', () => {
    expect(ID_RETENTION_MS).toBeGreaterThan(RESERVATION_TTL_MS + 5000);
  });

  test('an id is remembered one to two retention periods, then forgotten (and its memory with it)', async () => {
    let t = 1_000 * ID_RETENTION_MS + ID_RETENTION_MS - 1; // the last ms of a period: the shortest memory
    const ledger = createEmbeddedLedger({ now: () => t });
    const inc = [{ key: counter('a'), by: 1, expiresAt: null }];
    await ledger.add(inc, undefined, 'gen-t');
    expect(ledger.idCount()).toBe(1);
    t += ID_RETENTION_MS;
    await ledger.add(inc, undefined, 'gen-t');
    expect(await ledger.read([counter('a')])).toEqual([1]);
    t += 1;
    await ledger.add([{ key: counter('b'), by: 1, expiresAt: null }], undefined, 'gen-u'); // a new period sweeps
    expect(ledger.idCount()).toBe(1);
    await ledger.add(inc, undefined, 'gen-t');
    expect(await ledger.read([counter('a')])).toEqual([2]);
    await ledger.close();
  });
});
