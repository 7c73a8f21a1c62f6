// The health writer (docs/operator.md, "Upstream health and delivery"): upstream health and delivery, reported back
// by the data plane. The leader pulls GET /byok/status from every gateway pod (found through the gateway Service's
// EndpointSlices, or given as URLs), turns the counters into UpstreamHealthy and the loaded envelope versions into
// Delivered, and writes them with its own field manager (HEALTH_FIELD_MANAGER) on transitions only, at most once per
// object per writeIntervalMs. Data flows one way: nothing here feeds routing. The reconcilers ignore these fields
// (ownedStatus). Each pass is gather (gather.ts: pods, reports, probes) → evaluate (evaluate.ts, pure; memory.ts
// keeps what passes remember) → write (status-writes.ts).
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { GatewayStatusReport } from '../../contract/gateway-status.ts';
import { normalizeKeyHash } from '../../domain/api-keys.ts';
import { publicId } from '../../domain/ids.ts';
import { type Applier, createApplier } from '../../kube/apply.ts';
import type { EventRecorder } from '../../kube/events.ts';
import type { KubeAccess } from '../../kube/kubeconfig.ts';
import type { ResourceInformers } from '../../kube/resources.ts';
import { EventReason } from '../../schema/conditions.ts';
import type { CompilePipeline } from '../compile/pipeline.ts';
import type { Component } from '../manager.ts';
import { type PeriodicPass, periodicPass } from '../periodic.ts';
import { STATUS_OWNERS } from '../status/ownership.ts';
import {
  accountVersion,
  DEFAULT_THRESHOLDS,
  deliveryPart,
  evaluateCredentialHealth,
  type HealthThresholds,
  refusedBatchNote,
  serves,
  servesApiKey,
  stalePodNote,
  upstreamHealthEvent,
} from './evaluate.ts';
import { GatewayCollector, type Target } from './gather.ts';
import { HealthMemory } from './memory.ts';
import { HealthStatusWrites } from './status-writes.ts';
import { DeliveryWatch } from './watch.ts';

export const HEALTH_FIELD_MANAGER = STATUS_OWNERS.health.fieldManager;
export { PROBE_ANNOTATION } from './gather.ts';
export { HEALTH_CONDITION_TYPES, HEALTH_STATUS_FIELDS } from './status-writes.ts';

export interface GatewayStatusConfig {
  /** Bearer token the gateways expect on GET /byok/status (gateway --status-token-file). */
  token: string;
  /** Pods behind this Service, from its EndpointSlices (ready endpoints; FQDN, IPv4 or IPv6 addresses). */
  service?: { namespace: string; name: string; port?: string | number; scheme?: 'http' | 'https' };
  /** Fixed base URLs instead (dev, tests), e.g. http://127.0.0.1:8080. */
  urls?: string[];
  /** How often pods are polled (default 10 s). */
  pollMs?: number;
  /** At most one status write per object per this interval (default 30 s). */
  writeIntervalMs?: number;
  thresholds?: Partial<HealthThresholds>;
  /** lastUsedTime is rewritten only when it moved by at least this much (default 1 min): counts live in metrics. */
  lastUsedResolutionMs?: number;
  /**
   * While a credential's new version is not on every pod, pods are polled this often instead of pollMs (default
   * 1 s), so Delivered turns True soon after the last pod loads it.
   */
  pendingPollMs?: number;
  /** A pod that has not loaded an account's current versions for this long gets a Warning Event (default 5 min). */
  staleAfterMs?: number;
  /** Per-pod request timeout (default 3 s). */
  requestTimeoutMs?: number;
  /** Status writes in flight at once (default 8). */
  writeConcurrency?: number;
  /**
   * Probes of idle credentials annotated byok.gateway.dev/probe: "true" (off by default): after idleMs without use
   * or probe (default 1 h), one gateway pod makes the cheapest authenticated call; at most one probe per provider
   * per perProviderIntervalMs (default 10 s), pods taken in turn.
   */
  probe?: { idleMs?: number; perProviderIntervalMs?: number };
  /**
   * How long each pod holds the leader's status request before answering unchanged (default 25 s); 0 turns the
   * held requests off, leaving Delivered to the polls.
   */
  heldRequestMs?: number;
}

/** What the health writer is built from; createGatewayHealthStatus fills in the applier. */
export interface HealthStatusWriterDeps {
  config: GatewayStatusConfig;
  kubeConfig: KubeAccess;
  informers: ResourceInformers;
  pipeline: CompilePipeline | undefined;
  /** See PassContext.budgetsOpen; absent: budgets are always open (the embedded ledger). */
  budgetsOpen?: (namespace: string) => boolean;
  applier: Applier;
  events: EventRecorder;
  registry: Registry;
  log: Logger;
  clock?: () => number;
}

/** The health writer, a leader component: polls (and holds requests on) the gateway pods, and writes status. */
export class HealthStatusWriter implements Component {
  readonly name = 'health status';
  private readonly context: PassContext;
  private readonly log: Logger;
  private readonly pendingPollMs: number;
  private readonly heldRequestMs: number;
  private readonly pipeline: CompilePipeline | undefined;
  private readonly loop: PeriodicPass;
  // One pass at a time, polled or pushed: a pass never writes over a newer pass's Delivered.
  private chain: Promise<void> = Promise.resolve();
  private pushQueued = false;
  private unsubscribe: (() => void) | undefined;

  constructor(deps: HealthStatusWriterDeps) {
    const { config } = deps;
    this.log = deps.log.child({ component: 'health-status' });
    this.pipeline = deps.pipeline;
    const clock = deps.clock ?? Date.now;
    this.pendingPollMs = config.pendingPollMs ?? 1000;
    this.heldRequestMs = config.heldRequestMs ?? 25_000;
    const gauges = healthGauges(deps.registry);
    this.context = {
      clock,
      log: this.log,
      thresholds: { ...DEFAULT_THRESHOLDS, ...config.thresholds },
      lastUsedResolutionMs: config.lastUsedResolutionMs ?? 60_000,
      staleAfterMs: config.staleAfterMs ?? 5 * 60_000,
      informers: deps.informers,
      events: deps.events,
      pipeline: deps.pipeline,
      budgetsOpen: deps.budgetsOpen ?? (() => true),
      collector: new GatewayCollector({
        config,
        kubeConfig: deps.kubeConfig,
        log: this.log,
        probesTotal: gauges.probesTotal,
      }),
      statusWrites: new HealthStatusWrites({
        applier: deps.applier,
        log: this.log,
        writes: gauges.writes,
        writeIntervalMs: config.writeIntervalMs ?? 30_000,
        concurrency: config.writeConcurrency ?? 8,
      }),
      memory: new HealthMemory(clock()),
      healthyGauge: gauges.healthy,
      podsGauge: gauges.pods,
      staleGauge: gauges.stale,
      latest: new Map(),
      lastFound: [],
      watch: undefined,
    };
    this.loop = periodicPass(() => this.syncOnce(), config.pollMs ?? 10_000, this.failed);
  }

  start(): void {
    const c = this.context;
    if (this.heldRequestMs > 0) {
      c.watch ??= new DeliveryWatch({
        collector: c.collector,
        log: this.log,
        waitMs: this.heldRequestMs,
        onReport: (pod, report) => {
          if (absorbNewer(c.latest, pod, report)) this.pushed();
        },
      });
    }
    this.loop.start();
    // A compile that changed something may carry new credential versions: record them (Delivered False, Pending, in
    // the same write as the new version) now rather than at the next poll.
    this.unsubscribe ??= this.pipeline?.onCompiled(() => this.loop.soon());
  }

  async stop(): Promise<void> {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    this.context.watch?.stop();
    this.context.watch = undefined;
    await this.loop.stop();
    await this.chain;
  }

  /** One poll + write pass (what the timer runs). */
  async syncOnce(): Promise<void> {
    await this.exclusive(async () => {
      // Pods that hold the status request push their next load; the others are polled again soon while pending.
      const pending = await healthPass(this.context, true);
      if (pending.volumeOnly) this.loop.soon(this.pendingPollMs);
    });
  }

  /** Asks for a pass now (e.g. an account's budgets opened). */
  soon(): void {
    this.loop.soon();
  }

  private readonly failed = (err: unknown) =>
    this.log.error({ err: err instanceof Error ? err.message : String(err) }, 'health pass failed');

  private exclusive(pass: () => Promise<void>): Promise<void> {
    const next = this.chain.then(pass);
    this.chain = next.catch(() => undefined);
    return next;
  }

  /** A held request answered: one pass over the newest reports, coalescing answers that arrive meanwhile. */
  private pushed(): void {
    if (this.pushQueued) return;
    this.pushQueued = true;
    this.exclusive(async () => {
      this.pushQueued = false;
      await healthPass(this.context, false);
    }).catch(this.failed);
  }
}

function healthGauges(registry: Registry) {
  return {
    healthy: new Gauge({
      name: 'byok_credential_upstream_healthy',
      help: 'BYOK credentials by UpstreamHealthy reason (Serving, Unauthorized, RateLimited, UpstreamErrors, Unused, Inconclusive).',
      labelNames: ['namespace', 'provider', 'reason'] as const,
      registers: [registry],
    }),
    pods: new Gauge({
      name: 'byok_gateway_pods_reporting',
      help: 'Gateway pods found and answering the status endpoint, by result (ok, failed).',
      labelNames: ['result'] as const,
      registers: [registry],
    }),
    stale: new Gauge({
      name: 'byok_gateway_pods_stale',
      help: 'Gateway pods that have not loaded the current credential versions of at least one account for longer than the stale threshold.',
      registers: [registry],
    }),
    probesTotal: new Counter({
      name: 'byok_credential_probes_total',
      help: 'Probes of idle credentials asked of gateway pods, by provider and result (done, refused, unreachable).',
      labelNames: ['provider', 'result'] as const,
      registers: [registry],
    }),
    writes: new Counter({
      name: 'byok_health_status_writes_total',
      help: 'Status writes of the health writer, by kind (BYOKCredential, Account, GatewayAPIKey) and result.',
      labelNames: ['kind', 'result'] as const,
      registers: [registry],
    }),
  };
}

/** Keeps `report` as the pod's latest when it is newer than the one kept; true when kept. */
function absorbNewer(latest: Map<string, GatewayStatusReport>, pod: string, report: GatewayStatusReport): boolean {
  const kept = latest.get(pod);
  if (kept && kept.instance === report.instance && kept.at > report.at) return false;
  if (kept && kept.instance === report.instance && (kept.delivery?.seq ?? 0) > (report.delivery?.seq ?? 0))
    return false;
  latest.set(pod, report);
  return true;
}

/** What a pass reads and keeps: the writer's settings, parts and metrics, and its memory between passes. */
interface PassContext {
  clock: () => number;
  log: Logger;
  thresholds: HealthThresholds;
  lastUsedResolutionMs: number;
  staleAfterMs: number;
  informers: ResourceInformers;
  events: EventRecorder;
  pipeline: CompilePipeline | undefined;
  /** Whether an account's budgets admit requests (the spend ledger has validated it); always with no shared ledger. */
  budgetsOpen: (namespace: string) => boolean;
  collector: GatewayCollector;
  statusWrites: HealthStatusWrites;
  memory: HealthMemory;
  healthyGauge: Gauge<'namespace' | 'provider' | 'reason'>;
  podsGauge: Gauge<'result'>;
  staleGauge: Gauge;
  /** Each pod's newest report, polled or pushed (a held request's answer). */
  latest: Map<string, GatewayStatusReport>;
  /** The pods the last poll found (a pushed pass counts these). */
  lastFound: Target[];
  watch: DeliveryWatch | undefined;
}

/** What one pass gathered from the pods. */
interface Gathered {
  now: number;
  found: Target[];
  /** Reports of the pods that answered, by pod name. */
  reports: Map<string, GatewayStatusReport>;
  /** Each report's routing index as the compile run from which it is current (-1: no routing config yet). */
  routingRuns: Map<GatewayStatusReport, number>;
  /** Writes and Events of the pass, awaited at its end. */
  jobs: Promise<unknown>[];
}

/**
 * One write pass. `poll`: find the pods and pull every report first (the timer, a compile); otherwise a pushed pass
 * over the pods the last poll found and the newest report of each (a held request answered). `pending`: a version
 * is still missing on some pod; `volumeOnly`: and some pod will not push when it loads it (poll again soon).
 */
async function healthPass(c: PassContext, poll: boolean): Promise<{ pending: boolean; volumeOnly: boolean }> {
  const now = c.clock();
  let found = c.lastFound;
  if (poll) {
    try {
      found = await c.collector.targets();
    } catch (err) {
      c.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'listing gateway pods failed');
      return { pending: false, volumeOnly: false };
    }
    const polled = await c.collector.reports(found);
    c.podsGauge.set({ result: 'ok' }, polled.size);
    c.podsGauge.set({ result: 'failed' }, found.length - polled.size);
    c.memory.absorb(polled, found, now);
    for (const pod of c.latest.keys()) if (!polled.has(pod)) c.latest.delete(pod);
    for (const [pod, r] of polled) absorbNewer(c.latest, pod, r);
    c.lastFound = found;
    c.watch?.sync(found, c.latest);
  }
  const reports = new Map<string, GatewayStatusReport>();
  for (const t of found) {
    const r = c.latest.get(t.pod);
    if (r) reports.set(t.pod, r);
  }
  // A routing entry changed in run n is on the pods whose index is from run n or later.
  const routingRuns = new Map<GatewayStatusReport, number>();
  for (const r of reports.values())
    routingRuns.set(r, r.routing.version === null ? -1 : (c.pipeline?.routingRun(r.routing.version) ?? 0));
  const pass: Gathered = { now, found, reports, routingRuns, jobs: [] };

  const credentials = c.informers.credentials.list();
  const { pending, seen } = credentialsPass(c, pass, credentials);
  if (poll) {
    for (const id of c.memory.forgetCredentialsExcept(seen)) c.collector.forget(id);
    pass.jobs.push(
      c.collector.probeIdle(
        credentials,
        found.filter((f) => reports.has(f.pod)),
        now,
        (id) => c.memory.idleSince(id),
      ),
    );
  }
  c.staleGauge.set(accountsPass(c, pass));
  const keysPending = apiKeysPass(c, pass);
  await Promise.all(pass.jobs);
  // A pod whose report is not held (an older gateway, a failed report) is polled.
  const volumeOnly = c.watch === undefined || found.some((t) => c.latest.get(t.pod)?.delivery === undefined);
  return { pending: pending || keysPending, volumeOnly: (pending || keysPending) && volumeOnly };
}

/**
 * GatewayAPIKeys: how many pods serve each key's current routing entry; Delivered True only when every pod does and
 * the account's budgets admit requests (`budgetsOpen`). Returns whether a key is still pending.
 */
function apiKeysPass(c: PassContext, pass: Gathered): boolean {
  const { now, found, reports, routingRuns, jobs } = pass;
  let pending = false;
  for (const key of c.informers.apiKeys.list()) {
    const ns = key.metadata?.namespace ?? '';
    const delivery = c.pipeline?.apiKeyDelivery(ns)?.get(normalizeKeyHash(key.spec?.hash ?? ''));
    if (!delivery) continue;
    const loaded = [...reports.values()].filter((r) => servesApiKey(r, routingRuns.get(r)!, delivery)).length;
    const waiting = c.budgetsOpen(ns)
      ? undefined
      : "the account's budgets are not open yet (the operator has not validated it in the spend ledger)";
    const e = deliveryPart(
      (key as { status?: object }).status,
      key.metadata?.generation,
      { loaded, total: found.length, version: delivery.version },
      now,
      waiting,
    );
    if (e.pending) pending = true;
    if (!e.unchanged) jobs.push(c.statusWrites.write('GatewayAPIKey', key, e.part, now));
  }
  return pending;
}

/**
 * Credentials: UpstreamHealthy, lastUsedTime and Delivered, with an Event on each written health transition. Returns
 * whether a version is still pending on a pod, and the ids seen.
 */
function credentialsPass(
  c: PassContext,
  pass: Gathered,
  credentials: readonly KubernetesObject[],
): { pending: boolean; seen: Set<string> } {
  const { now, found, reports, routingRuns, jobs } = pass;
  const { memory, statusWrites, events } = c;
  c.healthyGauge.reset();
  let pending = false;
  const seen = new Set<string>();
  for (const cred of credentials) {
    const ns = cred.metadata?.namespace ?? '';
    const name = cred.metadata?.name ?? '';
    const id = publicId('BYOKCredential', ns, name);
    seen.add(id);
    // The delivery version moves with the key and with the routing entry (a spec change); health follows the key.
    const delivery = c.pipeline?.credentialDelivery(ns)?.get(id);
    const rotated = memory.rotate(id, delivery?.envelope);
    const e = evaluateCredentialHealth({
      stored: (cred as { status?: object }).status,
      generation: cred.metadata?.generation,
      now,
      window: memory.window(id, now, c.thresholds.windowMs),
      probe: memory.probe(id),
      rotated,
      lastUsed: memory.lastUsedAt(id),
      delivery: delivery && {
        version: delivery.version,
        loaded: [...reports.values()].filter((r) => serves(r, routingRuns.get(r)!, id, delivery)).length,
        total: found.length,
      },
      thresholds: c.thresholds,
      lastUsedResolutionMs: c.lastUsedResolutionMs,
    });
    if (e.rotatedFromFalse) memory.markRotatedFromFalse(id);
    if (e.pending) pending = true;
    c.healthyGauge.inc({
      namespace: ns,
      provider: (cred as { spec?: { provider?: string } }).spec?.provider ?? '',
      reason: e.health.reason,
    });
    if (e.unchanged) {
      statusWrites.unchanged('BYOKCredential', ns, name, e.part);
      continue;
    }
    jobs.push(
      statusWrites.write('BYOKCredential', cred, e.part, now).then((done) => {
        if (!done || !e.transition) return undefined;
        const event = upstreamHealthEvent(e.health, memory.recovers(id, e.storedFalse, e.health.status));
        return event && events.record(cred, event.eventType, event.reason, event.note).catch(() => undefined);
      }),
    );
  }
  return { pending, seen };
}

/** Accounts: every credential's current version, per pod; Warning Events for pods that lag too long. Returns the stale pods. */
function accountsPass(c: PassContext, pass: Gathered): number {
  const { now, found, reports, routingRuns, jobs } = pass;
  const staleNow = new Set<string>();
  for (const account of c.informers.accounts.list()) {
    const ns = account.metadata?.namespace ?? '';
    const versions = c.pipeline?.credentialDelivery(ns);
    if (!versions) continue;
    const version = accountVersion(versions);
    let loaded = 0;
    for (const target of found) {
      const r = reports.get(target.pod);
      const current = r !== undefined && [...versions].every(([id, d]) => serves(r, routingRuns.get(r)!, id, d));
      // A pod that refused a stream batch and lacks this account's versions: a Warning with its reason, once.
      const refused = r?.delivery?.lastBatch?.result === 'refused' ? r.delivery.lastBatch : undefined;
      if (!current && refused && c.memory.firstRefusal(target.pod, r!.instance, ns, refused.reason ?? '')) {
        const note = refusedBatchNote(target.pod, refused.batch, refused.reason, version);
        c.log.warn({ pod: target.pod, namespace: ns, batch: refused.batch }, note);
        jobs.push(c.events.record(account, 'Warning', EventReason.DeliveryRefused, note).catch(() => undefined));
      }
      const lag = c.memory.lag(target.pod, ns, current, now, c.staleAfterMs);
      if (!lag) {
        loaded++;
        continue;
      }
      if (lag.stale) staleNow.add(target.pod);
      if (!lag.firstStale) continue;
      const note = stalePodNote(target.pod, r !== undefined, version, lag.lagMs);
      c.log.warn({ pod: target.pod, namespace: ns }, note);
      jobs.push(c.events.record(account, 'Warning', EventReason.GatewayPodStale, note).catch(() => undefined));
    }
    const { part, unchanged } = deliveryPart(
      (account as { status?: object }).status,
      account.metadata?.generation,
      { loaded, total: found.length, version },
      now,
    );
    if (!unchanged) jobs.push(c.statusWrites.write('Account', account, part, now));
  }
  c.memory.forgetPodsExcept(found);
  return staleNow.size;
}

/** The writer with its own fenced applier (HEALTH_FIELD_MANAGER); run.ts starts it on leading. */
export function createGatewayHealthStatus(
  config: GatewayStatusConfig,
  deps: {
    kubeConfig: KubeAccess;
    canWrite: () => boolean;
    informers: ResourceInformers;
    pipeline: CompilePipeline | undefined;
    budgetsOpen?: (namespace: string) => boolean;
    events: EventRecorder;
    registry: Registry;
    log: Logger;
  },
): HealthStatusWriter {
  return new HealthStatusWriter({
    ...deps,
    config,
    applier: createApplier(deps.kubeConfig, { fieldManager: HEALTH_FIELD_MANAGER, canWrite: deps.canWrite }),
  });
}
