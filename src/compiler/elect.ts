// Deterministic tie-breaks for objects that must be unique per namespace. The oldest object wins
// (creationTimestamp, then name), so a later duplicate is the one marked conflicting and the winner
// never flips while both exist. The reconciler uses the same functions for its Conflict conditions.
import type { V1ObjectMeta } from '@kubernetes/client-node';
import { normalizeKeyHash } from '../domain/api-keys.ts';
import type { Account, GatewayAPIKey, Workspace } from '../schema/generated/types.ts';

function createdMs(meta: V1ObjectMeta): number {
  const ts: unknown = meta.creationTimestamp;
  if (ts instanceof Date) return ts.getTime();
  if (typeof ts === 'string') {
    const ms = Date.parse(ts);
    if (!Number.isNaN(ms)) return ms;
  }
  return Number.MAX_SAFE_INTEGER;
}

export function olderFirst(a: { metadata: V1ObjectMeta }, b: { metadata: V1ObjectMeta }): number {
  return createdMs(a.metadata) - createdMs(b.metadata) || compareStrings(a.metadata.name ?? '', b.metadata.name ?? '');
}

export function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Names of the credentials beyond the account's quota: the `limit` oldest are within, the newer ones are not. */
export function overQuota<T extends { metadata: V1ObjectMeta }>(credentials: readonly T[], limit: number): Set<string> {
  if (credentials.length <= limit) return new Set();
  return new Set(
    [...credentials]
      .sort(olderFirst)
      .slice(Math.max(0, limit))
      .map((c) => c.metadata.name ?? ''),
  );
}

/** The namespace's one Account (the oldest); the others conflict. */
export function electAccount(accounts: readonly Account[]): { winner?: Account; conflicting: Account[] } {
  const sorted = [...accounts].sort(olderFirst);
  const [winner, ...conflicting] = sorted;
  return winner ? { winner, conflicting } : { conflicting: [] };
}

/** The default Workspace (the oldest with default: true); other defaults conflict and are compiled as non-default. */
export function electDefaultWorkspace(workspaces: readonly Workspace[]): {
  winner?: Workspace;
  conflicting: Workspace[];
} {
  return electAccountLike(workspaces.filter((w) => w.spec.default === true));
}

function electAccountLike<T extends { metadata: V1ObjectMeta }>(items: readonly T[]): { winner?: T; conflicting: T[] } {
  const [winner, ...conflicting] = [...items].sort(olderFirst);
  return winner ? { winner, conflicting } : { conflicting: [] };
}

/**
 * Oldest first across accounts: creationTimestamp, then uid, then namespace and name. Every field is the object's
 * own and immutable, so the order is the same however and in whatever order the objects were read.
 */
function olderAcrossAccounts(a: { metadata: V1ObjectMeta }, b: { metadata: V1ObjectMeta }): number {
  const [x, y] = [a.metadata, b.metadata];
  return (
    createdMs(x) - createdMs(y) ||
    compareStrings(x.uid ?? '', y.uid ?? '') ||
    compareStrings(x.namespace ?? '', y.namespace ?? '') ||
    compareStrings(x.name ?? '', y.name ?? '')
  );
}

/**
 * The GatewayAPIKey that holds a hash, among every key (of any account) that names it: the oldest, live or not
 * (a disabled key keeps its hash, or disabling it would hand the hash to a copy). The others conflict and are
 * never compiled: a hash selects exactly one account.
 */
export function electKeyHolder<T extends { metadata: V1ObjectMeta }>(
  holders: readonly T[],
): { winner?: T; conflicting: T[] } {
  const [winner, ...conflicting] = [...holders].sort(olderAcrossAccounts);
  return winner ? { winner, conflicting } : { conflicting: [] };
}

/**
 * Names of `keys` (one namespace's) whose hash an older key holds, in this account or another. `holdersOf` gives
 * every key naming a hash (normalized, see normalizeKeyHash) across all accounts.
 */
export function keysNotHolding(
  keys: readonly GatewayAPIKey[],
  holdersOf: (hash: string) => readonly GatewayAPIKey[],
): Set<string> {
  const out = new Set<string>();
  for (const k of keys) {
    const { winner } = electKeyHolder(holdersOf(normalizeKeyHash(k.spec.hash)));
    if (winner !== undefined && !sameObject(winner, k)) out.add(k.metadata.name ?? '');
  }
  return out;
}

/**
 * Names of `keys` with a spec.previousHash (the secret before a rotation) that an older key holds. A key holds its
 * previous hash as it holds its current one: while it names it, by age (rotation keeps the object, so its age); a
 * copy of either hash made after it stays Conflicting.
 */
export function previousHashesNotHeld(
  keys: readonly GatewayAPIKey[],
  holdersOf: (hash: string) => readonly GatewayAPIKey[],
): Set<string> {
  const out = new Set<string>();
  for (const k of keys) {
    if (!k.spec.previousHash) continue;
    const { winner } = electKeyHolder(holdersOf(normalizeKeyHash(k.spec.previousHash)));
    if (winner !== undefined && !sameObject(winner, k)) out.add(k.metadata.name ?? '');
  }
  return out;
}

/** The same object as read by two caches or two lists (not necessarily the same JS object). */
export function sameObject(a: { metadata: V1ObjectMeta }, b: { metadata: V1ObjectMeta }): boolean {
  return a === b || (a.metadata.namespace === b.metadata.namespace && a.metadata.name === b.metadata.name);
}

/** RFC 3339 time of creation, whatever form the client handed us. */
export function creationTime(meta: V1ObjectMeta): string {
  const ts: unknown = meta.creationTimestamp;
  if (ts instanceof Date) return ts.toISOString();
  return typeof ts === 'string' ? ts : '';
}
