// The routing writer: lays the placed accounts out into shard ConfigMaps and bundle Secrets, diffs them against
// what is known to be in the cluster and writes only the changed ones. Order per run: bundle Secrets and shard
// ConfigMaps first, the index last (a gateway that sees the new index finds every shard it names), then stale
// objects are deleted. Writes are compared by sha256 against what is known to be in the cluster, so an unchanged
// shard is never rewritten, even after an operator restart.
import type { KubernetesObject } from '@kubernetes/client-node';
import {
  type BundleAccount,
  type BundleLayout,
  type BundleObject,
  type BundlePart,
  type BundleShardOptions,
  bundlesFromLayout,
  shardBundles,
  splitLayoutBucket,
} from '../../bundle/bundle.ts';
import {
  type EncodedBucket,
  encodeLayoutBucket,
  type SerializedAccount,
  type ShardLayout,
  type ShardObject,
  type ShardOptions,
  type ShardSet,
  shardFromLayout,
  shardSerialized,
} from '../../compiler/shard.ts';
import { canonicalJson } from '../../contract/canonical-json.ts';
import { INDEX_KEY, INDEX_NAME, ROUTING_LABEL, SHA_ANNOTATION } from '../../contract/routing.ts';
import type { KubeApiError } from '../../kube/client.ts';
import { yieldToEventLoop } from '../event-loop.ts';
import type { CompileMetrics } from './metrics.ts';
import { isRefusal } from './quarantine.ts';
import type { RoutingStore, StoredKind } from './store.ts';

/** Bounds the isolation rounds of one run; each round quarantines at least one account or gives up. */
const MAX_ISOLATION_ROUNDS = 4;

export async function limited<T>(
  items: readonly T[],
  concurrency: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const workers = Array.from({ length: Math.min(concurrency, items.length) }, async () => {
    while (next < items.length) await fn(items[next++]!);
  });
  await Promise.all(workers);
}

/** A shard or bundle write the apiserver refused for its content, with the accounts in that object. */
export interface RefusedWrite {
  kind: StoredKind;
  name: string;
  accounts: readonly string[];
  err: KubeApiError;
}

export interface WriteOutcome {
  shardSet: ShardSet;
  bundleSet: { buckets: number; objects: BundleObject[] };
  shardWrites: number;
  bundleWrites: number;
  indexWritten: boolean;
  deleted: number;
}

export interface RoutingWriterOptions {
  store: RoutingStore;
  namespace: string;
  /** The bundle key Secret: labelled like the bundles, never a stale one. */
  keySecret: string;
  concurrency: number;
  metrics: CompileMetrics;
  shardOptions?: Omit<ShardOptions, 'previousBuckets' | 'cache'>;
  bundleShardOptions?: Omit<BundleShardOptions, 'previousBuckets' | 'cache'>;
}

export class RoutingWriter {
  /** name -> sha256 of what is in the cluster (per kind). */
  private readonly known: Record<StoredKind, Map<string, string | undefined>> = {
    ConfigMap: new Map(),
    Secret: new Map(),
  };
  private readonly shardCache = new Map<string, EncodedBucket>();
  private readonly bundleCache = new Map<string, BundlePart[]>();
  private buckets: number | undefined;
  private bundleBuckets: number | undefined;
  private indexVersion: string | undefined;

  private readonly opts: RoutingWriterOptions;

  constructor(opts: RoutingWriterOptions) {
    this.opts = opts;
  }

  /** Index version last written or found unchanged by a successful write(). */
  get version(): string | undefined {
    return this.indexVersion;
  }

  /** Loads what is already in the cluster, so nothing unchanged is rewritten after a restart. */
  async load(): Promise<void> {
    for (const kind of ['ConfigMap', 'Secret'] as const) {
      this.known[kind].clear();
      for (const o of await this.opts.store.list(kind)) this.known[kind].set(o.name, o.sha256);
    }
    // The key Secret carries the routing label but is never a stale bundle.
    this.known.Secret.delete(this.opts.keySecret);
  }

  /** Names of the live shard ConfigMaps and bundle Secrets. */
  objects(): { configMaps: string[]; bundles: string[] } {
    return { configMaps: [...this.known.ConfigMap.keys()].sort(), bundles: [...this.known.Secret.keys()].sort() };
  }

  /**
   * Writes the current placement. When the apiserver refuses an object for its content, `isolate` quarantines the
   * account(s) responsible (returning how many) and the shards are laid out again without them: one account can
   * never hold back the others in its shard. Throws on any other failure; `known` records only confirmed writes.
   */
  async write(
    layouts: (
      buckets: number | undefined,
      bundleBuckets: number | undefined,
    ) => { shards: ShardLayout; bundles: BundleLayout },
    isolate: (refused: RefusedWrite) => Promise<number>,
  ): Promise<WriteOutcome> {
    const { known, shardCache, bundleCache, opts } = this;
    const m = opts.metrics;
    let shardSet!: ShardSet;
    let bundleSet!: ReturnType<typeof shardBundles>;
    let shardWriteCount = 0;
    let bundleWriteCount = 0;
    for (let round = 0; ; round++) {
      const { shards: shardLayout, bundles: bundleLayout } = layouts(this.buckets, this.bundleBuckets);
      // Buckets whose content changed are encoded (gzip) or split one at a time, between other work: after a
      // 100k cold start ~60 shards and ~45 bundles changed in one run, 0.3-1 s of CPU in one piece.
      for (const member of shardLayout.members) {
        if (shardCache.has(member.fingerprint)) continue;
        const turn = yieldToEventLoop();
        if (turn) await turn;
        shardCache.set(member.fingerprint, encodeLayoutBucket(member, shardLayout));
      }
      for (const member of bundleLayout.members) {
        if (member.splitKey === undefined || bundleCache.has(member.splitKey)) continue;
        const turn = yieldToEventLoop();
        if (turn) await turn;
        bundleCache.set(member.splitKey, splitLayoutBucket(member, bundleLayout));
      }
      // The bucket counts went into the layouts; what is left is the part size (shards) and the caches.
      shardSet = shardFromLayout(shardLayout, { ...opts.shardOptions, cache: shardCache });
      bundleSet = bundlesFromLayout(bundleLayout, { cache: bundleCache });
      const shardWrites = shardSet.shards.filter((s) => known.ConfigMap.get(s.name) !== s.sha256);
      const bundleWrites = bundleSet.objects.filter((b) => known.Secret.get(b.name) !== b.sha256);
      const refused: RefusedWrite[] = [];
      await limited(
        [
          ...bundleWrites.map((b) => ({ kind: 'Secret' as const, b })),
          ...shardWrites.map((s) => ({ kind: 'ConfigMap' as const, s })),
        ],
        opts.concurrency,
        async (w) => {
          try {
            if (w.kind === 'Secret') {
              await opts.store.apply(this.secretFor(w.b));
              known.Secret.set(w.b.name, w.b.sha256);
              m.secretWrites.inc({ op: 'apply' });
              bundleWriteCount++;
            } else {
              await opts.store.apply(this.configMapFor(w.s));
              known.ConfigMap.set(w.s.name, w.s.sha256);
              m.cmWrites.inc({ op: 'apply', object: 'shard' });
              shardWriteCount++;
            }
          } catch (err) {
            if (!isRefusal(err)) throw err;
            const o = w.kind === 'Secret' ? w.b : w.s;
            refused.push({ kind: w.kind, name: o.name, accounts: o.accounts, err });
          }
        },
      );
      if (refused.length === 0) break;
      let isolated = 0;
      if (round < MAX_ISOLATION_ROUNDS) for (const r of refused) isolated += await isolate(r);
      if (isolated === 0) throw refused[0]!.err;
    }
    const indexWritten = known.ConfigMap.get(INDEX_NAME) !== shardSet.index.version;
    if (indexWritten) {
      await opts.store.apply({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: {
          name: INDEX_NAME,
          namespace: opts.namespace,
          labels: { [ROUTING_LABEL]: 'index' },
          annotations: { [SHA_ANNOTATION]: shardSet.index.version },
        },
        data: { [INDEX_KEY]: canonicalJson(shardSet.index) },
      } as KubernetesObject);
      known.ConfigMap.set(INDEX_NAME, shardSet.index.version);
      m.cmWrites.inc({ op: 'apply', object: 'index' });
    }

    const wantCm = new Set([INDEX_NAME, ...shardSet.shards.map((s) => s.name)]);
    const wantSecret = new Set([opts.keySecret, ...bundleSet.objects.map((b) => b.name)]);
    const stale = [
      ...[...known.ConfigMap.keys()]
        .filter((n) => !wantCm.has(n))
        .map((name) => ({ kind: 'ConfigMap' as const, name })),
      ...[...known.Secret.keys()].filter((n) => !wantSecret.has(n)).map((name) => ({ kind: 'Secret' as const, name })),
    ];
    await limited(stale, opts.concurrency, async ({ kind, name }) => {
      await opts.store.delete(kind, name);
      known[kind].delete(name);
      if (kind === 'ConfigMap') m.cmWrites.inc({ op: 'delete', object: 'shard' });
      else m.secretWrites.inc({ op: 'delete' });
    });

    this.buckets = shardSet.index.buckets;
    this.bundleBuckets = bundleSet.buckets;
    this.indexVersion = shardSet.index.version;
    return {
      shardSet,
      bundleSet,
      shardWrites: shardWriteCount,
      bundleWrites: bundleWriteCount,
      indexWritten,
      deleted: stale.length,
    };
  }

  /** Whether the apiserver accepts one account's part on its own (server-side dry run of a one-account layout). */
  async refusedAlone(
    kind: StoredKind,
    part: { serialized: SerializedAccount; bundle: BundleAccount },
  ): Promise<KubeApiError | undefined> {
    const objects =
      kind === 'ConfigMap'
        ? shardSerialized([part.serialized], { ...this.opts.shardOptions }).shards.map((s) => this.configMapFor(s))
        : shardBundles([part.bundle], { ...this.opts.bundleShardOptions }).objects.map((b) => this.secretFor(b));
    for (const o of objects) {
      try {
        await this.opts.store.apply(o, { dryRun: true });
      } catch (err) {
        if (isRefusal(err)) return err;
        throw err;
      }
    }
    return undefined;
  }

  private configMapFor(s: ShardObject): KubernetesObject {
    return {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name: s.name,
        namespace: this.opts.namespace,
        labels: { [ROUTING_LABEL]: 'shard' },
        annotations: { [SHA_ANNOTATION]: s.sha256 },
      },
      ...(s.encoding === 'json'
        ? { data: { [s.key]: s.data.toString('utf8') } }
        : { binaryData: { [s.key]: s.data.toString('base64') } }),
    } as KubernetesObject;
  }

  private secretFor(b: BundleObject): KubernetesObject {
    return {
      apiVersion: 'v1',
      kind: 'Secret',
      type: 'Opaque',
      metadata: {
        name: b.name,
        namespace: this.opts.namespace,
        labels: { [ROUTING_LABEL]: 'bundle' },
        annotations: { [SHA_ANNOTATION]: b.sha256 },
      },
      data: Object.fromEntries(
        Object.entries(b.entries()).map(([id, env]) => [id, Buffer.from(env, 'utf8').toString('base64')]),
      ),
    } as KubernetesObject;
  }
}

/** Slots needed for objects numbered `<prefix>-<n>`: the highest n + 1 (numbers are dense from 0). */
export function slotsFor(names: readonly string[]): number {
  let max = -1;
  for (const name of names) {
    const n = Number(/-(\d+)$/.exec(name)?.[1] ?? -1);
    if (n > max) max = n;
  }
  return max + 1;
}
