// The embedded ledger: counters in this process (one gateway replica). An optional snapshot file keeps the month
// across restarts: written atomically (temp file + rename, so a crash mid-write leaves the previous snapshot),
// every few seconds when something changed and on close.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Micros } from '../domain/money.ts';
import { IdTable } from './id-table.ts';
import { ID_RETENTION_MS, idNamespace } from './keys.ts';
import { type Ledger, ReservationSettledError } from './ledger.ts';
import { EmbeddedRateSets } from './rate-embedded.ts';

export interface EmbeddedLedgerOptions {
  /** Snapshot file; absent = memory only (a restart forgets the month). */
  snapshotPath?: string;
  /** How often a changed ledger is written to the snapshot and expired windows are forgotten; default 5000 ms (60 s without a snapshot). */
  snapshotIntervalMs?: number;
  /** Clock for expiry; default Date.now. */
  now?: () => number;
  /** Told about a failed periodic snapshot write (the ledger keeps running and retries at the next interval). */
  onSnapshotError?: (err: Error) => void;
  /**
   * Told about each snapshot entry that cannot be loaded (not a key, not a safe integer, negative): it is left out
   * and kept in `<snapshot>.quarantine.json`, and the rest loads. One bad counter never keeps a gateway down.
   */
  onQuarantine?: (key: string, reason: string) => void;
  /** How long ids of records and reservations are remembered (at least; at most twice); default ID_RETENTION_MS. */
  idRetentionMs?: number;
}

/** An id that was released without being recorded: a later reservation holds nothing, a record still counts. */
const RELEASED = -1;

interface Counter {
  value: Micros;
  expiresAt: number | null;
}

interface SnapshotFile {
  version: 1;
  writtenAt: string;
  /** [key, value, expiresAt or null] */
  counters: [string, Micros, number | null][];
}

export interface EmbeddedLedger extends Ledger {
  readonly backend: 'embedded';
  /** Writes the snapshot now if something changed (no-op without a snapshot path). */
  snapshot(): void;
  /** Counters held in memory (expired ones are swept periodically). */
  size(): number;
  /** Ids of records and releases remembered (for exactly-once; forgotten after the retention). */
  idCount(): number;
}

function loadSnapshot(
  path: string,
  now: number,
  onQuarantine?: (key: string, reason: string) => void,
): Map<string, Counter> {
  const counters = new Map<string, Counter>();
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return counters;
    throw err;
  }
  const parsed = JSON.parse(text) as Partial<SnapshotFile>;
  if (parsed.version !== 1 || !Array.isArray(parsed.counters))
    throw new Error(`ledger snapshot ${path} has an unknown format`);
  const quarantined: unknown[] = [];
  for (const entry of parsed.counters as unknown[]) {
    const [key, value, expiresAt] = Array.isArray(entry)
      ? (entry as [unknown, unknown, unknown])
      : [undefined, undefined, undefined];
    const reason =
      typeof key !== 'string'
        ? 'the key is not a string'
        : !Number.isSafeInteger(value) || (value as number) < 0
          ? 'the value is not a non-negative safe integer'
          : !(expiresAt === null || Number.isSafeInteger(expiresAt))
            ? 'the expiry is not an integer or null'
            : null;
    if (reason !== null) {
      quarantined.push(entry);
      onQuarantine?.(typeof key === 'string' ? key : '(not a string)', reason);
      continue;
    }
    if (expiresAt === null || (expiresAt as number) > now)
      counters.set(key as string, { value: value as number, expiresAt: expiresAt as number | null });
  }
  // Kept for whoever investigates; never loaded again.
  if (quarantined.length > 0)
    writeFileSync(
      `${path}.quarantine.json`,
      JSON.stringify({ quarantinedAt: new Date(now).toISOString(), counters: quarantined }),
      { mode: 0o600 },
    );
  return counters;
}

/**
 * Ids applied or released, per retention period and account (the hash tag of the keys: ids of two accounts never
 * meet): period -> namespace -> id -> the first counter's total as first applied, or RELEASED. In memory only, as the
 * holds: a restart has no call in flight that could be replayed. An id is kept one to two periods, in an IdTable: a
 * gateway at 1,000 requests/s holds 1.2 to 2.4 million of them.
 */
class IdMemory {
  private readonly periods = new Map<number, Map<string, IdTable>>();
  private readonly retention: number;
  /** Key -> its namespace: the spend gate passes the same key strings all day, so the namespace is cut (and hashed) once. */
  private readonly namespaces = new Map<string, string>();

  constructor(retentionMs: number) {
    this.retention = retentionMs;
  }

  /** The account namespace of a key (idNamespace), cached. */
  namespace(key: string): string {
    let ns = this.namespaces.get(key);
    if (ns === undefined) {
      if (this.namespaces.size >= 10_000) this.namespaces.clear();
      this.namespaces.set(key, (ns = idNamespace(key)));
    }
    return ns;
  }

  /** Whether the id was applied or released (current or previous period). */
  known(ns: string, id: string, at: number): boolean {
    const p = Math.floor(at / this.retention);
    return (
      (this.periods.get(p)?.get(ns)?.has(id) ?? false) ||
      (this.periods
        .get(p - 1)
        ?.get(ns)
        ?.has(id) ??
        false)
    );
  }

  /** The first total of an applied id, or undefined when it was never applied (released only, or unknown). */
  recorded(ns: string, id: string, at: number): number | undefined {
    const p = Math.floor(at / this.retention);
    const cur = this.periods.get(p)?.get(ns)?.get(id);
    if (cur !== undefined && cur !== RELEASED) return cur;
    const prev = this.periods
      .get(p - 1)
      ?.get(ns)
      ?.get(id);
    return prev !== undefined && prev !== RELEASED ? prev : undefined;
  }

  remember(ns: string, id: string, value: number, at: number, onlyIfNew: boolean): void {
    const p = Math.floor(at / this.retention);
    let byNs = this.periods.get(p);
    if (!byNs) {
      this.periods.set(p, (byNs = new Map()));
      this.sweep(at);
    }
    let set = byNs.get(ns);
    if (!set) byNs.set(ns, (set = new IdTable()));
    if (!onlyIfNew || !set.has(id)) set.set(id, value);
  }

  /** Forgets periods before the previous one: past their retention. */
  sweep(at: number): void {
    const p = Math.floor(at / this.retention);
    for (const old of this.periods.keys()) if (old < p - 1) this.periods.delete(old);
  }

  size(): number {
    let n = 0;
    for (const byNs of this.periods.values()) for (const set of byNs.values()) n += set.size;
    return n;
  }
}

/** A journaled record's keep mark: it outlives the id memory, until its segment is forgotten (`forgetKept`). */
function markKept(kept: Map<string, IdTable>, keep: string, id: string, firstTotal: number): void {
  let marks = kept.get(keep);
  if (!marks) kept.set(keep, (marks = new IdTable()));
  marks.set(id, firstTotal);
}

/** The live counters, written atomically (temp file + rename): a crash mid-write leaves the previous snapshot. */
function writeSnapshot(path: string, counters: ReadonlyMap<string, Counter>, at: number): void {
  const body: SnapshotFile = { version: 1, writtenAt: new Date(at).toISOString(), counters: [] };
  for (const [key, c] of counters)
    if (c.expiresAt === null || c.expiresAt > at) body.counters.push([key, c.value, c.expiresAt]);
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(body), { mode: 0o600 });
  renameSync(tmp, path);
}

export function createEmbeddedLedger(opts: EmbeddedLedgerOptions = {}): EmbeddedLedger {
  const now = opts.now ?? Date.now;
  const path = opts.snapshotPath;
  const counters = path ? loadSnapshot(path, now(), opts.onQuarantine) : new Map<string, Counter>();
  let dirty = false;
  let closed = false;
  /** holdKey -> reservation id -> held amount and expiry. In memory only: a restart has no requests in flight. */
  const holds = new Map<string, Map<string, { amount: Micros; expiresAt: number }>>();
  /** What live reservations hold on a budget, its own (`ownId`: a repeated reservation) left out. */
  const heldOn = (holdKey: string, at: number, ownId: string): Micros => {
    const set = holds.get(holdKey);
    if (!set) return 0;
    let sum = 0;
    for (const [id, h] of set) {
      if (h.expiresAt <= at) set.delete(id);
      else if (id !== ownId) sum += h.amount;
    }
    if (set.size === 0) holds.delete(holdKey);
    return sum;
  };

  const ids = new IdMemory(opts.idRetentionMs ?? ID_RETENTION_MS);
  const rates = new EmbeddedRateSets(now);
  /** Keep marks of journaled records: key -> id -> first total, until forgetKept. */
  const kept = new Map<string, IdTable>();

  const dropHolds = (id: string, holdKeys: readonly string[]) => {
    for (const k of holdKeys) {
      const set = holds.get(k);
      set?.delete(id);
      if (set?.size === 0) holds.delete(k);
    }
  };

  const live = (key: string, at: number): Counter | undefined => {
    const c = counters.get(key);
    if (c === undefined) return undefined;
    if (c.expiresAt !== null && c.expiresAt <= at) {
      counters.delete(key);
      return undefined;
    }
    return c;
  };

  const snapshot = () => {
    if (!path || !dirty) return;
    writeSnapshot(path, counters, now());
    dirty = false;
  };

  // Old windows are never read again: forget them, so a long-running gateway does not grow without bound.
  const sweep = () => {
    const at = now();
    for (const [key, c] of counters) if (c.expiresAt !== null && c.expiresAt <= at) counters.delete(key);
    ids.sweep(at);
  };
  const timer = setInterval(
    () => {
      sweep();
      try {
        snapshot();
      } catch (err) {
        opts.onSnapshotError?.(err instanceof Error ? err : new Error(String(err)));
      }
    },
    path ? (opts.snapshotIntervalMs ?? 5000) : 60_000,
  );
  timer.unref();

  const ensureOpen = () => {
    if (closed) throw new Error('the ledger is closed');
  };

  const addNow: NonNullable<Ledger['addNow']> = (increments, settle, id, keep) => {
    ensureOpen();
    for (const inc of increments) {
      if (!Number.isSafeInteger(inc.by))
        throw new RangeError(`ledger increment of ${inc.key} must be an integer amount of micros`);
    }
    const at = now();
    const ns = id === undefined ? '' : ids.namespace(increments[0]?.key ?? settle?.holdKeys[0] ?? '');
    if (id !== undefined) {
      // Applied before: nothing changes; the first total as it was first returned, then the current ones.
      const first = ids.recorded(ns, id, at) ?? (keep === undefined ? undefined : kept.get(keep)?.get(id));
      if (first !== undefined) return increments.map((inc, i) => (i === 0 ? first : (live(inc.key, at)?.value ?? 0)));
    }
    // All or none: an increment that would carry a counter past 2^53 (where a number stops being exact, and a
    // snapshot could no longer be loaded) refuses the whole call before anything changes.
    for (const inc of increments) {
      if ((live(inc.key, at)?.value ?? 0) + inc.by > Number.MAX_SAFE_INTEGER)
        throw new RangeError(`ledger counter ${inc.key} would pass 2^53 micros: increment refused`);
    }
    // Synchronous: no other request interleaves, so the increments of one call are atomic.
    const out = increments.map((inc) => {
      const c = live(inc.key, at);
      if (c === undefined) {
        counters.set(inc.key, { value: inc.by, expiresAt: inc.expiresAt });
        return inc.by;
      }
      c.value += inc.by;
      return c.value;
    });
    if (settle) dropHolds(settle.id, settle.holdKeys);
    if (id !== undefined) {
      ids.remember(ns, id, out[0] ?? 0, at, false);
      if (keep !== undefined) markKept(kept, keep, id, out[0] ?? 0);
    }
    dirty = true;
    return out;
  };

  const reserveNow: NonNullable<Ledger['reserveNow']> = (req) => {
    ensureOpen();
    const at = now();
    // A request already settled or released holds nothing again.
    if (req.checks.length > 0 && ids.known(ids.namespace(req.checks[0]!.holdKey), req.id, at))
      throw new ReservationSettledError(req.id);
    const floor = req.floor ?? 0;
    const share = req.share ?? 1;
    let granted = Infinity;
    // Synchronous from the first read to the last hold: no other request interleaves.
    for (let i = 0; i < req.checks.length; i++) {
      const c = req.checks[i]!;
      const counted = c.countedKeys.reduce((sum, k) => sum + (live(k, at)?.value ?? 0), 0);
      const held = heldOn(c.holdKey, at, req.id);
      const room = c.limitMicros - counted - held;
      const fits = c.amount <= 0 ? room > 0 : floor > 0 ? room >= Math.min(floor, c.amount) : room >= c.amount;
      if (!fits) return { ok: false, index: i, countedMicros: counted, heldMicros: held };
      if (c.amount > 0)
        granted = Math.min(
          granted,
          c.amount,
          floor > 0 && room < c.amount ? Math.max(floor, Math.floor(room * share)) : c.amount,
        );
    }
    if (granted === Infinity) granted = 0;
    for (const c of req.checks) {
      if (c.amount <= 0) continue;
      let set = holds.get(c.holdKey);
      if (!set) holds.set(c.holdKey, (set = new Map()));
      set.set(req.id, { amount: granted, expiresAt: at + req.ttlMs });
    }
    return { ok: true, granted };
  };

  return {
    backend: 'embedded',
    snapshot,
    size: () => counters.size,
    idCount: () => ids.size(),
    async read(keys) {
      ensureOpen();
      const at = now();
      return keys.map((k) => live(k, at)?.value ?? 0);
    },
    add: async (increments, settle, id, keep) => addNow(increments, settle, id, keep),
    addNow,
    reserve: async (req) => reserveNow(req),
    reserveNow,
    ...rates.ledgerMethods(ensureOpen),
    async forgetKept(keys) {
      for (const k of keys) kept.delete(k);
    },
    async restore() {
      return { raisedCounters: 0, largestMicros: 0, alreadyValid: true };
    },
    async release(id, _amount, holdKeys) {
      dropHolds(id, holdKeys);
      if (holdKeys.length > 0) ids.remember(ids.namespace(holdKeys[0]!), id, RELEASED, now(), true);
    },
    async close() {
      if (closed) return;
      clearInterval(timer);
      closed = true;
      snapshot();
    },
  };
}
