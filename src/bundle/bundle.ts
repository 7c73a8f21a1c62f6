// Credential bundle Secrets (`byok-bundle-<n>`): {credentialId: envelope JSON}, sharded by account namespace
// with the same linear-hashing placement as the routing ConfigMaps. Mounted, each entry is a file named by
// the credential id, so the SDK opens `<bundleDir>/<credentialId>` without an index.
import { bucketCount } from '../compiler/shard.ts';
import { bucketOfHash, bundleName, canonicalJson, namespaceHash, sha256Hex } from '../compiler/format.ts';
import { sealPayload, type Keyring } from './envelope.ts';

export interface BundleAccount {
  namespace: string;
  hash: number;
  /** Sorted by credential id. */
  entries: { id: string; envelope: string }[];
  bytes: number;
  /** sha256 over the entries, computed once when sealed. */
  digest: string;
}

export interface BundleObject {
  name: string;
  bucket: number;
  part: number;
  /** credentialId -> envelope JSON (built on demand: only objects that are written need it). */
  entries(): Record<string, string>;
  sha256: string;
  bytes: number;
  accounts: string[];
}

export interface BundleShardOptions {
  /** Average envelope bytes per bucket (default 256 KiB). */
  targetBytes?: number;
  /** Largest envelope bytes per Secret (default 384 KiB, 512 KiB base64: well under the 1 MiB object limit). */
  maxPartBytes?: number;
  previousBuckets?: number;
  /** Split parts of oversized buckets, keyed by the bucket's content; entries not used by this call are evicted. */
  cache?: Map<string, BundlePart[]>;
}

/** One Secret's worth of an oversized bucket (its name is given at layout time: overflow slots move). */
export interface BundlePart {
  /** The accounts' own entry objects (no copies of the envelopes). */
  items: readonly { id: string; envelope: string }[];
  sha256: string;
  bytes: number;
}

export function sealAccount(keyring: Keyring, namespace: string, credentials: readonly { id: string; payload: string }[]): BundleAccount {
  const entries = credentials
    .map((c) => ({ id: c.id, envelope: JSON.stringify(sealPayload(keyring, namespace, c.id, c.payload)) }))
    .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const digest = sha256Hex(entries.map((e) => `${e.id}\u0000${e.envelope}`).join('\n'));
  return { namespace, hash: namespaceHash(namespace), entries, bytes: entries.reduce((s, e) => s + e.envelope.length + e.id.length, 0), digest };
}

export function shardBundles(accounts: readonly BundleAccount[], opts: BundleShardOptions = {}): { buckets: number; objects: BundleObject[] } {
  const target = opts.targetBytes ?? 256 * 1024;
  const maxPart = opts.maxPartBytes ?? 384 * 1024;
  const n = bucketCount(accounts.reduce((s, a) => s + a.bytes, 0), target, opts.previousBuckets);
  const members = new Map<number, BundleAccount[]>();
  for (const a of accounts) {
    if (a.entries.length === 0) continue;
    const b = bucketOfHash(a.hash, n);
    let list = members.get(b);
    if (!list) members.set(b, (list = []));
    list.push(a);
  }
  const objects: BundleObject[] = [];
  const used = new Set<string>();
  let overflow = n;
  for (const bucket of [...members.keys()].sort((a, b) => a - b)) {
    const list = members.get(bucket)!.sort((a, b) => (a.namespace < b.namespace ? -1 : a.namespace > b.namespace ? 1 : 0));
    const accountNames = list.map((a) => a.namespace);
    const bucketBytes = list.reduce((s, a) => s + a.bytes, 0);
    // The object's digest comes from the accounts' digests: no per-entry work per compile.
    const digest = sha256Hex(list.map((a) => `${a.namespace}:${a.digest}`).join('\n'));
    if (bucketBytes <= maxPart) {
      objects.push({
        name: bundleName(bucket),
        bucket,
        part: 0,
        entries: () => entriesOf(list.flatMap((a) => a.entries)),
        sha256: digest,
        bytes: bucketBytes,
        accounts: accountNames,
      });
      continue;
    }
    // Linear hashing leaves unsplit buckets at twice the target, so oversized buckets are common: split them
    // once per content, not on every compile (at 10,000 accounts the split was 30 ms of each run).
    const key = `${maxPart}:${digest}`;
    let parts = opts.cache?.get(key);
    if (!parts) {
      parts = splitBucket(list, maxPart);
      opts.cache?.set(key, parts);
    }
    used.add(key);
    parts.forEach((p, part) => {
      objects.push({ name: bundleName(part === 0 ? bucket : overflow++), bucket, part, entries: () => entriesOf(p.items), sha256: p.sha256, bytes: p.bytes, accounts: accountNames });
    });
  }
  if (opts.cache) for (const key of opts.cache.keys()) if (!used.has(key)) opts.cache.delete(key);
  return { buckets: n, objects };
}

function splitBucket(list: readonly BundleAccount[], maxPart: number): BundlePart[] {
  const parts: BundlePart[] = [];
  let items: { id: string; envelope: string }[] = [];
  let size = 0;
  const emit = () => {
    parts.push({ items, sha256: sha256Hex(canonicalJson(entriesOf(items))), bytes: size });
    items = [];
    size = 0;
  };
  for (const account of list) {
    for (const e of account.entries) {
      const entryBytes = e.envelope.length + e.id.length;
      if (size > 0 && size + entryBytes > maxPart) emit();
      items.push(e);
      size += entryBytes;
    }
  }
  emit();
  return parts;
}

/** A bundle Secret's data: credentialId -> envelope JSON. */
function entriesOf(items: readonly { id: string; envelope: string }[]): Record<string, string> {
  return Object.fromEntries(items.map((e) => [e.id, e.envelope]));
}
