// The account cache: every account's serialized routing and sealed bundle as of its last compile, kept placed in
// shard and bundle buckets so a run lays out only the buckets whose accounts changed, and what a
// gateway pod must hold of each credential for it to count as delivered.
import { createHash } from 'node:crypto';
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import {
  type BundleAccount,
  type BundleShardOptions,
  incrementalBundleLayout,
  sealAccount,
} from '../../bundle/bundle.ts';
import { compileAccount } from '../../compiler/compile.ts';
import {
  incrementalShardLayout,
  ownBuffer,
  type SerializedAccount,
  type ShardOptions,
  serializeAccount,
} from '../../compiler/shard.ts';
import { envelopeVersion, type Keyring } from '../../contract/envelope.ts';
import { sha256Hex } from '../../contract/routing.ts';
import { normalizeKeyHash } from '../../domain/api-keys.ts';
import type { CompiledApiKey, CompiledCredential } from '../../domain/compiled.ts';
import type { QuarantineBook } from './quarantine.ts';
import type { AccountStateSource, ApiKeyDelivery, CompilePipelineOptions, CredentialDelivery } from './types.ts';

/** One credential's compiled routing entry: its digest, and the compile run whose index first carried it. */
export interface RoutingMark {
  digest: string;
  since: number;
}

export interface AccountEntry {
  serialized: SerializedAccount;
  bundle: BundleAccount;
  /** Inputs to the bundle (credential id -> payload digest) + key id: reseal only when they change. */
  bundleFingerprint: string;
  /** Per credential id; the same map while the account's serialized routing is unchanged. */
  routing: ReadonlyMap<string, RoutingMark>;
  /** Per GatewayAPIKey hash of the account (live or not); the same map while the serialized routing is unchanged. */
  keys: ReadonlyMap<string, RoutingMark>;
}

/** What was compiled from: a quarantined account is held back until this changes. */
export const entryDigest = (e: AccountEntry): string => `${e.serialized.sha256}:${e.bundleFingerprint}`;

/**
 * A serialized account kept between runs with its JSON deflated: shards are re-encoded only for changed buckets
 * (the encoded-bucket cache serves the rest), so the JSON is read rarely, while every account's copy is held
 * for the life of the process (~0.4 KB per credential as text, about a fifth of that deflated).
 */
function keptSerialized(s: SerializedAccount): SerializedAccount {
  // zlib's sync output is a slice of its 64 KB output chunk: kept as is, each account held a whole chunk
  // (83 MB at 3,000 accounts). An exact-size copy holds only the ~1 KB it needs.
  const deflated = ownBuffer(deflateRawSync(s.json, { level: 1 }));
  return {
    namespace: s.namespace,
    sha256: s.sha256,
    bytes: s.bytes,
    hash: s.hash,
    get json() {
      return inflateRawSync(deflated).toString('utf8');
    },
  };
}

/** 16 hex digits of a sha256, as a string of its own (a slice of the full hex would keep all 64 alive, per credential). */
const shortDigest = (text: string): string => createHash('sha256').update(text).digest().toString('hex', 0, 8);

/**
 * Marks for the credentials of a changed account: an entry whose digest is unchanged keeps its mark (and its
 * `since`), a new or changed one gets `since`. Only asked when the account's serialized routing changed.
 */
export function routingMarks(
  credentials: readonly CompiledCredential[],
  ids: readonly string[],
  previous: ReadonlyMap<string, RoutingMark> | undefined,
  since: number,
): ReadonlyMap<string, RoutingMark> {
  const marks = new Map<string, RoutingMark>();
  for (let i = 0; i < credentials.length; i++) {
    const id = ids[i]!;
    const digest = shortDigest(JSON.stringify(credentials[i]));
    const prev = previous?.get(id);
    marks.set(id, prev?.digest === digest ? prev : { digest, since });
  }
  return marks;
}

/** What a key that is not compiled (disabled, expired, conflicting, or its workspace missing) compiles to. */
const NOT_ROUTED = 'not-routed';

/**
 * Marks for the GatewayAPIKeys of a changed account, by hash: the digest of the key's compiled entry (or of its
 * absence, for a key that is not live), kept with its `since` while unchanged, like routingMarks.
 */
export function apiKeyMarks(
  compiled: readonly CompiledApiKey[],
  hashes: Iterable<string>,
  previous: ReadonlyMap<string, RoutingMark> | undefined,
  since: number,
): ReadonlyMap<string, RoutingMark> {
  const entries = new Map(compiled.map((k) => [k.hash, k]));
  const marks = new Map<string, RoutingMark>();
  for (const hash of hashes) {
    const entry = entries.get(hash);
    const digest = shortDigest(entry ? JSON.stringify(entry) : `${NOT_ROUTED}\n${hash}`);
    const prev = previous?.get(hash);
    marks.set(hash, prev?.digest === digest ? prev : { digest, since });
  }
  return marks;
}

/** The delivery version of one credential: moves with its envelope (payload, key) and with its routing entry. */
export const deliveryVersion = (envelope: string, mark: RoutingMark | undefined): string =>
  mark ? shortDigest(`${envelope}\n${mark.digest}`) : envelope;

export class AccountCache {
  private readonly entries = new Map<string, AccountEntry>();
  // The accounts placed in shard and bundle buckets, kept in step with `entries` by set(): a run lays out only the
  // buckets whose accounts changed.
  readonly shardPlacement: ReturnType<typeof incrementalShardLayout>;
  readonly bundlePlacement: ReturnType<typeof incrementalBundleLayout>;
  /** Envelope versions per sealed bundle (a bundle object is replaced when resealed, so the cache follows it). */
  private readonly versionCache = new WeakMap<BundleAccount, ReadonlyMap<string, string>>();
  private readonly deliveryCache = new WeakMap<AccountEntry, ReadonlyMap<string, CredentialDelivery>>();
  private readonly keyDeliveryCache = new WeakMap<
    ReadonlyMap<string, RoutingMark>,
    ReadonlyMap<string, ApiKeyDelivery>
  >();

  private readonly onCompiled: CompilePipelineOptions['onAccountCompiled'];

  constructor(
    shardOptions: Omit<ShardOptions, 'previousBuckets' | 'cache'> | undefined,
    bundleShardOptions: Omit<BundleShardOptions, 'previousBuckets' | 'cache'> | undefined,
    onCompiled?: CompilePipelineOptions['onAccountCompiled'],
  ) {
    this.onCompiled = onCompiled;
    this.shardPlacement = incrementalShardLayout(shardOptions);
    this.bundlePlacement = incrementalBundleLayout(bundleShardOptions);
  }

  get size(): number {
    return this.entries.size;
  }

  get(ns: string): AccountEntry | undefined {
    return this.entries.get(ns);
  }

  namespaces(): IterableIterator<string> {
    return this.entries.keys();
  }

  set(ns: string, entry: AccountEntry | undefined): void {
    if (entry) this.entries.set(ns, entry);
    else this.entries.delete(ns);
    this.shardPlacement.set(ns, entry?.serialized);
    this.bundlePlacement.set(ns, entry?.bundle);
  }

  /**
   * Compiles one dirty namespace into the cache (`isAccount` false: it left). `since` is the run number that
   * changed routing entries get. A quarantined account whose input is unchanged is left as it is.
   */
  compile(
    ns: string,
    isAccount: boolean,
    ring: Keyring,
    source: AccountStateSource,
    quarantine: QuarantineBook<AccountEntry>,
    since: number,
  ): void {
    if (!isAccount) {
      this.set(ns, undefined);
      this.onCompiled?.(ns, undefined);
      return;
    }
    const snap = source.snapshot(ns);
    const compiled = compileAccount(snap);
    this.onCompiled?.(ns, { snapshot: snap, account: compiled });
    const serialized = serializeAccount(compiled);
    const inputs = new Map<string, { payload: string; statusId: string | undefined }>();
    for (const c of snap.credentials) {
      if (c.verdict.payload !== undefined)
        inputs.set(c.resource.metadata.name ?? '', { payload: c.verdict.payload, statusId: c.resource.status?.id });
    }
    // The id string the cached status already holds, when it is the same id: the sealed entry keeps it for the
    // life of the process, and a copy per credential is 5.6 MB at 100k.
    const sealed = compiled.credentials.map((c) => {
      const input = inputs.get(c.name);
      return { id: input?.statusId === c.id ? input.statusId : c.id, payload: input?.payload ?? '' };
    });
    // Digests only (never the payload) decide whether to reseal; sealing is deterministic anyway.
    const fingerprint = sha256Hex(`${ring.active}\n${sealed.map((s) => `${s.id}:${sha256Hex(s.payload)}`).join('\n')}`);
    // A quarantined account whose input did not change stays held back: the same bytes would be refused again.
    if (quarantine.holdsBack(ns, `${serialized.sha256}:${fingerprint}`)) return;
    const prev = this.entries.get(ns);
    const bundle = prev && prev.bundleFingerprint === fingerprint ? prev.bundle : sealAccount(ring, ns, sealed);
    // Unchanged parts stay the same objects: their buckets are not laid out again (e.g. the periodic resync).
    const same = prev !== undefined && prev.serialized.sha256 === serialized.sha256;
    const kept = same ? prev.serialized : keptSerialized(serialized);
    // A key that is not routed changes no routing bytes but still gets a version (a new disabled key is delivered).
    const hashes = snap.apiKeys.map((k) => normalizeKeyHash(k.spec.hash));
    const keys =
      same && hashes.length === prev.keys.size && hashes.every((h) => prev.keys.has(h))
        ? prev.keys
        : apiKeyMarks(compiled.apiKeys, hashes, prev?.keys, since);
    if (prev && kept === prev.serialized && bundle === prev.bundle && keys === prev.keys) return;
    const routing = same
      ? prev.routing
      : routingMarks(
          compiled.credentials,
          sealed.map((s) => s.id),
          prev?.routing,
          since,
        );
    this.set(ns, { serialized: kept, bundle, bundleFingerprint: fingerprint, routing, keys });
  }

  credentialVersions(ns: string): ReadonlyMap<string, string> | undefined {
    const bundle = this.entries.get(ns)?.bundle;
    if (!bundle) return undefined;
    let versions = this.versionCache.get(bundle);
    if (!versions)
      this.versionCache.set(
        bundle,
        (versions = new Map(bundle.entries.map((e) => [e.id, envelopeVersion(e.envelope)]))),
      );
    return versions;
  }

  /** By key hash: the version of each GatewayAPIKey's compiled entry and the run whose index first carried it. */
  apiKeyDelivery(ns: string): ReadonlyMap<string, ApiKeyDelivery> | undefined {
    const keys = this.entries.get(ns)?.keys;
    if (!keys) return undefined;
    let delivery = this.keyDeliveryCache.get(keys);
    if (!delivery)
      this.keyDeliveryCache.set(
        keys,
        (delivery = new Map([...keys].map(([hash, m]) => [hash, { version: m.digest, since: m.since }]))),
      );
    return delivery;
  }

  credentialDelivery(ns: string): ReadonlyMap<string, CredentialDelivery> | undefined {
    const entry = this.entries.get(ns);
    if (!entry) return undefined;
    let delivery = this.deliveryCache.get(entry);
    if (!delivery) {
      const out = new Map<string, CredentialDelivery>();
      for (const [id, envelope] of this.credentialVersions(ns)!) {
        const mark = entry.routing.get(id);
        out.set(id, { version: deliveryVersion(envelope, mark), envelope, since: mark?.since ?? 0 });
      }
      this.deliveryCache.set(entry, (delivery = out));
    }
    return delivery;
  }
}
