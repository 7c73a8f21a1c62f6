// The one way reconcilers write status and record Events: Server-Side Apply only when the status differs from
// the cached one, Ready transitions logged (and a throttled Normal Event on becoming Ready), and a Warning Event
// when an object's status keeps failing to be written.
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Applier } from '../../kube/apply.ts';
import { isNotFound, KubeApiError } from '../../kube/client.ts';
import type { EventRecorder } from '../../kube/events.ts';
import { ConditionType, EventReason } from '../../schema/conditions.ts';
import { type Condition, sameStatus } from '../conditions.ts';
import { ownedStatus } from '../spend/spend-status-writer.ts';
import { type Kind, namespacedName, nsOf } from './objects.ts';

/** Consecutive failed status writes of one object before a Warning Event, and the least time between two such Events. */
export const STATUS_WRITE_FAILURES_BEFORE_EVENT = 3;
export const STATUS_WRITE_EVENT_INTERVAL_MS = 10 * 60_000;

/** Normal Events allowed in a burst, and refilled per second. */
export const NORMAL_EVENT_BURST = 25;
export const NORMAL_EVENTS_PER_SECOND = 2;

const readyCondition = (status: object | undefined): Condition | undefined =>
  ((status as { conditions?: Condition[] } | undefined)?.conditions ?? []).find((c) => c.type === ConditionType.Ready);

/**
 * Normal Events are a courtesy: at most a burst of 25 and 2/s, so a cold start of thousands of objects does not
 * add thousands of Event writes (client-go's event broadcaster limits the same way; at 10/s they were ~7 % of a
 * 10k cold start's apiserver time). Warnings are not limited.
 */
export class EventTokenBucket {
  private readonly burst: number;
  private readonly perSecond: number;
  private readonly clock: () => number;
  private tokens: number;
  private refilledAt: number;

  constructor(
    burst = NORMAL_EVENT_BURST,
    perSecond = NORMAL_EVENTS_PER_SECOND,
    clock: () => number = () => performance.now(),
  ) {
    this.burst = burst;
    this.perSecond = perSecond;
    this.clock = clock;
    this.tokens = burst;
    this.refilledAt = clock();
  }

  take(): boolean {
    const now = this.clock();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.refilledAt) / 1000) * this.perSecond);
    this.refilledAt = now;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }
}

export interface StatusWriterDeps {
  applier: Applier;
  events: EventRecorder;
  log: Logger;
  /** Wall clock for the StatusWriteFailed interval (tests move it). */
  now?: () => number;
  normalEvents?: EventTokenBucket;
}

export class StatusWriter {
  private readonly failures = new Map<string, { count: number; eventAt: number }>();
  private readonly normalEvents: EventTokenBucket;
  private readonly now: () => number;

  private readonly deps: StatusWriterDeps;

  constructor(deps: StatusWriterDeps) {
    this.deps = deps;
    this.normalEvents = deps.normalEvents ?? new EventTokenBucket();
    this.now = deps.now ?? Date.now;
  }

  /**
   * Apply `status` unless it equals the operator-owned part of the cached status, then feed the written object back
   * to the informer. A NotFound (deleted meanwhile) is not an error: the delete event cleans up.
   */
  async write<T extends KubernetesObject & { status?: object }>(
    kind: Kind,
    obj: T,
    status: object,
    informer: { observe(o: T): void },
  ): Promise<void> {
    if (sameStatus(ownedStatus(obj.status), status)) return;
    const key = `${kind}/${namespacedName(obj)}`;
    try {
      const written = await this.deps.applier.applyStatus<T>(kind, nsOf(obj), obj.metadata?.name ?? '', status);
      this.failures.delete(key);
      informer.observe(written);
    } catch (err) {
      if (isNotFound(err)) return;
      this.writeFailed(key, obj, err);
      throw err;
    }
    this.readyTransition(kind, obj, readyCondition(obj.status), readyCondition(status));
  }

  /** A Warning Event; `secrets` are values the recorder must redact should they appear in the message. */
  warn(obj: KubernetesObject, reason: EventReason, message: string, secrets: string[] = []): void {
    void this.deps.events.record(obj, 'Warning', reason, message, secrets);
  }

  /** A Normal Event, not throttled (for rare, owner-facing news such as a lifted quarantine). */
  normal(obj: KubernetesObject, reason: EventReason, message: string): void {
    void this.deps.events.record(obj, 'Normal', reason, message);
  }

  /** Ready changes are logged (a fall from True at warn), and becoming Ready gets a Normal Event, like
   *  cert-manager's: a healthy object then says so in `kubectl describe`, not only by the absence of warnings. */
  private readyTransition(
    kind: Kind,
    obj: KubernetesObject,
    was: Condition | undefined,
    now: Condition | undefined,
  ): void {
    if (!now || was?.status === now.status) return;
    const fields = {
      kind,
      namespace: nsOf(obj),
      name: obj.metadata?.name,
      from: was?.status ?? 'Unknown',
      to: now.status,
      reason: now.reason,
    };
    if (was?.status === 'True' && now.status !== 'True')
      this.deps.log.warn({ ...fields, message: now.message }, `${kind} is no longer Ready`);
    else this.deps.log.info(fields, `${kind} Ready is ${now.status}`);
    if (now.status === 'True' && this.normalEvents.take())
      void this.deps.events.record(obj, 'Normal', EventReason.Ready, now.message);
  }

  /** A status write that keeps failing is visible to the object's owner, not only in the operator's log. */
  private writeFailed(key: string, obj: KubernetesObject, err: unknown): void {
    const f = this.failures.get(key) ?? { count: 0, eventAt: -Infinity };
    f.count++;
    this.failures.set(key, f);
    const now = this.now();
    if (f.count < STATUS_WRITE_FAILURES_BEFORE_EVENT || now - f.eventAt < STATUS_WRITE_EVENT_INTERVAL_MS) return;
    f.eventAt = now;
    // Status code and reason only: the apiserver's message can quote the refused value.
    const why =
      err instanceof KubeApiError
        ? `${err.status} ${err.reason ?? ''}`.trim()
        : err instanceof Error
          ? err.name
          : 'unknown error';
    this.warn(
      obj,
      EventReason.StatusWriteFailed,
      `the operator could not write this object's status ${f.count} times in a row (${why}); retrying with backoff`,
    );
  }
}
