// A record or reservation whose script call timed out on the client still runs on Redis when the stall
// ends, and so does every replay sent during it. Reproduced with a real redis-server stalled by CLIENT PAUSE WRITE
// for longer than the client's command timeout: the counters must equal the sum of the distinct requests, and a
// reservation the caller gave up on must not leave a hold behind.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { Redis } from 'ioredis';
import type { Reservation } from '../../../src/contract/spend-gate.ts';
import { byokFeeMicros } from '../../../src/domain/billing.ts';
import {
  createRedisLedger,
  createSpendGate,
  keySpace,
  LedgerUnavailableError,
  type RedisLedger,
  readAccountMonth,
  readWindows,
  windowOf,
} from '../../../src/ledger/index.ts';
import { ctx, finished, ledgerAccount, USD, WS1 } from '../../support/ledger-fixtures.ts';
import { type RedisServer, startRedis } from '../../support/redis.ts';

let redis: RedisServer;
let admin: Redis;
beforeAll(async () => {
  redis = await startRedis();
  admin = new Redis(redis.url);
});
afterAll(async () => {
  admin?.disconnect();
  await redis?.stop();
});

const keys = keySpace();
const TIMEOUT_MS = 200;
const COST = 1234;

/** Stalls every write (scripts included) for ms; reads still answer. Resolves when the stall has ended. */
async function stall(ms: number): Promise<() => Promise<void>> {
  await admin.call('CLIENT', 'PAUSE', String(ms), 'WRITE');
  const ends = Date.now() + ms;
  return () => new Promise((r) => setTimeout(r, Math.max(0, ends - Date.now()) + 50));
}

/**
 * Admission between stalls, as a client that retries a 503 would: on a loaded machine a reservation can outlast the
 * 200 ms command timeout without any stall, and a reservation given up on leaves no hold (the next test shows it).
 */
async function admitRetrying(
  gate: ReturnType<typeof createSpendGate>,
  req: Parameters<ReturnType<typeof createSpendGate>['admit']>[0],
) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await gate.admit(req);
    } catch (err) {
      if (!(err instanceof LedgerUnavailableError) || attempt >= 5) throw err;
    }
  }
}

async function open(): Promise<RedisLedger> {
  return createRedisLedger({ url: redis.url, commandTimeoutMs: TIMEOUT_MS });
}

test('20 stalls past the command timeout during records and their settles: every request counted exactly once, no hold left', async () => {
  const ledger = await open();
  const gate = createSpendGate(ledger, { retryMinMs: 50, retryMaxMs: 400 });
  const acc = ledgerAccount({
    workspace: { budgets: [{ interval: 'daily', limitUsd: 1_000_000 }], includeByokInBudgets: true },
  });
  const at = new Date();
  const c = ctx(acc, at);
  await ledger.restore(keys.validated(acc.accountId), []);
  const hold = keys.hold(acc.accountId, 'workspace', WS1, windowOf('daily', at));
  try {
    // Past the free allowance: every later BYOK request pays a fee, which must be counted once too.
    await gate.record(finished(c, 25_000 * USD, true));
    const STALLS = 20;
    const PER_STALL = 6;
    let byok = 0;
    let all = 0;
    for (let s = 0; s < STALLS; s++) {
      const reqs = Array.from({ length: PER_STALL }, (_, i) => finished(c, COST, i % 2 === 1));
      const reservations = new Map<string, Reservation | null>();
      for (const r of reqs) {
        const d = await admitRetrying(gate, {
          ...c,
          maximum: { id: r.generationId, costMicros: 10 * COST, byokOnly: false },
        });
        expect(d.allowed).toBe(true);
        reservations.set(r.generationId, d.allowed ? d.reservation : null);
      }
      const ended = await stall(3 * TIMEOUT_MS + (s % 4) * TIMEOUT_MS);
      const recorded = reqs.map((r) => gate.record({ ...r, reservation: reservations.get(r.generationId) ?? null }));
      await ended();
      await Promise.all(recorded);
      await gate.drain(10_000);
      byok += reqs.filter((r) => r.byokCredentialId !== null).length;
      all += reqs.length;
    }
    // One long stall, one request: every replay sent during it runs when it ends.
    const total = async () => {
      const spend = await readWindows(
        ledger,
        keys,
        acc.accountId,
        [{ scope: 'workspace', id: WS1, intervals: ['daily'] }],
        at,
      );
      const daily = spend.get(`workspace/${WS1}`)?.daily;
      return (daily?.nonByokMicros ?? 0) + (daily?.byokMicros ?? 0) - 25_000 * USD;
    };
    const beforeLone = await total();
    const ended = await stall(12 * TIMEOUT_MS);
    const p = gate.record(finished(c, COST, false));
    await ended();
    await p;
    all += 1;
    const counted = await total();
    process.stderr.write(
      `[exactly-once] one request through a stall of ${12 * TIMEOUT_MS} ms (command timeout ${TIMEOUT_MS} ms): counted ${(counted - beforeLone) / COST} times\n`,
    );
    const month = await readAccountMonth(ledger, keys, acc.accountId, 'pay-as-you-go', at);
    const fees = month.feesMicros;
    process.stderr.write(
      `[exactly-once] ${all} distinct requests of ${COST} micros over ${STALLS + 1} stalls: counted ${counted / COST} times their cost ` +
        `(${(counted / (all * COST)).toFixed(2)}x); BYOK fees ${fees} micros for ${byok} fees of ${byokFeeMicros(COST)}; holds left ${await admin.zcard(hold)}\n`,
    );
    expect(counted).toBe(all * COST);
    expect(fees).toBe(byok * byokFeeMicros(COST));
    expect(await admin.zcard(hold)).toBe(0);
  } finally {
    await admin.call('CLIENT', 'UNPAUSE');
    await gate.close();
  }
});

test('a reservation that timed out in a stall leaves no hold: a budget with room for one admits the next request', async () => {
  const ledger = await open();
  const gate = createSpendGate(ledger, { retryMinMs: 50, retryMaxMs: 400 });
  const MAX = 10_000;
  // Room for exactly one request's maximum.
  const acc = ledgerAccount({
    workspace: { budgets: [{ interval: 'daily', limitUsd: MAX / USD }], includeByokInBudgets: false },
  });
  await ledger.restore(keys.validated(acc.accountId), []);
  let seq = 0;
  const admit = () =>
    gate.admit({ ...ctx(acc, new Date()), maximum: { id: `gen-stalled-${++seq}`, costMicros: MAX, byokOnly: false } });
  const STALLS = 10;
  let admittedAfter = 0;
  try {
    for (let s = 0; s < STALLS; s++) {
      const ended = await stall(3 * TIMEOUT_MS);
      // The caller gives up at the timeout: the gateway answers 503 and sends nothing upstream.
      await expect(admit()).rejects.toBeInstanceOf(LedgerUnavailableError);
      await ended();
      const next = await admit();
      if (next.allowed) {
        admittedAfter += 1;
        await gate.release(next.reservation);
      }
    }
    process.stderr.write(
      `[exactly-once] a budget with room for one, after ${STALLS} stalled reservations: the next request admitted ${admittedAfter} of ${STALLS} times\n`,
    );
    expect(admittedAfter).toBe(STALLS);
    const hold = keys.hold(acc.accountId, 'workspace', WS1, windowOf('daily', new Date()));
    expect(await admin.zcard(hold)).toBe(0);
  } finally {
    await admin.call('CLIENT', 'UNPAUSE');
    await gate.close();
  }
});

test('the add script: an id applied once, in one batch or across batches, per account; batching kept', async () => {
  const ledger = await open();
  const scripts = async () => {
    const stats = await ledger.client.info('commandstats');
    return [...stats.matchAll(/cmdstat_(?:eval|evalsha):calls=(\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
  };
  try {
    const k = (acct: string, name: string) => `byok:ledger:{${acct}}:${name}`;
    const before = await scripts();
    // One batch (same account, within the 5 ms window): a request and its own replay, and another request.
    const [a, b, c] = await Promise.all([
      ledger.add(
        [
          { key: k('x', 'month'), by: 10, expiresAt: null },
          { key: k('x', 'day'), by: 1, expiresAt: null },
        ],
        undefined,
        'gen-1',
      ),
      ledger.add(
        [
          { key: k('x', 'month'), by: 10, expiresAt: null },
          { key: k('x', 'day'), by: 1, expiresAt: null },
        ],
        undefined,
        'gen-1',
      ),
      ledger.add(
        [
          { key: k('x', 'month'), by: 5, expiresAt: null },
          { key: k('x', 'day'), by: 1, expiresAt: null },
        ],
        undefined,
        'gen-2',
      ),
    ]);
    expect((await scripts()) - before).toBe(1);
    expect(a).toEqual([10, 1]);
    expect(b).toEqual([10, 1]); // the replay: its first total, then the current one (nothing added yet at that point)
    expect(c).toEqual([15, 2]);
    // Later, in another batch: still once, with the first total as first returned.
    expect(
      await ledger.add(
        [
          { key: k('x', 'month'), by: 10, expiresAt: null },
          { key: k('x', 'day'), by: 1, expiresAt: null },
        ],
        undefined,
        'gen-1',
      ),
    ).toEqual([10, 2]);
    // The same id in another account is another write.
    expect(await ledger.add([{ key: k('y', 'month'), by: 3, expiresAt: null }], undefined, 'gen-1')).toEqual([3]);
    expect(await ledger.read([k('x', 'month'), k('x', 'day'), k('y', 'month')])).toEqual([15, 2, 3]);
  } finally {
    await ledger.close();
  }
});

test('memory: an id costs about 100 bytes in its account hash (docs/ledger.md, "Exactly once")', async () => {
  const ledger = await open();
  const gate = createSpendGate(ledger);
  const acc = ledgerAccount();
  const c = ctx(acc, new Date());
  try {
    // Generation ids as the gateway makes them: gen- and a UUID's 36 characters.
    for (let i = 0; i < 2000; i += 100)
      await Promise.all(
        Array.from({ length: 100 }, () =>
          gate.record({ ...finished(c, COST, false), generationId: `gen-${randomUUID()}` }),
        ),
      );
    const [idsKey] = await admin.keys(`byok:ledger:{${acc.accountId}}:ids:*`);
    const fields = await admin.hlen(idsKey!);
    const bytes = Number(await admin.call('MEMORY', 'USAGE', idsKey!, 'SAMPLES', '0'));
    process.stderr.write(
      `[exactly-once] ${fields} ids in one account hash: ${bytes} bytes, ${(bytes / fields).toFixed(1)} per id\n`,
    );
    expect(fields).toBe(2000);
    expect(bytes / fields).toBeLessThan(130);
  } finally {
    await gate.close();
  }
});
