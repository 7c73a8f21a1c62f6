// The spend gate's behaviour on both real backends: the BYOK fee against the free allowance, budgets blocking at
// their limit (with and without include_byok_in_budgets), and windows turning over at UTC boundaries.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  createEmbeddedLedger,
  createRedisLedger,
  createSpendGate,
  ID_RETENTION_MS,
  keySpace,
  type Ledger,
  type LedgerSpendGate,
  openLedger,
  readAccountMonth,
  readWindows,
} from '../../../src/ledger/index.ts';
import {
  afterMonday,
  budgetGuardrail,
  ctx,
  finished,
  K2,
  ledgerAccount,
  MONDAY,
  monthStart,
  USD,
  WS1,
} from '../../support/ledger-fixtures.ts';
import { type RedisServer, startRedis } from '../../support/redis.ts';

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

const keys = keySpace();

describe.each(['embedded', 'redis'] as const)('spend gate on the %s ledger', (backend) => {
  let ledger: Ledger;
  let gate: LedgerSpendGate;
  beforeAll(async () => {
    ledger = backend === 'embedded' ? createEmbeddedLedger() : await createRedisLedger({ url: redis.url });
    gate = createSpendGate(ledger);
  });
  afterAll(async () => {
    await gate.close();
  });

  test.each([
    ['pay-as-you-go', 25_000],
    ['enterprise', 200_000],
  ] as const)(
    'BYOK fee on %s: nothing inside the allowance, 5%% of the part above it when straddling, 5%% beyond',
    async (plan, allowanceUsd) => {
      const acc = ledgerAccount({ plan });
      const c = ctx(acc, MONDAY);
      const inside = await gate.record(finished(c, (allowanceUsd - 0.5) * USD, true));
      expect(inside).toEqual({ feeMicros: 0, chargedMicros: 0, freeListCostMicros: (allowanceUsd - 0.5) * USD });
      const straddling = await gate.record(finished(c, 1 * USD, true));
      // 0.5 USD free, 0.5 USD billable: 5% = 0.025 USD.
      expect(straddling).toEqual({ feeMicros: 25_000, chargedMicros: 0, freeListCostMicros: 500_000 });
      const beyond = await gate.record(finished(c, 2 * USD, true));
      expect(beyond).toEqual({ feeMicros: 100_000, chargedMicros: 0, freeListCostMicros: 0 });
      // Shared capacity pays its list cost and neither uses the allowance nor a fee.
      const shared = await gate.record(finished(c, 3 * USD, false));
      expect(shared).toEqual({ feeMicros: 0, chargedMicros: 3 * USD, freeListCostMicros: 0 });

      const month = await readAccountMonth(ledger, keys, acc.accountId, plan, MONDAY);
      expect(month).toEqual({
        month: MONDAY.toISOString().slice(0, 7),
        byokListCostMicros: (allowanceUsd + 2.5) * USD,
        feesMicros: 125_000,
        chargedMicros: 3 * USD,
        freeAllowanceMicros: allowanceUsd * USD,
        freeAllowanceRemainingMicros: 0,
      });
      // The allowance is per calendar month (UTC): the next month starts from zero.
      const next = await gate.record(finished(ctx(acc, monthStart(1)), 2 * USD, true));
      expect(next.feeMicros).toBe(0);
    },
  );

  test('a guardrail budget without include_byok_in_budgets counts shared-capacity charges only and blocks at the limit', async () => {
    const acc = ledgerAccount({ guardrails: [budgetGuardrail('g-10', 10, 'daily', false)], keyGuardrail: 'g-10' });
    const c = ctx(acc, MONDAY);
    await gate.record(finished(c, 100 * USD, true)); // BYOK: not counted
    expect(await gate.admit(c)).toEqual({ allowed: true, reservation: null });
    await gate.record(finished(c, 6 * USD, false));
    expect(await gate.admit(c)).toEqual({ allowed: true, reservation: null });
    // Admitted at 6 of 10, this request overshoots the limit by its own cost; none is admitted after.
    await gate.record(finished(c, 6 * USD, false));
    expect(await gate.admit(c)).toEqual({
      allowed: false,
      blockedBy: {
        scope: 'guardrail',
        id: 'g-10',
        name: 'g-10',
        interval: 'daily',
        limitMicros: 10 * USD,
        countedMicros: 12 * USD,
        includesByok: false,
        blocked: true,
      },
      heldMicros: 0,
      requestMicros: 0,
    });
    // Another key of the same workspace without that guardrail is not blocked.
    expect(await gate.admit(ctx(acc, MONDAY, K2))).toEqual({ allowed: true, reservation: null });
  });

  test('a guardrail budget with include_byok_in_budgets counts what BYOK requests would have cost and blocks exactly at the limit', async () => {
    const acc = ledgerAccount({ guardrails: [budgetGuardrail('g-byok', 10, 'monthly', true)], keyGuardrail: 'g-byok' });
    const c = ctx(acc, MONDAY);
    await gate.record(finished(c, 9_999_999, true));
    expect(await gate.admit(c)).toEqual({ allowed: true, reservation: null });
    await gate.record(finished(c, 1, false));
    const blocked = await gate.admit(c);
    expect(blocked.allowed).toBe(false);
    expect(!blocked.allowed && blocked.blockedBy).toMatchObject({
      id: 'g-byok',
      interval: 'monthly',
      countedMicros: 10 * USD,
      includesByok: true,
    });
  });

  test("a member's guardrail (or the workspace default) is checked too", async () => {
    const acc = ledgerAccount({
      guardrails: [budgetGuardrail('g-default', 1, 'daily', false)],
      workspace: { defaultGuardrailId: 'g-default' },
    });
    const c = ctx(acc, MONDAY, K2, 'u2');
    await gate.record(finished(c, 1 * USD, false));
    const d = await gate.admit(c);
    expect(!d.allowed && d.blockedBy.id).toBe('g-default');
  });

  test('a guardrail without a limit never blocks, however much is spent', async () => {
    const acc = ledgerAccount({
      guardrails: [{ ...budgetGuardrail('g-nolimit', 1, 'daily', true), budget: null }],
      keyGuardrail: 'g-nolimit',
    });
    const c = ctx(acc, MONDAY);
    for (let i = 0; i < 5; i++) await gate.record(finished(c, 1_000 * USD, i % 2 === 0));
    expect(await gate.admit(c)).toEqual({ allowed: true, reservation: null });
    // The spend was recorded in its windows all the same.
    const spend = await readWindows(
      ledger,
      keys,
      acc.accountId,
      [{ scope: 'guardrail', id: 'g-nolimit', intervals: ['daily', 'lifetime'] }],
      MONDAY,
    );
    expect(spend.get('guardrail/g-nolimit')).toEqual({
      daily: { nonByokMicros: 2_000 * USD, byokMicros: 3_000 * USD },
      lifetime: { nonByokMicros: 2_000 * USD, byokMicros: 3_000 * USD },
    });
  });

  test.each(['daily', 'weekly', 'monthly', 'lifetime'] as const)(
    'the workspace flag counts BYOK in its %s budget',
    async (interval) => {
      for (const include of [true, false]) {
        const acc = ledgerAccount({
          workspace: { budgets: [{ interval, limitUsd: 60 }], includeByokInBudgets: include },
        });
        const c = ctx(acc, MONDAY);
        await gate.record(finished(c, 60 * USD, true));
        const d = await gate.admit(c);
        if (include)
          expect(d).toEqual({
            allowed: false,
            heldMicros: 0,
            requestMicros: 0,
            blockedBy: {
              scope: 'workspace',
              id: WS1,
              name: WS1,
              interval,
              limitMicros: 60 * USD,
              countedMicros: 60 * USD,
              includesByok: true,
              blocked: true,
            },
          });
        else expect(d).toEqual({ allowed: true, reservation: null });
      }
    },
  );

  test('the workspace budget checks every interval with its one flag: the first interval at its limit blocks', async () => {
    const acc = ledgerAccount({
      workspace: {
        budgets: [
          { interval: 'daily', limitUsd: 1000 },
          { interval: 'weekly', limitUsd: 50 },
          { interval: 'monthly', limitUsd: 2000 },
          { interval: 'lifetime', limitUsd: 3000 },
        ],
        includeByokInBudgets: true,
      },
    });
    await gate.record(finished(ctx(acc, MONDAY), 30 * USD, true));
    await gate.record(finished(ctx(acc, MONDAY), 30 * USD, false));
    const d = await gate.admit(ctx(acc, afterMonday(2)));
    expect(!d.allowed && [d.blockedBy.interval, d.blockedBy.countedMicros, d.blockedBy.includesByok]).toEqual([
      'weekly',
      60 * USD,
      true,
    ]);
    // Next ISO week (Monday 00:00 UTC): the weekly window is fresh, daily too; monthly and lifetime still hold 60.
    expect(await gate.admit(ctx(acc, afterMonday(7)))).toEqual({ allowed: true, reservation: null });
  });

  test('windows turn over exactly at UTC boundaries (injected clock)', async () => {
    // The last millisecond of a window and the first of the next: Tuesday's end, the next week's, the next month's.
    const cases = [
      ['daily', afterMonday(2, -1), afterMonday(2)],
      ['weekly', afterMonday(14, -1), afterMonday(14)],
      ['monthly', new Date(monthStart(2).getTime() - 1), monthStart(2)],
    ] as const;
    for (const [interval, last, first] of cases) {
      const acc = ledgerAccount({ guardrails: [budgetGuardrail('g', 5, interval, false)], keyGuardrail: 'g' });
      await gate.record(finished(ctx(acc, last), 5 * USD, false));
      expect((await gate.admit(ctx(acc, last))).allowed).toBe(false);
      expect(await gate.admit(ctx(acc, first))).toEqual({ allowed: true, reservation: null });
    }
    // Lifetime never turns over.
    const acc = ledgerAccount({ guardrails: [budgetGuardrail('g', 5, 'lifetime', false)], keyGuardrail: 'g' });
    await gate.record(finished(ctx(acc, MONDAY), 5 * USD, false));
    expect((await gate.admit(ctx(acc, afterMonday(200)))).allowed).toBe(false);
  });

  test('a request under no budget limit is admitted without reading the ledger', async () => {
    const acc = ledgerAccount();
    expect(await gate.admit(ctx(acc, MONDAY))).toEqual({ allowed: true, reservation: null });
  });

  test('a negative or fractional list cost is refused and records nothing', async () => {
    const acc = ledgerAccount({ guardrails: [budgetGuardrail('g', 5, 'daily', false)], keyGuardrail: 'g' });
    const c = ctx(acc, MONDAY);
    await expect(gate.record(finished(c, -1, false))).rejects.toThrow(RangeError);
    await expect(gate.record(finished(c, 0.5, false))).rejects.toThrow(RangeError);
    const spend = await readWindows(
      ledger,
      keys,
      acc.accountId,
      [{ scope: 'guardrail', id: 'g', intervals: ['daily'] }],
      MONDAY,
    );
    expect(spend.get('guardrail/g')).toEqual({ daily: { nonByokMicros: 0, byokMicros: 0 } });
  });
});

test('Redis keys expire after their window plus the margin; lifetime keys never', async () => {
  const ledger = await createRedisLedger({ url: redis.url });
  const gate = createSpendGate(ledger);
  try {
    const acc = ledgerAccount({ guardrails: [budgetGuardrail('g', 5, 'daily', false)], keyGuardrail: 'g' });
    await gate.record(finished(ctx(acc, MONDAY), 1 * USD, false));
    const client = (ledger as Awaited<ReturnType<typeof createRedisLedger>>).client;
    const names = (await client.keys(`byok:ledger:{${acc.accountId}}:*`)).sort();
    // The request's generation id, remembered for exactly-once for one to two retention periods.
    const ids = names.find((n) => n.includes('}:ids:')) ?? 'none';
    const period = Number(ids.split(':').pop());
    expect(Math.abs(period - Math.floor(Date.now() / ID_RETENTION_MS))).toBeLessThanOrEqual(1);
    // MONDAY's windows by the calendar: its day, its week (named by the Monday) and its month.
    const date = MONDAY.toISOString().slice(0, 10);
    const day = `d${date}`;
    const week = `w${date}`;
    const month = `m${date.slice(0, 7)}`;
    const key = (rest: string) => `byok:ledger:{${acc.accountId}}:${rest}`;
    expect(names).toEqual([
      key(`acct:${month}:charged`),
      key(`gr:g:${day}:nonbyok`),
      key('gr:g:life:nonbyok'),
      key(`gr:g:${month}:nonbyok`),
      key(`gr:g:${week}:nonbyok`),
      ids,
      key(`ws:${WS1}:${day}:nonbyok`),
      key(`ws:${WS1}:life:nonbyok`),
      key(`ws:${WS1}:${month}:nonbyok`),
      key(`ws:${WS1}:${week}:nonbyok`),
    ]);
    const margin = 7 * 86_400_000;
    expect(await client.pexpiretime(key(`gr:g:${day}:nonbyok`))).toBe(afterMonday(1).getTime() + margin);
    expect(await client.pexpiretime(key(`gr:g:${week}:nonbyok`))).toBe(afterMonday(7).getTime() + margin);
    expect(await client.pexpiretime(key(`acct:${month}:charged`))).toBe(monthStart(1).getTime() + margin);
    expect(await client.pexpiretime(`byok:ledger:{${acc.accountId}}:gr:g:life:nonbyok`)).toBe(-1);
    expect(await client.pexpiretime(ids)).toBe((period + 2) * ID_RETENTION_MS);
  } finally {
    await gate.close();
  }
});

test('openLedger picks Redis when a URL is given, else the embedded ledger', async () => {
  const embedded = await openLedger({});
  const shared = await openLedger({ redisUrl: redis.url, keyPrefix: 'other:' });
  try {
    expect([embedded.ledger.backend, shared.ledger.backend]).toEqual(['embedded', 'redis']);
    expect(shared.keys.prefix).toBe('other:');
    expect(await shared.ledger.add([{ key: 'other:{a}:probe', by: 3, expiresAt: null }])).toEqual([3]);
  } finally {
    await embedded.ledger.close();
    await shared.ledger.close();
  }
});
