import { deflateRawSync, gunzipSync } from 'node:zlib';
import { describe, expect, it } from '@jest/globals';
import { bucketCount } from '../../../src/compiler/buckets.ts';
import { compileAccount } from '../../../src/compiler/compile.ts';
import {
  type EncodedBucket,
  encodeLayoutBucket,
  layoutSerialized,
  ownBuffer,
  type ShardObject,
  serializeAccount,
  shardAccounts,
  shardFromLayout,
  shardSerialized,
} from '../../../src/compiler/shard.ts';
import { canonicalJson } from '../../../src/contract/canonical-json.ts';
import {
  bucketOf,
  bucketOfHash,
  indexVersion,
  namespaceHash,
  placementOrderKey,
} from '../../../src/contract/routing.ts';
import type { CompiledAccount } from '../../../src/domain/compiled.ts';
import { sizedSnapshot } from '../../support/fixtures/compiler.ts';

const MiB = 1024 * 1024;
/** What the apiserver stores: binaryData is base64 in the object. */
const storedBytes = (s: ShardObject) => (s.encoding === 'gzip' ? Math.ceil(s.bytes / 3) * 4 : s.bytes);

function decode(shards: ShardObject[], bucket: number): { accounts: CompiledAccount[]; bucket: number } {
  const parts = shards.filter((s) => s.bucket === bucket).sort((a, b) => a.part - b.part);
  const payload = Buffer.concat(parts.map((p) => p.data));
  return JSON.parse((parts[0]!.encoding === 'gzip' ? gunzipSync(payload) : payload).toString('utf8'));
}

const accounts = (n: number, creds: number) =>
  Array.from({ length: n }, (_, i) => compileAccount(sizedSnapshot(`acct-${i}`, creds)));

describe('linear-hashing placement', () => {
  it('growing N by one moves accounts out of exactly one bucket', () => {
    const hashes = Array.from({ length: 2000 }, (_, i) => namespaceHash(`ns-${i}`));
    // One expect over every case: an expect per hash and count is slow and proves the same.
    const wrong: string[] = [];
    for (let n = 1; n < 40; n++) {
      const from = new Set<number>();
      for (const h of hashes) {
        const a = bucketOfHash(h, n);
        const b = bucketOfHash(h, n + 1);
        if (a >= n) wrong.push(`hash ${h}: bucket ${a} of ${n}`);
        if (a !== b) {
          if (b !== n) wrong.push(`hash ${h}: moved from ${a} to ${b} growing ${n} -> ${n + 1}`);
          from.add(a);
        }
      }
      if (from.size > 1) wrong.push(`growing ${n} -> ${n + 1} moved accounts out of buckets ${[...from].join(', ')}`);
    }
    expect(wrong).toEqual([]);
  });

  it('bucket count grows with size and does not flap at a boundary', () => {
    expect(bucketCount(0, 100)).toBe(1);
    expect(bucketCount(1001, 100)).toBe(11);
    expect(bucketCount(990, 100, 11)).toBe(11);
    expect(bucketCount(400, 100, 11)).toBe(4);
  });
});

describe('placementOrderKey', () => {
  it('sorts the accounts of every bucket into one contiguous run, for any bucket count', () => {
    const namespaces = Array.from({ length: 600 }, (_, i) => `acct-${i}`).sort(
      (a, b) => placementOrderKey(a) - placementOrderKey(b),
    );
    for (let n = 1; n <= 70; n++) {
      const runs: number[] = [];
      for (const ns of namespaces) if (runs.at(-1) !== bucketOf(ns, n)) runs.push(bucketOf(ns, n));
      expect(new Set(runs).size).toBe(runs.length);
    }
  });
  it('is a 32-bit unsigned bit reversal of the namespace hash', () => {
    const ns = 'team-a';
    const rev = parseInt(namespaceHash(ns).toString(2).padStart(32, '0').split('').reverse().join(''), 2);
    expect(placementOrderKey(ns)).toBe(rev);
  });
});

describe('shardAccounts', () => {
  it('is deterministic and self-consistent', () => {
    const list = accounts(30, 20);
    const a = shardAccounts(list, { targetBytes: 16 * 1024 });
    const b = shardAccounts([...list].reverse(), { targetBytes: 16 * 1024 });
    expect(canonicalJson(a.index)).toBe(canonicalJson(b.index));
    expect(a.shards.map((s) => s.sha256)).toEqual(b.shards.map((s) => s.sha256));
    expect(a.index.version).toBe(indexVersion(a.index));
    expect(a.index.buckets).toBeGreaterThan(1);
    for (const entry of a.index.shards) {
      const doc = decode(a.shards, entry.bucket);
      expect(doc.accounts).toHaveLength(entry.accounts);
      for (const acct of doc.accounts) expect(bucketOf(acct.namespace, a.index.buckets)).toBe(entry.bucket);
    }
    const all = a.index.shards.flatMap((e) => decode(a.shards, e.bucket).accounts.map((x) => x.namespace)).sort();
    expect(all).toEqual(list.map((x) => x.namespace).sort());
  });

  it('compresses large shards and keeps small ones as JSON', () => {
    const small = shardAccounts(accounts(1, 2));
    expect(small.shards[0]!.encoding).toBe('json');
    const large = shardAccounts(accounts(1, 300));
    expect(large.shards[0]!.encoding).toBe('gzip');
    expect(large.index.shards[0]!.rawBytes).toBeGreaterThan(large.index.shards[0]!.bytes * 3);
  });

  it('changing one account rewrites exactly one shard', () => {
    const list = accounts(200, 10);
    const before = shardAccounts(list);
    expect(before.shards.length).toBeGreaterThan(2);
    const changedNs = 'acct-77';
    const snap = sizedSnapshot(changedNs, 10);
    snap.credentials[3]!.resource.spec.disabled = true;
    const after = shardAccounts(
      list.map((a) => (a.namespace === changedNs ? compileAccount(snap) : a)),
      { previousBuckets: before.index.buckets },
    );
    const beforeSha = new Map(before.shards.map((s) => [s.name, s.sha256]));
    const changed = after.shards.filter((s) => beforeSha.get(s.name) !== s.sha256);
    expect(changed).toHaveLength(1);
    expect(changed[0]!.accounts).toContain(changedNs);
    expect(after.shards.map((s) => s.name)).toEqual(before.shards.map((s) => s.name));
    expect(after.index.version).not.toBe(before.index.version);
  });

  it('a huge account spans several ConfigMaps, each well under 1 MiB, and reassembles', () => {
    // Random-looking ids and labels make the JSON compress poorly (worst case for the part limit).
    const huge = compileAccount(sizedSnapshot('huge', 12_000));
    const set = shardAccounts([huge, ...accounts(3, 5)]);
    const parts = set.shards.filter((s) => s.accounts.includes('huge'));
    expect(parts.length).toBeGreaterThan(1);
    for (const s of set.shards) expect(storedBytes(s)).toBeLessThan(0.75 * MiB);
    const bucket = parts[0]!.bucket;
    const doc = decode(set.shards, bucket);
    expect(doc.accounts.find((a) => a.namespace === 'huge')).toEqual(huge);
    const names = set.shards.map((s) => s.name);
    expect(new Set(names).size).toBe(names.length);
    expect(canonicalJson(set.index).length).toBeLessThan(64 * 1024);
  });

  it('reuses cached encodings for unchanged buckets', () => {
    const cache = new Map();
    const list = accounts(50, 10).map(serializeAccount);
    const first = shardSerialized(list, { cache, targetBytes: 32 * 1024 });
    const second = shardSerialized(list, { cache, targetBytes: 32 * 1024 });
    expect(second.shards.map((s) => s.data)).toEqual(first.shards.map((s) => s.data));
    expect(cache.size).toBe(first.index.shards.length);
    for (let i = 0; i < first.shards.length; i++)
      expect(second.shards[i]!.data.buffer).toBe(first.shards[i]!.data.buffer);
  });

  it('laid out and encoded one bucket at a time (as the pipeline does), gives the same shards and index', () => {
    const list = accounts(60, 10).map(serializeAccount);
    const opts = { targetBytes: 16 * 1024, maxPartBytes: 24 * 1024 };
    const whole = shardSerialized(list, opts);
    const cache = new Map<string, EncodedBucket>();
    const layout = layoutSerialized(list, { ...opts, cache });
    for (const member of layout.members) cache.set(member.fingerprint, encodeLayoutBucket(member, layout));
    const stepwise = shardFromLayout(layout, { ...opts, cache });
    expect(stepwise.index).toEqual(whole.index);
    expect(stepwise.shards.map((x) => [x.name, x.sha256, x.data.toString('base64')])).toEqual(
      whole.shards.map((x) => [x.name, x.sha256, x.data.toString('base64')]),
    );
    // Every shard came from the pre-encoded cache.
    expect(stepwise.shards.every((x) => [...cache.values()].some((e) => e.payload.buffer === x.data.buffer))).toBe(
      true,
    );
  });

  it('no payload (canary) ever appears in shard data', () => {
    const canary = 'CANARY-9f8e7d6c5b4a';
    const list = [compileAccount(sizedSnapshot('canary', 500, (i) => `${canary}-${i}`)), ...accounts(5, 5)];
    const set = shardAccounts(list);
    for (const e of set.index.shards) {
      expect(JSON.stringify(decode(set.shards, e.bucket))).not.toContain(canary);
    }
    for (const s of set.shards) expect(s.data.toString('latin1')).not.toContain(canary);
    expect(JSON.stringify(set.index)).not.toContain(canary);
  });

  it('cached gzip payloads and kept deflated text own exactly their bytes (zlib returns views of 64 KB chunks)', () => {
    const viewed = deflateRawSync('x'.repeat(4000));
    expect(viewed.buffer.byteLength).toBeGreaterThan(viewed.length * 100);
    const owned = ownBuffer(viewed);
    expect(owned.buffer.byteLength).toBe(owned.length);
    expect(owned.equals(viewed)).toBe(true);
    const set = shardAccounts(
      Array.from({ length: 3 }, (_, i) => compileAccount(sizedSnapshot(`acct-${i}`, 200))),
      { gzipAboveBytes: 1 },
    );
    for (const shard of set.shards) expect(shard.data.buffer.byteLength).toBeLessThanOrEqual(shard.data.length + 8192);
  });
});
