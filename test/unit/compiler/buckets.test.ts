import { randomBytes } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { type BundleAccount, incrementalBundleLayout, layoutBundles, sealAccount } from '../../../src/bundle/bundle.ts';
import { BucketedAccounts, bucketCount, byNamespace } from '../../../src/compiler/buckets.ts';
import { incrementalShardLayout, layoutSerialized, type SerializedAccount } from '../../../src/compiler/shard.ts';
import { bucketOfHash, namespaceHash, sha256Hex } from '../../../src/contract/routing.ts';

/** A small deterministic generator, so a failure can be replayed. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const serialized = (namespace: string, version: number, size: number): SerializedAccount => {
  const json = JSON.stringify({ namespace, version, pad: 'x'.repeat(size) });
  return { namespace, json, sha256: sha256Hex(json), bytes: json.length, hash: namespaceHash(namespace) };
};

interface Member {
  bucket: number;
  namespaces: string[];
}

describe('accounts kept placed between runs', () => {
  it('gives what placing every account from scratch gives, through random changes and bucket-count changes', () => {
    const next = rng(11);
    const live = new Map<string, SerializedAccount>();
    const placed = new BucketedAccounts<SerializedAccount, Member>((bucket, list) => ({
      bucket,
      namespaces: list.map((a) => a.namespace),
    }));
    const fromScratch = (n: number): Member[] => {
      const groups = new Map<number, SerializedAccount[]>();
      for (const a of live.values()) {
        const b = bucketOfHash(a.hash, n);
        groups.set(b, [...(groups.get(b) ?? []), a]);
      }
      return [...groups.keys()]
        .sort((a, b) => a - b)
        .map((bucket) => ({
          bucket,
          namespaces: groups
            .get(bucket)!
            .sort(byNamespace)
            .map((a) => a.namespace),
        }));
    };
    let checked = 0;
    for (let step = 0; step < 400; step++) {
      const ns = `ns-${Math.floor(next() * 120)}`;
      const roll = next();
      if (roll < 0.25) {
        live.delete(ns);
        placed.set(ns, undefined);
      } else {
        const account = serialized(ns, step, Math.floor(next() * 2000));
        live.set(ns, account);
        placed.set(ns, account);
      }
      if (step % 7 === 0) {
        // The bucket count follows the total, as in the pipeline, and sometimes jumps (a regroup).
        const n = step % 49 === 0 ? 1 + Math.floor(next() * 30) : bucketCount(placed.totalBytes, 8 * 1024);
        expect(placed.layout(n)).toEqual(fromScratch(n));
        expect(placed.totalBytes).toBe([...live.values()].reduce((s, a) => s + a.bytes, 0));
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(50);
  });

  it('re-derives only the bucket whose account changed, and nothing when the same object is set again', () => {
    const derived: number[] = [];
    const placed = new BucketedAccounts<SerializedAccount, Member>((bucket, list) => {
      derived.push(bucket);
      return { bucket, namespaces: list.map((a) => a.namespace) };
    });
    const accounts = Array.from({ length: 200 }, (_, i) => serialized(`ns-${i}`, 0, 100));
    for (const a of accounts) placed.set(a.namespace, a);
    const first = placed.layout(16);
    expect(derived).toHaveLength(first.length);

    derived.length = 0;
    const changed = serialized('ns-7', 1, 100);
    placed.set('ns-7', changed);
    placed.set('ns-8', accounts[8]);
    const second = placed.layout(16);
    expect(derived).toEqual([bucketOfHash(changed.hash, 16)]);
    // Every other bucket is the very same object as before.
    const same = second.filter((m, i) => m === first[i]);
    expect(same).toHaveLength(first.length - 1);

    derived.length = 0;
    placed.layout(16);
    expect(derived).toEqual([]);
    // A different bucket count places everything again.
    placed.layout(17);
    expect(derived.length).toBeGreaterThan(10);
  });

  it('shard layouts: incremental equals layoutSerialized, fingerprints included', () => {
    const next = rng(5);
    const live = new Map<string, SerializedAccount>();
    const placement = incrementalShardLayout({ targetBytes: 16 * 1024, gzipAboveBytes: 4 * 1024 });
    let previous: number | undefined;
    for (let step = 0; step < 300; step++) {
      const ns = `acct-${Math.floor(next() * 80)}`;
      if (next() < 0.2) {
        live.delete(ns);
        placement.set(ns, undefined);
      } else {
        const a = serialized(ns, step, Math.floor(next() * 3000));
        live.set(ns, a);
        placement.set(ns, a);
      }
      if (step % 5 === 0) {
        const incremental = placement.layout(previous);
        const whole = layoutSerialized([...live.values()], {
          targetBytes: 16 * 1024,
          gzipAboveBytes: 4 * 1024,
          previousBuckets: previous,
        });
        expect(incremental).toEqual(whole);
        previous = incremental.buckets;
      }
    }
    expect(previous).toBeGreaterThan(3);
  });

  it('bundle layouts: incremental equals layoutBundles, accounts without credentials left out', () => {
    const ring = { active: 'k1', keys: new Map([['k1', randomBytes(32)]]) };
    const next = rng(9);
    const live = new Map<string, BundleAccount>();
    const placement = incrementalBundleLayout({ targetBytes: 8 * 1024, maxPartBytes: 12 * 1024 });
    let previous: number | undefined;
    let empty = 0;
    for (let step = 0; step < 200; step++) {
      const ns = `acct-${Math.floor(next() * 60)}`;
      const creds = Math.floor(next() * 30);
      if (creds === 0) empty++;
      const a = sealAccount(
        ring,
        ns,
        Array.from({ length: creds }, (_, i) => ({ id: `${ns}-${i}`, payload: `sk-${step}-${i}` })),
      );
      live.set(ns, a);
      placement.set(ns, a);
      if (step % 4 === 0) {
        const incremental = placement.layout(previous);
        const whole = layoutBundles([...live.values()], {
          targetBytes: 8 * 1024,
          maxPartBytes: 12 * 1024,
          previousBuckets: previous,
        });
        expect(incremental).toEqual(whole);
        expect(incremental.members.flatMap((m) => m.list).every((x) => x.entries.length > 0)).toBe(true);
        previous = incremental.buckets;
      }
    }
    expect(empty).toBeGreaterThan(0);
    expect(previous).toBeGreaterThan(3);
  });
});
