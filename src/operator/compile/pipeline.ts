// The compile pipeline: dirty accounts -> compileAccount -> shards + sealed bundles -> only the changed objects.
// Assembled here from its parts: scheduler.ts (when a run starts), keyring.ts (the bundle key), accounts.ts (the
// account cache and its placement), quarantine.ts (accounts whose routing the apiserver refuses) and writer.ts
// (diff, apply, delete). The contract types are in types.ts and re-exported from here for the reconcilers.
import type { Logger } from 'pino';
import { Registry } from 'prom-client';
import { DEFAULT_BUNDLE_KEY_SECRET } from '../../contract/envelope.ts';
import type { KubeApiError } from '../../kube/client.ts';
import { yieldToEventLoop } from '../event-loop.ts';
import { childLogger } from '../logger.ts';
import type { Component } from '../manager.ts';
import { AccountCache, type AccountEntry, entryDigest } from './accounts.ts';
import { BundleKeyring } from './keyring.ts';
import { type CompileMetrics, compileMetrics } from './metrics.ts';
import { QuarantineBook } from './quarantine.ts';
import { limited, type RefusedWrite, RoutingWriter, slotsFor, type WriteOutcome } from './routing-writer.ts';
import { CompileScheduler } from './scheduler.ts';
import { kubeRoutingStore, type RoutingStore } from './store.ts';
import type {
  AccountStateSource,
  ApiKeyDelivery,
  CompilePipelineOptions,
  CompileResult,
  CredentialDelivery,
  Quarantine,
} from './types.ts';

export { activateBundleKey, addBundleKey, ensureBundleKey } from './bundle-key.ts';
export { kubeRoutingStore, type RoutingStore } from './store.ts';
export type {
  AccountSnapshot,
  AccountStateSource,
  CompilePipelineOptions,
  CompileResult,
  CredentialDelivery,
  CredentialVerdict,
  Quarantine,
  SnapshotCredential,
} from './types.ts';

/** Index versions remembered with the run that last wrote or kept them (see routingRun); about 17 min of busy runs. */
const ROUTING_RUNS_KEPT = 1024;

/**
 * The compile pipeline, a leader component: start() loads what the cluster holds and compiles every account, then
 * runs whenever accounts are marked dirty; stop() waits for the run in flight.
 */
export class CompilePipeline implements Component {
  readonly name = 'compile pipeline';
  private readonly opts: CompilePipelineOptions;
  private readonly log: Logger;
  private readonly m: CompileMetrics;
  private readonly concurrency: number;
  private readonly dirty = new Set<string>();
  private readonly accounts: AccountCache;
  private readonly quarantine: QuarantineBook<AccountEntry>;
  private readonly writer: RoutingWriter;
  private readonly keys: BundleKeyring;
  private readonly scheduler: CompileScheduler<CompileResult | undefined>;
  private readonly listeners = new Set<(r: CompileResult) => void>();
  private lastResult: CompileResult | undefined;
  /** Runs started; a routing entry that changes in run n is carried by every index from run n on. */
  private runs = 0;
  /** index version -> the last run that ended with it live (insertion order = age, for the bound). */
  private readonly routingRuns = new Map<string, number>();

  constructor(opts: CompilePipelineOptions) {
    this.opts = opts;
    const namespace = opts.routingNamespace;
    this.log = childLogger(opts.logger, { component: 'compile' });
    const store: RoutingStore = opts.store ?? kubeRoutingStore(opts.kubeConfig, namespace, opts.applier);
    this.m = compileMetrics(opts.registry ?? new Registry());
    const keySecret = opts.bundleKeySecretName ?? DEFAULT_BUNDLE_KEY_SECRET;
    this.concurrency = opts.writeConcurrency ?? 8;
    this.accounts = new AccountCache(opts.shardOptions, opts.bundleShardOptions, opts.onAccountCompiled);
    this.quarantine = new QuarantineBook<AccountEntry>(entryDigest, this.log, opts.onQuarantine);
    this.writer = new RoutingWriter({
      store,
      namespace,
      keySecret,
      concurrency: this.concurrency,
      metrics: this.m,
      shardOptions: opts.shardOptions,
      bundleShardOptions: opts.bundleShardOptions,
    });
    this.keys = new BundleKeyring({
      store,
      namespace,
      secretName: keySecret,
      reloadMs: opts.keyReloadMs ?? 10_000,
      pollMs: opts.keyPollMs ?? 4_000,
      log: this.log,
      onRotated: () => {
        for (const ns of this.accounts.namespaces()) this.dirty.add(ns);
      },
    });
    this.scheduler = new CompileScheduler({
      run: () => this.runOnce(),
      pending: () => this.dirty.size > 0,
      ...(opts.coalesceMs !== undefined ? { coalesceMs: opts.coalesceMs } : {}),
      ...(opts.maxBatchDelayMs !== undefined ? { maxBatchDelayMs: opts.maxBatchDelayMs } : {}),
      ...(opts.backlog ? { backlog: opts.backlog } : {}),
      ...(opts.backlogDelayMs !== undefined ? { backlogDelayMs: opts.backlogDelayMs } : {}),
    });
  }

  /** Queue an account (or a namespace that stopped being one) for recompilation. Cheap, never throws. */
  markDirty(namespace: string): void {
    this.dirty.add(namespace);
    // Only reaches a timer when the pipeline is idle (the scheduler's batch delay is coalesceMs then).
    this.scheduler.schedule();
  }

  /** Mark every account namespace dirty (e.g. after cache sync or becoming leader). */
  markAllDirty(): void {
    for (const ns of this.opts.source.accountNamespaces()) this.dirty.add(ns);
    for (const ns of this.accounts.namespaces()) this.dirty.add(ns);
    this.scheduler.schedule();
  }

  /** Load what is already in the cluster (to avoid rewrites) and the bundle key; then compile all accounts. */
  async start(): Promise<void> {
    if (this.scheduler.started) return;
    await this.writer.load();
    await this.keys.refresh(true);
    this.scheduler.start();
    this.keys.startPolling(
      () => this.scheduler.started && !this.scheduler.running,
      () => {
        if (this.dirty.size > 0) this.scheduler.schedule();
      },
    );
    this.markAllDirty();
    // Namespaces that stopped being accounts while no leader ran: their objects are stale by construction.
    if (this.dirty.size === 0) this.dirty.add('');
    await this.scheduler.drive();
  }

  /** Stop scheduling; waits for an in-flight compile to finish. */
  async stop(): Promise<void> {
    this.keys.stopPolling();
    await this.scheduler.stop();
  }

  /** Run pending work now and resolve when everything marked dirty before the call is written. */
  flush(): Promise<CompileResult | undefined> {
    return this.scheduler.flush(() => this.lastResult);
  }

  /** Version (envelopeVersion) of each sealed credential of an account, by credential id; undefined before it compiled. */
  credentialVersions(namespace: string): ReadonlyMap<string, string> | undefined {
    return this.accounts.credentialVersions(namespace);
  }

  /**
   * What a gateway pod must hold for each credential of an account to serve its current state, by credential id:
   * the sealed envelope and the compiled routing entry. Undefined before the account compiled.
   */
  credentialDelivery(namespace: string): ReadonlyMap<string, CredentialDelivery> | undefined {
    return this.accounts.credentialDelivery(namespace);
  }

  /** What a gateway pod must serve for each GatewayAPIKey of an account, by key hash. Undefined before it compiled. */
  apiKeyDelivery(namespace: string): ReadonlyMap<string, ApiKeyDelivery> | undefined {
    return this.accounts.apiKeyDelivery(namespace);
  }

  /**
   * The compile run from which a routing index version is known to be current (see CredentialDelivery.since);
   * 0 for a version this process did not see at the end of a run (older, or from before it started).
   */
  routingRun(indexVersion: string): number {
    return this.routingRuns.get(indexVersion) ?? 0;
  }

  /** Accounts currently quarantined (see CompilePipelineOptions.onQuarantine). */
  quarantined(): ReadonlyMap<string, Quarantine> {
    return this.quarantine.snapshot();
  }

  /** What the pipeline last wrote (names of live shard ConfigMaps and bundle Secrets, index version). */
  current(): { version?: string; configMaps: string[]; bundles: string[]; accounts: number } {
    const version = this.writer.version;
    return { ...(version !== undefined ? { version } : {}), ...this.writer.objects(), accounts: this.accounts.size };
  }

  /** Called after each successful compile that changed something (for tests / benchmarks / readiness). */
  onCompiled(listener: (result: CompileResult) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private async runOnce(): Promise<CompileResult | undefined> {
    const { dirty, log } = this;
    if (dirty.size === 0) return undefined;
    const taken = [...dirty];
    dirty.clear();
    const endTimer = this.m.duration.startTimer();
    const t0 = performance.now();
    const run = ++this.runs;
    try {
      await this.keys.refresh();
      const live = liveCheck(this.opts.source);
      // A key rotation (refresh) may have re-marked everything.
      const work = new Set([...taken, ...dirty]);
      dirty.clear();
      // Entries compiled before the first successful run are what the cluster already held, as far as this process
      // knows: pods on an index it never saw count for them as before (envelope only).
      await this.compileAll(work, live, this.lastResult === undefined ? 0 : run);
      const out = await this.writer.write(
        (buckets, bundleBuckets) => ({
          shards: this.accounts.shardPlacement.layout(buckets),
          bundles: this.accounts.bundlePlacement.layout(bundleBuckets),
        }),
        (refused) => this.isolate(refused),
      );
      this.quarantine.settle(work, live, (ns) => this.accounts.get(ns));
      this.m.quarantined.set(this.quarantine.size);
      this.remember(out.shardSet.index.version, run);
      recordWritten(this.m, out, this.accounts.size);
      endTimer();
      const result = resultOf(out, performance.now() - t0, work);
      this.lastResult = result;
      this.scheduler.succeeded(result.durationMs);
      if (out.shardWrites || out.bundleWrites || out.indexWritten || out.deleted) {
        const { version, shardWrites, bundleWrites, deleted } = result;
        const ms = Math.round(result.durationMs);
        log.debug({ version, shardWrites, bundleWrites, deleted, accounts: work.size, ms }, 'routing config written');
      }
      for (const l of this.listeners) l(result);
      return result;
    } catch (err) {
      // Whatever did not land is retried: the writer only records confirmed writes.
      for (const ns of taken) dirty.add(ns);
      this.scheduler.failed();
      this.m.errors.inc();
      log.warn(
        { err: err instanceof Error ? err.message : String(err), failures: this.scheduler.failures },
        'compile failed; retrying with backoff',
      );
      return undefined;
    }
  }

  /** Compiles each account of `work` into the cache; one that throws keeps its last compiled state. */
  private async compileAll(work: ReadonlySet<string>, live: (ns: string) => boolean, since: number): Promise<void> {
    const ring = this.keys.current;
    for (const ns of work) {
      // Hundreds of accounts (the run after a cold start) are seconds of CPU: watches and timers run between them.
      const turn = yieldToEventLoop();
      if (turn) await turn;
      try {
        this.accounts.compile(ns, live(ns), ring, this.opts.source, this.quarantine, since);
      } catch (err) {
        // One broken account must not block the others.
        this.log.error(
          { namespace: ns, err: err instanceof Error ? err.message : String(err) },
          'account failed to compile; keeping its previous state',
        );
      }
    }
  }

  /** Records that `version` was live at the end of `run`, keeping the newest ROUTING_RUNS_KEPT. */
  private remember(version: string, run: number): void {
    this.routingRuns.delete(version);
    this.routingRuns.set(version, run);
    if (this.routingRuns.size > ROUTING_RUNS_KEPT) this.routingRuns.delete(this.routingRuns.keys().next().value!);
  }

  private isolate(refused: RefusedWrite): Promise<number> {
    const { accounts, quarantine, writer, concurrency, m: metrics, log } = this;
    return isolateRefused({ accounts, quarantine, writer, concurrency, metrics, log }, refused);
  }
}

/** Whether a namespace is an account: asked of the source per namespace when it can, else from one listing. */
function liveCheck(source: AccountStateSource): (ns: string) => boolean {
  if (source.isAccountNamespace) return (ns) => source.isAccountNamespace!(ns);
  const all = new Set(source.accountNamespaces());
  return (ns) => all.has(ns);
}

/**
 * A shared write was refused for its content: find the account(s) of that object whose part alone is refused
 * and hold them back (last good state, or nothing), so the object can be written for everyone else.
 * Returns how many accounts were quarantined (0: the refusal is not one account's doing).
 */
async function isolateRefused(
  parts: {
    accounts: AccountCache;
    quarantine: QuarantineBook<AccountEntry>;
    writer: RoutingWriter;
    concurrency: number;
    metrics: CompileMetrics;
    log: Logger;
  },
  { kind, name: objectName, accounts: members, err }: RefusedWrite,
): Promise<number> {
  const { accounts, quarantine, writer, log } = parts;
  let found = 0;
  await limited([...members], parts.concurrency, async (ns) => {
    const entry = accounts.get(ns);
    if (!entry || quarantine.refused(ns, entry)) return;
    const alone: KubeApiError | undefined = await writer.refusedAlone(kind, entry);
    if (!alone) return;
    found++;
    quarantine.hold(ns, entry, kind, objectName, alone, (good) => accounts.set(ns, good));
  });
  parts.metrics.quarantined.set(quarantine.size);
  if (found === 0)
    log.warn(
      { kind, object: objectName, status: err.status, reason: err.reason },
      'a routing write was refused, but no single account is refused alone; retrying with backoff',
    );
  return found;
}

/** The sizes of what a run left written. */
function recordWritten(m: CompileMetrics, { shardSet, bundleSet }: WriteOutcome, accounts: number): void {
  m.bytes.set(
    { kind: 'configmap' },
    shardSet.shards.reduce((s, x) => s + x.bytes, 0),
  );
  m.bytes.set(
    { kind: 'bundle' },
    bundleSet.objects.reduce((s, x) => s + x.bytes, 0),
  );
  m.shards.set({ kind: 'configmap' }, shardSet.shards.length);
  m.shards.set({ kind: 'bundle' }, bundleSet.objects.length);
  m.accounts.set(accounts);
}

function resultOf(out: WriteOutcome, durationMs: number, work: ReadonlySet<string>): CompileResult {
  const { shardSet, bundleSet } = out;
  return {
    version: shardSet.index.version,
    shardWrites: out.shardWrites,
    bundleWrites: out.bundleWrites,
    indexWritten: out.indexWritten,
    deleted: out.deleted,
    durationMs,
    accounts: [...work],
    slotsNeeded: {
      routing: slotsFor(shardSet.shards.map((x) => x.name)),
      bundles: slotsFor(bundleSet.objects.map((x) => x.name)),
    },
  };
}
