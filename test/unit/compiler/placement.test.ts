// The placement part the routing shards and the credential bundles share (src/compiler/buckets.ts): the bucket count
// from the accounts' bytes, the incremental layout against one from scratch, and the per-pass cache of bucket results.
import { describe, expect, it } from '@jest/globals';
import {
  bucketCount,
  IncrementalPlacement,
  LayoutPassCache,
  layoutAll,
  type Placeable,
} from '../../../src/compiler/buckets.ts';
import { bucketOfHash, namespaceHash } from '../../../src/contract/routing.ts';

interface Acct extends Placeable {
  version: number;
}
const acct = (namespace: string, bytes: number, version = 0): Acct => ({
  namespace,
  hash: namespaceHash(namespace),
  bytes,
  version,
});
const derive = (bucket: number, list: Acct[]) => ({ bucket, names: list.map((a) => `${a.namespace}@${a.version}`) });

describe('IncrementalPlacement', () => {
  it('chooses the bucket count from the bytes and places each account in its linear-hashing bucket, sorted', () => {
    const accounts = Array.from({ length: 40 }, (_, i) => acct(`ns-${i}`, 100 + i));
    const total = accounts.reduce((s, a) => s + a.bytes, 0);
    const layout = layoutAll(new IncrementalPlacement(1000, derive), accounts);
    expect(layout.buckets).toBe(bucketCount(total, 1000));
    expect(layout.members.map((m) => m.bucket)).toEqual(layout.members.map((m) => m.bucket).sort((a, b) => a - b));
    for (const m of layout.members) {
      const namespaces = m.names.map((n) => n.split('@')[0]!);
      expect(namespaces).toEqual([...namespaces].sort());
      for (const namespace of namespaces) expect(bucketOfHash(namespaceHash(namespace), layout.buckets)).toBe(m.bucket);
    }
    expect(layout.members.flatMap((m) => m.names).length).toBe(accounts.length);
  });

  it('equals a layout from scratch after every change, and re-derives only the buckets that changed', () => {
    const calls: number[] = [];
    const placement = new IncrementalPlacement<Acct, ReturnType<typeof derive>>(800, (bucket, list) => {
      calls.push(bucket);
      return derive(bucket, list);
    });
    const live = new Map<string, Acct>();
    let previous: number | undefined;
    for (let step = 0; step < 120; step++) {
      const namespace = `ns-${(step * 7) % 23}`;
      if (step % 5 === 4) {
        live.delete(namespace);
        placement.set(namespace, undefined);
      } else {
        const a = acct(namespace, 50 + ((step * 13) % 200), step);
        live.set(namespace, a);
        placement.set(namespace, a);
      }
      calls.length = 0;
      const incremental = placement.layout(previous);
      const whole = layoutAll(new IncrementalPlacement(800, derive), [...live.values()], previous);
      expect(incremental).toEqual(whole);
      // A change touches one bucket, unless the bucket count moved (then every bucket is re-derived).
      if (incremental.buckets === previous) expect(calls.length).toBeLessThanOrEqual(1);
      previous = incremental.buckets;
    }
  });

  it('keeps the previous bucket count until the bytes fall well below it', () => {
    expect(bucketCount(0, 100)).toBe(1);
    expect(bucketCount(1001, 100)).toBe(11);
    expect(bucketCount(990, 100, 11)).toBe(11);
    expect(bucketCount(600, 100, 11)).toBe(11);
    expect(bucketCount(400, 100, 11)).toBe(4);
    expect(bucketCount(1300, 100, 11)).toBe(13);
  });
});

describe('LayoutPassCache', () => {
  it('builds only what the cache lacks and evicts what a pass did not ask for', () => {
    const store = new Map<string, string>([
      ['a', 'cached a'],
      ['stale', 'old'],
    ]);
    const built: string[] = [];
    const pass = new LayoutPassCache(store);
    const build = (key: string) => () => {
      built.push(key);
      return `built ${key}`;
    };
    expect(pass.get('a', build('a'))).toBe('cached a');
    expect(pass.get('b', build('b'))).toBe('built b');
    expect(pass.get('b', build('b'))).toBe('built b');
    expect(built).toEqual(['b']);
    pass.evictUnused();
    expect([...store.entries()]).toEqual([
      ['a', 'cached a'],
      ['b', 'built b'],
    ]);
  });

  it('without a cache, builds every time and keeps nothing', () => {
    const pass = new LayoutPassCache<number>(undefined);
    let n = 0;
    expect(pass.get('k', () => ++n)).toBe(1);
    expect(pass.get('k', () => ++n)).toBe(2);
    pass.evictUnused();
  });
});
