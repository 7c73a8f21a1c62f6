// Shards compiled accounts into ConfigMap payloads and builds the index. Pure (given the same accounts and
// options, the same bytes), with an optional cache so an incremental compile re-encodes only the buckets
// whose accounts changed.
import { gzipSync } from 'node:zlib';
import { canonicalJson } from '../contract/canonical-json.ts';
import {
  INDEX_FORMAT,
  type IndexPart,
  type IndexShard,
  indexVersion,
  namespaceHash,
  partKey,
  type RoutingIndex,
  type ShardEncoding,
  sha256Hex,
  shardName,
} from '../contract/routing.ts';
import type { CompiledAccount } from '../domain/compiled.ts';
import { IncrementalPlacement, LayoutPassCache, layoutAll } from './buckets.ts';

export interface ShardOptions {
  /** Average decoded bytes per bucket the bucket count aims for (default 128 KiB). */
  targetBytes?: number;
  /** Largest encoded payload per ConfigMap; larger shards are split into parts (default 384 KiB, i.e. 512 KiB base64). */
  maxPartBytes?: number;
  /** Shards whose JSON exceeds this are gzip-compressed into binaryData (default 32 KiB). */
  gzipAboveBytes?: number;
  /** Bucket count of the previous layout: kept while it still fits, so sizes hovering at a boundary do not flap. */
  previousBuckets?: number;
  /** Reused encoded buckets keyed by content fingerprint; entries not used by this call are evicted. */
  cache?: Map<string, EncodedBucket>;
}

export const DEFAULTS = { targetBytes: 128 * 1024, maxPartBytes: 384 * 1024, gzipAboveBytes: 32 * 1024 } as const;

/** One account serialized once (canonical JSON); the pipeline keeps these between compiles. */
export interface SerializedAccount {
  namespace: string;
  json: string;
  sha256: string;
  bytes: number;
  hash: number;
}

export interface ShardObject {
  /** ConfigMap name. */
  name: string;
  /** Data key (= mounted file name). */
  key: string;
  encoding: ShardEncoding;
  bucket: number;
  part: number;
  /** The bytes of this part: UTF-8 JSON (goes in `data`) or a gzip slice (goes base64 in `binaryData`). */
  data: Buffer;
  sha256: string;
  bytes: number;
  /** Namespaces in the shard this part belongs to. */
  accounts: string[];
}

export interface ShardSet {
  index: RoutingIndex;
  /** Every ConfigMap except the index, in slot order. */
  shards: ShardObject[];
}

export interface EncodedBucket {
  encoding: ShardEncoding;
  payload: Buffer;
  sha256: string;
  rawBytes: number;
  accounts: string[];
}

export function serializeAccount(account: CompiledAccount): SerializedAccount {
  const json = canonicalJson(account);
  return {
    namespace: account.namespace,
    json,
    sha256: sha256Hex(json),
    bytes: Buffer.byteLength(json),
    hash: namespaceHash(account.namespace),
  };
}

export function shardAccounts(compiled: readonly CompiledAccount[], opts: ShardOptions = {}): ShardSet {
  return shardSerialized(compiled.map(serializeAccount), opts);
}

/** Where each account goes: buckets in slot order, each with its accounts (sorted) and a content fingerprint. */
export interface ShardLayout {
  buckets: number;
  /** The gzip threshold the fingerprints were taken with: encoding a bucket uses the same one. */
  gzipAbove: number;
  members: ShardMember[];
}

export interface ShardMember {
  bucket: number;
  /** Sorted by namespace; shared with later layouts while the bucket is unchanged, so never modified. */
  list: readonly SerializedAccount[];
  /** sha256 over the bucket number, the gzip threshold and the accounts' digests: the encoded-bucket cache key. */
  fingerprint: string;
}

/** Accounts kept placed between compile runs: `layout` equals layoutSerialized of the accounts set, and re-derives
 *  only the buckets whose accounts changed since the previous layout. */
export interface IncrementalShardLayout {
  set(namespace: string, account: SerializedAccount | undefined): void;
  layout(previousBuckets?: number): ShardLayout;
}

export function incrementalShardLayout(
  opts: Omit<ShardOptions, 'previousBuckets' | 'cache'> = {},
): IncrementalShardLayout {
  const gzipAbove = opts.gzipAboveBytes ?? DEFAULTS.gzipAboveBytes;
  const placed = new IncrementalPlacement<SerializedAccount, ShardMember>(
    opts.targetBytes ?? DEFAULTS.targetBytes,
    (bucket, list) => ({
      bucket,
      list,
      fingerprint: sha256Hex(`${bucket}:${gzipAbove}:${list.map((a) => a.sha256).join(',')}`),
    }),
  );
  return {
    set: (namespace, account) => placed.set(namespace, account),
    layout(previousBuckets) {
      const { buckets, members } = placed.layout(previousBuckets);
      return { buckets, gzipAbove, members };
    },
  };
}

/** The first half of shardSerialized: placement only, no encoding. */
export function layoutSerialized(accounts: readonly SerializedAccount[], opts: ShardOptions = {}): ShardLayout {
  return layoutAll(incrementalShardLayout(opts), accounts, opts.previousBuckets);
}

/** Encodes one bucket of a layout (what shardFromLayout does for a bucket its cache does not have). */
export function encodeLayoutBucket(member: ShardMember, layout: ShardLayout): EncodedBucket {
  return encodeBucket(member.bucket, member.list, layout.gzipAbove);
}

export function shardSerialized(accounts: readonly SerializedAccount[], opts: ShardOptions = {}): ShardSet {
  return shardFromLayout(layoutSerialized(accounts, opts), opts);
}

/**
 * The second half: encodes the buckets the cache does not have and builds the objects and the index. A caller
 * that must not hold the event loop for long (the compile pipeline, re-encoding ~60 buckets after a 100k cold
 * start) encodes the missing buckets into the cache first, one at a time.
 */
export function shardFromLayout(layout: ShardLayout, opts: ShardOptions = {}): ShardSet {
  const maxPartBytes = opts.maxPartBytes ?? DEFAULTS.maxPartBytes;
  const cache = new LayoutPassCache(opts.cache);
  const shards: ShardObject[] = [];
  const indexShards: IndexShard[] = [];
  let overflowSlot = layout.buckets;
  for (const member of layout.members) {
    const { bucket, list, fingerprint } = member;
    const encoded = cache.get(fingerprint, () => encodeLayoutBucket(member, layout));

    const parts: IndexPart[] = [];
    for (let offset = 0, part = 0; offset < encoded.payload.length || part === 0; offset += maxPartBytes, part++) {
      const slot = part === 0 ? bucket : overflowSlot++;
      const name = shardName(slot);
      const data = encoded.payload.subarray(offset, offset + maxPartBytes);
      const sha256 = part === 0 && data.length === encoded.payload.length ? encoded.sha256 : sha256Hex(data);
      const key = partKey(name, encoded.encoding);
      parts.push({ name, key, sha256, bytes: data.length });
      shards.push({
        name,
        key,
        encoding: encoded.encoding,
        bucket,
        part,
        data,
        sha256,
        bytes: data.length,
        accounts: encoded.accounts,
      });
    }
    indexShards.push({
      bucket,
      encoding: encoded.encoding,
      sha256: encoded.sha256,
      bytes: encoded.payload.length,
      rawBytes: encoded.rawBytes,
      accounts: list.length,
      parts,
    });
  }
  cache.evictUnused();

  const body = { format: INDEX_FORMAT, buckets: layout.buckets, shards: indexShards } as const;
  return { index: { ...body, version: indexVersion(body) }, shards };
}

/** The bytes with a backing store of their own, exactly their length: zlib's sync output is a view of its 64 KB
 *  output chunk, which a long-lived small result would otherwise keep whole. */
export function ownBuffer(b: Buffer): Buffer {
  if (b.byteOffset === 0 && b.buffer.byteLength === b.length) return b;
  const out = Buffer.allocUnsafeSlow(b.length);
  b.copy(out);
  return out;
}

function encodeBucket(bucket: number, list: readonly SerializedAccount[], gzipAbove: number): EncodedBucket {
  // Account JSON is already canonical; keys "accounts" < "bucket" keep the wrapper canonical too.
  const json = `{"accounts":[${list.map((a) => a.json).join(',')}],"bucket":${bucket}}`;
  const raw = Buffer.from(json, 'utf8');
  const encoding: ShardEncoding = raw.length > gzipAbove ? 'gzip' : 'json';
  // Encoded buckets are cached between runs; gzipSync returns a view of its 64 KB output chunk, so a small
  // shard would keep the whole chunk alive. Copy it to its own exact-size buffer.
  const payload = encoding === 'gzip' ? ownBuffer(gzipSync(raw, { level: 6 })) : raw;
  return {
    encoding,
    payload,
    sha256: sha256Hex(payload),
    rawBytes: raw.length,
    accounts: list.map((a) => a.namespace),
  };
}
