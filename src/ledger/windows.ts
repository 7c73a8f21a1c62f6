// Budget windows aligned to UTC boundaries: a day is 00:00-24:00 UTC, a week is the ISO week (Monday 00:00 UTC to
// the next Monday), a month is the calendar month, lifetime never resets. Pure: the clock is an argument.
import type { BudgetInterval } from '../domain/compiled.ts';

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

export type DayWindows = Readonly<Record<BudgetInterval, Readonly<BudgetWindow>>>;

function computeWindows(at: Date, dayStart: number): DayWindows {
  // getUTCDay: Sunday 0 ... Saturday 6; ISO weeks start on Monday.
  const monday = dayStart - ((at.getUTCDay() + 6) % 7) * DAY_MS;
  const monthStart = Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1);
  return Object.freeze({
    daily: Object.freeze({ interval: 'daily', id: `d${ymd(dayStart)}`, startsAt: dayStart, endsAt: dayStart + DAY_MS }),
    weekly: Object.freeze({ interval: 'weekly', id: `w${ymd(monday)}`, startsAt: monday, endsAt: monday + 7 * DAY_MS }),
    monthly: Object.freeze({
      interval: 'monthly',
      id: `m${ymd(monthStart).slice(0, 7)}`,
      startsAt: monthStart,
      endsAt: Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1),
    }),
    lifetime: Object.freeze({ interval: 'lifetime', id: 'life', startsAt: 0, endsAt: null }),
  } as const);
}

// Every request asks for the windows of "now": the day's answer is kept (frozen, so callers share it safely) and
// reused until the day ends. Same objects all day: callers may key caches by them (spend-gate.ts does).
let today: { from: number; to: number; windows: DayWindows } | undefined;

/** The current window of every interval: one frozen record per UTC day. */
export function windowsAt(at: Date): DayWindows {
  const t = at.getTime();
  if (!Number.isFinite(t)) throw new RangeError('window time must be a valid date');
  if (today !== undefined && t >= today.from && t < today.to) return today.windows;
  const dayStart = Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate());
  const windows = computeWindows(at, dayStart);
  // Only the newest day is kept: a request for another day (a replay, a test) recomputes without evicting it.
  if (today === undefined || dayStart >= today.from) today = { from: dayStart, to: dayStart + DAY_MS, windows };
  return windows;
}

/** The window of `interval` that contains `at`. */
export function windowOf(interval: BudgetInterval, at: Date): Readonly<BudgetWindow> {
  return windowsAt(at)[interval];
}
