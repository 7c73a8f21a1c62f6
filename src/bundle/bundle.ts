// Credential bundle Secrets (`byok-bundle-<n>`): {credentialId: envelope JSON}, sharded by account namespace
// with the same linear-hashing placement as the routing ConfigMaps. Mounted, each entry is a file named by
// the credential id, so the SDK opens `<bundleDir>/<credentialId>` without an index.
import { IncrementalPlacement, LayoutPassCache, layoutAll } from '../compiler/buckets.ts';
import { canonicalJson } from '../contract/canonical-json.ts';
import { type BundleEnvelope, ENVELOPE_VERSION, type Keyring, sealPayload } from '../contract/envelope.ts';
import { bundleName, namespaceHash, sha256Hex } from '../contract/routing.ts';

/**
 * One sealed credential, held for the life of the operator (100k of them at 100k credentials). The envelope
 * JSON is rebuilt when a bundle Secret is written: its head (version, algorithm, key id, namespace) is one
 * string per account, and the IV, tag and ciphertext are kept as raw bytes (a latin1 string) instead of base64
 * inside JSON. About 100 bytes per credential less than the envelope text.
 */
export class SealedEntry {
  readonly id: string;
  /** `{"v":1,"alg":"A256GCM","kid":…,"ns":…,"id":`, shared by an account's entries. */
  private readonly head: string;
  /** iv (12 bytes) | tag (16 bytes) | ciphertext, one byte per character. */
  private readonly sealed: string;
  /** Length of the envelope text. */
  readonly length: number;

  /** `text` is JSON.stringify(envelope): the form written and digested; the entry must give it back exactly. */
  constructor(head: string, envelope: BundleEnvelope, text: string) {
    this.id = envelope.id;
    this.head = head;
    const iv = Buffer.from(envelope.iv, 'base64');
    const tag = Buffer.from(envelope.tag, 'base64');
    this.sealed = Buffer.concat([iv, tag, Buffer.from(envelope.ct, 'base64')]).toString('latin1');
    this.length = text.length;
    if (iv.length !== IV_BYTES || tag.length !== TAG_BYTES || this.envelope !== text)
      throw new Error('sealed envelope does not have the layout SealedEntry keeps');
  }

  /** The envelope JSON, byte for byte what JSON.stringify of the sealed envelope gives. */
  get envelope(): string {
    const raw = Buffer.from(this.sealed, 'latin1');
    const b64 = (from: number, to?: number) => raw.subarray(from, to).toString('base64');
    return `${this.head}${JSON.stringify(this.id)},"iv":"${b64(0, IV_BYTES)}","tag":"${b64(IV_BYTES, IV_BYTES + TAG_BYTES)}","ct":"${b64(IV_BYTES + TAG_BYTES)}"}`;
  }
}

const IV_BYTES = 12;
const TAG_BYTES = 16;

export interface BundleAccount {
  namespace: string;
  hash: number;
  /** Sorted by credential id. */
  entries: SealedEntry[];
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
  accounts: readonly string[];
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
  items: readonly SealedEntry[];
  sha256: string;
  bytes: number;
}

export function sealAccount(
  keyring: Keyring,
  namespace: string,
  credentials: readonly { id: string; payload: string }[],
): BundleAccount {
  const head = `{"v":${ENVELOPE_VERSION},"alg":"A256GCM","kid":${JSON.stringify(keyring.active)},"ns":${JSON.stringify(namespace)},"id":`;
  const sealed = credentials
    .map((c) => {
      const envelope = sealPayload(keyring, namespace, c.id, c.payload);
      const text = JSON.stringify(envelope);
      return { entry: new SealedEntry(head, envelope, text), text };
    })
    .sort((a, b) => (a.entry.id < b.entry.id ? -1 : a.entry.id > b.entry.id ? 1 : 0));
  const entries = sealed.map((s) => s.entry);
  const digest = sha256Hex(sealed.map((s) => `${s.entry.id}\u0000${s.text}`).join('\n'));
  return {
    namespace,
    hash: namespaceHash(namespace),
    entries,
    bytes: entries.reduce((s, e) => s + e.length + e.id.length, 0),
    digest,
  };
}

/** Where each account's envelopes go: buckets in slot order, with the bucket's content digest and size. */
export interface BundleLayout {
  buckets: number;
  maxPart: number;
  members: BundleMember[];
}

export interface BundleMember {
  bucket: number;
  /** Sorted by namespace; shared with later layouts while the bucket is unchanged, so never modified. */
  list: readonly BundleAccount[];
  /** The namespaces of `list`. */
  accounts: readonly string[];
  bytes: number;
  digest: string;
  /** Set for buckets too large for one Secret: the key of their split parts in the cache. */
  splitKey: string | undefined;
}

/** Accounts kept placed between compile runs: `layout` equals layoutBundles of the accounts set, and re-derives
 *  only the buckets whose accounts changed since the previous layout. */
export interface IncrementalBundleLayout {
  set(namespace: string, account: BundleAccount | undefined): void;
  layout(previousBuckets?: number): BundleLayout;
}

export function incrementalBundleLayout(
  opts: Omit<BundleShardOptions, 'previousBuckets' | 'cache'> = {},
): IncrementalBundleLayout {
  const maxPart = opts.maxPartBytes ?? 384 * 1024;
  const placed = new IncrementalPlacement<BundleAccount, BundleMember>(
    opts.targetBytes ?? 256 * 1024,
    (bucket, list) => {
      const bytes = list.reduce((s, a) => s + a.bytes, 0);
      // The object's digest comes from the accounts' digests: no per-entry work per compile.
      const digest = sha256Hex(list.map((a) => `${a.namespace}:${a.digest}`).join('\n'));
      return {
        bucket,
        list,
        accounts: list.map((a) => a.namespace),
        bytes,
        digest,
        splitKey: bytes > maxPart ? `${maxPart}:${digest}` : undefined,
      };
    },
  );
  return {
    // An account without credentials has no entries to place (and no bytes to count).
    set: (namespace, account) => placed.set(namespace, account && account.entries.length > 0 ? account : undefined),
    layout(previousBuckets) {
      const { buckets, members } = placed.layout(previousBuckets);
      return { buckets, maxPart, members };
    },
  };
}

/** The first half of shardBundles: placement only. `splitKey` is set for buckets too large for one Secret. */
export function layoutBundles(accounts: readonly BundleAccount[], opts: BundleShardOptions = {}): BundleLayout {
  return layoutAll(incrementalBundleLayout(opts), accounts, opts.previousBuckets);
}

/** Splits one oversized bucket of a layout into Secret-sized parts (what bundlesFromLayout does on a cache miss). */
export function splitLayoutBucket(member: BundleMember, layout: BundleLayout): BundlePart[] {
  return splitBucket(member.list, layout.maxPart);
}

export function shardBundles(
  accounts: readonly BundleAccount[],
  opts: BundleShardOptions = {},
): { buckets: number; objects: BundleObject[] } {
  return bundlesFromLayout(layoutBundles(accounts, opts), opts);
}

/**
 * The second half: the objects. Linear hashing leaves unsplit buckets at twice the target, so oversized buckets
 * are common: they are split once per content, not on every compile (docs/operator.md has what that saved). A caller that must not hold the event loop long splits the missing ones into the cache first.
 */
export function bundlesFromLayout(
  layout: BundleLayout,
  opts: BundleShardOptions = {},
): { buckets: number; objects: BundleObject[] } {
  const objects: BundleObject[] = [];
  const cache = new LayoutPassCache(opts.cache);
  let overflow = layout.buckets;
  for (const member of layout.members) {
    const { bucket, list, bytes, digest, splitKey, accounts: accountNames } = member;
    if (splitKey === undefined) {
      objects.push({
        name: bundleName(bucket),
        bucket,
        part: 0,
        entries: () => entriesOf(list.flatMap((a) => a.entries)),
        sha256: digest,
        bytes,
        accounts: accountNames,
      });
      continue;
    }
    const parts = cache.get(splitKey, () => splitLayoutBucket(member, layout));
    parts.forEach((p, part) => {
      objects.push({
        name: bundleName(part === 0 ? bucket : overflow++),
        bucket,
        part,
        entries: () => entriesOf(p.items),
        sha256: p.sha256,
        bytes: p.bytes,
        accounts: accountNames,
      });
    });
  }
  cache.evictUnused();
  return { buckets: layout.buckets, objects };
}

function splitBucket(list: readonly BundleAccount[], maxPart: number): BundlePart[] {
  const parts: BundlePart[] = [];
  let items: SealedEntry[] = [];
  let size = 0;
  const emit = () => {
    parts.push({ items, sha256: sha256Hex(canonicalJson(entriesOf(items))), bytes: size });
    items = [];
    size = 0;
  };
  for (const account of list) {
    for (const e of account.entries) {
      const entryBytes = e.length + e.id.length;
      if (size > 0 && size + entryBytes > maxPart) emit();
      items.push(e);
      size += entryBytes;
    }
  }
  emit();
  return parts;
}

/** A bundle Secret's data: credentialId -> envelope JSON. */
function entriesOf(items: readonly SealedEntry[]): Record<string, string> {
  return Object.fromEntries(items.map((e) => [e.id, e.envelope]));
}
