// Prometheus metrics with controller-runtime's (and client-go workqueue's) names, so existing dashboards and
// alerts for Go operators work unchanged. One Registry per operator instance (tests run several in a process).
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { ConditionType, PendingReason } from '../schema/conditions.ts';

export interface OperatorMetrics {
  registry: Registry;
  reconcileTotal: Counter<'controller' | 'result'>;
  reconcileErrors: Counter<'controller'>;
  reconcileTime: Histogram<'controller'>;
  activeWorkers: Gauge<'controller'>;
  maxConcurrentReconciles: Gauge<'controller'>;
  queueDepth: Gauge<'name' | 'controller'>;
  queueAdds: Counter<'name' | 'controller'>;
  queueRetries: Counter<'name' | 'controller'>;
  queueLatency: Histogram<'name' | 'controller'>;
  workDuration: Histogram<'name' | 'controller'>;
  leaderStatus: Gauge<'name'>;
  informerRestarts: Counter<'informer' | 'reason'>;
  secretLookups: Counter<'result'>;
}

const LATENCY_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

export function createOperatorMetrics(
  registry = new Registry(),
  opts: { defaultMetrics?: boolean } = {},
): OperatorMetrics {
  const registers = [registry];
  if (opts.defaultMetrics ?? true) collectDefaultMetrics({ register: registry });
  return {
    registry,
    reconcileTotal: new Counter({
      name: 'controller_runtime_reconcile_total',
      help: 'Total number of reconciliations per controller',
      labelNames: ['controller', 'result'],
      registers,
    }),
    reconcileErrors: new Counter({
      name: 'controller_runtime_reconcile_errors_total',
      help: 'Total number of reconciliation errors per controller',
      labelNames: ['controller'],
      registers,
    }),
    reconcileTime: new Histogram({
      name: 'controller_runtime_reconcile_time_seconds',
      help: 'Length of time per reconciliation per controller',
      labelNames: ['controller'],
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    activeWorkers: new Gauge({
      name: 'controller_runtime_active_workers',
      help: 'Number of currently used workers per controller',
      labelNames: ['controller'],
      registers,
    }),
    maxConcurrentReconciles: new Gauge({
      name: 'controller_runtime_max_concurrent_reconciles',
      help: 'Maximum number of concurrent reconciles per controller',
      labelNames: ['controller'],
      registers,
    }),
    queueDepth: new Gauge({
      name: 'workqueue_depth',
      help: 'Current depth of workqueue',
      labelNames: ['name', 'controller'],
      registers,
    }),
    queueAdds: new Counter({
      name: 'workqueue_adds_total',
      help: 'Total number of adds handled by workqueue',
      labelNames: ['name', 'controller'],
      registers,
    }),
    queueRetries: new Counter({
      name: 'workqueue_retries_total',
      help: 'Total number of retries handled by workqueue',
      labelNames: ['name', 'controller'],
      registers,
    }),
    queueLatency: new Histogram({
      name: 'workqueue_queue_duration_seconds',
      help: 'How long in seconds an item stays in workqueue before being requested',
      labelNames: ['name', 'controller'],
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    workDuration: new Histogram({
      name: 'workqueue_work_duration_seconds',
      help: 'How long in seconds processing an item from workqueue takes',
      labelNames: ['name', 'controller'],
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    leaderStatus: new Gauge({
      name: 'leader_election_master_status',
      help: 'Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master',
      labelNames: ['name'],
      registers,
    }),
    informerRestarts: new Counter({
      name: 'byok_informer_watch_restarts_total',
      help: 'Watch restarts per informer and reason (error, warming: the apiserver watch cache not ready yet, gone, stale, resync, closed)',
      labelNames: ['informer', 'reason'],
      registers,
    }),
    secretLookups: new Counter({
      name: 'byok_secret_direct_reads_total',
      help: 'Direct GETs of credential Secrets not (yet) in the labelled cache',
      labelNames: ['result'],
      registers,
    }),
  };
}

/** The Ready condition of an object, as the informer cache holds it. */
interface WithReady {
  status?: { conditions?: readonly { type: string; status: string; reason?: string }[] };
}

/**
 * `byok_credential_ready{status, reason}`: how many BYOKCredentials have each Ready status and reason, counted
 * from the informer cache at scrape time. Counts, not one series per credential, so cardinality stays at the
 * handful of reasons however many credentials there are (every replica reports the same numbers: aggregate
 * with max). `status="Unknown", reason="NotReconciled"` counts credentials without a Ready condition yet.
 */
export function registerCredentialReadiness(
  registry: Registry,
  credentials: () => Iterable<WithReady>,
): Gauge<'status' | 'reason'> {
  return new Gauge({
    name: 'byok_credential_ready',
    help: 'BYOKCredentials by Ready condition status and reason (counts from the cache).',
    labelNames: ['status', 'reason'],
    registers: [registry],
    collect() {
      this.reset();
      const counts = new Map<string, { status: string; reason: string; n: number }>();
      for (const c of credentials()) {
        const ready = c.status?.conditions?.find((x) => x.type === ConditionType.Ready);
        const status = ready?.status ?? 'Unknown';
        const reason = ready?.reason ?? PendingReason.NotReconciled;
        const key = `${status}\n${reason}`;
        const entry = counts.get(key) ?? { status, reason, n: 0 };
        entry.n++;
        counts.set(key, entry);
      }
      for (const { status, reason, n } of counts.values()) this.set({ status, reason }, n);
    },
  });
}
