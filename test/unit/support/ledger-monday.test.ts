// The ledger tests' request time comes from the clock, never from a calendar: whatever day a run starts, it is a
// Monday 10:00 UTC no later than now and less than a week before it, so every window the tests write to (its day,
// the days they step to, its week, its month) is one the ledgers still keep.
import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import fc from 'fast-check';
import { ledgerMonday } from '../../support/ledger-fixtures.ts';
import { moduleFilesUnder } from '../../support/module-imports.ts';
import { propertyRuns } from '../../support/properties.ts';

const WEEK_MS = 7 * 86_400_000;

describe('ledgerMonday', () => {
  test('any instant from 1970 to 2200: a Monday 10:00 UTC, not after it, less than a week before it', () => {
    fc.assert(
      fc.property(fc.integer({ min: WEEK_MS, max: Date.UTC(2200, 0, 1) }), (now) => {
        const monday = ledgerMonday(now);
        expect([monday.getUTCDay(), monday.getUTCHours(), monday.getUTCMinutes(), monday.getUTCMilliseconds()]).toEqual(
          [1, 10, 0, 0],
        );
        expect(monday.getTime() <= now && now < monday.getTime() + WEEK_MS).toBe(true);
      }),
      { numRuns: propertyRuns(2_000) },
    );
  });

  test('the turns: Monday 10:00 UTC is this week; a millisecond before it is the week before', () => {
    const at = Date.parse('2026-11-30T10:00:00Z');
    expect(ledgerMonday(at).toISOString()).toBe('2026-11-30T10:00:00.000Z');
    expect(ledgerMonday(at - 1).toISOString()).toBe('2026-11-23T10:00:00.000Z');
    expect(ledgerMonday(Date.parse('2026-12-06T23:59:59.999Z')).toISOString()).toBe('2026-11-30T10:00:00.000Z');
  });

  // redis-server keeps the real clock even under libfaketime (it does not start there), so `npm run test:unit:ahead`
  // cannot run the Redis ledger's tests. This holds them instead: a file that runs a Redis ledger names no calendar
  // date from 2020 on (a date long past, such as an expiry that must be refused, is fine).
  test('no test that runs a Redis ledger meters at a calendar date', () => {
    const root = join(import.meta.dirname, '..', '..', '..');
    const redisTests = moduleFilesUnder(join(root, 'test'))
      .map((file) => ({ file, text: readFileSync(file, 'utf8') }))
      .filter(({ text }) => /startRedis\(|createRedisLedger\(/.test(text));
    expect(redisTests.length).toBeGreaterThan(10); // the scan saw the Redis tests, not nothing
    const calendar = /['"`](20[2-9]\d-\d\d-\d\d)/g;
    const dated = redisTests.flatMap(({ file, text }) =>
      [...text.matchAll(calendar)].map((m) => `${relative(root, file)}: ${m[1]}`),
    );
    expect(dated).toEqual([]);
    expect("ctx(acc, new Date('2026-11-23T10:00:00Z'))".match(calendar)).toEqual(["'2026-11-23"]);
  });
});
