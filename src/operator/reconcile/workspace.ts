// Workspace: gather (its guardrails, the namespace's default-workspace election) → evaluate (Ready) → write.

import { electDefaultWorkspace } from '../../compiler/elect.ts';
import type { ResourceInformers } from '../../kube/resources.ts';
import { ConditionReason as R, ConditionType as T } from '../../schema/conditions.ts';
import { buildConditions, type CatalogCondition, type Condition } from '../conditions.ts';
import type { ReconcileResult } from '../workqueue.ts';
import { missingGuardrails } from './guardrail.ts';
import { baseStatus, splitKey } from './objects.ts';
import type { StatusWriter } from './status-writer.ts';

export interface WorkspaceFacts {
  name: string;
  isDefault: boolean;
  /** Default or member guardrails that do not exist. */
  missingGuardrails: readonly string[];
  /** The namespace's elected default workspace (the oldest with default: true), if any. */
  defaultWinner: string | undefined;
}

/** A conflicting default outranks missing guardrails: the older default workspace is the one compiled as default. */
export function evaluateWorkspace(f: WorkspaceFacts): CatalogCondition<'Ready'> {
  if (f.isDefault && f.defaultWinner !== undefined && f.defaultWinner !== f.name) {
    return {
      type: T.Ready,
      status: 'False',
      reason: R.Conflicting,
      message: `Workspace "${f.defaultWinner}" is already the default workspace of this namespace (oldest wins)`,
    };
  }
  if (f.missingGuardrails.length > 0)
    return {
      type: T.Ready,
      status: 'False',
      reason: R.GuardrailNotFound,
      message: `Guardrail(s) not found: ${f.missingGuardrails.join(', ')}`,
    };
  return {
    type: T.Ready,
    status: 'True',
    reason: R.Ready,
    message: f.isDefault ? 'the default workspace' : 'the workspace is valid',
  };
}

export async function reconcileWorkspace(
  deps: { informers: ResourceInformers; writer: StatusWriter },
  key: string,
): Promise<ReconcileResult> {
  const [ns, name] = splitKey(key);
  const inf = deps.informers;
  const ws = inf.workspaces.get(ns, name);
  if (!ws || ws.metadata.deletionTimestamp) return;
  const isDefault = !!ws.spec.default;
  const ready = evaluateWorkspace({
    name,
    isDefault,
    missingGuardrails: missingGuardrails(inf.guardrails, ns, [
      ws.spec.defaultGuardrail,
      ...(ws.spec.members ?? []).map((m) => m.guardrail),
    ]),
    defaultWinner: isDefault ? electDefaultWorkspace(inf.workspaces.list(ns)).winner?.metadata.name : undefined,
  });
  const status = {
    ...baseStatus('Workspace', ws),
    conditions: buildConditions(ws.status?.conditions as Condition[] | undefined, [ready], ws.metadata.generation),
  };
  await deps.writer.write('Workspace', ws, status, inf.workspaces);
  if (ready.status !== 'True') deps.writer.warn(ws, ready.reason, ready.message);
}
