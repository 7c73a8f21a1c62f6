// Deterministic tie-breaks for objects that must be unique per namespace. The oldest object wins
// (creationTimestamp, then name), so a later duplicate is the one marked conflicting and the winner
// never flips while both exist. The reconciler uses the same functions for its Conflict conditions.
import type { V1ObjectMeta } from '@kubernetes/client-node';
import { hashesNamed, normalizeKeyHash } from '../domain/api-keys.ts';
import type { Account, GatewayAPIKey, Workspace } from '../schema/generated/types.ts';

/** A metadata time as the client hands it over (a Date, or RFC 3339 text) in ms; NaN when it is neither. */
function timeMs(ts: unknown): number {
  if (ts instanceof Date) return ts.getTime();
  return typeof ts === 'string' ? Date.parse(ts) : Number.NaN;
}

/** Creation time in ms; an object without a readable one sorts last. */
function createdMs(meta: V1ObjectMeta): number {
  const ms = timeMs(meta.creationTimestamp);
  return Number.isNaN(ms) ? Number.MAX_SAFE_INTEGER : ms;
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

/** What the election reads of a key: its identity, its hashes and the claims the operator recorded. */
export interface KeyClaimant {
  metadata: V1ObjectMeta;
  spec: { hash: string; previousHash?: string | undefined };
  status?: { hashClaims?: ReadonlyArray<{ hash: string; since: string }> | undefined } | undefined;
}

/** managedFields times are whole seconds: the write happened before the next one. */
const SECOND_MS = 1000;

/**
 * The latest time the spec of an edited key can have been written: its newest managedFields time (status writes
 * aside), rounded up. The apiserver stamps the writing manager's entry on every change, so a tenant cannot make a
 * write look older; without managedFields it is unknown, and the far future.
 */
function lastWriteBound(meta: V1ObjectMeta): number {
  let latest = Number.NaN;
  for (const entry of meta.managedFields ?? []) {
    if (entry.subresource === 'status') continue;
    const t = timeMs(entry.time);
    if (!Number.isNaN(t)) latest = Number.isNaN(latest) ? t + SECOND_MS : Math.max(latest, t + SECOND_MS);
  }
  return Number.isNaN(latest) ? Number.MAX_SAFE_INTEGER : Math.max(latest, createdMs(meta));
}

/**
 * Since when `key` has named `hash` (normalized): the claim the operator recorded in status (tenants cannot write
 * status), else its creation for a hash it was created with (a key never rotated, or never edited), else the latest
 * write that can have set it. Every fallback is no earlier than the truth, so a rotation onto a hash another key
 * already names never ranks before that key, whoever reads first.
 */
export function claimedSince(key: KeyClaimant, hash: string): number {
  const recorded = key.status?.hashClaims?.find((c) => normalizeKeyHash(c.hash) === hash);
  if (recorded) {
    const t = Date.parse(recorded.since);
    if (!Number.isNaN(t)) return t;
  }
  // Never rotated (previousHash, once written, is never removed: a CEL rule): named since creation.
  if (!key.spec.previousHash && normalizeKeyHash(key.spec.hash) === hash) return createdMs(key.metadata);
  // Generation 1: the spec is as created, so are both its hashes.
  if ((key.metadata.generation ?? 1) <= 1) return createdMs(key.metadata);
  return lastWriteBound(key.metadata);
}

/**
 * The claims to record for `key` at `now`: the recorded one for each hash it still names, and for a newly named
 * hash what claimedSince says now (never later than now). A recorded claim never moves, so a later edit of the key
 * never costs it a hash it holds.
 */
export function nextHashClaims(key: KeyClaimant, now: number): Array<{ hash: string; since: string }> {
  return hashesNamed(key).map((hash) => ({
    hash,
    since: new Date(Math.min(claimedSince(key, hash), now)).toISOString(),
  }));
}

/**
 * First claim first across accounts: claimedSince for `hash`, then creationTimestamp, uid, namespace and name. Every
 * field is one the tenant cannot set or date back, so the order is the same however and in whatever order the
 * objects were read.
 */
function claimOrder(hash: string): (a: KeyClaimant, b: KeyClaimant) => number {
  return (a, b) => {
    const [x, y] = [a.metadata, b.metadata];
    return (
      claimedSince(a, hash) - claimedSince(b, hash) ||
      createdMs(x) - createdMs(y) ||
      compareStrings(x.uid ?? '', y.uid ?? '') ||
      compareStrings(x.namespace ?? '', y.namespace ?? '') ||
      compareStrings(x.name ?? '', y.name ?? '')
    );
  };
}

/**
 * The GatewayAPIKey that holds `hash` (normalized), among every key (of any account) that names it as its current
 * or previous hash: the one that named it first, live or not (a disabled key keeps its hash, or disabling it would
 * hand the hash to a copy). The others conflict and are never compiled: a hash selects exactly one account.
 */
export function electKeyHolder<T extends KeyClaimant>(
  hash: string,
  holders: readonly T[],
): { winner?: T; conflicting: T[] } {
  const [winner, ...conflicting] = [...holders].sort(claimOrder(normalizeKeyHash(hash)));
  return winner ? { winner, conflicting } : { conflicting: [] };
}

/** Names of `keys` whose hash `which` picks (when they name one) another key holds. */
function namesNotHolding(
  keys: readonly GatewayAPIKey[],
  which: (key: GatewayAPIKey) => string | undefined,
  holdersOf: (hash: string) => readonly GatewayAPIKey[],
): Set<string> {
  const out = new Set<string>();
  for (const k of keys) {
    const named = which(k);
    if (!named) continue;
    const hash = normalizeKeyHash(named);
    const { winner } = electKeyHolder(hash, holdersOf(hash));
    if (winner !== undefined && !sameObject(winner, k)) out.add(k.metadata.name ?? '');
  }
  return out;
}

/**
 * Names of `keys` (one namespace's) whose hash a key that named it first holds, in this account or another.
 * `holdersOf` gives every key naming a hash (normalized, see normalizeKeyHash) across all accounts.
 */
export function keysNotHolding(
  keys: readonly GatewayAPIKey[],
  holdersOf: (hash: string) => readonly GatewayAPIKey[],
): Set<string> {
  return namesNotHolding(keys, (k) => k.spec.hash, holdersOf);
}

/**
 * Names of `keys` with a spec.previousHash (the secret before a rotation) that another key holds. A key holds its
 * previous hash as it held it before the rotation (its recorded claim moves along); a copy of either hash made after
 * it stays Conflicting.
 */
export function previousHashesNotHeld(
  keys: readonly GatewayAPIKey[],
  holdersOf: (hash: string) => readonly GatewayAPIKey[],
): Set<string> {
  return namesNotHolding(keys, (k) => k.spec.previousHash, holdersOf);
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
