// The spend gate's in-turn path (an in-process ledger's addNow and reserveNow: no promise chain per request) against
// its promise path (the same ledger behind a wrapper that offers only add and reserve, as Redis does), under
// generated request sequences (fast-check, fixed seed): admissions with and without a floor, BYOK and shared records
// under and over the free allowance, releases, repeated ids. Both gates must give the same decisions, grants, fees
// and charges, and leave the same counters; a refusal the ledger throws must reject on both paths alike.

import { describe, expect, test } from '@jest/globals';
import fc from 'fast-check';
import type { AdmitDecision, RecordedSpend } from '../../../src/contract/spend-gate.ts';
import { FREE_ALLOWANCE_MICROS, type PlanName } from '../../../src/domain/index.ts';
import {
  createEmbeddedLedger,
  createSpendGate,
  type EmbeddedLedger,
  keySpace,
  type Ledger,
  readAccountMonth,
  windowsAt,
} from '../../../src/ledger/index.ts';
import { budgetGuardrail, ctx, finished, ledgerAccount, USD } from '../../support/ledger-fixtures.ts';
import { expectEqual, propertyRuns } from '../../support/properties.ts';

const SEED = 20261129;
const AT = new Date('2026-11-23T10:00:00Z');
const keys = keySpace();
const ACCOUNT = 'acct-in-turn';

type Op =
  | { kind: 'admit'; costMicros: number; floorMicros: number | null; byokOnly: boolean }
  | { kind: 'record'; of: number; costMicros: number; byok: boolean }
  | { kind: 'release'; of: number }
  | { kind: 'replay'; of: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    kind: fc.constant('admit' as const),
    costMicros: fc.integer({ min: 0, max: 3 * USD }),
    floorMicros: fc.option(fc.integer({ min: 0, max: USD }), { nil: null }),
    byokOnly: fc.boolean(),
  }),
  fc.record({
    kind: fc.constant('record' as const),
    of: fc.nat(),
    costMicros: fc.integer({ min: 0, max: 400 * USD }),
    byok: fc.boolean(),
  }),
  fc.record({ kind: fc.constant('release' as const), of: fc.nat() }),
  fc.record({ kind: fc.constant('replay' as const), of: fc.nat() }),
);

/** What the gateway would see from one call: its value, or the refusal's name and message. */
type Seen = { ok: AdmitDecision | RecordedSpend | null } | { error: string };
const seen = async (call: () => Promise<AdmitDecision | RecordedSpend | void>): Promise<Seen> => {
  try {
    return { ok: (await call()) ?? null };
  } catch (err) {
    return { error: err instanceof Error ? `${err.name}: ${err.message}` : String(err) };
  }
};

/** The same ledger with only the promise methods: the gate cannot take its in-turn path. */
function promisesOnly(inner: EmbeddedLedger): Ledger {
  return {
    backend: inner.backend,
    read: (k) => inner.read(k),
    add: (inc, settle, id, keep) => inner.add(inc, settle, id, keep),
    forgetKept: (k) => inner.forgetKept(k),
    reserve: (r) => inner.reserve(r),
    restore: (v, e) => inner.restore(v, e),
    release: (i, a, h) => inner.release(i, a, h),
    admitRate: (c) => inner.admitRate(c),
    settleRate: (c, u) => inner.settleRate(c, u),
    close: () => inner.close(),
  };
}

async function run(ops: Op[], plan: PlanName, includeByok: boolean, toAllowance: number, inTurn: boolean) {
  const inner = createEmbeddedLedger({ now: () => AT.getTime() });
  // The month's BYOK list cost so far, near the free allowance, so records cross it and pay fees.
  const byokSoFar = Math.max(0, FREE_ALLOWANCE_MICROS[plan] - toAllowance);
  await inner.add([{ key: keys.account(ACCOUNT, windowsAt(AT).monthly, 'byok_list'), by: byokSoFar, expiresAt: null }]);
  let inTurnCalls = 0;
  const ledger: Ledger = inTurn
    ? {
        ...inner,
        addNow: (...a) => (inTurnCalls++, inner.addNow!(...a)),
        reserveNow: (r) => (inTurnCalls++, inner.reserveNow!(r)),
      }
    : promisesOnly(inner);
  const gate = createSpendGate(ledger, { retryMinMs: 1, retryMaxMs: 2 });
  // One account per run, the same in both: its ids make the counters' keys.
  const acc = ledgerAccount({ plan, guardrails: [budgetGuardrail('g', 5, 'daily', includeByok)], keyGuardrail: 'g' });
  acc.accountId = ACCOUNT;
  const admitted: { id: string; reservation: AdmitDecision }[] = [];
  const out: Seen[] = [];
  const finishedOf = (i: number, costMicros: number, byok: boolean) => {
    const a = admitted[i % admitted.length]!;
    const reservation = a.reservation.allowed ? a.reservation.reservation : null;
    return { ...finished(ctx(acc, AT), costMicros, byok), generationId: a.id, reservation };
  };
  for (const [n, o] of ops.entries()) {
    if (o.kind === 'admit') {
      const id = `gen-${n}`;
      const maximum = {
        id,
        costMicros: o.costMicros,
        byokOnly: o.byokOnly,
        ...(o.floorMicros === null ? {} : { floorMicros: o.floorMicros, shareOfRoom: 0.5 }),
      };
      const s = await seen(() => gate.admit({ ...ctx(acc, AT), maximum }));
      out.push(s);
      if ('ok' in s) admitted.push({ id, reservation: s.ok as AdmitDecision });
    } else if (admitted.length === 0) {
      continue;
    } else if (o.kind === 'record') {
      out.push(await seen(() => gate.record(finishedOf(o.of, o.costMicros, o.byok))));
    } else if (o.kind === 'replay') {
      // The same generation recorded again (a retry): counted once, the first fee again.
      out.push(await seen(() => gate.record(finishedOf(o.of, USD, true))));
    } else {
      const a = admitted[o.of % admitted.length]!;
      out.push(await seen(() => gate.release(a.reservation.allowed ? a.reservation.reservation : null)));
    }
  }
  const month = await readAccountMonth(inner, keys, acc.accountId, plan, AT);
  await gate.close();
  return { out, month, inTurnCalls };
}

describe('the spend gate in one turn and in promises', () => {
  test('decide, grant, charge and count alike under generated sequences', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(op, { minLength: 1, maxLength: 30 }),
        fc.constantFrom<PlanName>('pay-as-you-go', 'enterprise'),
        fc.boolean(),
        fc.integer({ min: -100 * USD, max: 2_000 * USD }),
        async (ops, plan, includeByok, toAllowance) => {
          const turn = await run(ops, plan, includeByok, toAllowance, true);
          const promises = await run(ops, plan, includeByok, toAllowance, false);
          expectEqual(turn.out, promises.out);
          expectEqual(turn.month, promises.month);
          // The first path really is the in-turn one: every admission reaches reserveNow.
          if (ops.some((o) => o.kind === 'admit' && o.costMicros > 0)) expect(turn.inTurnCalls).toBeGreaterThan(0);
          expect(promises.inTurnCalls).toBe(0);
        },
      ),
      { seed: SEED, numRuns: propertyRuns(300) },
    );
  });

  test('a record the ledger refuses rejects, drops its hold, and leaves the counters as they were', async () => {
    for (const inTurn of [true, false]) {
      const inner = createEmbeddedLedger({ now: () => AT.getTime() });
      const gate = createSpendGate(inTurn ? inner : promisesOnly(inner));
      const acc = ledgerAccount({ guardrails: [budgetGuardrail('g', 5, 'daily', true)], keyGuardrail: 'g' });
      await gate.record(finished(ctx(acc, AT), USD, false));
      const admitted = await gate.admit({
        ...ctx(acc, AT),
        maximum: { id: 'gen-big', costMicros: USD, byokOnly: false },
      });
      if (!admitted.allowed) throw new Error('the first admission must fit');
      // Past 2^53 micros: the ledger refuses the whole add.
      const record = gate.record({
        ...finished(ctx(acc, AT), Number.MAX_SAFE_INTEGER, false),
        generationId: 'gen-big',
        reservation: admitted.reservation,
      });
      await expect(record).rejects.toThrow(/would pass 2\^53 micros/);
      expect(await readAccountMonth(inner, keys, acc.accountId, 'pay-as-you-go', AT)).toMatchObject({
        chargedMicros: USD,
      });
      // Its hold was dropped: the 4 USD left fit again.
      const next = await gate.admit({
        ...ctx(acc, AT),
        maximum: { id: 'gen-next', costMicros: 4 * USD, byokOnly: false },
      });
      expect(next.allowed).toBe(true);
      await gate.close();
    }
  });
});
