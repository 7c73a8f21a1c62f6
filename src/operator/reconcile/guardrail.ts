// Guardrail: always Ready (its schema is enforced by the CRD); Workspaces and API keys report missing ones.

import type { ObjectCache } from '../../kube/informer.ts';
import type { ResourceInformers } from '../../kube/resources.ts';
import { ConditionReason, ConditionType } from '../../schema/conditions.ts';
import type { Guardrail } from '../../schema/generated/types.ts';
import { buildConditions, type CatalogCondition, type Condition } from '../conditions.ts';
import type { ReconcileResult } from '../workqueue.ts';
import { baseStatus, splitKey } from './objects.ts';
import type { StatusWriter } from './status-writer.ts';

/** The named guardrails (duplicates and blanks ignored) that do not exist in the namespace, sorted. */
export function missingGuardrails(
  guardrails: Pick<ObjectCache<Guardrail>, 'get'>,
  ns: string,
  names: readonly (string | undefined)[],
): string[] {
  return [...new Set(names.filter((n): n is string => !!n))].filter((n) => !guardrails.get(ns, n)).sort();
}

export function evaluateGuardrail(): CatalogCondition<'Ready'> {
  return {
    type: ConditionType.Ready,
    status: 'True',
    reason: ConditionReason.Ready,
    message: 'the guardrail is valid',
  };
}

export async function reconcileGuardrail(
  deps: { informers: ResourceInformers; writer: StatusWriter },
  key: string,
): Promise<ReconcileResult> {
  const [ns, name] = splitKey(key);
  const g = deps.informers.guardrails.get(ns, name);
  if (!g || g.metadata.deletionTimestamp) return;
  const ready = evaluateGuardrail();
  const status = {
    ...baseStatus('Guardrail', g),
    conditions: buildConditions(g.status?.conditions as Condition[] | undefined, [ready], g.metadata.generation),
  };
  await deps.writer.write('Guardrail', g, status, deps.informers.guardrails);
}
