// the Redis ledger's connection, made cheaper, keeps what the spend gate relies on. With a real
// redis-server: the run_id is read once per connection, not per reservation, and a restart that kept every key (the
// account's validated key included) still closes budgets until the rebuild; the command timeout covers a command
// already written (a stalled Redis); a record batch names each key once; the ledger works in a process whose
// prototypes are frozen (the gateway's hardening, src/cli/harden.ts).
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { Redis } from 'ioredis';
import {
  createRedisLedger,
  LedgerResetError,
  LedgerUnavailableError,
  type RedisLedger,
} from '../../../src/ledger/index.ts';
import { KEPT_ID_TTL_MS } from '../../../src/ledger/keys.ts';
import type { ReserveRequest } from '../../../src/ledger/ledger.ts';
import { encodeAddBatch } from '../../../src/ledger/redis-scripts.ts';
import { beforeCap } from '../../support/order.ts';
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

const acct = (name: string) => `byok:ledger:{${name}}`;
const reservation = (name: string, id: string): ReserveRequest => ({
  id,
  validatedKey: `${acct(name)}:validated`,
  checks: [
    {
      countedKeys: [`${acct(name)}:ws:w:d:nonbyok`],
      holdKey: `${acct(name)}:ws:w:d:holds`,
      limitMicros: 1_000_000,
      amount: 10,
    },
  ],
  ttlMs: 60_000,
});

async function commandCalls(name: string): Promise<number> {
  const m = new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(await admin.info('commandstats'));
  return m ? Number(m[1]) : 0;
}

test('the run_id is read once per connection: 200 reservations run INFO once', async () => {
  const ledger = await createRedisLedger({ url: redis.url });
  try {
    await ledger.restore(`${acct('a')}:validated`, []);
    const before = await commandCalls('info');
    for (let i = 0; i < 200; i++)
      expect(await ledger.reserve(reservation('a', `gen-a-${i}`))).toEqual({ ok: true, granted: 10 });
    // The restore above read it in its own script; the reservations read it once, for the connection (the INFO that
    // read `before` counts itself once it has run: the 1 subtracted).
    expect((await commandCalls('info')) - before - 1).toBe(1);
  } finally {
    await ledger.close();
  }
});

test('a restart that kept every key still closes budgets until the rebuild, then reopens them', async () => {
  const ledger: RedisLedger = await createRedisLedger({ url: redis.url, commandTimeoutMs: 500 });
  try {
    const validated = `${acct('b')}:validated`;
    await ledger.restore(validated, []);
    expect(await ledger.reserve(reservation('b', 'gen-b-1'))).toEqual({ ok: true, granted: 10 });
    const oldRunId = /run_id:(\w+)/.exec(await admin.info('server'))![1];
    expect(await admin.get(validated)).toBe(oldRunId);
    // An RDB snapshot, then kill -9 and a restart that loads it: the validated key survives, naming the old process.
    await admin.call('SAVE');
    await redis.kill();
    await redis.start();
    expect(await admin.get(validated)).toBe(oldRunId);
    expect(/run_id:(\w+)/.exec(await admin.info('server'))![1]).not.toBe(oldRunId);
    // The ledger reconnects by itself; until then a reservation fails as unavailable, after it as reset.
    let outcome: unknown;
    for (let i = 0; i < 40; i++) {
      outcome = await ledger.reserve(reservation('b', `gen-b-after-${i}`)).catch((err: unknown) => err);
      if (!(outcome instanceof LedgerUnavailableError)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(outcome).toBeInstanceOf(LedgerResetError);
    // The operator's rebuild validates the account for the new process: budgets reopen.
    expect((await ledger.restore(validated, [])).alreadyValid).toBe(false);
    expect(await ledger.reserve(reservation('b', 'gen-b-rebuilt'))).toEqual({ ok: true, granted: 10 });
  } finally {
    await ledger.close();
  }
});

test('the command timeout covers a command already written: a stalled Redis fails the call at the timeout', async () => {
  const ledger = await createRedisLedger({ url: redis.url, commandTimeoutMs: 200 });
  try {
    await ledger.restore(`${acct('c')}:validated`, []);
    // Read the run_id before the stall (a reservation on a fresh connection reads it first).
    expect(await ledger.reserve(reservation('c', 'gen-c-0'))).toEqual({ ok: true, granted: 10 });
    await admin.call('CLIENT', 'PAUSE', '3000', 'WRITE');
    const started = Date.now();
    // Both gave up at the timeout, before a cap of 2 s (the trap: waiting for the stall's end at 3 s) fired.
    const [reserved, added] = await beforeCap(2000, "the stall's end", () =>
      Promise.all([
        ledger.reserve(reservation('c', 'gen-c-1')).catch((err: unknown) => err),
        ledger
          .add([{ key: `${acct('c')}:x`, by: 1, expiresAt: null }], undefined, 'gen-c-2')
          .catch((err: unknown) => err),
      ]),
    );
    const waited = Date.now() - started;
    expect(reserved).toBeInstanceOf(LedgerUnavailableError);
    expect(added).toBeInstanceOf(LedgerUnavailableError);
    // Not before the timeout: the add waits its 5 ms batch window first.
    expect(waited).toBeGreaterThanOrEqual(190);
    await new Promise((r) => setTimeout(r, 3100));
    // The connection is still usable after the stall (the late answers were dropped in order).
    expect(await ledger.read([`${acct('c')}:x`])).toEqual([1]);
    expect(await ledger.add([{ key: `${acct('c')}:x`, by: 1, expiresAt: null }], undefined, 'gen-c-3')).toEqual([2]);
  } finally {
    await admin.call('CLIENT', 'UNPAUSE');
    await ledger.close();
  }
});

test('a record batch names each key once: 5 requests on the same 5 counters send 7 keys', async () => {
  // Redis expires keys by its own clock, so the window's end is a day from now, never a calendar date.
  const day = Math.ceil(Date.now() / 86_400_000) * 86_400_000 + 86_400_000;
  const calls = Array.from({ length: 5 }, (_, i) => ({
    id: `gen-d-${i}`,
    increments: ['list', 'd', 'w', 'm', 'life'].map((w) => ({
      key: `${acct('d')}:${w}`,
      by: 100 + i,
      expiresAt: w === 'life' ? null : day,
    })),
    settle: { id: `gen-d-${i}`, amount: 500, holdKeys: [`${acct('d')}:d:holds`] },
  }));
  const { keys, args } = encodeAddBatch(calls, {
    current: `${acct('d')}:ids:1`,
    previous: `${acct('d')}:ids:0`,
    expiresAt: 42,
  });
  expect(keys).toEqual([
    `${acct('d')}:ids:1`,
    `${acct('d')}:ids:0`,
    ...['list', 'd', 'w', 'm', 'life'].map((w) => `${acct('d')}:${w}`),
    `${acct('d')}:d:holds`,
  ]);
  expect(args.slice(0, 5)).toEqual(['42', '5', '1', `0,0,${day},${day},${day},${day},0,0`, String(KEPT_ID_TTL_MS)]);
  // Per call: id, increments, hold sets, hold member, keep hash ('' = not journaled).
  expect(args.slice(5, 10)).toEqual(['gen-d-0', '3:100,4:100,5:100,6:100,7:100', '8', 'gen-d-0|500', '']);
  expect(args).toHaveLength(5 + 5 * 5);
  // And the script applies it: every request learns its running total; the holds are dropped.
  const ledger = await createRedisLedger({ url: redis.url });
  try {
    await admin.zadd(`${acct('d')}:d:holds`, Date.now() + 60_000, 'gen-d-0|500', Date.now() + 60_000, 'gen-d-4|500');
    const totals = await Promise.all(calls.map((c) => ledger.add(c.increments, c.settle, c.id)));
    expect(totals.map((t) => t[0])).toEqual([100, 201, 303, 406, 510]);
    expect(await admin.zcard(`${acct('d')}:d:holds`)).toBe(0);
    expect(await admin.pexpiretime(`${acct('d')}:d`)).toBe(day);
    expect(await admin.pexpiretime(`${acct('d')}:life`)).toBe(-1);
  } finally {
    await ledger.close();
  }
});

test('the ledger works in a process whose prototypes are frozen (the gateway hardens itself once loaded)', () => {
  const code = `
    import { createRedisLedger } from ${JSON.stringify(new URL('../../../src/ledger/redis.ts', import.meta.url).href)};
    import { hardenPrototypes } from ${JSON.stringify(new URL('../../../src/cli/harden.ts', import.meta.url).href)};
    const ledger = await createRedisLedger({ url: process.argv[1] });
    hardenPrototypes();
    const k = 'byok:ledger:{e}:x';
    const added = await ledger.add([{ key: k, by: 5, expiresAt: null }], undefined, 'gen-e-1');
    await ledger.restore('byok:ledger:{e}:validated', []);
    const reserved = await ledger.reserve({ id: 'gen-e-2', validatedKey: 'byok:ledger:{e}:validated', checks: [{ countedKeys: [k], holdKey: 'byok:ledger:{e}:h', limitMicros: 100, amount: 10 }], ttlMs: 60000 });
    await ledger.release('gen-e-2', 10, ['byok:ledger:{e}:h']);
    console.log(JSON.stringify({ frozen: Object.isFrozen(Object.prototype), added, reserved, read: await ledger.read([k]) }));
    await ledger.close();
  `;
  const out = spawnSync(
    process.execPath,
    ['--no-warnings=ExperimentalWarning', '--input-type=module', '-e', code, redis.url],
    { encoding: 'utf8', timeout: 20_000 },
  );
  expect(out.stderr).toBe('');
  expect(JSON.parse(out.stdout)).toEqual({ frozen: true, added: [5], reserved: { ok: true, granted: 10 }, read: [5] });
});

test("a journaled record's keep mark outlives the id sets: replayed after they lapsed it counts once, until the journal forgets it", async () => {
  const ledger = await createRedisLedger({ url: redis.url, batchWindowMs: 0 });
  try {
    const inc = [{ key: `${acct('k')}:list`, by: 250, expiresAt: null }];
    const keep = `${acct('k')}:jids:journal-1:7`;
    expect(await ledger.add(inc, undefined, 'gen-k-1', keep)).toEqual([250]);
    expect(await admin.hget(keep, 'gen-k-1')).toBe('250');
    expect(await admin.pttl(keep)).toBeGreaterThan(KEPT_ID_TTL_MS - 60_000);
    // The id sets lapse (20-40 minutes); the replay finds the keep mark and returns the first total.
    for (const key of await admin.keys(`${acct('k')}:ids:*`)) await admin.del(key);
    expect(await ledger.add(inc, undefined, 'gen-k-1', keep)).toEqual([250]);
    expect(await admin.get(`${acct('k')}:list`)).toBe('250');
    // The journal deleted the segment: the mark goes, and (ids lapsed too) the id is unknown again.
    await ledger.forgetKept([keep]);
    expect(await admin.exists(keep)).toBe(0);
  } finally {
    await ledger.close();
  }
});
