// BudgetExceeded Events (docs/operator.md, "Budget Events"): requests a budget refused (402) become one Warning Event
// series on the Guardrail or Workspace whose budget refused them, so `kubectl describe` shows them.
//
// Who writes: the operator's leader, from the spend pass. Gateways count refusals in the ledger (ledger/refusals.ts);
// they hold no Events RBAC and never wait on the Kubernetes API. Each pass hands this module the refusal counter of
// every budget window; an increase is new refusals.
//
// Throttled: one events.k8s.io/v1 Event per budget window (per leader), created when the first refusal is seen and
// then only patched (series.count, series.lastObservedTime), and at most one Event write per object per throttle
// period (default 1 min). N refusals make one Event "xN", not N Events. The note names the budget, its window, limit
// and reset time; it is built from names and figures only (no key material can reach it) and, being immutable on an
// events.k8s.io Event, a changed limit or a new window starts a new series.
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { budgetResetWords, budgetWindowWords } from '../../domain/budgets.ts';
import type { BudgetInterval } from '../../domain/compiled.ts';
import { KubeApiError, kubeClient } from '../../kube/client.ts';
import type { KubeAccess } from '../../kube/kubeconfig.ts';
import { EventReason } from '../../schema/conditions.ts';
import { API_VERSION } from '../../schema/resources.ts';

export const BUDGET_EVENT_ACTION = 'RefuseRequests';
const DEFAULT_THROTTLE_MS = 60_000;
/** Longer than a ledger outage usually lasts: a pass that could not read the ledger must not restart the series. */
const FORGET_MS = 15 * 60_000;

/** What one pass saw of one budget window. */
export interface BudgetRefusals {
  regarding: { kind: 'Workspace' | 'Guardrail'; namespace: string; name: string; uid: string };
  /** The limit was reached (BudgetExceeded), or the requests needed more than was left (RequestOverBudget). */
  reason: 'reached' | 'over';
  interval: BudgetInterval;
  /** The window id (d2026-11-26, w..., m2026-11, life: what tells one series from the next, never shown) and its end (ms since epoch; null for lifetime). */
  window: { id: string; endsAt: number | null };
  limitUsd: number;
  includesByok: boolean;
  /** The ledger's refusal counter of this window now. */
  refused: number;
  /** What status.spend last mirrored for this window: the base after a leader change (undefined: none). */
  mirrored: number | undefined;
}

/** The Event as written: events.k8s.io/v1 fields. */
export interface BudgetEvent {
  name: string;
  namespace: string;
  eventTime: Date;
  series: { count: number; lastObservedTime: Date } | null;
  note: string;
  reason: typeof EventReason.BudgetExceeded | typeof EventReason.RequestOverBudget;
  regarding: BudgetRefusals['regarding'];
}

/** Where Events go: create and patch the series (createKubeBudgetEventSink), or anything else in a unit test. */
export interface BudgetEventSink {
  create(event: BudgetEvent): Promise<void>;
  /** Throws a 404 KubeApiError when the Event is gone (its TTL lapsed). */
  updateSeries(event: BudgetEvent): Promise<void>;
}

interface Series {
  objectKey: string;
  reason: BudgetEvent['reason'];
  regarding: BudgetRefusals['regarding'];
  window: string;
  note: string;
  /** The ledger counter as last seen. */
  seen: number;
  /** Refusals in this Event series, and how many the API has. */
  total: number;
  written: number;
  firstAt: Date;
  lastAt: Date;
  name: string | null;
  /** When it was last written (ms; 0: never): of an object's series, the longest unwritten goes first. */
  writtenAt: number;
  /** When a pass last observed it (ms): a series unseen for FORGET_MS (its object or budget gone) is forgotten. */
  observedAt: number;
}

const usd = (n: number) => `${Number(n.toFixed(6))} USD`;

/**
 * The Event note: budget (its window in words, never the ledger's window id), limit, what counts, and when it resets
 * (UTC). Reached: every request is refused until then. Over: only requests that need more than is left are.
 */
export function budgetNote(
  r: Pick<BudgetRefusals, 'regarding' | 'reason' | 'interval' | 'window' | 'limitUsd' | 'includesByok'>,
): string {
  const counts = r.includesByok
    ? 'shared-capacity charges and BYOK list cost count'
    : 'shared-capacity charges count, BYOK is excluded';
  const what = `${r.regarding.kind} ${r.regarding.name}: ${budgetWindowWords(r.interval)} of ${usd(r.limitUsd)} (${counts})`;
  const reset =
    r.window.endsAt === null
      ? 'a lifetime budget never resets: raise the limit'
      : `${budgetResetWords(r.window.endsAt)} (UTC)`;
  if (r.reason === 'reached') return `${what} is reached; requests under it are refused with 402; ${reset}`;
  return `${what} is not reached, but requests that would need more than it has left were refused with 402 (each 402 says how much it needed, what was left and the max_tokens that would fit); requests that fit are served, and one without max_tokens is capped to what is left; ${reset}`;
}

export interface BudgetEventsOptions {
  sink: BudgetEventSink;
  throttleMs?: number;
  log?: Pick<Logger, 'warn'>;
}

/** The refusal series of every budget window, turned into throttled Events. Not thread-safe: one spend pass at a time. */
export class BudgetEvents {
  private readonly sink: BudgetEventSink;
  private readonly throttleMs: number;
  private readonly log: Pick<Logger, 'warn'> | undefined;
  private readonly series = new Map<string, Series>();
  private readonly lastWrite = new Map<string, number>();

  constructor(opts: BudgetEventsOptions) {
    this.sink = opts.sink;
    this.throttleMs = opts.throttleMs ?? DEFAULT_THROTTLE_MS;
    this.log = opts.log;
  }

  observe(r: BudgetRefusals, now: Date): void {
    const key = `${r.regarding.uid}|${r.regarding.kind}|${r.interval}|${r.reason}`;
    const note = budgetNote(r);
    let s = this.series.get(key);
    // The base: what this leader saw of this window, else what status mirrored (a new leader), else 0.
    const base = s !== undefined && s.window === r.window.id ? s.seen : (r.mirrored ?? 0);
    // A counter below its base was lost (a ledger restart) and counts again from 0: all of it is new.
    const fresh = r.refused >= base ? r.refused - base : r.refused;
    if (s === undefined || s.window !== r.window.id || s.note !== note) {
      s = {
        objectKey: r.regarding.uid,
        reason: r.reason === 'reached' ? EventReason.BudgetExceeded : EventReason.RequestOverBudget,
        regarding: r.regarding,
        window: r.window.id,
        note,
        seen: r.refused,
        total: 0,
        written: 0,
        firstAt: now,
        lastAt: now,
        name: null,
        writtenAt: 0,
        observedAt: now.getTime(),
      };
      this.series.set(key, s);
    }
    s.seen = r.refused;
    s.observedAt = now.getTime();
    if (fresh === 0) return;
    if (s.total === 0) s.firstAt = now;
    s.total += fresh;
    s.lastAt = now;
  }

  /** Writes the series that grew, at most one write per object per throttle period. */
  async flush(now: Date): Promise<void> {
    for (const [key, s] of this.series) if (now.getTime() - s.observedAt > FORGET_MS) this.series.delete(key);
    const live = new Set([...this.series.values()].map((s) => s.objectKey));
    for (const k of this.lastWrite.keys()) if (!live.has(k)) this.lastWrite.delete(k);
    const due = new Map<string, Series>();
    for (const s of this.series.values()) {
      if (s.total === s.written) continue;
      const last = this.lastWrite.get(s.objectKey);
      if (last !== undefined && now.getTime() - last < this.throttleMs) continue;
      const other = due.get(s.objectKey);
      if (other === undefined || s.writtenAt < other.writtenAt) due.set(s.objectKey, s);
    }
    await Promise.all([...due.values()].map((s) => this.write(s, now)));
  }

  private async write(s: Series, now: Date): Promise<void> {
    this.lastWrite.set(s.objectKey, now.getTime());
    s.writtenAt = now.getTime();
    const total = s.total;
    try {
      if (s.name !== null) {
        try {
          await this.sink.updateSeries(this.event(s, s.name, total));
          s.written = total;
          return;
        } catch (err) {
          if (!(err instanceof KubeApiError && err.status === 404)) throw err;
          // The Event lapsed (the apiserver's event TTL): a new one counts what the old one had not shown.
          s.total -= s.written;
          s.written = 0;
          s.firstAt = s.lastAt;
          s.name = null;
        }
      }
      const name = `${s.regarding.name.slice(0, 200)}.${randomBytes(8).toString('hex')}`;
      await this.sink.create(this.event(s, name, s.total));
      s.name = name;
      s.written = s.total;
    } catch (err) {
      // Best effort, like every Event: retried at the next write slot.
      this.log?.warn(
        {
          kind: s.regarding.kind,
          namespace: s.regarding.namespace,
          name: s.regarding.name,
          err: err instanceof Error ? err.message : String(err),
        },
        'BudgetExceeded event not written',
      );
    }
  }

  private event(s: Series, name: string, count: number): BudgetEvent {
    return {
      name,
      namespace: s.regarding.namespace,
      eventTime: s.firstAt,
      // events.k8s.io: a series needs at least two occurrences; a single one is the plain Event.
      series: count >= 2 ? { count, lastObservedTime: s.lastAt } : null,
      note: s.note,
      reason: s.reason,
      regarding: s.regarding,
    };
  }
}

const microTime = (d: Date) => d.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');

/** Events through the API server (events.k8s.io/v1): POST to create, a merge patch of series to count. */
export function createKubeBudgetEventSink(
  kubeConfig: KubeAccess,
  deps: { instance: string; controller?: string; canWrite?: () => boolean },
): BudgetEventSink {
  const client = kubeClient(kubeConfig);
  const path = (ns: string, name?: string) =>
    `/apis/events.k8s.io/v1/namespaces/${encodeURIComponent(ns)}/events${name === undefined ? '' : `/${encodeURIComponent(name)}`}`;
  const series = (e: BudgetEvent) =>
    e.series === null ? null : { count: e.series.count, lastObservedTime: microTime(e.series.lastObservedTime) };
  return {
    async create(e) {
      if (deps.canWrite && !deps.canWrite()) return;
      const body = {
        apiVersion: 'events.k8s.io/v1',
        kind: 'Event',
        metadata: { name: e.name, namespace: e.namespace },
        eventTime: microTime(e.eventTime),
        ...(e.series === null ? {} : { series: series(e) }),
        reportingController: deps.controller ?? 'byok.gateway.dev/operator',
        reportingInstance: deps.instance,
        action: BUDGET_EVENT_ACTION,
        reason: e.reason,
        type: 'Warning',
        note: e.note,
        regarding: {
          apiVersion: API_VERSION,
          kind: e.regarding.kind,
          name: e.regarding.name,
          namespace: e.regarding.namespace,
          uid: e.regarding.uid,
        },
      };
      await client.request('POST', path(e.namespace), { body, discardBody: true });
    },
    async updateSeries(e) {
      if (deps.canWrite && !deps.canWrite()) return;
      await client.request('PATCH', path(e.namespace, e.name), {
        body: { series: series(e) },
        contentType: 'application/merge-patch+json',
        discardBody: true,
      });
    },
  };
}
