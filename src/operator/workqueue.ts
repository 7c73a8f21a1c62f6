// A rate-limited work queue modelled on client-go's workqueue as controller-runtime uses it:
//  - a key is queued at most once (dirty set);
//  - a key is processed by one worker at a time; re-added while processing, it runs again afterwards;
//  - failures back off per key exponentially (base * 2^n, capped); forget() resets the key;
//  - addAfter() delays an add (the earliest pending time wins);
//  - `concurrency` workers; start()/stop() may be called repeatedly (workers only run while leading).
import { yieldToEventLoop } from './event-loop.ts';
import type { OperatorMetrics } from './metrics.ts';

export type ReconcileResult = void | { requeue?: boolean; requeueAfterMs?: number };
export type Reconciler = (key: string) => Promise<ReconcileResult>;

export interface WorkQueueOptions {
  name: string;
  concurrency?: number;
  baseDelayMs?: number;
  maxDelayMs?: number;
  metrics?: OperatorMetrics;
  /** Called for errors a reconcile threw (after metrics). */
  onError?: (key: string, err: unknown) => void;
  /**
   * While this returns true, queued keys wait (checked every 100 ms). Lets work that routing does not depend on
   * (Account, Workspace, key statuses) stand aside while the credential queue has a backlog.
   */
  yieldWhile?: () => boolean;
}

const YIELD_POLL_MS = 100;

export class WorkQueue {
  readonly name: string;
  private readonly opts: WorkQueueOptions;
  private readonly queue: string[] = [];
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly queuedAt = new Map<string, number>();
  private readonly delayed = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private readonly failures = new Map<string, number>();
  /** Periodic re-checks (addBackground): taken only when `queue` is empty; `background` is read from bgHead. */
  private background: string[] = [];
  private bgHead = 0;
  private readonly backgroundKeys = new Set<string>();
  private wake: (() => void)[] = [];
  private idleWaiters: (() => void)[] = [];
  private workers: Promise<void>[] = [];
  private running = false;
  private shutDown = false;
  private reconcile: Reconciler | undefined;

  constructor(opts: WorkQueueOptions) {
    this.opts = opts;
    this.name = opts.name;
    opts.metrics?.maxConcurrentReconciles.set({ controller: opts.name }, this.concurrency);
  }

  private get concurrency(): number {
    return this.opts.concurrency ?? 1;
  }

  private get labels() {
    return { name: this.name, controller: this.name };
  }

  add(key: string): void {
    if (this.shutDown) return;
    this.opts.metrics?.queueAdds.inc(this.labels);
    if (this.dirty.has(key)) return;
    this.backgroundKeys.delete(key); // a real change goes ahead; its background entry is skipped
    this.dirty.add(key);
    this.queuedAt.set(key, performance.now());
    if (this.processing.has(key)) return;
    this.queue.push(key);
    this.opts.metrics?.queueDepth.set(this.labels, this.queue.length);
    this.wake.shift()?.();
  }

  /**
   * Adds every key and moves the queued ones into the given order, ahead of other queued keys (which keep
   * their order). Used to reconcile a full resync in a chosen order even when informer events queued the keys
   * first, in whatever order they arrived.
   */
  addAllInOrder(keys: readonly string[]): void {
    if (this.shutDown) return;
    for (const key of keys) this.add(key);
    const rank = new Map<string, number>();
    keys.forEach((k, i) => rank.set(k, i));
    const first = this.queue.filter((k) => rank.has(k)).sort((a, b) => rank.get(a)! - rank.get(b)!);
    const rest = this.queue.filter((k) => !rank.has(k));
    this.queue.length = 0;
    for (const k of first) this.queue.push(k);
    for (const k of rest) this.queue.push(k);
  }

  /**
   * Keys for a periodic re-check: taken only when no other key is queued, so a full resync of 100k credentials
   * never stands in front of a real change (at 100k one did: a change waited 5 s behind it). They do not count
   * in len().
   */
  addBackground(keys: readonly string[]): void {
    if (this.shutDown) return;
    for (const key of keys) {
      if (this.dirty.has(key) || this.backgroundKeys.has(key)) continue;
      this.backgroundKeys.add(key);
      this.background.push(key);
    }
    for (const w of this.wake.splice(0)) w();
  }

  private takeBackground(): string | undefined {
    while (this.bgHead < this.background.length) {
      const key = this.background[this.bgHead++]!;
      if (this.backgroundKeys.delete(key)) return key;
    }
    this.background = [];
    this.bgHead = 0;
    return undefined;
  }

  addAfter(key: string, delayMs: number): void {
    if (this.shutDown) return;
    if (delayMs <= 0) return this.add(key);
    const at = Date.now() + delayMs;
    const existing = this.delayed.get(key);
    if (existing && existing.at <= at) return;
    if (existing) clearTimeout(existing.timer);
    const timer = setTimeout(() => {
      this.delayed.delete(key);
      this.add(key);
    }, delayMs);
    timer.unref();
    this.delayed.set(key, { at, timer });
  }

  /** Re-adds a key after its per-key backoff and counts a retry. */
  addRateLimited(key: string): void {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    this.opts.metrics?.queueRetries.inc(this.labels);
    this.addAfter(key, this.backoffFor(n));
  }

  backoffFor(failures: number): number {
    const base = this.opts.baseDelayMs ?? 5;
    const max = this.opts.maxDelayMs ?? 60_000;
    return Math.min(max, base * 2 ** Math.min(failures, 30));
  }

  forget(key: string): void {
    this.failures.delete(key);
  }

  numRequeues(key: string): number {
    return this.failures.get(key) ?? 0;
  }

  len(): number {
    return this.queue.length;
  }

  /** Nothing queued and nothing processing (delayed adds do not count). */
  isIdle(): boolean {
    return this.queue.length === 0 && this.processing.size === 0 && this.backgroundKeys.size === 0;
  }

  waitForIdle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((r) => this.idleWaiters.push(r));
  }

  /** Starts `concurrency` workers calling `reconcile`. */
  start(reconcile: Reconciler): void {
    if (this.running || this.shutDown) return;
    this.reconcile = reconcile;
    this.running = true;
    this.workers = Array.from({ length: this.concurrency }, () => this.worker());
  }

  /** Stops the workers, waiting for in-flight reconciles; queued keys stay for the next start(). */
  async stop(): Promise<void> {
    this.running = false;
    for (const w of this.wake.splice(0)) w();
    await Promise.all(this.workers);
    this.workers = [];
  }

  /** Stops for good and drops every pending key. */
  async shutdown(): Promise<void> {
    this.shutDown = true;
    for (const d of this.delayed.values()) clearTimeout(d.timer);
    this.delayed.clear();
    await this.stop();
  }

  private async next(): Promise<string | undefined> {
    while (this.running) {
      if (this.queue.length > 0 && this.opts.yieldWhile?.()) {
        await new Promise<void>((r) => setTimeout(r, YIELD_POLL_MS).unref());
        continue;
      }
      const key = this.queue.shift() ?? this.takeBackground();
      if (key !== undefined) return key;
      await new Promise<void>((r) => this.wake.push(r));
    }
    return undefined;
  }

  private async worker(): Promise<void> {
    const m = this.opts.metrics;
    for (;;) {
      const turn = yieldToEventLoop();
      if (turn) await turn;
      const key = await this.next();
      if (key === undefined) return;
      this.processing.add(key);
      this.dirty.delete(key);
      m?.queueDepth.set(this.labels, this.queue.length);
      const queued = this.queuedAt.get(key);
      this.queuedAt.delete(key);
      if (queued !== undefined) m?.queueLatency.observe(this.labels, (performance.now() - queued) / 1000);
      m?.activeWorkers.inc({ controller: this.name });
      const started = performance.now();
      let result: string;
      try {
        const r = await this.reconcile!(key);
        if (r && r.requeueAfterMs !== undefined && r.requeueAfterMs > 0) {
          this.forget(key);
          this.addAfter(key, r.requeueAfterMs);
          result = 'requeue_after';
        } else if (r && r.requeue) {
          this.addRateLimited(key);
          result = 'requeue';
        } else {
          this.forget(key);
          result = 'success';
        }
      } catch (err) {
        this.addRateLimited(key);
        result = 'error';
        m?.reconcileErrors.inc({ controller: this.name });
        this.opts.onError?.(key, err);
      }
      const seconds = (performance.now() - started) / 1000;
      m?.reconcileTotal.inc({ controller: this.name, result });
      m?.reconcileTime.observe({ controller: this.name }, seconds);
      m?.workDuration.observe(this.labels, seconds);
      m?.activeWorkers.dec({ controller: this.name });
      this.processing.delete(key);
      // Re-added while we were processing: it goes to the back of the queue now.
      if (this.dirty.has(key) && !this.shutDown) {
        this.queue.push(key);
        m?.queueDepth.set(this.labels, this.queue.length);
        this.wake.shift()?.();
      }
      if (this.isIdle()) for (const w of this.idleWaiters.splice(0)) w();
    }
  }
}
