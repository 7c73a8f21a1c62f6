// Budget windows aligned to UTC boundaries: a day is 00:00-24:00 UTC, a week is the ISO week (Monday 00:00 UTC to
// the next Monday), a month is the calendar month, lifetime never resets. Pure: the clock is an argument.
import type { BudgetInterval } from '../domain/model.ts';

export const INTERVALS: readonly BudgetInterval[] = ['daily', 'weekly', 'monthly', 'lifetime'];

export interface BudgetWindow {
  interval: BudgetInterval;
  /** Stable id of the window inside its interval: d2026-11-23, w2026-11-23 (the Monday), m2026-11, life. */
  id: string;
  /** Start of the window (ms since epoch, UTC); 0 for lifetime. */
  startsAt: number;
  /** End of the window (exclusive, ms since epoch); null for lifetime. */
  endsAt: number | null;
}

const DAY_MS = 86_400_000;

const pad = (n: number, width = 2) => String(n).padStart(width, '0');
const ymd = (ms: number) => {
  const d = new Date(ms);
  return `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}`;
};

/** The window of `interval` that contains `at`. */
export function windowOf(interval: BudgetInterval, at: Date): BudgetWindow {
  const t = at.getTime();
  if (!Number.isFinite(t)) throw new RangeError('window time must be a valid date');
  const dayStart = Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate());
  switch (interval) {
    case 'daily':
      return { interval, id: `d${ymd(dayStart)}`, startsAt: dayStart, endsAt: dayStart + DAY_MS };
    case 'weekly': {
      // getUTCDay: Sunday 0 ... Saturday 6; ISO weeks start on Monday.
      const sinceMonday = (at.getUTCDay() + 6) % 7;
      const monday = dayStart - sinceMonday * DAY_MS;
      return { interval, id: `w${ymd(monday)}`, startsAt: monday, endsAt: monday + 7 * DAY_MS };
    }
    case 'monthly': {
      const start = Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1);
      const end = Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1);
      return { interval, id: `m${ymd(start).slice(0, 7)}`, startsAt: start, endsAt: end };
    }
    case 'lifetime':
      return { interval, id: 'life', startsAt: 0, endsAt: null };
  }
}

/** The current window of every interval. */
export function windowsAt(at: Date): Record<BudgetInterval, BudgetWindow> {
  return {
    daily: windowOf('daily', at),
    weekly: windowOf('weekly', at),
    monthly: windowOf('monthly', at),
    lifetime: windowOf('lifetime', at),
  };
}
