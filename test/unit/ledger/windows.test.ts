import { describe, expect, test } from '@jest/globals';
import { keySpace } from '../../../src/ledger/keys.ts';
import { microsText } from '../../../src/ledger/spend-view.ts';
import { windowOf, windowsAt } from '../../../src/ledger/windows.ts';

const at = (iso: string) => new Date(iso);

describe('budget windows are aligned to UTC boundaries', () => {
  test('a day ends at 24:00 UTC, whatever the local time zone', () => {
    expect(windowOf('daily', at('2026-11-23T23:59:59.999Z')).id).toBe('d2026-11-23');
    expect(windowOf('daily', at('2026-11-24T00:00:00.000Z')).id).toBe('d2026-11-24');
    const w = windowOf('daily', at('2026-11-23T12:00:00+09:00'));
    expect([w.id, new Date(w.startsAt).toISOString(), new Date(w.endsAt ?? 0).toISOString()]).toEqual([
      'd2026-11-23',
      '2026-11-23T00:00:00.000Z',
      '2026-11-24T00:00:00.000Z',
    ]);
  });

  test('a week is the ISO week: Monday 00:00 UTC to the next Monday', () => {
    // 2026-11-23 is a Monday; Sunday 2026-11-29 still belongs to its week.
    expect(windowOf('weekly', at('2026-11-23T00:00:00Z')).id).toBe('w2026-11-23');
    expect(windowOf('weekly', at('2026-11-29T23:59:59.999Z')).id).toBe('w2026-11-23');
    expect(windowOf('weekly', at('2026-11-30T00:00:00Z')).id).toBe('w2026-11-30');
    expect(windowOf('weekly', at('2026-11-22T23:59:59.999Z')).id).toBe('w2026-11-16');
    // A week across a year boundary is named by its Monday.
    const w = windowOf('weekly', at('2027-01-01T10:00:00Z'));
    expect([w.id, new Date(w.endsAt ?? 0).toISOString()]).toEqual(['w2026-12-28', '2027-01-04T00:00:00.000Z']);
  });

  test('a month is the calendar month, including December into January and leap February', () => {
    expect(windowOf('monthly', at('2026-11-30T23:59:59.999Z')).id).toBe('m2026-11');
    expect(windowOf('monthly', at('2026-12-01T00:00:00Z')).id).toBe('m2026-12');
    const dec = windowOf('monthly', at('2026-12-31T23:00:00Z'));
    expect(new Date(dec.endsAt ?? 0).toISOString()).toBe('2027-01-01T00:00:00.000Z');
    const feb = windowOf('monthly', at('2028-02-10T00:00:00Z'));
    expect(new Date(feb.endsAt ?? 0).toISOString()).toBe('2028-03-01T00:00:00.000Z');
  });

  test('lifetime never ends', () => {
    expect(windowOf('lifetime', at('2026-11-23T00:00:00Z'))).toEqual({
      interval: 'lifetime',
      id: 'life',
      startsAt: 0,
      endsAt: null,
    });
    expect(windowsAt(at('2030-01-01T00:00:00Z')).lifetime.id).toBe('life');
  });

  test('an invalid date is refused', () => {
    expect(() => windowOf('daily', new Date('nope'))).toThrow(RangeError);
  });
});

describe('ledger keys', () => {
  const keys = keySpace({ prefix: 'p:', expiryMarginMs: 1000 });
  const day = windowOf('daily', at('2026-11-23T05:00:00Z'));
  const month = windowOf('monthly', at('2026-11-23T05:00:00Z'));

  test('carry the account id as a cluster hash tag, the scope, the window and the part', () => {
    expect(keys.budget('A', 'guardrail', 'G', day, 'nonbyok')).toBe('p:{A}:gr:G:d2026-11-23:nonbyok');
    expect(keys.budget('A', 'workspace', 'W', month, 'byok')).toBe('p:{A}:ws:W:m2026-11:byok');
    expect(keys.account('A', month, 'fee')).toBe('p:{A}:acct:m2026-11:fee');
    expect(keySpace().budget('A', 'guardrail', 'G', day, 'byok')).toBe('byok:ledger:{A}:gr:G:d2026-11-23:byok');
  });

  test('expire at their window end plus the margin; lifetime keys never', () => {
    expect(keys.expiresAt(day)).toBe(Date.parse('2026-11-24T00:00:00Z') + 1000);
    expect(keys.expiresAt(windowOf('lifetime', at('2026-11-23T05:00:00Z')))).toBeNull();
  });

  test('account meters exist only per calendar month', () => {
    expect(() => keys.account('A', day, 'fee')).toThrow(/calendar month/);
  });
});

describe('microsText', () => {
  test('is the exact decimal of an amount of micros', () => {
    expect(microsText(0)).toBe('0.000000');
    expect(microsText(1)).toBe('0.000001');
    expect(microsText(25_000_000_000)).toBe('25000.000000');
    expect(microsText(9_007_199_254_740_991)).toBe('9007199254.740991');
    expect(microsText(-1_500_000)).toBe('-1.500000');
  });
});

describe('windowsAt keeps one frozen record per UTC day', () => {
  test('the same objects all day, new ones at midnight UTC, and another day asked for in between does not evict today', () => {
    const morning = windowsAt(at('2031-03-10T00:00:00.000Z'));
    expect(windowsAt(at('2031-03-10T23:59:59.999Z'))).toBe(morning);
    expect(windowOf('weekly', at('2031-03-10T12:00:00Z'))).toBe(morning.weekly);
    // A replayed record from yesterday gets yesterday's windows, computed, and today's stay cached.
    expect(windowsAt(at('2031-03-09T23:00:00Z')).daily.id).toBe('d2031-03-09');
    expect(windowsAt(at('2031-03-10T08:00:00Z'))).toBe(morning);
    const next = windowsAt(at('2031-03-11T00:00:00.000Z'));
    expect(next).not.toBe(morning);
    expect([next.daily.id, next.weekly.id, next.monthly.id]).toEqual(['d2031-03-11', 'w2031-03-10', 'm2031-03']);
    // Shared objects cannot be changed by a caller.
    expect(Object.isFrozen(next) && Object.isFrozen(next.daily)).toBe(true);
    expect(() => windowsAt(new Date(Number.NaN))).toThrow(RangeError);
  });
});
