// Push, the health writer's fast path for Delivered: for every gateway pod that can hold a status request, the leader
// keeps one GET /byok/status?after=<seq> open; the pod answers the moment its delivery sequence moves (it loaded or
// refused a stream batch, or reloaded its mount), and the writer recomputes Delivered from that answer at once
// instead of at the next poll. Only the leader runs it: the acknowledgements are read where the status writer is.
import type { Logger } from 'pino';
import type { GatewayStatusReport } from '../../contract/gateway-status.ts';
import type { GatewayCollector, Target } from './gather.ts';

export interface DeliveryWatchOptions {
  collector: Pick<GatewayCollector, 'report'>;
  /** A pod's answer whose delivery sequence moved. */
  onReport: (pod: string, report: GatewayStatusReport) => void;
  log: Pick<Logger, 'debug'>;
  /** How long a pod holds one request (default 25 s; the pod caps it at 60 s). */
  waitMs?: number;
  /** Pause after a failed request before the next (default 1 s). */
  retryMs?: number;
}

interface Held {
  target: Target;
  stop: AbortController;
}

/** One held status request per pod found; pods no longer found are let go. */
export class DeliveryWatch {
  private readonly opts: DeliveryWatchOptions;
  private readonly held = new Map<string, Held>();

  constructor(opts: DeliveryWatchOptions) {
    this.opts = opts;
  }

  /** Holds a request on each found pod whose last report says it can be held; lets the others go. */
  sync(found: readonly Target[], latest: ReadonlyMap<string, GatewayStatusReport>): void {
    const keep = new Set<string>();
    for (const target of found) {
      const report = latest.get(target.pod);
      if (!report?.delivery) continue;
      const id = `${target.pod}\u0000${target.url}`;
      keep.add(id);
      if (this.held.has(id)) continue;
      const h: Held = { target, stop: new AbortController() };
      this.held.set(id, h);
      void this.run(h, report);
    }
    for (const [id, h] of this.held) {
      if (keep.has(id)) continue;
      h.stop.abort();
      this.held.delete(id);
    }
  }

  /** Pods held now. */
  get size(): number {
    return this.held.size;
  }

  stop(): void {
    for (const h of this.held.values()) h.stop.abort();
    this.held.clear();
  }

  private async run(h: Held, from: GatewayStatusReport): Promise<void> {
    const waitMs = this.opts.waitMs ?? 25_000;
    let instance = from.instance;
    let seq = from.delivery?.seq ?? 0;
    while (!h.stop.signal.aborted) {
      const r = await this.opts.collector.report(h.target, { after: seq, waitMs, signal: h.stop.signal });
      if (h.stop.signal.aborted) return;
      if (!r?.delivery) {
        this.opts.log.debug({ pod: h.target.pod }, 'held status request failed; retrying');
        await new Promise((resolve) => setTimeout(resolve, this.opts.retryMs ?? 1000).unref());
        continue;
      }
      const moved = r.instance !== instance || r.delivery.seq !== seq;
      instance = r.instance;
      seq = r.delivery.seq;
      if (moved) this.opts.onReport(h.target.pod, r);
    }
  }
}
