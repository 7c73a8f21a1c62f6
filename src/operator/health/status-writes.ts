// Write, the health writer's status writes: the part of status it owns (delivery, lastUsedTime, UpstreamHealthy,
// Delivered), written with its own field manager on change only, at most once per object per writeIntervalMs
// (a new delivery version or a Delivered transition is never held back), with a cap on writes in flight.
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Counter } from 'prom-client';
import type { Applier } from '../../kube/apply.ts';
import { ConditionType } from '../../schema/conditions.ts';
import { sameStatus } from '../conditions.ts';
import { STATUS_OWNERS } from '../status/ownership.ts';
import { conditionOf } from './evaluate.ts';

/** Status fields and condition types this writer owns (status/ownership.ts); the reconcilers leave them out of their comparisons. */
export const HEALTH_STATUS_FIELDS = STATUS_OWNERS.health.fields;
export const HEALTH_CONDITION_TYPES = STATUS_OWNERS.health.conditions;

export type HealthKind = 'BYOKCredential' | 'Account' | 'GatewayAPIKey';

/** The delivery record and Delivered status of a status part: what must reach the object without delay. */
export function deliveryOf(part: Record<string, unknown>): string {
  const d = part.delivery as { configVersion?: string } | undefined;
  return `${d?.configVersion ?? ''}/${conditionOf(part, ConditionType.Delivered)?.status ?? ''}`;
}

export class HealthStatusWrites {
  private readonly applier: Applier;
  private readonly log: Pick<Logger, 'warn'>;
  private readonly writes: Counter;
  private readonly writeIntervalMs: number;
  private readonly concurrency: number;
  /** kind/ns/name → when we last wrote and what. */
  private readonly written = new Map<string, { at: number; part: Record<string, unknown> }>();
  // Writes in flight are capped: the first pass after taking the lead writes every object once.
  private inFlight = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(deps: {
    applier: Applier;
    log: Pick<Logger, 'warn'>;
    writes: Counter;
    writeIntervalMs: number;
    concurrency: number;
  }) {
    this.applier = deps.applier;
    this.log = deps.log;
    this.writes = deps.writes;
    this.writeIntervalMs = deps.writeIntervalMs;
    this.concurrency = deps.concurrency;
  }

  /** The stored status already is `part`: remember it (keeping when it was last written) so no write follows. */
  unchanged(kind: HealthKind, ns: string, name: string, part: Record<string, unknown>): void {
    const id = `${kind}/${ns}/${name}`;
    this.written.set(id, { at: this.written.get(id)?.at ?? 0, part });
  }

  /** Writes `part` unless it was written already or the object's interval holds it back; true when written. */
  async write(kind: HealthKind, obj: KubernetesObject, part: Record<string, unknown>, now: number): Promise<boolean> {
    const ns = obj.metadata?.namespace ?? '';
    const name = obj.metadata?.name ?? '';
    const id = `${kind}/${ns}/${name}`;
    const last = this.written.get(id);
    if (last && sameStatus(last.part, part)) return false;
    // Other transitions wait out the interval (one write per object per interval). A new version or a Delivered
    // transition does not: `kubectl wait --for=condition=Delivered` after a rotation must never see the old True.
    if (last && now - last.at < this.writeIntervalMs && deliveryOf(last.part) === deliveryOf(part)) return false;
    await this.acquire();
    try {
      await this.applier.applyStatus(kind, ns, name, part);
      this.written.set(id, { at: now, part });
      this.writes.inc({ kind, result: 'ok' });
      return true;
    } catch (err) {
      this.writes.inc({ kind, result: 'error' });
      if ((err as { status?: number }).status !== 404)
        this.log.warn(
          { kind, namespace: ns, name, err: err instanceof Error ? err.message : String(err) },
          'health status write failed',
        );
      return false;
    } finally {
      this.release();
    }
  }

  private acquire(): Promise<void> | void {
    if (this.inFlight < this.concurrency) {
      this.inFlight++;
      return;
    }
    return new Promise<void>((r) => this.waiting.push(r));
  }

  // A released slot passes straight to the next waiter, so the cap is never exceeded.
  private release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.inFlight--;
  }
}
