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
import { AccountCache, type AccountEntry, entryDigest } from './accounts.ts';
import { BundleKeyring } from './keyring.ts';
import { type CompileMetrics, compileMetrics } from './metrics.ts';
import { QuarantineBook } from './quarantine.ts';
import { limited, type RefusedWrite, RoutingWriter, slotsFor, type WriteOutcome } from './routing-writer.ts';
import { CompileScheduler } from './scheduler.ts';
import { kubeRoutingStore, type RoutingStore } from './store.ts';
import type { AccountStateSource, CompilePipeline, CompilePipelineOptions, CompileResult } from './types.ts';

export { activateBundleKey, addBundleKey, ensureBundleKey } from './bundle-key.ts';
export { kubeRoutingStore, type RoutingStore } from './store.ts';
export type {
  AccountSnapshot,
  AccountStateSource,
  CompilePipeline,
  CompilePipelineOptions,
  CompileResult,
  CredentialDelivery,
  CredentialVerdict,
  Quarantine,
  SnapshotCredential,
} from './types.ts';

/** Index versions remembered with the run that last wrote or kept them (see routingRun); about 17 min of busy runs. */
const ROUTING_RUNS_KEPT = 1024;

export function createCompilePipeline(opts: CompilePipelineOptions): CompilePipeline {
  const namespace = opts.routingNamespace;
  const log = childLogger(opts.logger, { component: 'compile' });
  const store: RoutingStore = opts.store ?? kubeRoutingStore(opts.kubeConfig, namespace, opts.applier);
  const m = compileMetrics(opts.registry ?? new Registry());
  const keySecret = opts.bundleKeySecretName ?? DEFAULT_BUNDLE_KEY_SECRET;
  const concurrency = opts.writeConcurrency ?? 8;

  const dirty = new Set<string>();
  const accounts = new AccountCache(opts.shardOptions, opts.bundleShardOptions, opts.onAccountCompiled);
  const quarantine = new QuarantineBook<AccountEntry>(entryDigest, log, opts.onQuarantine);
  const writer = new RoutingWriter({
    store,
    namespace,
    keySecret,
    concurrency,
    metrics: m,
    shardOptions: opts.shardOptions,
    bundleShardOptions: opts.bundleShardOptions,
  });
  const keys = new BundleKeyring({
    store,
    namespace,
    secretName: keySecret,
    reloadMs: opts.keyReloadMs ?? 10_000,
    pollMs: opts.keyPollMs ?? 4_000,
    log,
    onRotated: () => {
      for (const ns of accounts.namespaces()) dirty.add(ns);
    },
  });
  const scheduler: CompileScheduler<CompileResult | undefined> = new CompileScheduler({
    run: runOnce,
    pending: () => dirty.size > 0,
    ...(opts.coalesceMs !== undefined ? { coalesceMs: opts.coalesceMs } : {}),
    ...(opts.maxBatchDelayMs !== undefined ? { maxBatchDelayMs: opts.maxBatchDelayMs } : {}),
    ...(opts.backlog ? { backlog: opts.backlog } : {}),
    ...(opts.backlogDelayMs !== undefined ? { backlogDelayMs: opts.backlogDelayMs } : {}),
  });
  const listeners = new Set<(r: CompileResult) => void>();
  let lastResult: CompileResult | undefined;
  /** Runs started; a routing entry that changes in run n is carried by every index from run n on. */
  let runs = 0;
  /** index version -> the last run that ended with it live (insertion order = age, for the bound). */
  const routingRuns = new Map<string, number>();

  const isolate = (refused: RefusedWrite) =>
    isolateRefused({ accounts, quarantine, writer, concurrency, metrics: m, log }, refused);

  async function runOnce(): Promise<CompileResult | undefined> {
    if (dirty.size === 0) return undefined;
    const taken = [...dirty];
    dirty.clear();
    const endTimer = m.duration.startTimer();
    const t0 = performance.now();
    const run = ++runs;
    try {
      await keys.refresh();
      const ring = keys.current;
      const live = liveCheck(opts.source);
      // A key rotation (refresh) may have re-marked everything.
      const work = new Set([...taken, ...dirty]);
      dirty.clear();
      // Entries compiled before the first successful run are what the cluster already held, as far as this process
      // knows: pods on an index it never saw count for them as before (envelope only).
      const since = lastResult === undefined ? 0 : run;
      for (const ns of work) {
        // Hundreds of accounts (the run after a cold start) are seconds of CPU: watches and timers run between them.
        const turn = yieldToEventLoop();
        if (turn) await turn;
        try {
          accounts.compile(ns, live(ns), ring, opts.source, quarantine, since);
        } catch (err) {
          // One broken account must not block the others: it keeps its last compiled state.
          log.error(
            { namespace: ns, err: err instanceof Error ? err.message : String(err) },
            'account failed to compile; keeping its previous state',
          );
        }
      }

      const out = await writer.write(
        (buckets, bundleBuckets) => ({
          shards: accounts.shardPlacement.layout(buckets),
          bundles: accounts.bundlePlacement.layout(bundleBuckets),
        }),
        isolate,
      );
      const { shardSet } = out;
      quarantine.settle(work, live, (ns) => accounts.get(ns));
      m.quarantined.set(quarantine.size);
      routingRuns.delete(shardSet.index.version);
      routingRuns.set(shardSet.index.version, run);
      if (routingRuns.size > ROUTING_RUNS_KEPT) routingRuns.delete(routingRuns.keys().next().value!);
      recordWritten(m, out, accounts.size);
      endTimer();
      const result = resultOf(out, performance.now() - t0, work);
      lastResult = result;
      scheduler.succeeded(result.durationMs);
      if (out.shardWrites || out.bundleWrites || out.indexWritten || out.deleted) {
        log.debug(
          {
            version: result.version,
            shardWrites: result.shardWrites,
            bundleWrites: result.bundleWrites,
            deleted: result.deleted,
            accounts: work.size,
            ms: Math.round(result.durationMs),
          },
          'routing config written',
        );
      }
      for (const l of listeners) l(result);
      return result;
    } catch (err) {
      // Whatever did not land is retried: the writer only records confirmed writes.
      for (const ns of taken) dirty.add(ns);
      scheduler.failed();
      m.errors.inc();
      log.warn(
        { err: err instanceof Error ? err.message : String(err), failures: scheduler.failures },
        'compile failed; retrying with backoff',
      );
      return undefined;
    }
  }

  return {
    markDirty(ns) {
      dirty.add(ns);
      // Only reaches a timer when the pipeline is idle (the scheduler's batch delay is coalesceMs then).
      scheduler.schedule();
    },
    markAllDirty() {
      for (const ns of opts.source.accountNamespaces()) dirty.add(ns);
      for (const ns of accounts.namespaces()) dirty.add(ns);
      scheduler.schedule();
    },
    async start() {
      if (scheduler.started) return;
      await writer.load();
      await keys.refresh(true);
      scheduler.start();
      keys.startPolling(
        () => scheduler.started && !scheduler.running,
        () => {
          if (dirty.size > 0) scheduler.schedule();
        },
      );
      this.markAllDirty();
      // Namespaces that stopped being accounts while no leader ran: their objects are stale by construction.
      if (dirty.size === 0) dirty.add('');
      await scheduler.drive();
    },
    async stop() {
      keys.stopPolling();
      await scheduler.stop();
    },
    flush() {
      return scheduler.flush(() => lastResult);
    },
    credentialVersions(ns) {
      return accounts.credentialVersions(ns);
    },
    credentialDelivery(ns) {
      return accounts.credentialDelivery(ns);
    },
    apiKeyDelivery(ns) {
      return accounts.apiKeyDelivery(ns);
    },
    routingRun(indexVersion) {
      return routingRuns.get(indexVersion) ?? 0;
    },
    quarantined() {
      return quarantine.snapshot();
    },
    current() {
      const version = writer.version;
      return { ...(version !== undefined ? { version } : {}), ...writer.objects(), accounts: accounts.size };
    },
    onCompiled(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
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
