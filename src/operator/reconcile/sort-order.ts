// A credential's effective position among its provider's credentials: a pure function of the cached specs, so
// every replica computes the same value.

import { olderFirst } from '../../compiler/elect.ts';
import type { BYOKCredential } from '../../schema/generated/types.ts';

/** The section a credential is ranked in. */
export const sortSection = (c: BYOKCredential): 'fallback' | 'prioritized' =>
  c.spec.isFallback ? 'fallback' : 'prioritized';

/**
 * Effective sort order: spec.sortOrder, or after every explicit position in the same provider and section,
 * ranked by age (creationTimestamp, then name).
 */
export function effectiveSortOrder(cred: BYOKCredential, all: readonly BYOKCredential[]): number {
  if (cred.spec.sortOrder !== undefined) return cred.spec.sortOrder;
  const group = all.filter((c) => c.spec.provider === cred.spec.provider && sortSection(c) === sortSection(cred));
  const explicitMax = Math.max(-1, ...group.map((c) => c.spec.sortOrder ?? -1));
  const implicit = group.filter((c) => c.spec.sortOrder === undefined).sort(olderFirst);
  const rank = implicit.findIndex((c) => c.metadata.name === cred.metadata.name);
  return explicitMax + 1 + Math.max(0, rank);
}
