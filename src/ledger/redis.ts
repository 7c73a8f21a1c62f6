// The Redis ledger (several gateway replicas): one Lua script adds every counter of a request in one round trip
// (INCRBY per key, atomic as a whole: Redis runs a script without interleaving), and sets each new key's expiry
// to its window's end plus a margin. Reads are one MGET. Commands fail fast while Redis is unreachable (no offline
// queue, a command timeout), so the spend gate can apply its documented outage behaviour instead of hanging.
import { Redis, type RedisOptions } from 'ioredis';
import type { Micros } from '../domain/money.ts';
import { ID_RETENTION_MS, idSets, type IdSets } from './keys.ts';
import { LedgerResetError, LedgerUnavailableError, ReservationSettledError, type CounterIncrement, type HoldRelease, type Ledger } from './ledger.ts';

// Ids (issue 37): a call carrying an id is applied once. A call that timed out on the client still runs when Redis
// answers again, and so does every replay sent meanwhile; all but the first find the id and change nothing. An id is
// a field of the account's id set of the current period (value: the first counter's total as first applied, or 'R'
// for a reservation released unrecorded, which a record still counts); lookups read the current and previous set.
const FIND_RECORDED = `
local function recorded(cur, prev, id)
  local v = redis.call('HGET', cur, id)
  if v and v ~= 'R' then return v end
  v = redis.call('HGET', prev, id)
  if v and v ~= 'R' then return v end
  return false
end
`;

// Adds of a batch. ARGV: the id sets' expiry (ms), the number of calls, then per call: id ('' = none), number of
// counters, number of hold sets, the hold member to drop ("<id>|<amount>"), then (amount, expiresAt ms or 0) per
// counter. KEYS per call: the id sets (current, previous; only with an id), its counters, its hold sets.
// A counter may appear in several calls (several requests of one account in one batch): each INCRBY returns the
// running total, so every request still learns the total after its own increment. The overflow check runs on
// running totals too, before anything is written. The expiry is set when the increment created the key (its value
// equals the amount), once per window. The holds go in the same script: a request's spend and its hold are never
// both counted. A call already applied (or earlier in this batch) returns its first total, then the current ones.
const ADD_SCRIPT = `
${FIND_RECORDED}
local idsAt = tonumber(ARGV[1])
local nc = tonumber(ARGV[2])
-- Per call: id, counters, hold sets, member, first counter's KEYS and ARGV index, already applied.
local ids, ni, nh, member, kf, af, dup = {}, {}, {}, {}, {}, {}, {}
local cur, prev
local k, a = 1, 3
for c = 1, nc do
  ids[c] = ARGV[a]
  ni[c] = tonumber(ARGV[a + 1])
  nh[c] = tonumber(ARGV[a + 2])
  member[c] = ARGV[a + 3]
  a = a + 4
  if ids[c] ~= '' then
    cur = KEYS[k]
    prev = KEYS[k + 1]
    k = k + 2
  end
  kf[c] = k
  af[c] = a
  k = k + ni[c] + nh[c]
  a = a + 2 * ni[c]
end
-- A batch is one account: one pair of id sets, so ids seen earlier in it are keyed by id alone.
local running = {}
local seen = {}
for c = 1, nc do
  local id = ids[c]
  if id ~= '' then
    if seen[id] or recorded(cur, prev, id) then dup[c] = true else seen[id] = true end
  end
  if not dup[c] then
    for i = 0, ni[c] - 1 do
      local key = KEYS[kf[c] + i]
      local v = running[key] or tonumber(redis.call('GET', key) or '0') or 0
      v = v + tonumber(ARGV[af[c] + 2 * i])
      if v > 9007199254740991 then return redis.error_reply('BYOK_OVERFLOW ' .. key) end
      running[key] = v
    end
  end
end
local out = {}
local n = 0
local remembered = false
for c = 1, nc do
  if dup[c] then
    local first = recorded(cur, prev, ids[c])
    for i = 0, ni[c] - 1 do
      n = n + 1
      if i == 0 then out[n] = tonumber(first) else out[n] = tonumber(redis.call('GET', KEYS[kf[c] + i]) or '0') or 0 end
    end
  else
    local first = 0
    for i = 0, ni[c] - 1 do
      local key = KEYS[kf[c] + i]
      local by = tonumber(ARGV[af[c] + 2 * i])
      local v = redis.call('INCRBY', key, by)
      local at = tonumber(ARGV[af[c] + 2 * i + 1])
      if at > 0 and v == by then redis.call('PEXPIREAT', key, at) end
      if i == 0 then first = v end
      n = n + 1
      out[n] = v
    end
    for i = 0, nh[c] - 1 do redis.call('ZREM', KEYS[kf[c] + ni[c] + i], member[c]) end
    if ids[c] ~= '' then
      redis.call('HSET', cur, ids[c], first)
      remembered = true
    end
  end
end
if remembered then redis.call('PEXPIREAT', cur, idsAt) end
return out
`;

// The running Redis process, read inside scripts: counters restored from an RDB snapshot (or an empty restart) live in
// a process whose run_id no account was validated for.
const RUN_ID = `local runid = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')`;

// Rebuild after a restart. KEYS[1]: the account's validated key, then the counters. ARGV: per counter its floor and
// expiry (0 = none). Raises each counter to its floor, then validates the account for this process.
const RESTORE_SCRIPT = `
${RUN_ID}
if redis.call('GET', KEYS[1]) == runid then return {0, 0, 1} end
local raised = 0
local largest = 0
for i = 2, #KEYS do
  local floor = tonumber(ARGV[2 * i - 3])
  local at = tonumber(ARGV[2 * i - 2])
  local cur = tonumber(redis.call('GET', KEYS[i]) or '0') or 0
  if cur < floor then
    redis.call('INCRBY', KEYS[i], floor - cur)
    if at > 0 then redis.call('PEXPIREAT', KEYS[i], at) end
    raised = raised + 1
    if floor - cur > largest then largest = floor - cur end
  end
end
redis.call('SET', KEYS[1], runid)
return {raised, largest, 0}
`;

// Check-and-reserve. KEYS: the account's validated key (or '' when not checked), its id sets (current, previous),
// then per check its hold set and its counted keys. ARGV: now, expiresAt, id, number of checks,
// then per check: limit, amount, number of counted keys. A hold is a sorted-set member "<id>|<amount>" scored by its
// expiry: lapsed ones are dropped before summing, so a crashed gateway's holds free themselves. An id already
// recorded or released holds nothing ({2}: a reservation that ran after its caller gave up); the request's own hold
// (a repeated reservation) is not counted against it and is replaced.
const RESERVE_SCRIPT = `
${RUN_ID}
if KEYS[1] ~= '' and redis.call('GET', KEYS[1]) ~= runid then return {-1} end
local now = tonumber(ARGV[1])
local expires = tonumber(ARGV[2])
local id = ARGV[3]
local n = tonumber(ARGV[4])
if redis.call('HEXISTS', KEYS[2], id) == 1 or redis.call('HEXISTS', KEYS[3], id) == 1 then return {2} end
local own = id .. '|'
local k = 4
local a = 5
local plan = {}
for i = 1, n do
  local hold = KEYS[k]
  k = k + 1
  local limit = tonumber(ARGV[a])
  local amount = tonumber(ARGV[a + 1])
  local nkeys = tonumber(ARGV[a + 2])
  a = a + 3
  local counted = 0
  for j = 1, nkeys do
    counted = counted + (tonumber(redis.call('GET', KEYS[k]) or '0') or 0)
    k = k + 1
  end
  redis.call('ZREMRANGEBYSCORE', hold, '-inf', now)
  local held = 0
  for _, m in ipairs(redis.call('ZRANGE', hold, 0, -1)) do
    if string.sub(m, 1, #own) ~= own then held = held + (tonumber(string.match(m, '|(%d+)$')) or 0) end
  end
  local fits
  if amount > 0 then fits = counted + held + amount <= limit else fits = counted + held < limit end
  if not fits then return {0, i - 1, counted, held} end
  plan[i] = {hold, amount}
end
for i = 1, n do
  if plan[i][2] > 0 then
    redis.call('ZADD', plan[i][1], expires, id .. '|' .. plan[i][2])
    local ttl = redis.call('PTTL', plan[i][1])
    if ttl < 0 or ttl < expires - now then redis.call('PEXPIREAT', plan[i][1], expires) end
  end
end
return {1}
`;

// Drops one reservation's member ("<id>|<amount>", ARGV[1]) from its hold sets (KEYS from 2), in one round trip, and
// remembers its id (ARGV[2]) as released in the account's current id set (KEYS[1], lapsing at ARGV[3]) unless it is
// there already: a reservation sent before a stall and run after it then holds nothing.
const RELEASE_SCRIPT = `
redis.call('HSETNX', KEYS[1], ARGV[2], 'R')
redis.call('PEXPIREAT', KEYS[1], ARGV[3])
for i = 2, #KEYS do redis.call('ZREM', KEYS[i], ARGV[1]) end
return 1
`;

/** A reservation's member in its hold sets (RESERVE_SCRIPT writes it as id .. '|' .. amount). */
const holdMember = (id: string, amount: Micros) => `${id}|${amount}`;

/** How long an add waits for others of the same account before its script runs (see AddBatcher). */
export const DEFAULT_BATCH_WINDOW_MS = 5;
/** Adds per script call at most: a busy account's batch is sent at once when it reaches this size. */
const MAX_BATCH = 64;

interface PendingAdd {
  increments: readonly CounterIncrement[];
  settle: HoldRelease | undefined;
  /** Applied once per id ('' = no id). */
  id: string;
  resolve(totals: Micros[]): void;
  reject(err: Error): void;
}

/**
 * Adds of one account that arrive within a window go to Redis as one script call. Records are off the response path
 * (the reservation's hold stands for the request until then), so a few milliseconds cost nothing, and one call per
 * batch instead of per request saves the client's per-command cost (ioredis: ~45 µs of CPU, ~12 KB allocated and
 * ~1.9 KB kept past a scavenge per call, docs/ledger.md) and Redis's. Batches never mix accounts: every key of an
 * account shares its hash tag, so a batch stays in one Redis Cluster slot. Order within a batch is arrival order.
 */
class AddBatcher {
  private readonly open = new Map<string, { calls: PendingAdd[]; timer: NodeJS.Timeout }>();
  private readonly inFlight = new Set<Promise<void>>();
  private readonly run: (calls: readonly PendingAdd[]) => Promise<void>;
  private readonly windowMs: number;

  constructor(run: (calls: readonly PendingAdd[]) => Promise<void>, windowMs: number) {
    this.run = run;
    this.windowMs = windowMs;
  }

  add(call: PendingAdd): void {
    const tag = hashTagOf(call.increments[0]?.key ?? call.settle?.holdKeys[0] ?? '');
    if (this.windowMs <= 0 || tag === null) return this.send([call]);
    const batch = this.open.get(tag);
    if (batch) {
      batch.calls.push(call);
      if (batch.calls.length >= MAX_BATCH) this.flush(tag);
      return;
    }
    this.open.set(tag, { calls: [call], timer: setTimeout(() => this.flush(tag), this.windowMs) });
  }

  /** Sends every open batch and waits for every script call under way. */
  async flushAll(): Promise<void> {
    // Deleting the entry being visited is safe in a Map walk.
    for (const tag of this.open.keys()) this.flush(tag);
    await Promise.all(this.inFlight);
  }

  private flush(tag: string): void {
    const batch = this.open.get(tag);
    if (!batch) return;
    this.open.delete(tag);
    clearTimeout(batch.timer);
    this.send(batch.calls);
  }

  private send(calls: PendingAdd[]): void {
    // run() settles every call itself; anything it throws still reaches the callers, never an unhandled rejection.
    const p = this.run(calls)
      .catch((err: unknown) => {
        for (const c of calls) c.reject(err instanceof Error ? err : new Error(String(err)));
      })
      .finally(() => this.inFlight.delete(p));
    this.inFlight.add(p);
  }
}

/** The `{...}` hash tag of a key (Redis Cluster's rule: the first `{` and the next `}`, non-empty), or null. */
function hashTagOf(key: string): string | null {
  const open = key.indexOf('{');
  if (open < 0) return null;
  const close = key.indexOf('}', open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : null;
}

export interface RedisLedgerOptions {
  /** redis://[:password@]host:port[/db] or rediss:// for TLS. */
  url: string;
  /** Per-command timeout in ms (default 1000). */
  commandTimeoutMs?: number;
  /** How long createRedisLedger waits for the first connection (default 5000); it returns either way. */
  connectWaitMs?: number;
  redisOptions?: RedisOptions;
  /** How long an add waits for other adds of its account (default DEFAULT_BATCH_WINDOW_MS; 0: every add alone). */
  batchWindowMs?: number;
  /** How long ids of records and reservations are remembered (at least; at most twice); default ID_RETENTION_MS. */
  idRetentionMs?: number;
}

export interface RedisLedger extends Ledger {
  readonly backend: 'redis';
  readonly client: Redis;
}

type WithAddCommand = Redis & {
  byokLedgerAdd(numKeys: number, ...args: (string | number)[]): Promise<number[]>;
  byokLedgerReserve(numKeys: number, ...args: (string | number)[]): Promise<number[]>;
  byokLedgerRelease(numKeys: number, ...args: (string | number)[]): Promise<number>;
  byokLedgerRestore(numKeys: number, ...args: (string | number)[]): Promise<number[]>;
};

export async function createRedisLedger(opts: RedisLedgerOptions): Promise<RedisLedger> {
  const client = new Redis(opts.url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: opts.commandTimeoutMs ?? 1000,
    connectTimeout: 2000,
    // Keep reconnecting (capped backoff): the ledger comes back by itself when Redis does.
    retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 6), 2000),
    lazyConnect: false,
    ...opts.redisOptions,
  });
  // ioredis emits 'error' on every failed reconnect; the spend gate reports outages through its own metrics.
  client.on('error', () => {});
  client.defineCommand('byokLedgerAdd', { lua: ADD_SCRIPT });
  client.defineCommand('byokLedgerReserve', { lua: RESERVE_SCRIPT });
  client.defineCommand('byokLedgerRelease', { lua: RELEASE_SCRIPT });
  client.defineCommand('byokLedgerRestore', { lua: RESTORE_SCRIPT });
  const scripted = client as WithAddCommand;

  await new Promise<void>((resolve) => {
    if (client.status === 'ready') return resolve();
    const timer = setTimeout(done, opts.connectWaitMs ?? 5000);
    timer.unref();
    client.once('ready', done);
    function done() {
      clearTimeout(timer);
      client.off('ready', done);
      resolve();
    }
  });

  const unavailable = (err: unknown): LedgerUnavailableError =>
    new LedgerUnavailableError(`ledger Redis unavailable: ${err instanceof Error ? err.message : String(err)}`, { cause: err });

  const idRetention = opts.idRetentionMs ?? ID_RETENTION_MS;

  /** One script call for a batch of adds (all of one account: one hash tag, one cluster slot). */
  const runAdds = async (calls: readonly PendingAdd[]): Promise<void> => {
    const keys: string[] = [];
    const args: (string | number)[] = [0, calls.length];
    // A batch is one account: its id sets are computed once.
    let sets: IdSets | undefined;
    for (const c of calls) {
      const holdKeys = c.settle?.holdKeys ?? [];
      args.push(c.id, c.increments.length, holdKeys.length, c.settle ? holdMember(c.settle.id, c.settle.amount) : '');
      if (c.id !== '') {
        sets ??= idSets(c.increments[0]?.key ?? holdKeys[0] ?? '', Date.now(), idRetention);
        keys.push(sets.current, sets.previous);
      }
      for (const inc of c.increments) {
        keys.push(inc.key);
        args.push(inc.by, inc.expiresAt ?? 0);
      }
      for (const h of holdKeys) keys.push(h);
    }
    if (sets) args[0] = sets.expiresAt;
    let out: number[];
    try {
      out = await scripted.byokLedgerAdd(keys.length, ...keys, ...args);
    } catch (err) {
      // All or none, as embedded: past 2^53 micros a counter is no longer exact in a JavaScript number. In a batch,
      // each add is tried alone, so only the one that overflows is refused.
      if (err instanceof Error && err.message.includes('BYOK_OVERFLOW')) {
        if (calls.length === 1) return calls[0]!.reject(new RangeError('a ledger counter would pass 2^53 micros: increment refused'));
        for (const c of calls) await runAdds([c]);
        return;
      }
      const e = unavailable(err);
      for (const c of calls) c.reject(e);
      return;
    }
    let at = 0;
    for (const c of calls) {
      c.resolve(out.slice(at, at + c.increments.length));
      at += c.increments.length;
    }
  };
  const batcher = new AddBatcher(runAdds, opts.batchWindowMs ?? DEFAULT_BATCH_WINDOW_MS);

  return {
    backend: 'redis',
    client,
    async read(keys) {
      if (keys.length === 0) return [];
      let values: (string | null)[];
      try {
        values = await client.mget(...keys);
      } catch (err) {
        throw unavailable(err);
      }
      return values.map((v) => (v === null ? 0 : Number(v)));
    },
    add(increments: readonly CounterIncrement[], settle?: HoldRelease, id?: string): Promise<Micros[]> {
      for (const inc of increments) {
        if (!Number.isSafeInteger(inc.by)) return Promise.reject(new RangeError(`ledger increment of ${inc.key} must be an integer amount of micros`));
      }
      if (increments.length === 0 && (settle?.holdKeys.length ?? 0) === 0) return Promise.resolve([]);
      return new Promise<Micros[]>((resolve, reject) => batcher.add({ increments, settle, id: id ?? '', resolve, reject }));
    },
    async reserve(req) {
      const keys: string[] = [];
      const now = Date.now();
      const args: (string | number)[] = [now, now + req.ttlMs, req.id, req.checks.length];
      const sets = idSets(req.checks[0]?.holdKey ?? '', now, idRetention);
      keys.push(req.validatedKey ?? '', sets.current, sets.previous);
      for (const c of req.checks) {
        keys.push(c.holdKey, ...c.countedKeys);
        args.push(c.limitMicros, c.amount, c.countedKeys.length);
      }
      let out: number[];
      try {
        out = await scripted.byokLedgerReserve(keys.length, ...keys, ...args);
      } catch (err) {
        throw unavailable(err);
      }
      if (out[0] === -1) throw new LedgerResetError('the ledger restarted since this account was last checked against its durable copy: budgets are closed until the operator rebuilds it');
      if (out[0] === 2) throw new ReservationSettledError(req.id);
      return out[0] === 1 ? { ok: true } : { ok: false, index: out[1] ?? 0, countedMicros: out[2] ?? 0, heldMicros: out[3] ?? 0 };
    },
    async restore(validatedKey, entries) {
      const args: (string | number)[] = [];
      for (const e of entries) args.push(e.floorMicros, e.expiresAt ?? 0);
      let out: number[];
      try {
        out = await scripted.byokLedgerRestore(entries.length + 1, validatedKey, ...entries.map((e) => e.key), ...args);
      } catch (err) {
        throw unavailable(err);
      }
      return { raisedCounters: out[0] ?? 0, largestMicros: out[1] ?? 0, alreadyValid: out[2] === 1 };
    },
    async release(id, amount, holdKeys) {
      if (holdKeys.length === 0) return;
      try {
        const sets = idSets(holdKeys[0]!, Date.now(), idRetention);
        await scripted.byokLedgerRelease(holdKeys.length + 1, sets.current, ...holdKeys, holdMember(id, amount), id, sets.expiresAt);
      } catch (err) {
        throw unavailable(err);
      }
    },
    async close() {
      await batcher.flushAll();
      try {
        await client.quit();
      } catch {
        client.disconnect();
      }
    },
  };
}
