// Records waiting for the ledger to come back, in order (later records wait behind them, so each replayed BYOK
// request's month-to-date is exact), replayed with backoff. Bounded: past `max` the oldest is dropped, counted and
// rejected. The queue owns no durability: with a journal, every record in it is already on disk (spend-gate.ts).
import type { Logger } from 'pino';
import type { RecordedSpend } from '../../contract/spend-gate.ts';
import { LedgerUnavailableError } from '../ledger.ts';
import type { GateMetrics } from './metrics.ts';
import type { RecordPlan } from './record-plan.ts';

interface Waiting {
  plan: RecordPlan;
  resolve(spend: RecordedSpend): void;
  reject(err: Error): void;
}

export interface ReplayQueueOptions {
  /** Applies one record; a LedgerUnavailableError keeps it at the head for the next try. */
  apply: (plan: RecordPlan) => Promise<RecordedSpend>;
  /** Told when a record leaves the queue: landed, or failed for good (dropped or refused). */
  settled?: (plan: RecordPlan, landed: boolean, err?: Error) => void;
  max: number;
  retry: { minMs: number; maxMs: number };
  metrics: GateMetrics;
  log?: Logger | undefined;
}

export class ReplayQueue {
  private readonly opts: ReplayQueueOptions;
  private readonly waiting: Waiting[] = [];
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
  enqueue(plan: RecordPlan, now = false): Promise<RecordedSpend> {
    const p = new Promise<RecordedSpend>((resolve, reject) => {
      this.waiting.push({ plan, resolve, reject });
      while (this.waiting.length > this.opts.max) {
        const oldest = this.waiting.shift() as Waiting;
        this.opts.metrics.dropped.inc();
        this.opts.log?.error({ generation_id: oldest.plan.id }, 'ledger replay queue full: spend of the oldest waiting request dropped');
        this.fail(oldest, new LedgerUnavailableError('ledger unavailable and the replay queue is full: spend not recorded'));
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

  private async replay(): Promise<void> {
    if (this.replaying) return;
    this.replaying = true;
    try {
      while (this.waiting.length > 0) {
        const head = this.waiting[0] as Waiting;
        try {
          const spend = await this.opts.apply(head.plan);
          this.waiting.shift();
          this.opts.settled?.(head.plan, true);
          head.resolve(spend);
          this.delay = this.opts.retry.minMs;
        } catch (err) {
          if (err instanceof LedgerUnavailableError && !this.stopped) {
            this.opts.metrics.unavailable.inc({ op: 'record' });
            this.schedule();
            return;
          }
          this.waiting.shift();
          this.opts.metrics.dropped.inc();
          this.fail(head, err instanceof Error ? err : new Error(String(err)));
        }
      }
    } finally {
      this.replaying = false;
      this.settleDrain();
    }
  }

  private settleDrain(): void {
    this.opts.metrics.pending.set(this.waiting.length);
    if (this.waiting.length === 0) for (const w of this.drainWaiters) w();
  }
}
