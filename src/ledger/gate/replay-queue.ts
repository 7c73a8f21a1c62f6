// Records waiting for the ledger to come back, in order (later records wait behind them, so each replayed BYOK
// request's month-to-date is exact), replayed with backoff, in chunks sent in order. Bounded: past `max` the oldest
// leaves memory. Without a journal it is dropped, counted and rejected; with one (`spill`) it stays on disk, not done,
// and the spend gate queues it again once the queue has room (spend-gate.ts). The queue owns no durability.
import type { Logger } from 'pino';
import type { RecordedSpend } from '../../contract/spend-gate.ts';
import { LedgerUnavailableError } from '../ledger.ts';
import type { GateMetrics } from './metrics.ts';
import type { SpendRecord } from './spend-record.ts';

/** Records sent at once when the queue drains (a few ledger batches' worth). */
const DEFAULT_CHUNK = 256;

interface Waiting {
  plan: SpendRecord;
  /** Landed or failed for good: leaves the queue. */
  done?: boolean;
  resolve(spend: RecordedSpend): void;
  reject(err: Error): void;
}

export interface ReplayQueueOptions {
  /** Applies one record; a LedgerUnavailableError keeps it at the head for the next try. */
  apply: (plan: SpendRecord) => Promise<RecordedSpend>;
  /** Told when a record leaves the queue: landed, or failed for good (dropped or refused). */
  settled?: (plan: SpendRecord, landed: boolean, err?: Error) => void;
  /** With a journal: past `max` the oldest leaves memory only (it is on disk, not done); told here instead of dropped. */
  spill?: (plan: SpendRecord) => void;
  /** Told whenever the queue becomes empty. */
  emptied?: () => void;
  max: number;
  /** Records sent at once while draining; default 256. */
  chunk?: number;
  retry: { minMs: number; maxMs: number };
  metrics: GateMetrics;
  log?: Logger | undefined;
}

export class ReplayQueue {
  private readonly opts: ReplayQueueOptions;
  private waiting: Waiting[] = [];
  private readonly drainWaiters = new Set<() => void>();
  private timer: NodeJS.Timeout | undefined;
  private delay: number;
  private replaying = false;
  private stopped = false;

  constructor(opts: ReplayQueueOptions) {
    this.opts = opts;
    this.delay = opts.retry.minMs;
  }

  size(): number {
    return this.waiting.length;
  }

  /** Queues a record behind the others; settles when it lands (or is dropped). `now`: try at once, not after the backoff. */
  enqueue(plan: SpendRecord, now = false): Promise<RecordedSpend> {
    const p = new Promise<RecordedSpend>((resolve, reject) => {
      this.waiting.push({ plan, resolve, reject });
      while (this.waiting.length > this.opts.max) {
        const oldest = this.waiting.shift() as Waiting;
        oldest.done = true;
        if (this.opts.spill) {
          this.opts.spill(oldest.plan);
          oldest.reject(
            new LedgerUnavailableError(
              'ledger unavailable and the replay queue is full: spend kept in the journal, replayed when the queue has room',
            ),
          );
          continue;
        }
        this.opts.metrics.dropped.inc();
        this.opts.log?.error(
          { generation_id: oldest.plan.id },
          'ledger replay queue full: spend of the oldest waiting request dropped',
        );
        this.fail(
          oldest,
          new LedgerUnavailableError('ledger unavailable and the replay queue is full: spend not recorded'),
        );
      }
      this.opts.metrics.pending.set(this.waiting.length);
    });
    if (now) void this.replay();
    else this.schedule();
    return p;
  }

  /** Resolves when nothing waits (or rejects after timeoutMs). */
  drain(timeoutMs: number): Promise<void> {
    if (this.waiting.length === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.drainWaiters.delete(done);
        reject(new Error(`ledger replay queue still holds ${this.waiting.length} records after ${timeoutMs} ms`));
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        this.drainWaiters.delete(done);
        resolve();
      };
      this.drainWaiters.add(done);
    });
  }

  /** One last replay, then every record still waiting is rejected with `reason` (and handed to `settled` as not landed). */
  async close(reason: () => Error): Promise<Waiting[]> {
    if (this.waiting.length > 0) {
      clearTimeout(this.timer);
      this.timer = undefined;
      await this.replay();
    }
    this.stopped = true;
    const left = this.waiting.splice(0);
    for (const w of left) w.reject(reason());
    this.settleDrain();
    return left;
  }

  private fail(w: Waiting, err: Error): void {
    this.opts.settled?.(w.plan, false, err);
    w.reject(err);
  }

  private schedule(): void {
    if (this.timer !== undefined || this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.replay();
    }, this.delay);
    this.timer.unref();
    this.delay = Math.min(this.delay * 2, this.opts.retry.maxMs);
  }

  /**
   * Sends the queue's head in chunks of up to `chunk` records, issued in queue order (one connection and the ledger's
   * per-account batches keep that order, so each BYOK month-to-date is as if one at a time), then settles each in
   * order. On an outage the records that did not land stay, in order, for the next try.
   */
  private async replay(): Promise<void> {
    if (this.replaying) return;
    this.replaying = true;
    try {
      while (this.waiting.length > 0) {
        const chunk = this.waiting.slice(0, this.opts.chunk ?? DEFAULT_CHUNK);
        const results = await Promise.allSettled(chunk.map((w) => this.opts.apply(w.plan)));
        let outage = false;
        chunk.forEach((w, i) => {
          const r = results[i]!;
          if (w.done) return; // dropped meanwhile (queue full)
          if (r.status === 'fulfilled') {
            w.done = true;
            this.opts.settled?.(w.plan, true);
            w.resolve(r.value);
          } else if (r.reason instanceof LedgerUnavailableError && !this.stopped) {
            outage = true;
          } else {
            w.done = true;
            this.opts.metrics.dropped.inc();
            this.fail(w, r.reason instanceof Error ? r.reason : new Error(String(r.reason)));
          }
        });
        this.removeDone(outage);
        if (outage) {
          this.opts.metrics.unavailable.inc({ op: 'record' });
          this.schedule();
          return;
        }
        this.delay = this.opts.retry.minMs;
      }
    } finally {
      this.replaying = false;
      this.settleDrain();
    }
  }

  /** Drops settled records: from the head (the usual case), or anywhere when some of a chunk stayed behind. */
  private removeDone(anywhere: boolean): void {
    if (anywhere) {
      this.waiting = this.waiting.filter((w) => !w.done);
      return;
    }
    let n = 0;
    while (n < this.waiting.length && this.waiting[n]!.done) n++;
    this.waiting.splice(0, n);
  }

  private settleDrain(): void {
    this.opts.metrics.pending.set(this.waiting.length);
    if (this.waiting.length > 0) return;
    this.opts.emptied?.();
    if (this.waiting.length === 0) for (const w of this.drainWaiters) w();
  }
}
