// The embedded ledger keeps the month across a restart through its snapshot file (atomic temp file + rename).
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, test } from '@jest/globals';
import {
  createEmbeddedLedger,
  createSpendGate,
  keySpace,
  readAccountMonth,
  readWindows,
} from '../../../src/ledger/index.ts';
import { budgetGuardrail, ctx, finished, ledgerAccount, USD } from '../../support/ledger-fixtures.ts';

const dir = mkdtempSync(join(tmpdir(), 'byok-ledger-snapshot-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const NOV23 = new Date('2026-11-23T10:00:00Z');
const keys = keySpace();

test('a restarted embedded ledger continues the month, the allowance and the budget windows from its snapshot', async () => {
  const path = join(dir, 'state', 'ledger.json');
  const acc = ledgerAccount({ guardrails: [budgetGuardrail('g', 10, 'daily', false)], keyGuardrail: 'g' });
  const c = ctx(acc, NOV23);

  const first = createSpendGate(createEmbeddedLedger({ snapshotPath: path }));
  await first.record(finished(c, 24_999 * USD, true));
  await first.record(finished(c, 10 * USD, false));
  expect((await first.admit(c)).allowed).toBe(false);
  await first.close(); // writes the snapshot
  expect(readdirSync(join(dir, 'state'))).toEqual(['ledger.json']); // no temp file left behind

  const ledger = createEmbeddedLedger({ snapshotPath: path });
  const second = createSpendGate(ledger);
  expect((await second.admit(c)).allowed).toBe(false);
  // The allowance continues: 1 USD left, so a 3 USD request pays 5% of 2 USD.
  expect(await second.record(finished(c, 3 * USD, true))).toEqual({
    feeMicros: 100_000,
    chargedMicros: 0,
    freeListCostMicros: 1 * USD,
  });
  expect(await readAccountMonth(ledger, keys, acc.accountId, 'pay-as-you-go', NOV23)).toMatchObject({
    byokListCostMicros: 25_002 * USD,
    feesMicros: 100_000,
    chargedMicros: 10 * USD,
  });
  await second.close();
});

test('the snapshot is written periodically while running, and expired windows are not carried over', async () => {
  const path = join(dir, 'periodic.json');
  let now = Date.parse('2026-11-23T10:00:00Z');
  const ledger = createEmbeddedLedger({ snapshotPath: path, snapshotIntervalMs: 50, now: () => now });
  const gate = createSpendGate(ledger);
  const acc = ledgerAccount({ guardrails: [budgetGuardrail('g', 10, 'daily', false)], keyGuardrail: 'g' });
  await gate.record(finished(ctx(acc, NOV23), 4 * USD, false));
  const deadline = Date.now() + 10_000;
  while (!existsSync(path) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  const written = JSON.parse(readFileSync(path, 'utf8')) as {
    version: number;
    counters: [string, number, number | null][];
  };
  expect(written.version).toBe(1);
  expect(written.counters).toContainEqual([
    keys.budget(
      acc.accountId,
      'guardrail',
      'g',
      { interval: 'daily', id: 'd2026-11-23', startsAt: 0, endsAt: 0 },
      'nonbyok',
    ),
    4 * USD,
    Date.parse('2026-12-01T00:00:00Z'),
  ]);
  await gate.close();

  // Restarted after the daily key's expiry (window end + 7 days margin): the day is gone, lifetime stays.
  now = Date.parse('2026-12-01T00:00:00Z');
  const later = createEmbeddedLedger({ snapshotPath: path, now: () => now });
  const spend = await readWindows(
    later,
    keys,
    acc.accountId,
    [{ scope: 'guardrail', id: 'g', intervals: ['daily', 'lifetime'] }],
    NOV23,
  );
  expect(spend.get('guardrail/g')).toEqual({
    daily: { nonByokMicros: 0, byokMicros: 0 },
    lifetime: { nonByokMicros: 4 * USD, byokMicros: 0 },
  });
  await later.close();
});

test('a bad counter in a snapshot is quarantined and reported; the rest loads; an unknown format is refused', async () => {
  const path = join(dir, 'corrupt.json');
  const good = ['byok:ledger:{a}:acct:m2026-11:byok_list', 1_500_000, null];
  writeFileSync(
    path,
    JSON.stringify({
      version: 1,
      counters: [
        good,
        ['k-text', 'ten', null],
        ['k-huge', 8e15 * 2, null],
        ['k-negative', -5, null],
        ['k-frac', 0.5, null],
      ],
    }),
  );
  const reported: [string, string][] = [];
  const ledger = createEmbeddedLedger({
    snapshotPath: path,
    onQuarantine: (key, reason) => reported.push([key, reason]),
  });
  expect(await ledger.read([good[0] as string, 'k-text', 'k-huge'])).toEqual([1_500_000, 0, 0]);
  expect(reported.map(([k]) => k)).toEqual(['k-text', 'k-huge', 'k-negative', 'k-frac']);
  expect(JSON.parse(readFileSync(`${path}.quarantine.json`, 'utf8')).counters).toHaveLength(4);
  // No counter can pass 2^53 either: an increment that would is refused whole, nothing changes.
  await expect(
    ledger.add([
      { key: 'a', by: 1, expiresAt: null },
      { key: good[0] as string, by: Number.MAX_SAFE_INTEGER, expiresAt: null },
    ]),
  ).rejects.toThrow(/2\^53/);
  expect(await ledger.read(['a', good[0] as string])).toEqual([0, 1_500_000]);
  await ledger.close();
  writeFileSync(path, JSON.stringify({ version: 9 }));
  expect(() => createEmbeddedLedger({ snapshotPath: path })).toThrow(/unknown format/);
});

test('expired windows are swept from memory; a failing periodic snapshot is reported and the ledger keeps working', async () => {
  let now = Date.parse('2026-11-23T10:00:00Z');
  const errors: string[] = [];
  const blocker = join(dir, 'not-a-dir');
  mkdirSync(blocker);
  const ledger = createEmbeddedLedger({
    snapshotPath: join(blocker, 'ledger.json'),
    snapshotIntervalMs: 20,
    now: () => now,
    onSnapshotError: (e) => errors.push(e.message),
  });
  // The snapshot directory turns into a file after start (a broken volume): writes fail from now on.
  rmSync(blocker, { recursive: true });
  writeFileSync(blocker, 'a file where the snapshot directory should be');
  const gate = createSpendGate(ledger);
  const acc = ledgerAccount({ guardrails: [budgetGuardrail('g', 10, 'daily', false)], keyGuardrail: 'g' });
  await gate.record(finished(ctx(acc, NOV23), 1 * USD, false));
  const withAll = ledger.size(); // 2 scopes x 4 windows + the account's month
  expect(withAll).toBe(9);
  const deadline = Date.now() + 10_000;
  while (errors.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  expect(errors[0]).toMatch(/ENOTDIR|EEXIST/);
  // Past the daily and weekly windows' expiry (+7 days), before the month's: only those go.
  now = Date.parse('2026-12-07T00:00:01Z');
  while (ledger.size() === withAll && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  expect(ledger.size()).toBe(withAll - 4);
  expect((await gate.admit(ctx(acc, new Date(now)))).allowed).toBe(true);
  await expect(gate.close()).rejects.toThrow(/ENOTDIR|EEXIST/);
});
