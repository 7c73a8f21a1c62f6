// The ledger tests' request time comes from the clock, never from a calendar: whatever day a run starts, it is a
// Monday 10:00 UTC no later than now and less than a week before it, so every window the tests write to (its day,
// the days they step to, its week, its month) is one the ledgers still keep.
import { describe, expect, test } from '@jest/globals';
import fc from 'fast-check';
import { ledgerMonday } from '../../support/ledger-fixtures.ts';
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
});
