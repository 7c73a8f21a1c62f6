// The Redis ledger (several gateway replicas): one Lua script adds every counter of a request in one round trip
// (INCRBY per key, atomic as a whole: Redis runs a script without interleaving), and sets each new key's expiry
// to its window's end plus a margin. Reads are one MGET. Commands fail fast while Redis is unreachable (no offline
// queue, a command timeout), so the spend gate can apply its documented outage behaviour instead of hanging. The
// connection and the scripts are in redis-connection.ts and redis-scripts.ts.
import { createRequire } from 'node:module';
import type { Redis } from 'ioredis';
import type { Micros } from '../domain/money.ts';
import { ID_RETENTION_MS, idSets } from './keys.ts';
import {
  type CounterIncrement,
  type HoldRelease,
  type Ledger,
  LedgerResetError,
  LedgerUnavailableError,
  type RateCheck,
  type RateLimitName,
  ReservationSettledError,
} from './ledger.ts';
import { openLedgerConnection } from './redis-connection.ts';
import { encodeAddBatch } from './redis-scripts.ts';

/** A reservation's member in its hold sets (RESERVE_SCRIPT writes it as id .. '|' .. amount). */
const holdMember = (id: string, amount: Micros) => `${id}|${amount}`;

/** RATE_ADMIT_SCRIPT's refusal codes, in order. */
const RATE_LIMITS: readonly RateLimitName[] = ['requests', 'tokens', 'in_flight'];
const rateKeys = (c: RateCheck): string[] => [c.keys.requests, c.keys.tokens, c.keys.inFlight, c.keys.tokensSum];

/** How long an add waits for others of the same account before its script runs (see AddBatcher). */
export const DEFAULT_BATCH_WINDOW_MS = 5;
/** Adds per script call at most: a busy account's batch is sent at once when it reaches this size. */
const MAX_BATCH = 64;

interface PendingAdd {
  increments: readonly CounterIncrement[];
  settle: HoldRelease | undefined;
  /** Applied once per id ('' = no id). */
  id: string;
  keep: string | undefined;
  resolve(totals: Micros[]): void;
  reject(err: Error): void;
}

/**
 * Adds of one account that arrive within a window go to Redis as one script call. Records are off the response path
 * (the reservation's hold stands for the request until then), so a few milliseconds cost nothing, and one call per
 * batch instead of per request saves the client's per-command cost (bench/redis-client.ts, docs/ledger.md) and
 * Redis's; each key goes once per batch (encodeAddBatch). Batches never mix accounts: every key of an
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

/**
 * The run_id of the Redis process behind the current connection. Admission needs it to tell whether an
 * account's counters were validated in this process (docs/ledger.md, "Resets"); INFO inside the admission script cost
 * Redis a ~1.5 KB text per request. A restart always breaks the connection, so the run_id is read once per connection
 * (by a script: the process that runs the scripts answers) and forgotten when the connection closes. A reservation
 * waits for the read, and never sends a run_id read on an earlier connection (the generation check).
 */
class ConnectionRunId {
  private generation = 0;
  private current: { generation: number; runId: Promise<string> } | null = null;
  private readonly read: () => Promise<string>;

  constructor(read: () => Promise<string>) {
    this.read = read;
  }

  /** The connection closed or a new one is ready: whatever was read is no longer known to hold. */
  forget(): void {
    this.generation++;
    this.current = null;
  }

  /** The current connection's run_id; rejects when it cannot be read (the caller's call fails as unavailable). */
  async get(): Promise<string> {
    for (;;) {
      const generation = this.generation;
      if (this.current?.generation !== generation) {
        const runId = this.read();
        // A failed read is tried again by the next caller.
        runId.catch(() => {
          if (this.current?.runId === runId) this.current = null;
        });
        this.current = { generation, runId };
      }
      const runId = await this.current.runId;
      if (generation === this.generation) return runId;
    }
  }
}

export interface RedisLedgerOptions {
  /** redis://[:password@]host:port[/db] or rediss:// for TLS. */
  url: string;
  /** Per-command timeout in ms (default 1000). */
  commandTimeoutMs?: number;
  /** How long createRedisLedger waits for the first connection (default 5000); it returns either way. */
  connectWaitMs?: number;
  /** How long an add waits for other adds of its account (default DEFAULT_BATCH_WINDOW_MS; 0: every add alone). */
  batchWindowMs?: number;
  /** How long ids of records and reservations are remembered (at least; at most twice); default ID_RETENTION_MS. */
  idRetentionMs?: number;
}

export interface RedisLedger extends Ledger {
  readonly backend: 'redis';
  /**
   * An ioredis connection to the same Redis for tools and tests (inspecting keys, INFO), opened on first use with an
   * offline queue; the ledger's own calls never use it (they go through redis-connection.ts). Closed by close().
   */
  readonly client: Redis;
}

export async function createRedisLedger(opts: RedisLedgerOptions): Promise<RedisLedger> {
  const connection = await openLedgerConnection({
    url: opts.url,
    commandTimeoutMs: opts.commandTimeoutMs ?? 1000,
    connectWaitMs: opts.connectWaitMs ?? 5000,
  });
  const runId = new ConnectionRunId(async () => String(await connection.run('runId', [], [])));
  connection.onReconnect(() => runId.forget());
  let admin: Redis | undefined;

  const unavailable = (err: unknown): LedgerUnavailableError =>
    new LedgerUnavailableError(`ledger Redis unavailable: ${err instanceof Error ? err.message : String(err)}`, {
      cause: err,
    });

  const idRetention = opts.idRetentionMs ?? ID_RETENTION_MS;

  /** One script call for a batch of adds (all of one account: one hash tag, one cluster slot). */
  const runAdds = async (calls: readonly PendingAdd[]): Promise<void> => {
    // A batch is one account: its id sets are computed once.
    const first = calls.find((c) => c.id !== '');
    const sets = first
      ? idSets(first.increments[0]?.key ?? first.settle?.holdKeys[0] ?? '', Date.now(), idRetention)
      : undefined;
    const { keys, args } = encodeAddBatch(calls, sets);
    let out: number[];
    try {
      out = (await connection.run('add', keys, args)) as number[];
    } catch (err) {
      // All or none, as embedded: past 2^53 micros a counter is no longer exact in a JavaScript number. In a batch,
      // each add is tried alone, so only the one that overflows is refused.
      if (err instanceof Error && err.message.includes('BYOK_OVERFLOW')) {
        if (calls.length === 1)
          return calls[0]!.reject(new RangeError('a ledger counter would pass 2^53 micros: increment refused'));
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
    get client() {
      if (!admin) {
        // Loaded on first use: ioredis costs a process ~25 MB of RSS, and the gateway never asks for it.
        const { Redis: IoRedis } = createRequire(import.meta.url)('ioredis') as typeof import('ioredis');
        admin = new IoRedis(opts.url);
        admin.on('error', () => {});
      }
      return admin;
    },
    async read(keys) {
      if (keys.length === 0) return [];
      let values: (string | null)[];
      try {
        values = await connection.mget(keys);
      } catch (err) {
        throw unavailable(err);
      }
      return values.map((v) => (v === null ? 0 : Number(v)));
    },
    add(increments: readonly CounterIncrement[], settle?: HoldRelease, id?: string, keep?: string): Promise<Micros[]> {
      for (const inc of increments) {
        if (!Number.isSafeInteger(inc.by))
          return Promise.reject(new RangeError(`ledger increment of ${inc.key} must be an integer amount of micros`));
      }
      if (increments.length === 0 && (settle?.holdKeys.length ?? 0) === 0) return Promise.resolve([]);
      return new Promise<Micros[]>((resolve, reject) =>
        batcher.add({ increments, settle, id: id ?? '', keep, resolve, reject }),
      );
    },
    async reserve(req) {
      const keys: string[] = [];
      let server: string;
      try {
        server = req.validatedKey === undefined ? '' : await runId.get();
      } catch (err) {
        throw unavailable(err);
      }
      const now = Date.now();
      const args: (string | number)[] = [
        now,
        now + req.ttlMs,
        req.id,
        req.checks.length,
        server,
        req.floor ?? 0,
        req.share ?? 1,
      ];
      const sets = idSets(req.checks[0]?.holdKey ?? '', now, idRetention);
      keys.push(req.validatedKey ?? '', sets.current, sets.previous);
      for (const c of req.checks) {
        keys.push(c.holdKey, ...c.countedKeys);
        args.push(c.limitMicros, c.amount, c.countedKeys.length);
      }
      let out: number[];
      try {
        out = (await connection.run('reserve', keys, args)) as number[];
      } catch (err) {
        throw unavailable(err);
      }
      if (out[0] === -1)
        throw new LedgerResetError(
          'the ledger restarted since this account was last checked against its durable copy: budgets are closed until the operator rebuilds it',
        );
      if (out[0] === 2) throw new ReservationSettledError(req.id);
      return out[0] === 1
        ? { ok: true, granted: out[1] ?? 0 }
        : { ok: false, index: out[1] ?? 0, countedMicros: out[2] ?? 0, heldMicros: out[3] ?? 0 };
    },
    async admitRate(c) {
      let out: number[];
      try {
        out = (await connection.run('rateAdmit', rateKeys(c), [
          c.id,
          c.windowMs,
          c.lapseMs,
          c.requestsPerWindow,
          c.tokensPerWindow,
          c.tokens,
          c.maxInFlight,
        ])) as number[];
      } catch (err) {
        throw unavailable(err);
      }
      if (out[0] === 1) return { ok: true };
      const retry = out[4] ?? -1;
      return {
        ok: false,
        limit: RATE_LIMITS[(out[1] ?? 1) - 1]!,
        used: out[2] ?? 0,
        max: out[3] ?? 0,
        retryAfterMs: retry < 0 ? null : retry,
      };
    },
    async settleRate(c, usedTokens) {
      try {
        await connection.run('rateSettle', rateKeys(c), [c.id, c.tokens, usedTokens === null ? -1 : usedTokens]);
      } catch (err) {
        throw unavailable(err);
      }
    },
    async restore(validatedKey, entries) {
      const args: (string | number)[] = [];
      for (const e of entries) args.push(e.floorMicros, e.expiresAt ?? 0);
      let out: number[];
      try {
        out = (await connection.run('restore', [validatedKey, ...entries.map((e) => e.key)], args)) as number[];
      } catch (err) {
        throw unavailable(err);
      }
      return { raisedCounters: out[0] ?? 0, largestMicros: out[1] ?? 0, alreadyValid: out[2] === 1 };
    },
    async forgetKept(keys) {
      try {
        for (const k of keys) await connection.run('forget', [k], []);
      } catch (err) {
        throw unavailable(err);
      }
    },
    async release(id, amount, holdKeys) {
      if (holdKeys.length === 0) return;
      try {
        const sets = idSets(holdKeys[0]!, Date.now(), idRetention);
        await connection.run('release', [sets.current, ...holdKeys], [holdMember(id, amount), id, sets.expiresAt]);
      } catch (err) {
        throw unavailable(err);
      }
    },
    async close() {
      await batcher.flushAll();
      await connection.close();
      if (admin) {
        try {
          await admin.quit();
        } catch {
          admin.disconnect();
        }
      }
    },
  };
}
