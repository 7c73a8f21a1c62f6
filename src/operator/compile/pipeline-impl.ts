// The compile pipeline: dirty accounts -> compileAccount -> shards + sealed bundles -> only the changed objects.
// Order per run: bundle Secrets and shard ConfigMaps first, the index last (a gateway that sees the new index
// finds every shard it names), then stale objects are deleted. Writes are compared by sha256 against what is
// known to be in the cluster, so an unchanged shard is never rewritten, even after an operator restart.
import type { KubernetesObject } from '@kubernetes/client-node';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { compileAccount } from '../../compiler/compile.ts';
import { canonicalJson, INDEX_KEY, INDEX_NAME, ROUTING_LABEL, SHA_ANNOTATION, sha256Hex } from '../../compiler/format.ts';
import { serializeAccount, shardSerialized, type EncodedBucket, type SerializedAccount, type ShardObject } from '../../compiler/shard.ts';
import { sealAccount, shardBundles, type BundleAccount, type BundleObject } from '../../bundle/bundle.ts';
import { DEFAULT_BUNDLE_KEY_SECRET, type Keyring } from '../../bundle/envelope.ts';
import { ensureBundleKey } from './bundle-key.ts';
import { kubeRoutingStore, type RoutingStore, type StoredKind } from './store.ts';
import type { CompilePipeline, CompilePipelineOptions, CompileResult } from './pipeline.ts';

interface AccountEntry {
  serialized: SerializedAccount;
  bundle: BundleAccount;
  /** Inputs to the bundle (credential id -> payload digest) + key id: reseal only when they change. */
  bundleFingerprint: string;
}

interface Metrics {
  duration: Histogram;
  bytes: Gauge;
  shards: Gauge;
  accounts: Gauge;
  cmWrites: Counter;
  secretWrites: Counter;
  errors: Counter;
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
  };
}

async function limited<T>(items: readonly T[], concurrency: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const workers = Array.from({ length: Math.min(concurrency, items.length) }, async () => {
    while (next < items.length) await fn(items[next++]!);
  });
  await Promise.all(workers);
}

export function createCompilePipeline(opts: CompilePipelineOptions): CompilePipeline {
  const namespace = opts.routingNamespace;
  const log = opts.logger.child({ component: 'compile' });
  const store: RoutingStore = opts.store ?? kubeRoutingStore(opts.kubeConfig, namespace, opts.applier);
  const m = metrics(opts.registry ?? new Registry());
  const coalesceMs = opts.coalesceMs ?? 20;
  const keySecret = opts.bundleKeySecretName ?? DEFAULT_BUNDLE_KEY_SECRET;
  const keyReloadMs = opts.keyReloadMs ?? 10_000;
  const concurrency = opts.writeConcurrency ?? 8;

  const accounts = new Map<string, AccountEntry>();
  const dirty = new Set<string>();
  /** name -> sha256 of what is in the cluster (per kind). */
  const known: Record<StoredKind, Map<string, string | undefined>> = { ConfigMap: new Map(), Secret: new Map() };
  const shardCache = new Map<string, EncodedBucket>();
  const listeners = new Set<(r: CompileResult) => void>();
  let keyring: Keyring | undefined;
  let keyReadAt = 0;
  let buckets: number | undefined;
  let bundleBuckets: number | undefined;
  let version: string | undefined;
  let started = false;
  let timer: NodeJS.Timeout | undefined;
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

  const drive = (): Promise<CompileResult | undefined> => {
    if (running) return running;
    running = runOnce().finally(() => {
      running = undefined;
      if (dirty.size === 0) {
        busyRuns = 0;
        return;
      }
      busyRuns++;
      schedule(failures > 0 ? Math.min(10_000, 100 * 2 ** failures) : Math.max(batchDelay(), Math.min(lastRunMs, 2000)));
    });
    return running;
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

  const compileOne = (ns: string, isAccount: boolean, ring: Keyring) => {
    if (!isAccount) {
      accounts.delete(ns);
      return;
    }
    const snap = opts.source.snapshot(ns);
    const compiled = compileAccount(snap);
    const serialized = serializeAccount(compiled);
    const payloads = new Map<string, string>();
    for (const c of snap.credentials) {
      if (c.verdict.payload !== undefined) payloads.set(c.resource.metadata.name ?? '', c.verdict.payload);
    }
    const sealed = compiled.credentials.map((c) => ({ id: c.id, payload: payloads.get(c.name) ?? '' }));
    // Digests only (never the payload) decide whether to reseal; sealing is deterministic anyway.
    const fingerprint = sha256Hex(`${ring.active}\n${sealed.map((s) => `${s.id}:${sha256Hex(s.payload)}`).join('\n')}`);
    const prev = accounts.get(ns);
    const bundle = prev && prev.bundleFingerprint === fingerprint ? prev.bundle : sealAccount(ring, ns, sealed);
    accounts.set(ns, { serialized, bundle, bundleFingerprint: fingerprint });
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
      const live = new Set(opts.source.accountNamespaces());
      // A key rotation (refreshKeys) may have re-marked everything.
      const work = new Set([...taken, ...dirty]);
      dirty.clear();
      for (const ns of work) {
        try {
          compileOne(ns, live.has(ns), ring);
        } catch (err) {
          // One broken account must not block the others: it keeps its last compiled state.
          log.error({ namespace: ns, err: err instanceof Error ? err.message : String(err) }, 'account failed to compile; keeping its previous state');
        }
      }

      const all = [...accounts.values()];
      const shardSet = shardSerialized(all.map((a) => a.serialized), { ...opts.shardOptions, previousBuckets: buckets, cache: shardCache });
      const bundleSet = shardBundles(all.map((a) => a.bundle), { ...opts.bundleShardOptions, previousBuckets: bundleBuckets });

      const shardWrites = shardSet.shards.filter((s) => known.ConfigMap.get(s.name) !== s.sha256);
      const bundleWrites = bundleSet.objects.filter((b) => known.Secret.get(b.name) !== b.sha256);
      await limited([...bundleWrites.map((b) => ({ kind: 'Secret' as const, b })), ...shardWrites.map((s) => ({ kind: 'ConfigMap' as const, s }))], concurrency, async (w) => {
        if (w.kind === 'Secret') {
          await store.apply(secretFor(w.b));
          known.Secret.set(w.b.name, w.b.sha256);
          m.secretWrites.inc({ op: 'apply' });
        } else {
          await store.apply(configMapFor(w.s));
          known.ConfigMap.set(w.s.name, w.s.sha256);
          m.cmWrites.inc({ op: 'apply', object: 'shard' });
        }
      });

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
        shardWrites: shardWrites.length,
        bundleWrites: bundleWrites.length,
        indexWritten,
        deleted: stale.length,
        durationMs: performance.now() - t0,
        accounts: [...work],
      };
      lastResult = result;
      lastRunMs = result.durationMs;
      if (shardWrites.length || bundleWrites.length || indexWritten || stale.length) {
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
      this.markAllDirty();
      // Namespaces that stopped being accounts while no leader ran: their objects are stale by construction.
      if (dirty.size === 0) dirty.add('');
      await drive();
    },
    async stop() {
      started = false;
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
    current() {
      return { ...(version !== undefined ? { version } : {}), configMaps: [...known.ConfigMap.keys()].sort(), bundles: [...known.Secret.keys()].sort(), accounts: accounts.size };
    },
    onCompiled(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}
