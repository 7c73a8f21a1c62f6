// The pure part of credential health (docs/operator.md, "Upstream health and delivery"): turning counter deltas
// from gateway pods into a sliding window, and the window into the UpstreamHealthy condition. No I/O.
import { ConditionReason, ConditionType } from '../schema/conditions.ts';
import type { ConditionStatus, DesiredCondition } from './conditions.ts';

export interface OutcomeCounts {
  ok: number;
  unauthorized: number;
  rateLimited: number;
  upstreamError: number;
}

export interface HealthThresholds {
  /** Attempts older than this are forgotten (default 5 min). */
  windowMs: number;
  /** Failures of one class needed before it decides (default 3): one stray 401 or 429 is not a verdict. */
  minFailures: number;
  /** Share of the window's attempts that class must reach (default 0.5). */
  failureRatio: number;
}

export const DEFAULT_THRESHOLDS: HealthThresholds = { windowMs: 5 * 60_000, minFailures: 3, failureRatio: 0.5 };

export const ZERO_COUNTS: OutcomeCounts = { ok: 0, unauthorized: 0, rateLimited: 0, upstreamError: 0 };

export const sumCounts = (a: OutcomeCounts, b: OutcomeCounts): OutcomeCounts => ({
  ok: a.ok + b.ok,
  unauthorized: a.unauthorized + b.unauthorized,
  rateLimited: a.rateLimited + b.rateLimited,
  upstreamError: a.upstreamError + b.upstreamError,
});

/** Monotonic counters from one pod: the increase since the previous report (the whole value after a restart). */
export function counterDelta(now: OutcomeCounts, before: OutcomeCounts | undefined): OutcomeCounts {
  if (!before) return { ...now };
  const d = (k: keyof OutcomeCounts) => (now[k] >= before[k] ? now[k] - before[k] : now[k]);
  return { ok: d('ok'), unauthorized: d('unauthorized'), rateLimited: d('rateLimited'), upstreamError: d('upstreamError') };
}

/** Per-credential buckets of deltas; sum() covers the last windowMs. */
export class OutcomeWindow {
  private buckets: { at: number; counts: OutcomeCounts }[] = [];

  add(at: number, counts: OutcomeCounts): void {
    if (counts.ok + counts.unauthorized + counts.rateLimited + counts.upstreamError === 0) return;
    const last = this.buckets[this.buckets.length - 1];
    if (last && last.at === at) last.counts = sumCounts(last.counts, counts);
    else this.buckets.push({ at, counts });
  }

  sum(now: number, windowMs: number): OutcomeCounts {
    while (this.buckets.length > 0 && this.buckets[0]!.at <= now - windowMs) this.buckets.shift();
    return this.buckets.reduce((s, b) => sumCounts(s, b.counts), ZERO_COUNTS);
  }

  isEmpty(): boolean {
    return this.buckets.length === 0;
  }
}

const FAILURE_CLASSES = [
  { key: 'unauthorized', reason: ConditionReason.Unauthorized, says: 'the provider refused this key (401/403): rotate it' },
  { key: 'rateLimited', reason: ConditionReason.RateLimited, says: 'the provider is rate limiting this key (429)' },
  { key: 'upstreamError', reason: ConditionReason.UpstreamErrors, says: 'the provider is failing (5xx, timeouts or connection errors)' },
] as const;

/**
 * UpstreamHealthy from the window. A failure class decides when it reaches minFailures and failureRatio of the
 * attempts (401/403 first, then 429, then errors); otherwise any success means Serving. No attempts at all: Unused,
 * except that a False verdict stands until an attempt says otherwise (an idle revoked key stays flagged).
 */
export function decideUpstreamHealth(
  window: OutcomeCounts,
  previous: { status: ConditionStatus; reason: string; message: string } | undefined,
  t: HealthThresholds,
  windowText: string,
  /** The newest probe result within the window, if any: it decides alone when there was no traffic. */
  probe?: { outcome: keyof OutcomeCounts; status: number | null },
): DesiredCondition {
  const total = window.ok + window.unauthorized + window.rateLimited + window.upstreamError;
  if (total === 0 && probe) {
    const code = probe.status === null ? '' : ` (HTTP ${probe.status})`;
    if (probe.outcome === 'ok') return { type: ConditionType.UpstreamHealthy, status: 'True', reason: ConditionReason.Serving, message: `idle; the last probe was accepted${code}` };
    const c = FAILURE_CLASSES.find((f) => f.key === probe.outcome)!;
    return { type: ConditionType.UpstreamHealthy, status: 'False', reason: c.reason, message: `${c.says}: the probe of this idle credential failed${code}` };
  }
  const tally = `${window.ok} ok, ${window.unauthorized} refused, ${window.rateLimited} rate limited, ${window.upstreamError} errors in the last ${windowText}`;
  for (const c of FAILURE_CLASSES) {
    const n = window[c.key];
    if (n >= t.minFailures && n >= t.failureRatio * total) return { type: ConditionType.UpstreamHealthy, status: 'False', reason: c.reason, message: `${c.says}: ${tally}` };
  }
  if (window.ok > 0) return { type: ConditionType.UpstreamHealthy, status: 'True', reason: ConditionReason.Serving, message: tally };
  if (previous && previous.status === 'False') return { type: ConditionType.UpstreamHealthy, status: 'False', reason: previous.reason, message: previous.message };
  if (total === 0) return { type: ConditionType.UpstreamHealthy, status: 'Unknown', reason: ConditionReason.Unused, message: `no attempts with this credential in the last ${windowText}` };
  if (previous) return { type: ConditionType.UpstreamHealthy, status: previous.status, reason: previous.reason, message: previous.message };
  return { type: ConditionType.UpstreamHealthy, status: 'Unknown', reason: ConditionReason.Inconclusive, message: `too few attempts to judge: ${tally}` };
}

/** Delivered from pod counts. */
export function decideDelivered(loaded: number, total: number, version: string): DesiredCondition {
  if (total === 0) return { type: ConditionType.Delivered, status: 'Unknown', reason: ConditionReason.NoGateways, message: 'no gateway pod is reporting' };
  if (loaded === total) return { type: ConditionType.Delivered, status: 'True', reason: ConditionReason.Delivered, message: `all ${total} gateway pods have loaded version ${version}` };
  return { type: ConditionType.Delivered, status: 'False', reason: ConditionReason.Pending, message: `${loaded} of ${total} gateway pods have loaded version ${version}` };
}
