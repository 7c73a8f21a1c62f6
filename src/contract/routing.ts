// Wire format of the compiled routing config: ConfigMap names and keys, the index and shard documents,
// and the namespace -> bucket function. Node built-ins and the domain only: the gateway SDK imports this.
import { createHash } from 'node:crypto';
import type { CompiledAccount } from '../domain/compiled.ts';
import { canonicalJson } from './canonical-json.ts';

export const INDEX_NAME = 'byok-routing-index';
export const INDEX_KEY = 'byok-routing-index.json';
export const SHARD_PREFIX = 'byok-routing-';
export const BUNDLE_PREFIX = 'byok-bundle-';
export const INDEX_FORMAT = 'byok-routing/v1';
/** Label on every object the pipeline writes, so it can list (and delete stale) ones. */
export const ROUTING_LABEL = 'byok.gateway.dev/routing';
/** Annotation carrying the sha256 of an object's payload, so a restarted operator skips identical writes. */
export const SHA_ANNOTATION = 'byok.gateway.dev/sha256';

export type ShardEncoding = 'json' | 'gzip';

export interface IndexPart {
  /** ConfigMap name; also the file stem in a projected volume. */
  name: string;
  /** Data key in the ConfigMap (`<name>.json` in data, or `<name>.gz` in binaryData) = the mounted file name. */
  key: string;
  sha256: string;
  bytes: number;
}

export interface IndexShard {
  bucket: number;
  encoding: ShardEncoding;
  /** sha256 of the whole encoded payload (the parts concatenated in order). */
  sha256: string;
  /** Encoded size (sum of parts). */
  bytes: number;
  /** Size of the decoded JSON. */
  rawBytes: number;
  /** Number of accounts in the shard (their namespaces are inside the shard). */
  accounts: number;
  /** Usually one part; a shard whose encoded payload exceeds the part limit spans several ConfigMaps. */
  parts: IndexPart[];
}

export interface RoutingIndex {
  format: typeof INDEX_FORMAT;
  /** sha256 of the canonical JSON of {format, buckets, shards}: changes iff any shard changes. */
  version: string;
  /** Bucket count N of the linear-hashing placement (see bucketOf). */
  buckets: number;
  /** Sorted by bucket; empty buckets are omitted. */
  shards: IndexShard[];
}

/** Decoded shard payload. */
export interface ShardDocument {
  bucket: number;
  /** Sorted by namespace. */
  accounts: CompiledAccount[];
}

/** Lowercase hex SHA-256 (strings as UTF-8): the one digest helper of src/ (objects, index, bearer-token hashes). */
export function sha256Hex(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

/** 32-bit hash of a namespace; the placement depends on nothing else, so an account never moves unless N changes. */
export function namespaceHash(namespace: string): number {
  return createHash('sha256').update(namespace).digest().readUInt32BE(0);
}

/**
 * Linear hashing: with N buckets, L = floor(log2 N) and split pointer s = N - 2^L, a namespace with hash h
 * lives in h mod 2^L, or in h mod 2^(L+1) when that first bucket has already been split (< s).
 * Growing N by one splits exactly one bucket, so only two shards are rewritten.
 */
export function bucketOf(namespace: string, buckets: number): number {
  return bucketOfHash(namespaceHash(namespace), buckets);
}

/**
 * A sort key under which the accounts of any one bucket are contiguous, whatever the bucket count: the namespace
 * hash with its 32 bits reversed (placement is decided by the low bits, so those become the most significant).
 * Reconciling a cold start in this order fills the shards one after another, so each compile run rewrites a
 * couple of shards instead of all of them.
 */
export function placementOrderKey(namespace: string): number {
  let h = namespaceHash(namespace);
  let r = 0;
  for (let i = 0; i < 32; i++) {
    r = r * 2 + (h & 1);
    h >>>= 1;
  }
  return r;
}

export function bucketOfHash(h: number, buckets: number): number {
  if (buckets <= 1) return 0;
  const level = 31 - Math.clz32(buckets);
  const low = 2 ** level;
  const b = h % low;
  return b < buckets - low ? h % (low * 2) : b;
}

export function shardName(slot: number): string {
  return `${SHARD_PREFIX}${slot}`;
}

export function bundleName(slot: number): string {
  return `${BUNDLE_PREFIX}${slot}`;
}

export function partKey(name: string, encoding: ShardEncoding): string {
  return encoding === 'gzip' ? `${name}.gz` : `${name}.json`;
}

/** The version of an index body (everything but the version itself). */
export function indexVersion(body: Omit<RoutingIndex, 'version'>): string {
  return sha256Hex(canonicalJson({ format: body.format, buckets: body.buckets, shards: body.shards }));
}

export function isRoutingIndex(value: unknown): value is RoutingIndex {
  if (value === null || typeof value !== 'object') return false;
  const v = value as Partial<RoutingIndex>;
  return (
    v.format === INDEX_FORMAT &&
    typeof v.version === 'string' &&
    typeof v.buckets === 'number' &&
    Array.isArray(v.shards)
  );
}
