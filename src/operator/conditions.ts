// metav1.Condition bookkeeping: lastTransitionTime only moves when a condition's status changes, so a
// reconcile with unchanged inputs produces a byte-identical status and Server-Side Apply is a no-op.

import { canonicalJson } from '../contract/canonical-json.ts';
import { ConditionReason, ConditionType } from '../schema/conditions.ts';

export type ConditionStatus = 'True' | 'False' | 'Unknown';

export interface Condition {
  type: string;
  status: ConditionStatus;
  observedGeneration?: number;
  lastTransitionTime: string;
  reason: string;
  message: string;
}

/** A condition as a reconcile decides it; the operator's own reconcilers use the catalog's types and reasons. */
export interface DesiredCondition<T extends string = string, R extends string = string> {
  type: T;
  status: ConditionStatus;
  reason: R;
  message: string;
}

/** A condition whose type and reason come from the catalog (src/schema/conditions.ts). */
export type CatalogCondition<T extends ConditionType = ConditionType> = DesiredCondition<T, ConditionReason>;

/** metav1.Time: RFC 3339 with second precision. */
export function metaTime(d = new Date()): string {
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

export function buildConditions(
  existing: readonly Condition[] | undefined,
  desired: readonly DesiredCondition[],
  generation: number | undefined,
  now = new Date(),
): Condition[] {
  return desired.map((d) => {
    const prev = existing?.find((c) => c.type === d.type);
    const lastTransitionTime = prev && prev.status === d.status ? prev.lastTransitionTime : metaTime(now);
    const c: Condition = { type: d.type, status: d.status, lastTransitionTime, reason: d.reason, message: d.message };
    if (generation !== undefined) c.observedGeneration = generation;
    return c;
  });
}

/** Ready summarises the others: True when all are True, else False with the first failing reason. */
export function readyFrom<R extends string>(
  conditions: readonly DesiredCondition<string, R>[],
  readyMessage: string,
): DesiredCondition<typeof ConditionType.Ready, R | typeof ConditionReason.Ready> {
  const failing = conditions.find((c) => c.status !== 'True');
  if (!failing)
    return { type: ConditionType.Ready, status: 'True', reason: ConditionReason.Ready, message: readyMessage };
  return {
    type: ConditionType.Ready,
    status: 'False',
    reason: failing.reason,
    message: `${failing.type}: ${failing.message}`,
  };
}

/** Equal statuses whatever their key order (canonical JSON). */
export function sameStatus(a: unknown, b: unknown): boolean {
  return canonicalJson(a ?? {}) === canonicalJson(b ?? {});
}
