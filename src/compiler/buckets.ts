// Accounts grouped by bucket and kept between compile runs, so a run re-derives only the buckets whose accounts
// changed, instead of laying out every account for one account's change (figures in docs/compiler.md).
// The routing shards and the credential bundles are placed alike: both build on IncrementalPlacement below.
import { bucketOfHash } from '../contract/routing.ts';

export interface Placeable {
  readonly namespace: string;
  readonly hash: number;
  readonly bytes: number;
}

export const byNamespace = (a: Placeable, b: Placeable): number =>
  a.namespace < b.namespace ? -1 : a.namespace > b.namespace ? 1 : 0;

/**
 * `layout(n)` gives, in bucket order, `derive(bucket, accounts sorted by namespace)` for every non-empty bucket
 * of an n-bucket placement: the same as deriving from scratch, given that `derive` is a pure function of its
 * arguments. A bucket's result is kept until one of its accounts is set again or the bucket count changes.
 */
export class BucketedAccounts<T extends Placeable, M> {
  private readonly accounts = new Map<string, T>();
  private readonly groups = new Map<number, Map<string, T>>();
  private readonly derived = new Map<number, M>();
  /** Bucket count of `groups`; 0 until the first layout. */
  private buckets = 0;
  private bytes = 0;
  private readonly derive: (bucket: number, sorted: T[]) => M;

  constructor(derive: (bucket: number, sorted: T[]) => M) {
    this.derive = derive;
  }

  /** Sum of the accounts' bytes: what the bucket count is chosen from. */
  get totalBytes(): number {
    return this.bytes;
  }

  /** Puts an account in (or takes it out, with undefined). Setting the same object again changes nothing. */
  set(namespace: string, account: T | undefined): void {
    const old = this.accounts.get(namespace);
    if (old === account) return;
    if (old) {
      this.bytes -= old.bytes;
      this.accounts.delete(namespace);
      if (this.buckets > 0) this.unplace(namespace, old);
    }
    if (account) {
      this.bytes += account.bytes;
      this.accounts.set(namespace, account);
      if (this.buckets > 0) this.place(namespace, account);
    }
  }

  layout(n: number): M[] {
    if (n !== this.buckets) this.regroup(n);
    const out: M[] = [];
    for (const bucket of [...this.groups.keys()].sort((a, b) => a - b)) {
      let member = this.derived.get(bucket);
      if (member === undefined) {
        member = this.derive(bucket, [...this.groups.get(bucket)!.values()].sort(byNamespace));
        this.derived.set(bucket, member);
      }
      out.push(member);
    }
    return out;
  }

  private regroup(n: number): void {
    this.buckets = n;
    this.groups.clear();
    this.derived.clear();
    for (const [namespace, account] of this.accounts) this.place(namespace, account);
  }

  private place(namespace: string, account: T): void {
    const bucket = bucketOfHash(account.hash, this.buckets);
    let group = this.groups.get(bucket);
    if (!group) this.groups.set(bucket, (group = new Map()));
    group.set(namespace, account);
    this.derived.delete(bucket);
  }

  private unplace(namespace: string, account: T): void {
    const bucket = bucketOfHash(account.hash, this.buckets);
    const group = this.groups.get(bucket);
    group?.delete(namespace);
    if (group?.size === 0) this.groups.delete(bucket);
    this.derived.delete(bucket);
  }
}

/** Buckets for `totalBytes` at about `targetBytes` each; the previous count is kept while it still fits. */
export function bucketCount(totalBytes: number, targetBytes: number, previous?: number): number {
  const need = Math.max(1, Math.ceil(totalBytes / targetBytes));
  if (previous === undefined || previous < 1 || need > previous) return need;
  // Shrink only well below the previous size: a merge rewrites objects, so do not flap around a boundary.
  return totalBytes < (previous - 1) * targetBytes * 0.5 ? need : previous;
}

/** A placement: the bucket count and, in bucket order, what each non-empty bucket derived. */
export interface Placement<M> {
  buckets: number;
  members: M[];
}

/**
 * The part the routing shards (compiler/shard.ts) and the credential bundles (bundle/bundle.ts) share: accounts kept
 * placed between compile runs, with the bucket count chosen from their bytes. `layout` equals placing the same
 * accounts from scratch and re-derives only the buckets whose accounts changed since the previous call.
 */
export class IncrementalPlacement<T extends Placeable, M> {
  private readonly placed: BucketedAccounts<T, M>;
  private readonly targetBytes: number;

  constructor(targetBytes: number, derive: (bucket: number, sorted: T[]) => M) {
    this.placed = new BucketedAccounts(derive);
    this.targetBytes = targetBytes;
  }

  set(namespace: string, account: T | undefined): void {
    this.placed.set(namespace, account);
  }

  layout(previousBuckets?: number): Placement<M> {
    const buckets = bucketCount(this.placed.totalBytes, this.targetBytes, previousBuckets);
    return { buckets, members: this.placed.layout(buckets) };
  }
}

/** Lays out `accounts` with a fresh incremental placement: the from-scratch layout the incremental one must equal. */
export function layoutAll<T extends Placeable, L>(
  placement: { set(namespace: string, account: T | undefined): void; layout(previousBuckets?: number): L },
  accounts: readonly T[],
  previousBuckets?: number,
): L {
  for (const account of accounts) placement.set(account.namespace, account);
  return placement.layout(previousBuckets);
}

/**
 * One pass over a layout with a cache of per-bucket results keyed by content (encoded shards, split bundle parts):
 * `get` builds what the cache lacks, and `evictUnused` drops the entries this pass did not ask for.
 */
export class LayoutPassCache<V> {
  private readonly cache: Map<string, V> | undefined;
  private readonly used = new Set<string>();

  constructor(cache: Map<string, V> | undefined) {
    this.cache = cache;
  }

  get(key: string, build: () => V): V {
    let value = this.cache?.get(key);
    if (value === undefined) {
      value = build();
      this.cache?.set(key, value);
    }
    this.used.add(key);
    return value;
  }

  evictUnused(): void {
    if (this.cache) for (const key of this.cache.keys()) if (!this.used.has(key)) this.cache.delete(key);
  }
}
