// Entry point of the operator runtime: informers → work queues → reconcilers → status, plus the compile
// pipeline, leader election, metrics/health endpoints and graceful shutdown. Informers run on every replica
// (warm caches, fast failover, readiness); reconcile workers, writes and compiles run only on the leader.
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { kubeClient } from '../kube/client.ts';
import { createApplier } from '../kube/apply.ts';
import { createEventRecorder } from '../kube/events.ts';
import { createResourceInformers, startAll, stopAll, type ResourceInformers } from '../kube/resources.ts';
import { createCompilePipeline, type CompilePipeline } from './compile/pipeline.ts';
import { Controllers } from './controllers.ts';
import { startHealthServer } from './http.ts';
import { LEASE_DEFAULTS, LeaderElector } from './leader.ts';
import { createLogger } from './logger.ts';
import { createOperatorMetrics } from './metrics.ts';
import { VerdictStore, createAccountStateSource } from './state.ts';

export interface LeaderElectionOptions {
  enabled: boolean;
  leaseName?: string;
  /** Default: the routing namespace. */
  leaseNamespace?: string;
  leaseDurationSeconds?: number;
  renewDeadlineSeconds?: number;
  retryPeriodSeconds?: number;
}

export interface OperatorOptions {
  kubeConfig: KubeConfig;
  /** Namespace of the compiled routing ConfigMaps, bundle Secrets and (by default) the leader Lease. */
  routingNamespace: string;
  /** Watch only these namespaces (cluster-wide when absent). */
  watchNamespaces?: string[];
  /** Leader-election identity and Event reportingInstance; default hostname + random suffix. */
  identity?: string;
  leaderElection?: LeaderElectionOptions;
  /** Port for /metrics, /healthz, /readyz; 0 = random; default 8080. */
  httpPort?: number;
  httpHost?: string;
  logger?: Logger;
  /** Informer relist and full re-reconcile period; default 300. */
  resyncSeconds?: number;
  /** Watch staleness watchdog; default 150. */
  staleSeconds?: number;
  /** Install SIGTERM/SIGINT handlers that stop gracefully (and release the lease). Default false. */
  handleSignals?: boolean;
  /** Cap of the missing-Secret requeue backoff in ms (default 5000). */
  missingSecretMaxDelayMs?: number;
  /** Credentials per account when its Account sets no spec.limits.maxCredentials (default 1000). */
  defaultMaxCredentials?: number;
  concurrency?: { credentials?: number; others?: number };
  /** Compile pipeline (on by default). */
  compile?: { enabled?: boolean; coalesceMs?: number; bundleKeySecretName?: string };
}

export interface RunningOperator {
  /** Graceful stop; releases the lease unless releaseLease is false (use false to simulate a crash). */
  stop(opts?: { releaseLease?: boolean }): Promise<void>;
  isLeader(): boolean;
  /** Base URL of the metrics/health server, e.g. http://127.0.0.1:8080. */
  httpAddress: string;
  identity: string;
  /** Resolves when the work queues are idle and (when leading) the compile pipeline has flushed. */
  waitForIdle(): Promise<void>;
  registry: Registry;
  informers: ResourceInformers;
  pipeline: CompilePipeline | undefined;
}

export async function startOperator(opts: OperatorOptions): Promise<RunningOperator> {
  const identity = opts.identity ?? `${hostname()}-${randomBytes(3).toString('hex')}`;
  const log = (opts.logger ?? createLogger()).child({ component: 'operator', identity });
  const metrics = createOperatorMetrics();
  const client = kubeClient(opts.kubeConfig);
  const resyncSeconds = opts.resyncSeconds ?? 300;

  let leading = false;
  const canWrite = () => leading;
  const applier = createApplier(opts.kubeConfig, { canWrite });
  const events = createEventRecorder({ kubeConfig: opts.kubeConfig, controller: 'byok.gateway.dev/operator', instance: identity, logger: log, canWrite });

  const informers = createResourceInformers({
    kubeConfig: opts.kubeConfig,
    ...(opts.watchNamespaces ? { namespaces: opts.watchNamespaces } : {}),
    logger: log,
    resyncSeconds,
    ...(opts.staleSeconds !== undefined ? { staleSeconds: opts.staleSeconds } : {}),
    onRestart: (informer, reason) => metrics.informerRestarts.inc({ informer, reason }),
  });
  const verdicts = new VerdictStore();
  const source = createAccountStateSource(informers, verdicts);
  const pipeline =
    opts.compile?.enabled === false
      ? undefined
      : createCompilePipeline({
          kubeConfig: opts.kubeConfig,
          routingNamespace: opts.routingNamespace,
          source,
          logger: log,
          registry: metrics.registry,
          applier,
          ...(opts.compile?.coalesceMs !== undefined ? { coalesceMs: opts.compile.coalesceMs } : {}),
          ...(opts.compile?.bundleKeySecretName ? { bundleKeySecretName: opts.compile.bundleKeySecretName } : {}),
        });

  const controllers = new Controllers({
    informers,
    applier,
    events,
    client,
    log,
    metrics,
    verdicts,
    markDirty: (ns) => {
      if (leading) pipeline?.markDirty(ns);
    },
    ...(opts.missingSecretMaxDelayMs !== undefined ? { missingSecretMaxDelayMs: opts.missingSecretMaxDelayMs } : {}),
    ...(opts.defaultMaxCredentials !== undefined ? { defaultMaxCredentials: opts.defaultMaxCredentials } : {}),
    ...(opts.concurrency ? { concurrency: opts.concurrency } : {}),
  });

  const health = await startHealthServer({
    port: opts.httpPort ?? 8080,
    ...(opts.httpHost ? { host: opts.httpHost } : {}),
    registry: metrics.registry,
    ready: () => Object.values(informers).every((i: { hasSynced(): boolean }) => i.hasSynced()),
  });

  // Leadership transitions are serialised: stopping workers and the pipeline is async.
  let transition: Promise<void> = Promise.resolve();
  const leaderGauge = { name: opts.leaderElection?.leaseName ?? 'byok-operator' };
  metrics.leaderStatus.set(leaderGauge, 0);
  const lead = () => {
    transition = transition.then(async () => {
      leading = true;
      metrics.leaderStatus.set(leaderGauge, 1);
      controllers.enqueueAll();
      controllers.start();
      if (pipeline) {
        pipeline.start().catch((err: unknown) => log.error({ err: err instanceof Error ? err.message : String(err) }, 'compile pipeline failed to start'));
      }
    });
  };
  const unlead = () => {
    transition = transition.then(async () => {
      leading = false;
      metrics.leaderStatus.set(leaderGauge, 0);
      await controllers.stop();
      await pipeline?.stop();
    });
  };

  try {
    await startAll(informers);
  } catch (err) {
    await stopAll(informers);
    await health.close();
    throw err;
  }
  log.info({ namespaces: opts.watchNamespaces ?? 'all' }, 'caches synced');

  const le = opts.leaderElection;
  const elector = le?.enabled
    ? new LeaderElector(
        opts.kubeConfig,
        {
          leaseName: le.leaseName ?? 'byok-operator',
          leaseNamespace: le.leaseNamespace ?? opts.routingNamespace,
          identity,
          leaseDurationSeconds: le.leaseDurationSeconds ?? LEASE_DEFAULTS.leaseDurationSeconds,
          renewDeadlineSeconds: le.renewDeadlineSeconds ?? LEASE_DEFAULTS.renewDeadlineSeconds,
          retryPeriodSeconds: le.retryPeriodSeconds ?? LEASE_DEFAULTS.retryPeriodSeconds,
        },
        { onStartedLeading: lead, onStoppedLeading: unlead, onNewLeader: (id) => log.info({ leader: id }, 'leader observed') },
        log,
      )
    : undefined;
  if (elector) elector.start();
  else lead();

  // Periodic full re-reconcile (status writes are skipped when nothing changed, so this is cheap).
  const resync = resyncSeconds > 0 ? setInterval(() => leading && controllers.enqueueAll(), resyncSeconds * 1000) : undefined;
  resync?.unref();

  let stopping: Promise<void> | undefined;
  const stop = (stopOpts: { releaseLease?: boolean } = {}): Promise<void> => {
    stopping ??= (async () => {
      log.info('stopping');
      if (resync) clearInterval(resync);
      if (elector) await elector.stop({ release: stopOpts.releaseLease ?? true });
      else if (leading) unlead();
      await transition;
      await controllers.shutdown();
      await stopAll(informers);
      await health.close();
      log.info('stopped');
    })();
    return stopping;
  };

  if (opts.handleSignals) {
    const onSignal = (signal: string) => {
      log.info({ signal }, 'shutting down');
      stop().then(
        () => process.exit(0),
        () => process.exit(1),
      );
    };
    process.once('SIGTERM', () => onSignal('SIGTERM'));
    process.once('SIGINT', () => onSignal('SIGINT'));
  }

  return {
    stop,
    isLeader: () => leading,
    httpAddress: health.address,
    identity,
    registry: metrics.registry,
    informers,
    pipeline,
    async waitForIdle() {
      await transition;
      for (let i = 0; i < 3; i++) {
        await controllers.waitForIdle();
        if (leading && pipeline) await pipeline.flush();
        if (controllers.isIdle()) break;
      }
    },
  };
}
