// The SpendGate (src/contract/spend-gate.ts) over a Ledger, composed of parts (src/ledger/gate/): the key cache,
// admission (check-and-reserve, outage rule), the spend record (what a finished request writes), the recorder (the
// ledger writes and the BYOK fee), the replay queue (records waiting through an outage) and, when configured, the
// journal (records and reservations on local disk before the response completes). Outage and crash behaviour
// (docs/ledger.md):
// - admit fails closed by default: a request under at least one budget limit is refused with
//   LedgerUnavailableError (the gateway answers 503); `admitWhenUnavailable: 'open'` admits instead.
// - record never drops silently: a failed write is queued in order and replayed with backoff; its promise settles
//   when the replay lands. Past maxPendingRecords the oldest is dropped, counted and rejected; with a journal it is
//   kept on disk instead (not done) and queued again once the queue has room.
// - with a journal, a record is on disk before record() returns its promise (synchronously, so before the gateway
//   answers), and a restarted gateway replays what never landed; writes are idempotent by generation id.
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type {
  AdmitDecision,
  AdmitRequest,
  FinishedRequest,
  RateAdmitRequest,
  RateDecision,
  RateHold,
  RecordedSpend,
  Reservation,
  SpendGate,
} from '../contract/spend-gate.ts';
import { Admission, releaseInBackground } from './gate/admission.ts';
import { type FsyncPolicy, type JournalWriter, type RecoveredEntries, SpendJournal } from './gate/journal.ts';
import type { LockOptions } from './gate/journal-lock.ts';
import { GateKeyCache } from './gate/key-cache.ts';
import { createGateMetrics, type GateMetrics } from './gate/metrics.ts';
import { FeeNotRecordedError, Recorder } from './gate/recorder.ts';
import { ReplayQueue } from './gate/replay-queue.ts';
import { type SpendRecord, spendRecordOf } from './gate/spend-record.ts';
import { type KeySpace, keySpace } from './keys.ts';
import { type Ledger, LedgerUnavailableError } from './ledger.ts';

export interface SpendGateOptions {
  keys?: KeySpace;
  /** What admit does when the ledger cannot be read; default 'closed'. */
  admitWhenUnavailable?: 'closed' | 'open';
  /** Records kept for replay during an outage; default 10,000, or 100,000 with a journal (~1.1 KB of heap and ~1.5 KB of disk each). */
  maxPendingRecords?: number;
  /** How long a reservation holds budget room when nothing settles it (a gateway that crashed); default 15 min. */
  reservationTtlMs?: number;
  /** Replay backoff bounds in ms; default 100 to 5000. */
  retryMinMs?: number;
  retryMaxMs?: number;
  /** A directory for the spend journal (the chart's emptyDir): spend survives the gateway's kill -9. */
  journal?: {
    dir: string;
    fsync?: FsyncPolicy;
    batchMs?: number;
    segmentBytes?: number;
    lock?: LockOptions;
    writer?: JournalWriter;
  };
  registry?: Registry;
  logger?: Logger;
}

/** The window of the per-minute key limits. */
export const RATE_WINDOW_MS = 60_000;
/** When an in-flight slot frees itself if its request never settles (a replica that crashed mid-request). */
export const IN_FLIGHT_LAPSE_MS = 10 * 60_000;

/** The sets a request of this key is counted in, and its limits (0: none). */
export function rateHold(keys: KeySpace, req: RateAdmitRequest): RateHold {
  const { accountId } = req.account;
  const l = req.key.limits;
  return {
    id: req.id,
    keys: {
      requests: keys.rate(accountId, req.key.name, 'rpm'),
      tokens: keys.rate(accountId, req.key.name, 'tpm'),
      tokensSum: keys.rate(accountId, req.key.name, 'tpmsum'),
      inFlight: keys.rate(accountId, req.key.name, 'inflight'),
    },
    requestsPerWindow: l.requestsPerMinute ?? 0,
    tokensPerWindow: l.tokensPerMinute ?? 0,
    tokens: Math.max(0, Math.ceil(req.tokens)),
    maxInFlight: l.maxInFlight ?? 0,
    windowMs: RATE_WINDOW_MS,
    lapseMs: IN_FLIGHT_LAPSE_MS,
  };
}

/** How long a reservation holds budget room when nothing settles it (a gateway that crashed mid-request). */
export const RESERVATION_TTL_MS = 15 * 60_000;

export interface LedgerSpendGate extends SpendGate {
  admitRate(req: RateAdmitRequest): Promise<RateDecision>;
  settleRate(hold: RateHold | null, usedTokens: number | null): Promise<void>;
  /** Records waiting for the ledger to come back. */
  pendingRecords(): number;
  /** Resolves when no record is waiting (or rejects after timeoutMs). */
  drain(timeoutMs?: number): Promise<void>;
  /** As if the process were killed now (tests and the fault generator): nothing more is written, the journal's lock is left behind. */
  abandon(): void;
}

class ComposedSpendGate implements LedgerSpendGate {
  private readonly ledger: Ledger;
  private readonly metrics: GateMetrics;
  private readonly log: Logger | undefined;
  private readonly keys: GateKeyCache;
  private readonly keySpace: KeySpace;
  private readonly admission: Admission;
  private readonly recorder: Recorder;
  private readonly queue: ReplayQueue;
  private readonly journal: SpendJournal | undefined;
  private readonly retry: { minMs: number; maxMs: number };
  /** Records applied outside the queue right now (a spilled record found in the journal is not queued twice meanwhile). */
  private readonly applying = new Set<string>();
  /** Some records past the queue's bound wait on disk only. */
  private spilled = false;
  private readonly maxPending: number;
  private closed = false;

  constructor(ledger: Ledger, opts: SpendGateOptions) {
    this.ledger = ledger;
    this.metrics = createGateMetrics(opts.registry);
    this.log = opts.logger?.child({ component: 'ledger' });
    this.keySpace = opts.keys ?? keySpace();
    this.keys = new GateKeyCache(this.keySpace);
    this.retry = { minMs: opts.retryMinMs ?? 100, maxMs: opts.retryMaxMs ?? 5000 };
    const stopped = () => this.closed;
    let recovered: RecoveredEntries | undefined;
    if (opts.journal) {
      ({ journal: this.journal, recovered } = SpendJournal.open({
        ...opts.journal,
        onSegmentDropped: (keeps) => this.forgetKept(keeps),
        onLockLost: () =>
          this.log?.error(
            { journal: opts.journal?.dir },
            'spend journal lock removed or replaced while this gateway holds it: another process may be using the directory',
          ),
      }));
    }
    this.maxPending = opts.maxPendingRecords ?? (this.journal ? 100_000 : 10_000);
    const journal = this.journal;
    this.admission = new Admission({
      ledger,
      keys: this.keys,
      metrics: this.metrics,
      failOpen: opts.admitWhenUnavailable === 'open',
      reservationTtlMs: opts.reservationTtlMs ?? RESERVATION_TTL_MS,
      retry: this.retry,
      stopped,
      ...(journal ? { held: (r: Reservation) => this.journaled(r.id, () => journal.hold(r)) } : {}),
      log: this.log,
    });
    this.recorder = new Recorder({ ledger, metrics: this.metrics, retry: this.retry, stopped, log: this.log });
    this.queue = new ReplayQueue({
      apply: (plan) => this.recorder.apply(plan),
      // A record that failed for good (not an outage) is done too; one whose fee was cut by close() replays at the next start.
      settled: (plan, _landed, err) => {
        if (!(err instanceof FeeNotRecordedError)) journal?.done(plan.id);
      },
      max: this.maxPending,
      ...(journal
        ? {
            spill: () => {
              this.spilled = true;
              this.metrics.journalSpilled.inc();
            },
            emptied: () => {
              if (this.spilled) setImmediate(() => this.requeueSpilled());
            },
          }
        : {}),
      retry: this.retry,
      metrics: this.metrics,
      log: this.log,
    });
    if (recovered) this.recover(recovered);
  }

  admit(req: AdmitRequest): Promise<AdmitDecision> {
    return this.admission.admit(req);
  }

  async admitRate(req: RateAdmitRequest): Promise<RateDecision> {
    const hold = rateHold(this.keySpace, req);
    const result = await this.ledger.admitRate(hold);
    if (result.ok) return { allowed: true, hold };
    return {
      allowed: false,
      limit: result.limit,
      used: result.used,
      max: result.max,
      retryAfterSeconds: result.retryAfterMs === null ? null : Math.max(1, Math.ceil(result.retryAfterMs / 1000)),
    };
  }

  async settleRate(hold: RateHold | null, usedTokens: number | null): Promise<void> {
    if (!hold) return;
    try {
      await this.ledger.settleRate(hold, usedTokens);
    } catch (err) {
      this.log?.warn(
        { generation_id: hold.id, err: err instanceof Error ? err.message : String(err) },
        'rate-limit settle failed: the in-flight slot lapses by itself',
      );
    }
  }

  record(req: FinishedRequest): Promise<RecordedSpend> {
    if (!this.ledger.addNow || this.closed || this.queue.size() > 0) return this.recordInTurns(req);
    // In-process ledger with nothing waiting for replay: written in this turn, one settled promise instead of a chain.
    let plan: SpendRecord | undefined;
    try {
      plan = spendRecordOf(req, this.keys);
      if (this.journal) this.journaled(plan.id, () => this.journal!.record(plan!));
      const spend = this.recorder.applyNow(plan);
      this.journal?.done(plan.id);
      return Promise.resolve(spend);
    } catch (err) {
      return this.notRecorded(req, plan, err);
    }
  }

  /** As applyNowOnce and recordInTurns: a record refused for good is done in the journal, and its hold dropped. */
  private async notRecorded(req: FinishedRequest, plan: SpendRecord | undefined, err: unknown): Promise<never> {
    if (plan) this.journal?.done(plan.id);
    await this.release(req.reservation ?? null);
    throw err;
  }

  private async recordInTurns(req: FinishedRequest): Promise<RecordedSpend> {
    try {
      if (this.closed) throw new Error('the spend gate is closed');
      const plan = spendRecordOf(req, this.keys);
      // On disk (the kernel's page cache at least) before the caller answers its client: a kill -9 from here on loses nothing.
      if (this.journal) this.journaled(plan.id, () => this.journal!.record(plan));
      // Keep order: while anything waits for replay, later records wait behind it (month-to-date stays exact).
      if (this.queue.size() > 0) return await this.queue.enqueue(plan);
      return await this.applyNow(plan);
    } catch (err) {
      // Not recorded: the hold is dropped on its own (best effort; it lapses at its expiry otherwise).
      await this.release(req.reservation ?? null);
      throw err;
    }
  }

  /** Best effort: a hold that cannot be dropped now lapses at its expiry. */
  async release(reservation: Reservation | null): Promise<void> {
    if (!reservation || reservation.holdKeys.length === 0) return;
    try {
      await this.ledger.release(reservation.id, reservation.amountMicros, reservation.holdKeys);
      this.journal?.done(reservation.id);
    } catch (err) {
      this.log?.warn(
        { generation_id: reservation.id, err: err instanceof Error ? err.message : String(err) },
        'reservation release failed: it lapses at its expiry',
      );
    }
  }

  pendingRecords(): number {
    return this.queue.size();
  }

  drain(timeoutMs = 30_000): Promise<void> {
    return this.queue.drain(timeoutMs);
  }

  abandon(): void {
    this.closed = true;
    this.journal?.abandon();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    // One last replay attempt, then whatever still waits is lost, or (journal) left for the next start.
    const left = await this.queue.close(
      () =>
        new LedgerUnavailableError(
          this.journal
            ? 'spend gate closed before the ledger came back: spend kept in the journal for the next start'
            : 'spend gate closed before the ledger came back: spend not recorded',
        ),
    );
    this.closed = true;
    if (this.journal) {
      if (left.length > 0)
        this.log?.warn(
          { records: left.length, journal: this.journal.dir },
          'ledger unreachable at shutdown: records kept in the journal, replayed at the next start',
        );
      this.journal.close();
    } else {
      this.metrics.dropped.inc(left.length);
    }
    await this.ledger.close();
  }

  /**
   * A journal write that fails (the emptyDir full, an I/O error) must not cost the request its record: the record
   * goes on in memory only, as without a journal, and the failure is counted and logged.
   */
  private journaled(id: string, write: () => void): void {
    try {
      write();
    } catch (err) {
      this.metrics.journalWriteFailures.inc();
      this.log?.error(
        { generation_id: id, err: err instanceof Error ? err.message : String(err) },
        'spend journal write failed: this request is kept in memory only',
      );
    }
  }

  private async applyNow(plan: SpendRecord): Promise<RecordedSpend> {
    this.applying.add(plan.id);
    try {
      return await this.applyNowOnce(plan);
    } finally {
      this.applying.delete(plan.id);
    }
  }

  private async applyNowOnce(plan: SpendRecord): Promise<RecordedSpend> {
    try {
      const spend = await this.recorder.apply(plan);
      this.journal?.done(plan.id);
      return spend;
    } catch (err) {
      if (err instanceof FeeNotRecordedError) {
        if (!this.journal) this.metrics.dropped.inc();
        throw err;
      }
      if (!(err instanceof LedgerUnavailableError)) {
        this.journal?.done(plan.id);
        throw err;
      }
      this.metrics.unavailable.inc({ op: 'record' });
      this.log?.warn({ generation_id: plan.id }, 'ledger unavailable: spend queued for replay');
      return this.queue.enqueue(plan);
    }
  }

  /**
   * What a previous process left undone: its records go first in the replay queue (before any new one, so
   * month-to-date stays in order), and the reservations of requests it never finished are released (docs/ledger.md,
   * "Lapsed holds": not charged).
   */
  /**
   * The queue has room again and records past its bound wait in the journal only: queue them again, in the order they
   * were written, up to the bound (the rest wait for the next time it empties).
   */
  private requeueSpilled(): void {
    if (this.closed || !this.journal || this.queue.size() > 0) return;
    this.spilled = false;
    let n = 0;
    for (const plan of this.journal.pendingRecords()) {
      if (this.applying.has(plan.id)) continue;
      if (n >= this.maxPending) {
        this.spilled = true;
        break;
      }
      n++;
      this.queue.enqueue(plan, n === 1).catch(() => {}); // its outcome is the journal's: done when it lands
    }
  }

  /** Best effort: a segment's keep marks that cannot be deleted now lapse by themselves (KEPT_ID_TTL_MS). */
  private forgetKept(keeps: readonly string[]): void {
    this.ledger
      .forgetKept(keeps)
      .catch((err: unknown) =>
        this.log?.debug(
          { keys: keeps.length, err: err instanceof Error ? err.message : String(err) },
          'journal keep marks not deleted: they lapse by themselves',
        ),
      );
  }

  private recover(recovered: RecoveredEntries): void {
    if (recovered.tookOverLock)
      this.log?.warn(
        { journal: this.journal?.dir, previous: recovered.tookOverLock },
        'spend journal: took over the lock of a process that is gone',
      );
    if (recovered.unreadableLines > 0) {
      this.metrics.journalUnreadableLines.inc(recovered.unreadableLines);
      this.log?.warn(
        { lines: recovered.unreadableLines, first: recovered.skipped.slice(0, 5) },
        'spend journal: unreadable lines skipped (a write cut by a kill or a full disk, or a line of the wrong shape); the rest replays',
      );
    }
    for (const plan of recovered.records) {
      this.metrics.journalReplayed.inc();
      this.queue
        .enqueue(plan, true)
        .catch((err: unknown) =>
          this.log?.error(
            { generation_id: plan.id, err: err instanceof Error ? err.message : String(err) },
            'journaled record not replayed',
          ),
        );
    }
    for (const hold of recovered.holds) {
      releaseInBackground(
        this.ledger,
        hold,
        this.retry,
        () => this.closed,
        (released) => {
          if (!released) return; // kept in the journal: the next start tries again; the hold lapses at its expiry meanwhile
          this.metrics.journalHoldsReleased.inc();
          this.journal?.done(hold.id);
        },
      );
    }
    if (recovered.records.length + recovered.holds.length > 0)
      this.log?.warn(
        { records: recovered.records.length, holds: recovered.holds.length },
        'spend journal: replaying what the previous process left undone',
      );
  }
}

export function createSpendGate(ledger: Ledger, opts: SpendGateOptions = {}): LedgerSpendGate {
  return new ComposedSpendGate(ledger, opts);
}
