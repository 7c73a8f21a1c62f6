// Entry point of the operator runtime: informers → work queues → reconcilers → status, plus the compile
// pipeline, leader election, metrics/health endpoints and graceful shutdown. startOperator builds the components and
// hands them to the manager (manager.ts) as one list: informers run on every replica (warm caches, fast failover,
// readiness); reconcile workers, writes and compiles run only on the leader.

import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import { Gauge, type Registry } from 'prom-client';
import { INDEX_NAME } from '../contract/routing.ts';
import type { EgressAllowList } from '../domain/egress.ts';
import { microsToUsd } from '../domain/money.ts';
import { createApplier } from '../kube/apply.ts';
import { kubeClient } from '../kube/client.ts';
import { createEventRecorder, type EventRecorder } from '../kube/events.ts';
import type { KubeAccess } from '../kube/kubeconfig.ts';
import { createResourceInformers, type ResourceInformers, startAll, stopAll } from '../kube/resources.ts';
import { EventReason } from '../schema/conditions.ts';
import { CompilePipeline, type CompilePipelineOptions } from './compile/pipeline.ts';
import { watchForCompile } from './compile/watches.ts';
import { addReconcilers, Controllers } from './controllers.ts';
import { type DeliveryStreamConfig, DeliveryStreamServer } from './delivery/server.ts';
import { registerAccountDelivery } from './delivery-metrics.ts';
import { ExportController, type ExportControllerConfig } from './export/controller.ts';
import {
  createGatewayHealthStatus,
  type GatewayStatusConfig,
  type HealthStatusWriter,
} from './health/health-status-writer.ts';
import { type HealthServer, startHealthServer } from './http.ts';
import { LEASE_DEFAULTS } from './leader.ts';
import { childLogger, createLogger } from './logger.ts';
import { type Component, Manager } from './manager.ts';
import { createOperatorMetrics, registerCredentialReadiness } from './metrics.ts';
import { AccountReconciler } from './reconcile/account.ts';
import { StatusWriter } from './reconcile/status-writer.ts';
import { createRedisSpendStatus, type SpendStatusConfig } from './spend/spend-status-writer.ts';
import { createAccountStateSource, VerdictStore } from './verdicts.ts';

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
  kubeConfig: KubeAccess;
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
  /** Full re-reconcile period, from the cache (no apiserver reads); default 300. */
  resyncSeconds?: number;
  /**
   * Informer relist period, the last line of defence behind watch + 410 handling; default 1800. A relist of
   * 100k credentials and their Secrets is ~400 pages and ~50 s of apiserver time, so it is not done every
   * resync (client-go does not relist periodically at all).
   */
  relistSeconds?: number;
  /** Watch staleness watchdog; default 150. */
  staleSeconds?: number;
  /** Install SIGTERM/SIGINT handlers that stop gracefully (and release the lease). Default false. */
  handleSignals?: boolean;
  /** Cap of the missing-Secret requeue backoff in ms (default 5000). */
  missingSecretMaxDelayMs?: number;
  /** Credentials per account when its Account sets no spec.limits.maxCredentials (default 1000). */
  defaultMaxCredentials?: number;
  /** What tenant URLs in payloads may point at beyond the egress policy (`--egress-allow`). */
  egress?: EgressAllowList;
  concurrency?: { credentials?: number; others?: number };
  /** Compile pipeline (on by default). */
  compile?: {
    enabled?: boolean;
    coalesceMs?: number;
    bundleKeySecretName?: string;
    shardOptions?: CompilePipelineOptions['shardOptions'];
  };
  /** Publish spend from the gateways' shared Redis ledger into Account/Workspace/Guardrail status (leader only). */
  spendStatus?: SpendStatusConfig;
  /** Pull gateway pods' status endpoints into UpstreamHealthy, lastUsedTime and Delivered (leader only; docs/operator.md). */
  gatewayStatus?: GatewayStatusConfig;
  /**
   * Shard and bundle slots the gateway Deployment mounts (chart: gateway.routingSlots / gateway.bundleSlots). When the
   * compiled config needs more, the operator warns (log, Event on the index ConfigMap, byok_gateway_slots_exceeded).
   */
  gatewaySlots?: { routing: number; bundles: number };
  /** Keep Envoy AI Gateway's or agentgateway's objects in a namespace (`--export-target`; export/controller.ts). Needs the compile pipeline. */
  export?: ExportControllerConfig;
  /** Serve the delivery stream to gateway pods from this replica's cache (every replica; delivery/server.ts). */
  deliveryStream?: DeliveryStreamConfig;
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
  /** Base URL of the delivery stream, when it is on. */
  deliveryUrl(): string | undefined;
}

export async function startOperator(opts: OperatorOptions): Promise<RunningOperator> {
  const identity = opts.identity ?? `${hostname()}-${randomBytes(3).toString('hex')}`;
  const log = childLogger(opts.logger ?? createLogger(), { component: 'operator', identity });
  const metrics = createOperatorMetrics();
  const leaseName = opts.leaderElection?.leaseName ?? 'byok-operator';
  const manager = new Manager({ log, leaderStatus: metrics.leaderStatus, leaseName });
  // Every write is fenced on leading.
  const canWrite = () => manager.leading;
  const applier = createApplier(opts.kubeConfig, { canWrite });
  const events = createEventRecorder({
    kubeConfig: opts.kubeConfig,
    controller: 'byok.gateway.dev/operator',
    instance: identity,
    logger: log,
    canWrite,
  });

  const informers = createResourceInformers({
    kubeConfig: opts.kubeConfig,
    ...(opts.watchNamespaces ? { namespaces: opts.watchNamespaces } : {}),
    logger: log,
    resyncSeconds: opts.relistSeconds ?? 1800,
    ...(opts.staleSeconds !== undefined ? { staleSeconds: opts.staleSeconds } : {}),
    onRestart: (informer, reason) => metrics.informerRestarts.inc({ informer, reason }),
  });
  registerCredentialReadiness(metrics.registry, () => informers.credentials.list());
  registerAccountDelivery(metrics.registry, () => informers.accounts.list());
  const verdicts = new VerdictStore();
  const source = createAccountStateSource(informers, verdicts);

  // The work queues and the account reconciler come before the compile pipeline, which yields to a credential
  // backlog and reports quarantines to the account reconciler; the other reconcilers mark its accounts dirty.
  const controllers = new Controllers({
    informers,
    metrics,
    log,
    ...(opts.concurrency ? { concurrency: opts.concurrency } : {}),
  });
  const writer = new StatusWriter({ applier, events, log });
  const accounts = new AccountReconciler({ informers, writer, enqueueAccount: controllers.enqueuer('accounts') });
  const exporter =
    opts.export && opts.compile?.enabled !== false
      ? new ExportController(opts.export, {
          kubeConfig: opts.kubeConfig,
          canWrite,
          log: childLogger(log, { component: 'export' }),
          registry: metrics.registry,
          events,
        })
      : undefined;
  const pipeline =
    opts.compile?.enabled === false
      ? undefined
      : new CompilePipeline({
          ...compileOptions(opts),
          source,
          logger: log,
          registry: metrics.registry,
          applier,
          onQuarantine: (ns, q) => accounts.setQuarantine(ns, q),
          backlog: () => controllers.credentialBacklog(),
          ...(exporter ? { onAccountCompiled: exporter.observe } : {}),
        });
  if (pipeline) exporter?.follow(pipeline);
  const markDirty = (ns: string) => {
    if (manager.leading) pipeline?.markDirty(ns);
  };
  addReconcilers(controllers, {
    informers,
    client: kubeClient(opts.kubeConfig),
    applier,
    metrics,
    verdicts,
    writer,
    accounts,
    markDirty,
    ...(opts.missingSecretMaxDelayMs !== undefined ? { missingSecretMaxDelayMs: opts.missingSecretMaxDelayMs } : {}),
    ...(opts.defaultMaxCredentials !== undefined ? { defaultMaxCredentials: opts.defaultMaxCredentials } : {}),
    ...(opts.egress ? { egress: opts.egress } : {}),
  });
  // After the reconcilers' watches, so a deleted credential's verdict is gone before its account is marked.
  if (pipeline) watchForCompile(informers, markDirty);
  if (pipeline && opts.gatewaySlots)
    watchGatewaySlots(pipeline, opts.gatewaySlots, { log, metrics, events, routingNamespace: opts.routingNamespace });

  const { spendStatus, healthStatus } = await statusWriters(opts, {
    canWrite,
    source,
    informers,
    pipeline,
    events,
    registry: metrics.registry,
    log,
    identity,
  });
  const endpoints = httpEndpoints({
    port: opts.httpPort ?? 8080,
    ...(opts.httpHost ? { host: opts.httpHost } : {}),
    registry: metrics.registry,
    ready: () => Object.values(informers).every((i: { hasSynced(): boolean }) => i.hasSynced()),
  });
  const resyncSeconds = opts.resyncSeconds ?? 300;
  const delivery =
    opts.deliveryStream &&
    new DeliveryStreamServer(opts.deliveryStream, {
      kubeConfig: opts.kubeConfig,
      routingNamespace: opts.routingNamespace,
      logger: childLogger(log, { component: 'delivery' }),
      registry: metrics.registry,
    });

  // The components, in start order: every replica serves its endpoints and keeps its caches warm (fast failover,
  // readiness); the leader alone reconciles, compiles and writes status.
  manager.add(
    endpoints,
    caches(informers, () => log.info({ namespaces: opts.watchNamespaces ?? 'all' }, 'caches synced')),
    delivery,
    // Periodic full re-reconcile (status writes are skipped when nothing changed, so this is cheap). Skipped while
    // credentials are backed up: everything queued is reconciled anyway (at 100k a cold start outlasts 300 s).
    resyncSeconds > 0
      ? every(
          'resync',
          resyncSeconds * 1000,
          () => manager.leading && !controllers.credentialBacklog() && controllers.enqueueAll({ background: true }),
        )
      : undefined,
    controllers,
    spendStatus,
    healthStatus,
    exporter,
    pipeline,
  );
  await manager.start(campaign(opts, leaseName, identity));
  const stop = (stopOpts: { releaseLease?: boolean } = {}) => manager.stop(stopOpts);
  if (opts.handleSignals) exitOnSignals(stop, log);

  return {
    stop,
    isLeader: () => manager.leading,
    httpAddress: endpoints.address(),
    identity,
    registry: metrics.registry,
    informers,
    pipeline,
    deliveryUrl: () => delivery?.url || undefined,
    async waitForIdle() {
      await manager.settled();
      for (let i = 0; i < 3; i++) {
        await controllers.waitForIdle();
        if (manager.leading && pipeline) await pipeline.flush();
        if (manager.leading) await exporter?.flush();
        if (controllers.isIdle()) break;
      }
    },
  };
}

/**
 * The leader's two status writers beside the reconcilers: spend (with a shared ledger) and health (with gateway
 * status). A GatewayAPIKey is Delivered only once its account's budgets admit requests: with a shared ledger, when
 * the spend writer has validated the account, which a compile asks it to do at once (a new account).
 */
async function statusWriters(
  opts: OperatorOptions,
  deps: {
    canWrite: () => boolean;
    source: ReturnType<typeof createAccountStateSource>;
    informers: ResourceInformers;
    pipeline: CompilePipeline | undefined;
    events: EventRecorder;
    registry: Registry;
    log: Logger;
    identity: string;
  },
) {
  const { canWrite, informers, pipeline, events, log } = deps;
  let healthStatus: HealthStatusWriter | undefined;
  const spendStatus = opts.spendStatus
    ? await createRedisSpendStatus(opts.spendStatus, {
        kubeConfig: opts.kubeConfig,
        canWrite,
        source: deps.source,
        log,
        onReset: ledgerResetEvents(informers, events),
        onValidated: () => healthStatus?.soon(),
        instance: deps.identity,
      })
    : undefined;
  if (spendStatus)
    pipeline?.onCompiled((r) => r.accounts.some((ns) => !spendStatus.validated(ns)) && spendStatus.soon());
  healthStatus = opts.gatewayStatus
    ? createGatewayHealthStatus(opts.gatewayStatus, {
        kubeConfig: opts.kubeConfig,
        canWrite,
        informers,
        pipeline,
        ...(spendStatus ? { budgetsOpen: (ns: string) => spendStatus.validated(ns) } : {}),
        events,
        registry: deps.registry,
        log,
      })
    : undefined;
  return { spendStatus, healthStatus };
}

/** The compile pipeline's settings from the operator's options. */
function compileOptions(opts: OperatorOptions) {
  const c = opts.compile;
  return {
    kubeConfig: opts.kubeConfig,
    routingNamespace: opts.routingNamespace,
    ...(c?.coalesceMs !== undefined ? { coalesceMs: c.coalesceMs } : {}),
    ...(c?.bundleKeySecretName ? { bundleKeySecretName: c.bundleKeySecretName } : {}),
    ...(c?.shardOptions ? { shardOptions: c.shardOptions } : {}),
  };
}

/** The lease to campaign for, or none: without leader election this replica leads at once. */
function campaign(opts: OperatorOptions, leaseName: string, identity: string) {
  const le = opts.leaderElection;
  if (!le?.enabled) return undefined;
  return {
    kubeConfig: opts.kubeConfig,
    lease: {
      leaseName,
      leaseNamespace: le.leaseNamespace ?? opts.routingNamespace,
      identity,
      leaseDurationSeconds: le.leaseDurationSeconds ?? LEASE_DEFAULTS.leaseDurationSeconds,
      renewDeadlineSeconds: le.renewDeadlineSeconds ?? LEASE_DEFAULTS.renewDeadlineSeconds,
      retryPeriodSeconds: le.retryPeriodSeconds ?? LEASE_DEFAULTS.retryPeriodSeconds,
    },
  };
}

/** /metrics, /healthz and /readyz on every replica; its address once started. */
function httpEndpoints(opts: Parameters<typeof startHealthServer>[0]): Component & { address(): string } {
  let server: HealthServer | undefined;
  return {
    name: 'http endpoints',
    everyReplica: true,
    start: async () => {
      server = await startHealthServer(opts);
    },
    close: async () => server?.close(),
    address: () => server?.address ?? '',
  };
}

/** The informers' caches on every replica (fast failover, readiness); `synced` once all have listed. */
function caches(informers: ResourceInformers, synced: () => void): Component {
  return {
    name: 'informers',
    everyReplica: true,
    start: async () => {
      await startAll(informers);
      synced();
    },
    close: () => stopAll(informers),
  };
}

/** A timer on every replica: `tick` decides for itself whether this replica acts. */
function every(name: string, intervalMs: number, tick: () => void): Component {
  let timer: NodeJS.Timeout | undefined;
  return {
    name,
    everyReplica: true,
    start: () => {
      timer = setInterval(tick, intervalMs);
      timer.unref();
    },
    close: async () => clearInterval(timer),
  };
}

/** SIGTERM/SIGINT stop gracefully (releasing the lease), then exit. */
function exitOnSignals(stop: () => Promise<void>, log: Logger): void {
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

/** A ledger reset that lost spend is reported on the Account, where `kubectl describe` shows it. */
function ledgerResetEvents(
  informers: ResourceInformers,
  events: EventRecorder,
): (namespace: string, raisedCounters: number, largestMicros: number) => void {
  return (namespace, raisedCounters, largestMicros) => {
    const account = informers.accounts.list().find((a) => a.metadata?.namespace === namespace);
    if (!account) return;
    const note = `the spend ledger restarted and lost spend: ${raisedCounters} counters were rebuilt from status.spend (the largest by ${microsToUsd(largestMicros)} USD); budgets were closed until then, and spend metered after the last mirror is lost`;
    void events.record(account, 'Warning', EventReason.LedgerReset, note).catch(() => undefined);
  };
}

/** Warns once per growth when gateway pods would miss shards or bundles because their Deployment has too few slots. */
function watchGatewaySlots(
  pipeline: CompilePipeline,
  slots: { routing: number; bundles: number },
  ctx: {
    log: Logger;
    metrics: ReturnType<typeof createOperatorMetrics>;
    events: ReturnType<typeof createEventRecorder>;
    routingNamespace: string;
  },
): void {
  const needed = new Gauge({
    name: 'byok_gateway_slots_needed',
    help: 'Projected-volume slots the compiled config needs in gateway pods, by kind (routing, bundles).',
    labelNames: ['kind'],
    registers: [ctx.metrics.registry],
  });
  const exceeded = new Gauge({
    name: 'byok_gateway_slots_exceeded',
    help: '1 when the compiled config needs more slots of this kind than gateway pods mount.',
    labelNames: ['kind'],
    registers: [ctx.metrics.registry],
  });
  const warned = { routing: 0, bundles: 0 };
  pipeline.onCompiled((result) => {
    for (const kind of ['routing', 'bundles'] as const) {
      const need = result.slotsNeeded[kind];
      needed.set({ kind }, need);
      exceeded.set({ kind }, need > slots[kind] ? 1 : 0);
      if (need <= slots[kind]) {
        warned[kind] = 0;
        continue;
      }
      if (need <= warned[kind]) continue;
      warned[kind] = need;
      const note = `the compiled routing config needs ${need} ${kind} slots but gateway pods mount ${slots[kind]}: raise gateway.${kind === 'routing' ? 'routingSlots' : 'bundleSlots'}, or pods miss ${kind === 'routing' ? 'shards' : 'credential bundles'}`;
      ctx.log.warn({ kind, needed: need, mounted: slots[kind] }, note);
      void ctx.events
        .record(
          { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: INDEX_NAME, namespace: ctx.routingNamespace } },
          'Warning',
          EventReason.GatewaySlotsExceeded,
          note,
        )
        .catch(() => undefined);
    }
  });
}
