// The pure part of the health writer (docs/operator.md, "Upstream health and delivery"): counter deltas from gateway
// pods into a sliding window, the window into UpstreamHealthy, pod counts into Delivered, and each object's status
// part, Events and stale-pod notes from what a pass gathered. No I/O; types and reasons from the catalog.
import { createHash } from 'node:crypto';
import type { GatewayStatusReport } from '../../contract/gateway-status.ts';
import { ConditionReason, ConditionType, EventReason } from '../../schema/conditions.ts';
import type { ApiKeyDelivery, CredentialDelivery } from '../compile/types.ts';
import {
  buildConditions,
  type Condition,
  type ConditionStatus,
  type DesiredCondition,
  metaTime,
  sameStatus,
} from '../conditions.ts';
import { statusPartOf } from '../status/ownership.ts';

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

/** A probe result as a pod reports it. */
export interface ProbeReport {
  at: number;
  outcome: keyof OutcomeCounts;
  status: number | null;
}

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
  return {
    ok: d('ok'),
    unauthorized: d('unauthorized'),
    rateLimited: d('rateLimited'),
    upstreamError: d('upstreamError'),
  };
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
  {
    key: 'unauthorized',
    reason: ConditionReason.Unauthorized,
    event: EventReason.UpstreamUnauthorized,
    says: 'the provider refused this key (401/403): rotate it',
  },
  {
    key: 'rateLimited',
    reason: ConditionReason.RateLimited,
    event: EventReason.UpstreamRateLimited,
    says: 'the provider is rate limiting this key (429)',
  },
  {
    key: 'upstreamError',
    reason: ConditionReason.UpstreamErrors,
    event: EventReason.UpstreamErrors,
    says: 'the provider is failing (5xx, timeouts or connection errors)',
  },
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
    if (probe.outcome === 'ok')
      return {
        type: ConditionType.UpstreamHealthy,
        status: 'True',
        reason: ConditionReason.Serving,
        message: `idle; the last probe was accepted${code}`,
      };
    const c = FAILURE_CLASSES.find((f) => f.key === probe.outcome)!;
    return {
      type: ConditionType.UpstreamHealthy,
      status: 'False',
      reason: c.reason,
      message: `${c.says}: the probe of this idle credential failed${code}`,
    };
  }
  const tally = `${window.ok} ok, ${window.unauthorized} refused, ${window.rateLimited} rate limited, ${window.upstreamError} errors in the last ${windowText}`;
  for (const c of FAILURE_CLASSES) {
    const n = window[c.key];
    if (n >= t.minFailures && n >= t.failureRatio * total)
      return { type: ConditionType.UpstreamHealthy, status: 'False', reason: c.reason, message: `${c.says}: ${tally}` };
  }
  if (window.ok > 0)
    return { type: ConditionType.UpstreamHealthy, status: 'True', reason: ConditionReason.Serving, message: tally };
  if (previous && previous.status === 'False')
    return { type: ConditionType.UpstreamHealthy, status: 'False', reason: previous.reason, message: previous.message };
  if (total === 0)
    return {
      type: ConditionType.UpstreamHealthy,
      status: 'Unknown',
      reason: ConditionReason.Unused,
      message: `no attempts with this credential in the last ${windowText}`,
    };
  if (previous)
    return {
      type: ConditionType.UpstreamHealthy,
      status: previous.status,
      reason: previous.reason,
      message: previous.message,
    };
  return {
    type: ConditionType.UpstreamHealthy,
    status: 'Unknown',
    reason: ConditionReason.Inconclusive,
    message: `too few attempts to judge: ${tally}`,
  };
}

/** Delivered from pod counts. */
export function decideDelivered(loaded: number, total: number, version: string): DesiredCondition {
  if (total === 0)
    return {
      type: ConditionType.Delivered,
      status: 'Unknown',
      reason: ConditionReason.NoGateways,
      message: 'no gateway pod is reporting',
    };
  if (loaded === total)
    return {
      type: ConditionType.Delivered,
      status: 'True',
      reason: ConditionReason.Delivered,
      message: `all ${total} gateway pods have loaded version ${version}`,
    };
  return {
    type: ConditionType.Delivered,
    status: 'False',
    reason: ConditionReason.Pending,
    message: `${loaded} of ${total} gateway pods have loaded version ${version}`,
  };
}

export const windowText = (ms: number): string =>
  ms % 60_000 === 0 ? `${ms / 60_000} min` : `${Math.round(ms / 1000)} s`;

export const conditionOf = (status: unknown, type: ConditionType): Condition | undefined =>
  ((status as { conditions?: Condition[] } | undefined)?.conditions ?? []).find((c) => c.type === type);

/** The part of a stored status the health writer owns (status/ownership.ts). */
export function healthPart(status: object | undefined): Record<string, unknown> {
  return statusPartOf('health', status);
}

/** An account's delivery version: a digest of every credential's version. */
export function accountVersion(versions: ReadonlyMap<string, CredentialDelivery>): string {
  return createHash('sha256')
    .update(
      [...versions]
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([id, v]) => `${id}:${v.version}`)
        .join('\n'),
    )
    .digest('hex')
    .slice(0, 16);
}

/**
 * Whether a pod has a credential's current version live: it has loaded a routing config at all (a pod that answers
 * 503 "no routing config yet" must not count toward Delivered), its bundles hold the credential's envelope version,
 * and its routing index is from the compile run that brought the routing entry or later (`routingRun`: the run of
 * the index version it reports, -1 for none).
 */
export function serves(
  report: GatewayStatusReport,
  routingRun: number,
  id: string,
  delivery: CredentialDelivery,
): boolean {
  return (
    report.routing.version !== null &&
    report.bundle.credentials[id] === delivery.envelope &&
    routingRun >= delivery.since
  );
}

/** What a pass gathered about one credential. */
export interface CredentialHealthFacts {
  /** Its stored status. */
  stored: object | undefined;
  generation: number | undefined;
  now: number;
  /** The window's attempts with the current key. */
  window: OutcomeCounts;
  /** The newest probe result across pods, if any (it counts only within the window). */
  probe: ProbeReport | undefined;
  /** The key changed since the last pass: the old key's verdict is not built on. */
  rotated: boolean;
  /** When a pod last saw it used. */
  lastUsed: number | undefined;
  /** Its compiled delivery version and how many of the `total` pods found serve it; undefined when not compiled. */
  delivery: { version: string; loaded: number; total: number } | undefined;
  thresholds: HealthThresholds;
  /** lastUsedTime moves only by at least this much. */
  lastUsedResolutionMs: number;
}

export interface CredentialHealthEvaluation {
  health: DesiredCondition;
  /** The status part to write (delivery, lastUsedTime, UpstreamHealthy, Delivered). */
  part: Record<string, unknown>;
  /** The stored part already is `part`: nothing to write. */
  unchanged: boolean;
  /** UpstreamHealthy moves (status or reason) from what is stored: a written transition gets an Event. */
  transition: boolean;
  /** A pod still lacks the current version (Delivered False): poll again soon. */
  pending: boolean;
  /** The stored UpstreamHealthy is False: a True after it is an UpstreamRecovered. */
  storedFalse: boolean;
  /** Rotated away from a False verdict: the first True after it is still an UpstreamRecovered. */
  rotatedFromFalse: boolean;
}

/** A credential's health part. Between transitions the stored messages stay, or every pass would write. */
export function evaluateCredentialHealth(f: CredentialHealthFacts): CredentialHealthEvaluation {
  const { stored, now, thresholds: t } = f;
  const storedHealth = conditionOf(stored, ConditionType.UpstreamHealthy);
  // The verdict to build on; transitions and their Events still compare with what is stored.
  const prevHealth = f.rotated ? undefined : storedHealth;
  const probe = f.probe && now - f.probe.at < t.windowMs ? f.probe : undefined;
  const health = decideUpstreamHealth(f.window, prevHealth, t, windowText(t.windowMs), probe);
  // The message carries the window's tally.
  if (prevHealth && prevHealth.status === health.status && prevHealth.reason === health.reason)
    health.message = prevHealth.message;
  const desired: DesiredCondition[] = [health];
  const part: Record<string, unknown> = {};
  const storedPart = healthPart(stored);
  // lastUsedTime: only when it moved by the resolution (or was never written).
  const storedUsed = typeof storedPart.lastUsedTime === 'string' ? Date.parse(storedPart.lastUsedTime) : undefined;
  if (f.lastUsed !== undefined)
    part.lastUsedTime =
      storedUsed === undefined || f.lastUsed - storedUsed >= f.lastUsedResolutionMs
        ? metaTime(new Date(f.lastUsed))
        : storedPart.lastUsedTime;
  else if (storedPart.lastUsedTime !== undefined) part.lastUsedTime = storedPart.lastUsedTime;
  const storedDelivered = conditionOf(stored, ConditionType.Delivered);
  let pending = false;
  if (f.delivery !== undefined) {
    const { version, loaded, total } = f.delivery;
    const delivered = decideDelivered(loaded, total, version);
    const storedDelivery = storedPart.delivery as
      | { loaded?: number; total?: number; configVersion?: string }
      | undefined;
    // A delivered credential keeps its record when only the pod count moves (Account.status.delivery has it).
    const keep =
      storedDelivery &&
      storedDelivered?.status === 'True' &&
      delivered.status === 'True' &&
      storedDelivery.configVersion === version;
    part.delivery = keep ? storedDelivery : { loaded, total, configVersion: version };
    desired.push(
      keep
        ? {
            type: ConditionType.Delivered,
            status: 'True',
            reason: storedDelivered.reason,
            message: storedDelivered.message,
          }
        : delivered,
    );
    pending = delivered.status === 'False';
  } else if (storedDelivered) {
    desired.push(storedDelivered);
    if (storedPart.delivery !== undefined) part.delivery = storedPart.delivery;
  }
  part.conditions = buildConditions(
    stored ? ((stored as { conditions?: Condition[] }).conditions ?? []) : [],
    desired,
    f.generation,
    new Date(now),
  );
  return {
    health,
    part,
    unchanged: sameStatus(storedPart, part),
    transition: storedHealth?.status !== health.status || storedHealth?.reason !== health.reason,
    pending,
    storedFalse: storedHealth?.status === 'False',
    rotatedFromFalse: f.rotated && storedHealth?.status === 'False',
  };
}

export interface HealthEvent {
  eventType: 'Warning' | 'Normal';
  reason: EventReason;
  note: string;
}

/** The Event of a written UpstreamHealthy transition: a Warning into False, UpstreamRecovered out of one. */
export function upstreamHealthEvent(health: DesiredCondition, recovered: boolean): HealthEvent | undefined {
  if (health.status === 'False') {
    const reason = FAILURE_CLASSES.find((c) => c.reason === health.reason)?.event ?? EventReason.UpstreamErrors;
    // The condition's message already says what to do ("…refused this key (401/403): rotate it: <counts>").
    return { eventType: 'Warning', reason, note: health.message };
  }
  if (health.status === 'True' && recovered)
    return {
      eventType: 'Normal',
      reason: EventReason.UpstreamRecovered,
      note: `the provider accepts this credential again: ${health.message}`,
    };
  return undefined;
}

/**
 * Whether a pod serves a GatewayAPIKey's current routing entry: it has loaded a routing config and its index is from
 * the compile run that first carried the entry or later (the rule `serves` applies to a credential's entry).
 */
export const servesApiKey = (report: GatewayStatusReport, routingRun: number, delivery: ApiKeyDelivery): boolean =>
  report.routing.version !== null && routingRun >= delivery.since;

/**
 * The delivery part of an Account (how many pods serve every credential's current version) or of a GatewayAPIKey
 * (how many serve its routing entry). `waiting`: what else must happen before Delivered can be True (a key whose
 * account's budgets are not open yet): Delivered stays False, Pending, saying so.
 */
export function deliveryPart(
  stored: object | undefined,
  generation: number | undefined,
  delivery: { loaded: number; total: number; version: string },
  now: number,
  waiting?: string,
): {
  part: { delivery: { loaded: number; total: number; configVersion: string }; conditions: Condition[] };
  unchanged: boolean;
  pending: boolean;
} {
  const { loaded, total, version } = delivery;
  let delivered = decideDelivered(loaded, total, version);
  if (waiting !== undefined && delivered.status === 'True')
    delivered = {
      ...delivered,
      status: 'False',
      reason: ConditionReason.Pending,
      message: `all ${total} gateway pods have loaded version ${version}; ${waiting}`,
    };
  const part = {
    delivery: { loaded, total, configVersion: version },
    conditions: buildConditions(
      (stored as { conditions?: Condition[] } | undefined)?.conditions ?? [],
      [delivered],
      generation,
      new Date(now),
    ),
  };
  return { part, unchanged: sameStatus(healthPart(stored), part), pending: delivered.status === 'False' };
}

/**
 * The Warning on an Account when a gateway pod refused a delivery stream batch and does not serve the account's
 * current version. The reason is the pod's (object names of the routing namespace, key ids, fixed phrases).
 */
export function refusedBatchNote(pod: string, batch: number, reason: string | undefined, version: string): string {
  return `gateway pod ${pod} refused delivery batch ${batch} and does not serve this account's current credentials (version ${version}): ${reason ?? 'no reason given'}; it keeps serving what it held, and Delivered stays False until it loads this version`;
}

/** The Warning on an Account when a pod has lagged behind its current credentials for `lagMs`. */
export function stalePodNote(pod: string, answered: boolean, version: string, lagMs: number): string {
  const seconds = Math.round(lagMs / 1000);
  return answered
    ? `gateway pod ${pod} has not loaded this account's current credentials (version ${version}) for ${seconds} s: check its projected volumes (a missing bundle slot or a Secret it cannot read)`
    : `gateway pod ${pod} has not answered the status endpoint for ${seconds} s`;
}
