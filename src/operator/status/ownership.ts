// Who writes which part of a resource's status: the one map every status writer reads its part from.
//
// Each writer applies its part with Server-Side Apply under its own field manager, so a manager only ever removes
// fields it owns and no writer drops another's. Each also compares the stored status with what it would write over
// its own part only; otherwise every write of one would make the others rewrite. The reconcilers (FIELD_MANAGER in
// src/kube/apply.ts) own everything the writers below do not.
import { ConditionType } from '../../schema/conditions.ts';

export interface StatusOwner {
  fieldManager: string;
  /** Top-level status fields. */
  fields: readonly string[];
  /** Condition types in status.conditions (a list merged by type). */
  conditions: readonly string[];
}

export const STATUS_OWNERS = {
  /** Spend from the shared ledger (spend-status.ts), on the leader. */
  spend: { fieldManager: 'byok-operator-spend', fields: ['spend'], conditions: [] },
  /** Upstream health and delivery reported by the gateway pods (health/health-status-writer.ts), on the leader. */
  health: {
    fieldManager: 'byok-operator-health',
    fields: ['lastUsedTime', 'delivery'],
    conditions: [ConditionType.UpstreamHealthy, ConditionType.Delivered],
  },
  /** What the export target keeps and drops (export/controller.ts), on the leader, only with --export-target. */
  export: { fieldManager: 'byok-operator-export', fields: [], conditions: [ConditionType.Exported] },
} as const satisfies Record<string, StatusOwner>;

export type StatusWriter = keyof typeof STATUS_OWNERS;

const OWNERS: readonly StatusOwner[] = Object.values(STATUS_OWNERS);
const foreignFields = new Set(OWNERS.flatMap((o) => o.fields));
const foreignConditions = new Set(OWNERS.flatMap((o) => o.conditions));

interface Typed {
  type: string;
}

/** The part of a stored status `writer` owns: its fields and its conditions. */
export function statusPartOf(writer: StatusWriter, status: object | undefined): Record<string, unknown> {
  const owner: StatusOwner = STATUS_OWNERS[writer];
  const s = (status ?? {}) as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const f of owner.fields) if (s[f] !== undefined) out[f] = s[f];
  const conditions = ((s.conditions as Typed[] | undefined) ?? []).filter((c) => owner.conditions.includes(c.type));
  if (conditions.length > 0) out.conditions = conditions;
  return out;
}

/**
 * The part of a stored status the reconcilers own: everything but the other writers' fields and conditions. The
 * same object when it holds none of those.
 */
export function ownedStatus(status: object | undefined): object | undefined {
  if (status === undefined) return status;
  const s = status as Record<string, unknown>;
  const conditions = s.conditions as Typed[] | undefined;
  const foreignCondition = conditions?.some((c) => foreignConditions.has(c.type)) ?? false;
  if (!foreignCondition && !Object.keys(s).some((k) => foreignFields.has(k))) return status;
  const rest: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(s)) if (!foreignFields.has(k)) rest[k] = v;
  if (foreignCondition) rest.conditions = conditions!.filter((c) => !foreignConditions.has(c.type));
  return rest;
}
