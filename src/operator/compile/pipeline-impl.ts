// The compile pipeline: dirty accounts -> compileAccount -> shards + sealed bundles -> only the changed objects.
// Order per run: bundle Secrets and shard ConfigMaps first, the index last (a gateway that sees the new index
// finds every shard it names), then stale objects are deleted. Writes are compared by sha256 against what is
// known to be in the cluster, so an unchanged shard is never rewritten, even after an operator restart.
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import type { KubernetesObject } from '@kubernetes/client-node';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { compileAccount } from '../../compiler/compile.ts';
import { canonicalJson } from '../../contract/canonical-json.ts';
import { INDEX_KEY, INDEX_NAME, ROUTING_LABEL, SHA_ANNOTATION, sha256Hex } from '../../contract/routing.ts';
import { encodeLayoutBucket, incrementalShardLayout, ownBuffer, serializeAccount, shardFromLayout, shardSerialized, type EncodedBucket, type SerializedAccount, type ShardObject } from '../../compiler/shard.ts';
import { bundlesFromLayout, incrementalBundleLayout, sealAccount, shardBundles, splitLayoutBucket, type BundleAccount, type BundleObject, type BundlePart } from '../../bundle/bundle.ts';
import { DEFAULT_BUNDLE_KEY_SECRET, envelopeVersion, type Keyring } from '../../contract/envelope.ts';
import { yieldToEventLoop } from '../event-loop.ts';
import { childLogger } from '../logger.ts';
import { ensureBundleKey } from './bundle-key.ts';
import { kubeRoutingStore, type RoutingStore, type StoredKind } from './store.ts';
import type { CompilePipeline, CompilePipelineOptions, CompileResult, Quarantine } from './pipeline.ts';
import { KubeApiError } from '../../kube/client.ts';

interface AccountEntry {
  serialized: SerializedAccount;
  bundle: BundleAccount;
  /** Inputs to the bundle (credential id -> payload digest) + key id: reseal only when they change. */
  bundleFingerprint: string;
}

/**
 * A serialized account kept between runs with its JSON deflated: shards are re-encoded only for changed buckets
 * (the encoded-bucket cache serves the rest), so the JSON is read rarely, while every account's copy is held
 * for the life of the process (~0.4 KB per credential as text, about a fifth of that deflated; issue 11).
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

interface Metrics {
  duration: Histogram;
  bytes: Gauge;
  shards: Gauge;
  accounts: Gauge;
  cmWrites: Counter;
  secretWrites: Counter;
  errors: Counter;
  quarantined: Gauge;
}

function metrics(registry: Registry): Metrics {
  const registers = [registry];
  const get = <T>(name: string, make: () => T): T => (registry.getSingleMetric(name) as T | undefined) ?? make();
  return {
    duration: get('byok_compile_duration_seconds', () => new Histogram({
      name: 'byok_compile_duration_seconds',
      help: 'Time from taking dirty accounts to all changed routing objects written.',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    })),
    bytes: get('byok_routing_config_bytes', () => new Gauge({ name: 'byok_routing_config_bytes', help: 'Stored bytes of the compiled routing config.', labelNames: ['kind'], registers })),
    shards: get('byok_routing_shards', () => new Gauge({ name: 'byok_routing_shards', help: 'Routing objects currently written.', labelNames: ['kind'], registers })),
    accounts: get('byok_compiled_accounts', () => new Gauge({ name: 'byok_compiled_accounts', help: 'Accounts in the compiled routing config.', registers })),
    cmWrites: get('byok_configmap_writes_total', () => new Counter({ name: 'byok_configmap_writes_total', help: 'Routing ConfigMap writes.', labelNames: ['op', 'object'], registers })),
    secretWrites: get('byok_bundle_secret_writes_total', () => new Counter({ name: 'byok_bundle_secret_writes_total', help: 'Credential bundle Secret writes.', labelNames: ['op'], registers })),
    errors: get('byok_compile_errors_total', () => new Counter({ name: 'byok_compile_errors_total', help: 'Compile runs that failed (retried with backoff).', registers })),
    quarantined: get('byok_quarantined_accounts', () => new Gauge({ name: 'byok_quarantined_accounts', help: 'Accounts whose routing the apiserver refused to store; they keep their last good state while every other account compiles.', registers })),
  };
}

/** A write the apiserver refuses for its content: retrying the same bytes cannot succeed. */
function isRefusal(err: unknown): err is KubeApiError {
  return err instanceof KubeApiError && (err.status === 400 || err.status === 413 || err.status === 422);
}

/** The apiserver's message without quoted values (field errors can quote the refused value). */
function refusalMessage(err: KubeApiError): string {
  const text = (err.body?.message ?? '').replace(/"(?:[^"\\]|\\.)*"/g, '"…"').replace(/\s+/g, ' ');
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
}

/** How often a run held back for a reconcile backlog checks whether the backlog has cleared. */
const BACKLOG_POLL_MS = 250;

/** Bounds the isolation rounds of one run; each round quarantines at least one account or gives up. */
const MAX_ISOLATION_ROUNDS = 4;

async function limited<T>(items: readonly T[], concurrency: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const workers = Array.from({ length: Math.min(concurrency, items.length) }, async () => {
    while (next < items.length) await fn(items[next++]!);
  });
  await Promise.all(workers);
}

export function createCompilePipeline(opts: CompilePipelineOptions): CompilePipeline {
  const namespace = opts.routingNamespace;
  const log = childLogger(opts.logger, { component: 'compile' });
  const store: RoutingStore = opts.store ?? kubeRoutingStore(opts.kubeConfig, namespace, opts.applier);
  const m = metrics(opts.registry ?? new Registry());
  const coalesceMs = opts.coalesceMs ?? 20;
  const keySecret = opts.bundleKeySecretName ?? DEFAULT_BUNDLE_KEY_SECRET;
  const keyReloadMs = opts.keyReloadMs ?? 10_000;
  const keyPollMs = opts.keyPollMs ?? 4_000;
  const concurrency = opts.writeConcurrency ?? 8;

  const accounts = new Map<string, AccountEntry>();
  // The accounts placed in shard and bundle buckets, kept in step with `accounts` by setAccount: a run lays out
  // only the buckets whose accounts changed.
  const shardPlacement = incrementalShardLayout(opts.shardOptions);
  const bundlePlacement = incrementalBundleLayout(opts.bundleShardOptions);
  const setAccount = (ns: string, entry: AccountEntry | undefined) => {
    if (entry) accounts.set(ns, entry);
    else accounts.delete(ns);
    shardPlacement.set(ns, entry?.serialized);
    bundlePlacement.set(ns, entry?.bundle);
  };
  /** Each account's entry as of the last write that included it: what a quarantined account keeps. */
  const lastGood = new Map<string, AccountEntry>();
  /** Quarantined accounts, with the digest of the input that was refused (retried only when it changes). */
  const quarantined = new Map<string, Quarantine & { refused: string }>();
  const retrying = new Set<string>();
  const dirty = new Set<string>();
  /** name -> sha256 of what is in the cluster (per kind). */
  const known: Record<StoredKind, Map<string, string | undefined>> = { ConfigMap: new Map(), Secret: new Map() };
  const shardCache = new Map<string, EncodedBucket>();
  const bundleCache = new Map<string, BundlePart[]>();
  const listeners = new Set<(r: CompileResult) => void>();
  let keyring: Keyring | undefined;
  let keyReadAt = 0;
  let buckets: number | undefined;
  let bundleBuckets: number | undefined;
  let version: string | undefined;
  let started = false;
  let timer: NodeJS.Timeout | undefined;
  let keyPoll: NodeJS.Timeout | undefined;
  let running: Promise<CompileResult | undefined> | undefined;
  let failures = 0;
  let lastResult: CompileResult | undefined;
  /** Duration of the last run: the next one waits at least this long, so compiling (and writing) takes at most
   *  about half the time while changes keep arriving, e.g. during a cold start of thousands of credentials. */
  let lastRunMs = 0;
  /** Runs after which changes were already waiting again, in the current stream of changes (e.g. a cold start):
   *  the wait before the next run doubles from coalesceMs per such run, up to maxBatchDelayMs, so a sustained
   *  stream is written in fewer, larger batches (every rewrite of a shard costs the apiserver the whole shard).
   *  The stream ends with the first run after which nothing is waiting: the pipeline is idle, and the next change
   *  waits only coalesceMs whatever came before. (Ending it on a quiet period instead kept a steady trickle of
   *  one change every 0.7 s at the 640 ms batch delay forever after a cold start.) */
  let busyRuns = 0;
  const maxBatchDelayMs = opts.maxBatchDelayMs ?? 1000;
  const batchDelay = () => Math.max(coalesceMs, Math.min(maxBatchDelayMs, coalesceMs * 2 ** Math.min(busyRuns, 16)));

  const schedule = (delay = coalesceMs) => {
    if (!started || timer || running) return;
    timer = setTimeout(() => {
      timer = undefined;
      void drive();
    }, delay);
    timer.unref?.();
  };

  /** `endsHold`: the run holdForBacklog starts once the backlog has cleared. */
  const drive = (endsHold = false): Promise<CompileResult | undefined> => {
    if (running) return running;
    running = runOnce().finally(() => {
      running = undefined;
      if (dirty.size === 0) {
        busyRuns = 0;
        return;
      }
      busyRuns++;
      if (failures > 0) schedule(Math.min(10_000, 100 * 2 ** failures));
      else if (opts.backlog?.()) holdForBacklog();
      else if (endsHold) {
        // The backlog is gone and the held run batched it: what arrived during that run (seconds, at 100k) is
        // ordinary traffic again. Waiting the batch delay or the run's length here held the first changes after
        // a 100k cold start for 0.6-1.3 s (issue 11).
        busyRuns = 0;
        schedule();
      } else schedule(Math.max(batchDelay(), Math.min(lastRunMs, 2000)));
    });
    return running;
  };

  /**
   * While the reconcilers are backed up (a cold start, a mass rotation), the next run waits for the backlog to
   * clear, or backlogDelayMs at most. Every run rewrites each bundle Secret one of its accounts touched, whole
   * (SSA of ~900 keys): at 100k credentials, runs 5 s apart still wrote bundles 1,401 times, +21 % apiserver
   * time over the floor. Once the backlog clears, the run starts within BACKLOG_POLL_MS.
   */
  const holdForBacklog = () => {
    if (!started || timer || running) return;
    const until = performance.now() + (opts.backlogDelayMs ?? 30_000);
    const check = () => {
      timer = undefined;
      if (!started || running) return;
      if (opts.backlog?.() && performance.now() < until) {
        timer = setTimeout(check, BACKLOG_POLL_MS);
        timer.unref?.();
        return;
      }
      void drive(!opts.backlog?.());
    };
    timer = setTimeout(check, BACKLOG_POLL_MS);
    timer.unref?.();
  };

  const refreshKeys = async () => {
    if (keyring && Date.now() - keyReadAt < keyReloadMs) return;
    const next = await ensureBundleKey(store, namespace, keySecret);
    if (keyring && next.active !== keyring.active) {
      log.info({ keyId: next.active }, 'bundle key rotated: resealing all credential bundles');
      for (const ns of accounts.keys()) dirty.add(ns);
    }
    keyring = next;
    keyReadAt = Date.now();
  };

  /** A rotation must reseal even when nothing else changes: compile runs only start when something is dirty,
   *  so the key Secret is also read on its own timer (one GET per keyPollMs; a watch would cost a long-lived
   *  connection per replica for a Secret that changes a few times a year). */
  const pollKey = async () => {
    if (!started || running) return;
    try {
      keyReadAt = 0;
      await refreshKeys();
      if (dirty.size > 0) schedule();
    } catch (err) {
      log.warn({ err: err instanceof Error ? err.message : String(err) }, 'reading the bundle key Secret failed; retrying on the next poll');
    }
  };

  const compileOne = (ns: string, isAccount: boolean, ring: Keyring) => {
    if (!isAccount) {
      setAccount(ns, undefined);
      return;
    }
    const snap = opts.source.snapshot(ns);
    const compiled = compileAccount(snap);
    const serialized = serializeAccount(compiled);
    const inputs = new Map<string, { payload: string; statusId: string | undefined }>();
    for (const c of snap.credentials) {
      if (c.verdict.payload !== undefined) inputs.set(c.resource.metadata.name ?? '', { payload: c.verdict.payload, statusId: c.resource.status?.id });
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
    const q = quarantined.get(ns);
    if (q?.refused === `${serialized.sha256}:${fingerprint}`) return;
    // Changed input of a quarantined account: try it again; it is released once a write including it lands.
    if (q) retrying.add(ns);
    const prev = accounts.get(ns);
    const bundle = prev && prev.bundleFingerprint === fingerprint ? prev.bundle : sealAccount(ring, ns, sealed);
    // Unchanged parts stay the same objects: their buckets are not laid out again (e.g. the periodic resync).
    const kept = prev && prev.serialized.sha256 === serialized.sha256 ? prev.serialized : keptSerialized(serialized);
    if (prev && kept === prev.serialized && bundle === prev.bundle) return;
    setAccount(ns, { serialized: kept, bundle, bundleFingerprint: fingerprint });
  };

  /** Whether a namespace is an account: asked of the source per namespace when it can, else from one listing. */
  const liveCheck = (): ((ns: string) => boolean) => {
    const source = opts.source;
    if (source.isAccountNamespace) return (ns) => source.isAccountNamespace!(ns);
    const all = new Set(source.accountNamespaces());
    return (ns) => all.has(ns);
  };

  /** Envelope versions per sealed bundle (a bundle object is replaced when resealed, so the cache follows it). */
  const versionCache = new WeakMap<BundleAccount, ReadonlyMap<string, string>>();

  const entryDigest = (e: AccountEntry) => `${e.serialized.sha256}:${e.bundleFingerprint}`;

  /** Whether the apiserver accepts this account's part on its own (server-side dry run of a one-account layout). */
  const refusedAlone = async (kind: 'ConfigMap' | 'Secret', entry: AccountEntry): Promise<KubeApiError | undefined> => {
    const objects =
      kind === 'ConfigMap'
        ? shardSerialized([entry.serialized], { ...opts.shardOptions }).shards.map(configMapFor)
        : shardBundles([entry.bundle], { ...opts.bundleShardOptions }).objects.map(secretFor);
    for (const o of objects) {
      try {
        await store.apply(o, { dryRun: true });
      } catch (err) {
        if (isRefusal(err)) return err;
        throw err;
      }
    }
    return undefined;
  };

  /**
   * A shared write was refused for its content: find the account(s) of that object whose part alone is refused
   * and hold them back (last good state, or nothing), so the object can be written for everyone else.
   * Returns how many accounts were quarantined (0: the refusal is not one account's doing).
   */
  const isolate = async (kind: 'ConfigMap' | 'Secret', objectName: string, members: readonly string[], err: KubeApiError): Promise<number> => {
    let found = 0;
    await limited([...members], concurrency, async (ns) => {
      const entry = accounts.get(ns);
      if (!entry || quarantined.get(ns)?.refused === entryDigest(entry)) return;
      const alone = await refusedAlone(kind, entry);
      if (!alone) return;
      found++;
      const candidate = lastGood.get(ns);
      const good = candidate && entryDigest(candidate) !== entryDigest(entry) ? candidate : undefined;
      retrying.delete(ns);
      const what = kind === 'ConfigMap' ? 'routing shard ConfigMap' : 'credential bundle Secret';
      const q: Quarantine & { refused: string } = {
        kind,
        status: alone.status,
        reason: alone.reason ?? String(alone.status),
        message: `the apiserver refused this account's part of ${what} ${objectName} (${alone.status} ${alone.reason ?? ''}: ${refusalMessage(alone)}); ${good ? 'the gateway keeps its last good routing' : 'it is left out of routing'} until its resources change`,
        keptLastGood: good !== undefined,
        refused: entryDigest(entry),
      };
      setAccount(ns, good);
      const was = quarantined.get(ns);
      quarantined.set(ns, q);
      log.warn({ namespace: ns, kind, object: objectName, status: alone.status, reason: q.reason, keptLastGood: q.keptLastGood }, 'account quarantined: its routing was refused by the apiserver');
      if (was?.message !== q.message) opts.onQuarantine?.(ns, stripRefused(q));
    });
    m.quarantined.set(quarantined.size);
    if (found === 0) log.warn({ kind, object: objectName, status: err.status, reason: err.reason }, 'a routing write was refused, but no single account is refused alone; retrying with backoff');
    return found;
  };

  const stripRefused = (q: Quarantine & { refused: string }): Quarantine => {
    const { refused: _refused, ...rest } = q;
    return rest;
  };

  /** After a successful write: the accounts written become last good; quarantined ones that were written are released. */
  const settle = (work: ReadonlySet<string>, live: (ns: string) => boolean) => {
    for (const [ns, q] of quarantined) {
      const entry = accounts.get(ns);
      const released = !live(ns) || (retrying.has(ns) && entry !== undefined && entryDigest(entry) !== q.refused);
      if (released) {
        quarantined.delete(ns);
        retrying.delete(ns);
        log.info({ namespace: ns }, 'account released from quarantine');
        opts.onQuarantine?.(ns, undefined);
      }
    }
    for (const ns of work) {
      const entry = accounts.get(ns);
      if (entry && !quarantined.has(ns)) lastGood.set(ns, entry);
      else if (!live(ns)) lastGood.delete(ns);
    }
    m.quarantined.set(quarantined.size);
  };

  const configMapFor = (s: ShardObject): KubernetesObject => ({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: s.name, namespace, labels: { [ROUTING_LABEL]: 'shard' }, annotations: { [SHA_ANNOTATION]: s.sha256 } },
    ...(s.encoding === 'json' ? { data: { [s.key]: s.data.toString('utf8') } } : { binaryData: { [s.key]: s.data.toString('base64') } }),
  } as KubernetesObject);

  const secretFor = (b: BundleObject): KubernetesObject => ({
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'Opaque',
    metadata: { name: b.name, namespace, labels: { [ROUTING_LABEL]: 'bundle' }, annotations: { [SHA_ANNOTATION]: b.sha256 } },
    data: Object.fromEntries(Object.entries(b.entries()).map(([id, env]) => [id, Buffer.from(env, 'utf8').toString('base64')])),
  } as KubernetesObject);

  async function runOnce(): Promise<CompileResult | undefined> {
    if (dirty.size === 0) return undefined;
    const taken = [...dirty];
    dirty.clear();
    const endTimer = m.duration.startTimer();
    const t0 = performance.now();
    try {
      await refreshKeys();
      const ring = keyring!;
      const live = liveCheck();
      // A key rotation (refreshKeys) may have re-marked everything.
      const work = new Set([...taken, ...dirty]);
      dirty.clear();
      for (const ns of work) {
        // Hundreds of accounts (the run after a cold start) are seconds of CPU: watches and timers run between them.
        const turn = yieldToEventLoop();
        if (turn) await turn;
        try {
          compileOne(ns, live(ns), ring);
        } catch (err) {
          // One broken account must not block the others: it keeps its last compiled state.
          log.error({ namespace: ns, err: err instanceof Error ? err.message : String(err) }, 'account failed to compile; keeping its previous state');
        }
      }

      // Write, and when the apiserver refuses an object for its content, quarantine the account(s) responsible
      // and lay the shards out again without them: one account can never hold back the others in its shard.
      let shardSet!: ReturnType<typeof shardSerialized>;
      let bundleSet!: ReturnType<typeof shardBundles>;
      let shardWriteCount = 0;
      let bundleWriteCount = 0;
      for (let round = 0; ; round++) {
        const shardLayout = shardPlacement.layout(buckets);
        const bundleLayout = bundlePlacement.layout(bundleBuckets);
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
        const refused: { kind: 'ConfigMap' | 'Secret'; name: string; accounts: readonly string[]; err: KubeApiError }[] = [];
        await limited([...bundleWrites.map((b) => ({ kind: 'Secret' as const, b })), ...shardWrites.map((s) => ({ kind: 'ConfigMap' as const, s }))], concurrency, async (w) => {
          try {
            if (w.kind === 'Secret') {
              await store.apply(secretFor(w.b));
              known.Secret.set(w.b.name, w.b.sha256);
              m.secretWrites.inc({ op: 'apply' });
              bundleWriteCount++;
            } else {
              await store.apply(configMapFor(w.s));
              known.ConfigMap.set(w.s.name, w.s.sha256);
              m.cmWrites.inc({ op: 'apply', object: 'shard' });
              shardWriteCount++;
            }
          } catch (err) {
            if (!isRefusal(err)) throw err;
            const o = w.kind === 'Secret' ? w.b : w.s;
            refused.push({ kind: w.kind, name: o.name, accounts: o.accounts, err });
          }
        });
        if (refused.length === 0) break;
        let isolated = 0;
        if (round < MAX_ISOLATION_ROUNDS) for (const r of refused) isolated += await isolate(r.kind, r.name, r.accounts, r.err);
        if (isolated === 0) throw refused[0]!.err;
      }
      const indexWritten = known.ConfigMap.get(INDEX_NAME) !== shardSet.index.version;
      if (indexWritten) {
        await store.apply({
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: INDEX_NAME, namespace, labels: { [ROUTING_LABEL]: 'index' }, annotations: { [SHA_ANNOTATION]: shardSet.index.version } },
          data: { [INDEX_KEY]: canonicalJson(shardSet.index) },
        } as KubernetesObject);
        known.ConfigMap.set(INDEX_NAME, shardSet.index.version);
        m.cmWrites.inc({ op: 'apply', object: 'index' });
      }

      const wantCm = new Set([INDEX_NAME, ...shardSet.shards.map((s) => s.name)]);
      const wantSecret = new Set([keySecret, ...bundleSet.objects.map((b) => b.name)]);
      const stale = [
        ...[...known.ConfigMap.keys()].filter((n) => !wantCm.has(n)).map((name) => ({ kind: 'ConfigMap' as const, name })),
        ...[...known.Secret.keys()].filter((n) => !wantSecret.has(n)).map((name) => ({ kind: 'Secret' as const, name })),
      ];
      await limited(stale, concurrency, async ({ kind, name }) => {
        await store.delete(kind, name);
        known[kind].delete(name);
        if (kind === 'ConfigMap') m.cmWrites.inc({ op: 'delete', object: 'shard' });
        else m.secretWrites.inc({ op: 'delete' });
      });

      settle(work, live);
      buckets = shardSet.index.buckets;
      bundleBuckets = bundleSet.buckets;
      version = shardSet.index.version;
      failures = 0;
      m.bytes.set({ kind: 'configmap' }, shardSet.shards.reduce((s, x) => s + x.bytes, 0));
      m.bytes.set({ kind: 'bundle' }, bundleSet.objects.reduce((s, x) => s + x.bytes, 0));
      m.shards.set({ kind: 'configmap' }, shardSet.shards.length);
      m.shards.set({ kind: 'bundle' }, bundleSet.objects.length);
      m.accounts.set(accounts.size);
      endTimer();
      const result: CompileResult = {
        version: shardSet.index.version,
        shardWrites: shardWriteCount,
        bundleWrites: bundleWriteCount,
        indexWritten,
        deleted: stale.length,
        durationMs: performance.now() - t0,
        accounts: [...work],
        slotsNeeded: { routing: slotsFor(shardSet.shards.map((x) => x.name)), bundles: slotsFor(bundleSet.objects.map((x) => x.name)) },
      };
      lastResult = result;
      lastRunMs = result.durationMs;
      if (shardWriteCount || bundleWriteCount || indexWritten || stale.length) {
        log.debug({ version: result.version, shardWrites: result.shardWrites, bundleWrites: result.bundleWrites, deleted: result.deleted, accounts: work.size, ms: Math.round(result.durationMs) }, 'routing config written');
      }
      for (const l of listeners) l(result);
      return result;
    } catch (err) {
      // Whatever did not land is retried: `known` only records confirmed writes.
      for (const ns of taken) dirty.add(ns);
      failures++;
      m.errors.inc();
      log.warn({ err: err instanceof Error ? err.message : String(err), failures }, 'compile failed; retrying with backoff');
      return undefined;
    }
  }

  return {
    markDirty(ns) {
      dirty.add(ns);
      // Only reaches a timer when the pipeline is idle (busyRuns is 0 then): coalesceMs.
      schedule();
    },
    markAllDirty() {
      for (const ns of opts.source.accountNamespaces()) dirty.add(ns);
      for (const ns of accounts.keys()) dirty.add(ns);
      schedule();
    },
    async start() {
      if (started) return;
      for (const kind of ['ConfigMap', 'Secret'] as const) {
        known[kind].clear();
        for (const o of await store.list(kind)) known[kind].set(o.name, o.sha256);
      }
      // The key Secret carries the routing label but is never a stale bundle.
      known.Secret.delete(keySecret);
      keyReadAt = 0;
      await refreshKeys();
      started = true;
      keyPoll = setInterval(() => void pollKey(), keyPollMs);
      keyPoll.unref?.();
      this.markAllDirty();
      // Namespaces that stopped being accounts while no leader ran: their objects are stale by construction.
      if (dirty.size === 0) dirty.add('');
      await drive();
    },
    async stop() {
      started = false;
      if (keyPoll) clearInterval(keyPoll);
      keyPoll = undefined;
      if (timer) clearTimeout(timer);
      timer = undefined;
      await running;
    },
    async flush() {
      if (timer) clearTimeout(timer);
      timer = undefined;
      if (running) await running;
      let result = lastResult;
      while (dirty.size > 0) {
        const before = failures;
        result = await drive();
        if (failures > before) break;
      }
      return result;
    },
    credentialVersions(namespace) {
      const bundle = accounts.get(namespace)?.bundle;
      if (!bundle) return undefined;
      let versions = versionCache.get(bundle);
      if (!versions) versionCache.set(bundle, (versions = new Map(bundle.entries.map((e) => [e.id, envelopeVersion(e.envelope)]))));
      return versions;
    },
    quarantined() {
      return new Map([...quarantined].map(([ns, q]) => [ns, stripRefused(q)]));
    },
    current() {
      return { ...(version !== undefined ? { version } : {}), configMaps: [...known.ConfigMap.keys()].sort(), bundles: [...known.Secret.keys()].sort(), accounts: accounts.size };
    },
    onCompiled(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}

/** Slots needed for objects numbered `<prefix>-<n>`: the highest n + 1 (numbers are dense from 0). */
function slotsFor(names: readonly string[]): number {
  let max = -1;
  for (const name of names) {
    const n = Number(/-(\d+)$/.exec(name)?.[1] ?? -1);
    if (n > max) max = n;
  }
  return max + 1;
}
