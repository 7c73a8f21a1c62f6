// When the compile pipeline runs: dirty accounts are coalesced for coalesceMs; while changes keep arriving the wait
// between runs grows (batches), after a failure it backs off, and while the reconcilers are backed up it holds the
// next run until the backlog clears. One run at a time. No I/O of its own: `run` does the work.

/** How often a run held back for a reconcile backlog checks whether the backlog has cleared. */
const BACKLOG_POLL_MS = 250;

export interface SchedulerOptions<R> {
  /** One compile run; it reports its outcome through succeeded() / failed(). */
  run: () => Promise<R>;
  /** Whether changes are waiting (dirty accounts). */
  pending: () => boolean;
  /** Dirty accounts are collected for this long before a run (default 20 ms). */
  coalesceMs?: number;
  /** Cap of the wait between back-to-back runs while changes keep arriving (default 1000 ms). */
  maxBatchDelayMs?: number;
  /** True while the reconcilers are backed up: the next run waits until it turns false (or backlogDelayMs). */
  backlog?: () => boolean;
  /** The longest wait between runs while backlog() holds (default 30000 ms). */
  backlogDelayMs?: number;
}

export class CompileScheduler<R> {
  private readonly coalesceMs: number;
  private readonly maxBatchDelayMs: number;
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<R> | undefined;
  private active = false;
  private failureCount = 0;
  /** Duration of the last run: the next one waits at least this long, so compiling (and writing) takes at most
   *  about half the time while changes keep arriving, e.g. during a cold start of thousands of credentials. */
  private lastRunMs = 0;
  /** Runs after which changes were already waiting again, in the current stream of changes (e.g. a cold start):
   *  the wait before the next run doubles from coalesceMs per such run, up to maxBatchDelayMs, so a sustained
   *  stream is written in fewer, larger batches (every rewrite of a shard costs the apiserver the whole shard).
   *  The stream ends with the first run after which nothing is waiting: the pipeline is idle, and the next change
   *  waits only coalesceMs whatever came before. (Ending it on a quiet period instead kept a steady trickle of
   *  one change every 0.7 s at the 640 ms batch delay forever after a cold start.) */
  private busyRuns = 0;

  private readonly opts: SchedulerOptions<R>;

  constructor(opts: SchedulerOptions<R>) {
    this.opts = opts;
    this.coalesceMs = opts.coalesceMs ?? 20;
    this.maxBatchDelayMs = opts.maxBatchDelayMs ?? 1000;
  }

  /** Whether runs are scheduled at all (between start() and stop()). */
  get started(): boolean {
    return this.active;
  }

  /** The run in progress, if any. */
  get running(): Promise<R> | undefined {
    return this.inFlight;
  }

  /** Consecutive failed runs (0 after a success). */
  get failures(): number {
    return this.failureCount;
  }

  /** The wait before the next run while changes keep arriving. */
  batchDelay(): number {
    return Math.max(
      this.coalesceMs,
      Math.min(this.maxBatchDelayMs, this.coalesceMs * 2 ** Math.min(this.busyRuns, 16)),
    );
  }

  succeeded(durationMs: number): void {
    this.failureCount = 0;
    this.lastRunMs = durationMs;
  }

  failed(): void {
    this.failureCount++;
  }

  start(): void {
    this.active = true;
  }

  /** Stop scheduling; waits for an in-flight run. */
  async stop(): Promise<void> {
    this.active = false;
    this.cancelTimer();
    await this.inFlight;
  }

  /** A run after `delay` unless one is already timed or running (then it picks the change up). */
  schedule(delay = this.coalesceMs): void {
    if (!this.active || this.timer || this.inFlight) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.drive();
    }, delay);
    this.timer.unref?.();
  }

  /** Runs now (or joins the run in progress). `endsHold`: the run holdForBacklog starts once the backlog has cleared. */
  drive(endsHold = false): Promise<R> {
    if (this.inFlight) return this.inFlight;
    this.inFlight = this.opts.run().finally(() => {
      this.inFlight = undefined;
      if (!this.opts.pending()) {
        this.busyRuns = 0;
        return;
      }
      this.busyRuns++;
      if (this.failureCount > 0) this.schedule(Math.min(10_000, 100 * 2 ** this.failureCount));
      else if (this.opts.backlog?.()) this.holdForBacklog();
      else if (endsHold) {
        // The backlog is gone and the held run batched it: what arrived during that run (seconds, at 100k) is
        // ordinary traffic again. Waiting the batch delay or the run's length here held the first changes after
        // a 100k cold start for 0.6-1.3 s.
        this.busyRuns = 0;
        this.schedule();
      } else this.schedule(Math.max(this.batchDelay(), Math.min(this.lastRunMs, 2000)));
    });
    return this.inFlight;
  }

  /**
   * Runs until nothing is pending (or a run fails), after the run in progress; resolves with the last run's
   * result, or `last()` when nothing was pending.
   */
  async flush(last: () => R): Promise<R> {
    this.cancelTimer();
    if (this.inFlight) await this.inFlight;
    let result = last();
    while (this.opts.pending()) {
      const before = this.failureCount;
      result = await this.drive();
      if (this.failureCount > before) break;
    }
    return result;
  }

  /**
   * While the reconcilers are backed up (a cold start, a mass rotation), the next run waits for the backlog to
   * clear, or backlogDelayMs at most. Every run rewrites each bundle Secret one of its accounts touched, whole
   * (SSA of ~900 keys): at 100k credentials, runs 5 s apart still wrote bundles 1,401 times, +21 % apiserver
   * time over the floor. Once the backlog clears, the run starts within BACKLOG_POLL_MS.
   */
  private holdForBacklog(): void {
    if (!this.active || this.timer || this.inFlight) return;
    const until = performance.now() + (this.opts.backlogDelayMs ?? 30_000);
    const check = () => {
      this.timer = undefined;
      if (!this.active || this.inFlight) return;
      if (this.opts.backlog?.() && performance.now() < until) {
        this.timer = setTimeout(check, BACKLOG_POLL_MS);
        this.timer.unref?.();
        return;
      }
      void this.drive(!this.opts.backlog?.());
    };
    this.timer = setTimeout(check, BACKLOG_POLL_MS);
    this.timer.unref?.();
  }

  private cancelTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
