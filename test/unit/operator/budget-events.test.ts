// The BudgetExceeded and RequestOverBudget series (operator/spend/budget-events.ts): increases of a budget window's refusal
// counters become one Event per window and reason with a count, written at most once per object per throttle period; a new leader counts from what
// status mirrored; a lost counter counts again; a changed limit or a new window starts a new series; a lapsed Event
// is created again. The sink records what would reach the API (the integration test writes to a real one).
import { describe, expect, test } from '@jest/globals';
import { KubeApiError } from '../../../src/kube/client.ts';
import {
  type BudgetEvent,
  type BudgetEventSink,
  BudgetEvents,
  type BudgetRefusals,
  budgetNote,
} from '../../../src/operator/spend/budget-events.ts';

const DAY = Date.UTC(2026, 10, 26);
const at = (s: number) => new Date(DAY + 10 * 3_600_000 + s * 1000);

function recordingSink(): BudgetEventSink & {
  writes: { op: 'create' | 'update'; event: BudgetEvent }[];
  gone: Set<string>;
} {
  const writes: { op: 'create' | 'update'; event: BudgetEvent }[] = [];
  const gone = new Set<string>();
  return {
    writes,
    gone,
    async create(event) {
      writes.push({ op: 'create', event });
    },
    async updateSeries(event) {
      if (gone.has(event.name)) throw new KubeApiError(404, undefined, 'PATCH event');
      writes.push({ op: 'update', event });
    },
  };
}

const ws = { kind: 'Workspace' as const, namespace: 'acme', name: 'main', uid: 'uid-ws' };
function refusals(refused: number, over: Partial<BudgetRefusals> = {}): BudgetRefusals {
  return {
    regarding: ws,
    reason: 'reached',
    interval: 'daily',
    window: { id: 'd2026-11-26', endsAt: DAY + 86_400_000 },
    limitUsd: 50,
    includesByok: false,
    refused,
    mirrored: undefined,
    ...over,
  };
}

const counts = (sink: ReturnType<typeof recordingSink>) => sink.writes.map((w) => [w.op, w.event.series?.count ?? 1]);

describe('BudgetEvents', () => {
  test('N refusals within the throttle period are one Event, then one update with the total', async () => {
    const sink = recordingSink();
    const events = new BudgetEvents({ sink, throttleMs: 60_000 });
    events.observe(refusals(1), at(0));
    await events.flush(at(0));
    for (let s = 5; s <= 55; s += 5) {
      events.observe(refusals(1 + s), at(s)); // 11 more passes, more refusals each time
      await events.flush(at(s));
    }
    expect(counts(sink)).toEqual([['create', 1]]);
    events.observe(refusals(60), at(60));
    await events.flush(at(60));
    expect(counts(sink)).toEqual([
      ['create', 1],
      ['update', 60],
    ]);
    const [first, second] = sink.writes.map((w) => w.event);
    expect(second!.name).toBe(first!.name);
    expect(second!.eventTime).toEqual(at(0));
    expect(second!.series?.lastObservedTime).toEqual(at(60));
    // Nothing new: nothing written.
    events.observe(refusals(60), at(200));
    await events.flush(at(200));
    expect(sink.writes).toHaveLength(2);
  });

  test('several refusals before the first write are created as a series', async () => {
    const sink = recordingSink();
    const events = new BudgetEvents({ sink });
    events.observe(refusals(0), at(0));
    await events.flush(at(0));
    expect(sink.writes).toEqual([]);
    events.observe(refusals(4), at(5));
    await events.flush(at(5));
    expect(counts(sink)).toEqual([['create', 4]]);
  });

  test('at most one write per object per period, across its budgets', async () => {
    const sink = recordingSink();
    const events = new BudgetEvents({ sink, throttleMs: 60_000 });
    events.observe(refusals(2), at(0));
    events.observe(
      refusals(3, { interval: 'monthly', window: { id: 'm2026-11', endsAt: Date.UTC(2026, 11, 1) }, limitUsd: 900 }),
      at(0),
    );
    await events.flush(at(0));
    expect(sink.writes).toHaveLength(1);
    events.observe(refusals(2), at(61));
    events.observe(
      refusals(3, { interval: 'monthly', window: { id: 'm2026-11', endsAt: Date.UTC(2026, 11, 1) }, limitUsd: 900 }),
      at(61),
    );
    await events.flush(at(61));
    expect(sink.writes.map((w) => w.event.note.includes('monthly'))).toEqual([false, true]);
    // Both keep growing: they take turns, the one written longest ago first.
    events.observe(refusals(5), at(122));
    events.observe(
      refusals(6, { interval: 'monthly', window: { id: 'm2026-11', endsAt: Date.UTC(2026, 11, 1) }, limitUsd: 900 }),
      at(122),
    );
    await events.flush(at(122));
    events.observe(refusals(7), at(183));
    events.observe(
      refusals(8, { interval: 'monthly', window: { id: 'm2026-11', endsAt: Date.UTC(2026, 11, 1) }, limitUsd: 900 }),
      at(183),
    );
    await events.flush(at(183));
    expect(
      sink.writes.map((w) => [w.event.note.includes('monthly') ? 'monthly' : 'daily', w.event.series?.count ?? 1]),
    ).toEqual([
      ['daily', 2],
      ['monthly', 3],
      ['daily', 5],
      ['monthly', 8],
    ]);
  });

  test('a new leader counts from what status mirrored, not from zero', async () => {
    const sink = recordingSink();
    const events = new BudgetEvents({ sink });
    events.observe(refusals(40, { mirrored: 40 }), at(0));
    await events.flush(at(0));
    expect(sink.writes).toEqual([]);
    events.observe(refusals(43, { mirrored: 40 }), at(5));
    await events.flush(at(5));
    expect(counts(sink)).toEqual([['create', 3]]);
  });

  test('a counter the ledger lost (below what was seen) counts again from zero', async () => {
    const sink = recordingSink();
    const events = new BudgetEvents({ sink, throttleMs: 0 });
    events.observe(refusals(10), at(0));
    await events.flush(at(0));
    events.observe(refusals(2), at(5));
    await events.flush(at(5));
    expect(counts(sink)).toEqual([
      ['create', 10],
      ['update', 12],
    ]);
  });

  test('a new window or a changed limit starts a new Event (its note is immutable)', async () => {
    const sink = recordingSink();
    const events = new BudgetEvents({ sink, throttleMs: 0 });
    events.observe(refusals(3), at(0));
    await events.flush(at(0));
    events.observe(refusals(5, { limitUsd: 60 }), at(5)); // same window, limit raised: two more refusals
    await events.flush(at(5));
    const next = { id: 'd2026-11-27', endsAt: DAY + 2 * 86_400_000 };
    events.observe(refusals(1, { window: next }), at(10));
    await events.flush(at(10));
    expect(counts(sink)).toEqual([
      ['create', 3],
      ['create', 2],
      ['create', 1],
    ]);
    expect(new Set(sink.writes.map((w) => w.event.name)).size).toBe(3);
    expect(sink.writes[2]!.event.note).toContain('it resets at 2026-11-28T00:00:00Z (UTC)');
    for (const w of sink.writes) expect(w.event.note).not.toMatch(/window d|d2026/);
  });

  test('an Event the API server let lapse is created again with what it had not shown', async () => {
    const sink = recordingSink();
    const events = new BudgetEvents({ sink, throttleMs: 0 });
    events.observe(refusals(5), at(0));
    await events.flush(at(0));
    sink.gone.add(sink.writes[0]!.event.name);
    events.observe(refusals(8), at(5));
    await events.flush(at(5));
    expect(counts(sink)).toEqual([
      ['create', 5],
      ['create', 3],
    ]);
  });

  test('a failed write is retried at the next slot', async () => {
    let fail = true;
    const writes: BudgetEvent[] = [];
    const events = new BudgetEvents({
      sink: {
        async create(e) {
          if (fail) throw new Error('apiserver unavailable');
          writes.push(e);
        },
        async updateSeries(e) {
          writes.push(e);
        },
      },
      throttleMs: 60_000,
    });
    events.observe(refusals(2), at(0));
    await events.flush(at(0));
    fail = false;
    events.observe(refusals(2), at(30));
    await events.flush(at(30));
    expect(writes).toEqual([]);
    events.observe(refusals(2), at(60));
    await events.flush(at(60));
    expect(writes.map((e) => e.series?.count)).toEqual([2]);
  });
});

describe('two reasons, two series', () => {
  test('requests too large for what is left and a reached limit are separate Events, each with its own reason', async () => {
    const sink = recordingSink();
    const events = new BudgetEvents({ sink, throttleMs: 0 });
    events.observe(refusals(1, { reason: 'over' }), at(0));
    await events.flush(at(0));
    events.observe(refusals(4, { reason: 'reached' }), at(5));
    events.observe(refusals(1, { reason: 'over' }), at(5));
    await events.flush(at(5));
    expect(sink.writes.map((w) => [w.event.reason, w.event.series?.count ?? 1])).toEqual([
      ['RequestOverBudget', 1],
      ['BudgetExceeded', 4],
    ]);
    expect(sink.writes[0]!.event.note).toContain('is not reached');
    expect(sink.writes[1]!.event.note).toContain('is reached');
  });
});

describe('budgetNote', () => {
  test('reached: names the budget, its window in words, limit, what counts and the reset time (UTC)', () => {
    expect(budgetNote(refusals(1, { includesByok: true, limitUsd: 12.5 }))).toBe(
      "Workspace main: today's (UTC) daily budget of 12.5 USD (shared-capacity charges and BYOK list cost count) is reached; requests under it are refused with 402; it resets at 2026-11-27T00:00:00Z (UTC)",
    );
  });

  test('over: the budget is not reached; only requests that need more than is left were refused', () => {
    expect(budgetNote(refusals(1, { reason: 'over', includesByok: true, limitUsd: 1 }))).toBe(
      "Workspace main: today's (UTC) daily budget of 1 USD (shared-capacity charges and BYOK list cost count) is not reached, but requests that would need more than it has left were refused with 402 (each 402 says how much it needed, what was left and the max_tokens that would fit); requests that fit are served, and one without max_tokens is capped to what is left; it resets at 2026-11-27T00:00:00Z (UTC)",
    );
  });

  test('a lifetime budget says it never resets', () => {
    const note = budgetNote(
      refusals(1, {
        interval: 'lifetime',
        window: { id: 'life', endsAt: null },
        regarding: { kind: 'Guardrail', namespace: 'acme', name: 'ci', uid: 'u' },
      }),
    );
    expect(note).toBe(
      'Guardrail ci: the lifetime budget of 50 USD (shared-capacity charges count, BYOK is excluded) is reached; requests under it are refused with 402; a lifetime budget never resets: raise the limit',
    );
  });
});
