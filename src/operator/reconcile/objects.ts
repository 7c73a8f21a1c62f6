// Keys and small facts about cached objects, shared by the wiring and the reconcilers.
import type { KubernetesObject } from '@kubernetes/client-node';
import { type IdentifiedKind, publicId } from '../../domain/ids.ts';

/** The five kinds the operator reconciles. */
export type Kind = IdentifiedKind;

/** Timers beyond ~24.8 days overflow; far-away expiries are simply re-checked hourly. */
export const MAX_REQUEUE_MS = 3_600_000;

/** A work-queue key ("namespace/name") as [namespace, name]. */
export const splitKey = (key: string): [string, string] => {
  const i = key.indexOf('/');
  return [key.slice(0, i), key.slice(i + 1)];
};
export const namespacedName = (o: KubernetesObject): string =>
  `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;
export const nsOf = (o: KubernetesObject): string => o.metadata?.namespace ?? '';

/** Spec changes (and the start of deletion) move the generation; status-only updates do not. */
export const generationChanged = (a: KubernetesObject, b: KubernetesObject): boolean =>
  a.metadata?.generation !== b.metadata?.generation ||
  !!a.metadata?.deletionTimestamp !== !!b.metadata?.deletionTimestamp;

/** The fields every kind's status starts with. */
export function baseStatus(
  kind: IdentifiedKind,
  obj: KubernetesObject,
): { id: string; observedGeneration: number | undefined } {
  return { id: publicId(kind, nsOf(obj), obj.metadata?.name ?? ''), observedGeneration: obj.metadata?.generation };
}
