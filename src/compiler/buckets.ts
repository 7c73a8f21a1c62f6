// Accounts grouped by bucket and kept between compile runs, so a run re-derives only the buckets whose accounts
// changed, instead of laying out every account for one account's change (figures in docs/compiler.md; issue 11).
import { bucketOfHash } from '../contract/routing.ts';

export interface Placeable {
  readonly namespace: string;
  readonly hash: number;
  readonly bytes: number;
}

export const byNamespace = (a: Placeable, b: Placeable): number => (a.namespace < b.namespace ? -1 : a.namespace > b.namespace ? 1 : 0);

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
