// Upstream health and delivery, reported back by the data plane (docs/operator.md, "Upstream health and delivery").
// The leader pulls GET /byok/status from every gateway pod (found through the gateway Service's EndpointSlices, or
// given as URLs), turns the counters into UpstreamHealthy and the loaded envelope versions into Delivered, and writes
// them with its own field manager (HEALTH_FIELD_MANAGER) on transitions only, at most once per object per
// writeIntervalMs. Data flows one way: nothing here feeds routing. The reconcilers ignore these fields (ownedStatus).
// Assembled from health-collector.ts (finds and polls the pods), health-decide.ts (the verdicts, pure) and
// health-writer.ts (the status writes); what is here turns reports into each object's status part.
import { periodicPass } from './periodic.ts';
import { createHash } from 'node:crypto';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { KubeAccess } from '../kube/kubeconfig.ts';
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import { publicId } from '../domain/ids.ts';
import { createApplier, type Applier } from '../kube/apply.ts';
import type { EventRecorder } from '../kube/events.ts';
import type { ResourceInformers } from '../kube/resources.ts';
import type { CompilePipeline, CredentialDelivery } from './compile/pipeline.ts';
import type { GatewayStatusReport } from '../contract/gateway-status.ts';
import { buildConditions, metaTime, sameStatus, type Condition, type DesiredCondition } from './conditions.ts';
import { STATUS_OWNERS } from './status/ownership.ts';
import { counterDelta, decideDelivered, decideUpstreamHealth, DEFAULT_THRESHOLDS, OutcomeWindow, type HealthThresholds, type OutcomeCounts } from './health-decide.ts';
import { GatewayCollector, type Target } from './health-collector.ts';
import { conditionOf, healthPart, HealthStatusWrites } from './health-writer.ts';
import { ConditionReason, ConditionType, EventReason } from '../schema/conditions.ts';

export const HEALTH_FIELD_MANAGER = STATUS_OWNERS.health.fieldManager;
export { HEALTH_CONDITION_TYPES, HEALTH_STATUS_FIELDS } from './health-writer.ts';
export { PROBE_ANNOTATION } from './health-collector.ts';

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
}

/** What a pod answers on GET /byok/status, parsed (src/contract/gateway-status.ts). */
type PodReport = GatewayStatusReport;

export interface HealthStatusWriter {
  start(): void;
  stop(): Promise<void>;
  /** One poll + write pass (what the timer runs). */
  syncOnce(): Promise<void>;
}

const accountVersion = (versions: ReadonlyMap<string, CredentialDelivery>): string =>
  createHash('sha256')
    .update([...versions].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([id, v]) => `${id}:${v.version}`).join('\n'))
    .digest('hex')
    .slice(0, 16);

const windowText = (ms: number) => (ms % 60_000 === 0 ? `${ms / 60_000} min` : `${Math.round(ms / 1000)} s`);

export function createHealthStatusWriter(deps: {
  config: GatewayStatusConfig;
  kubeConfig: KubeAccess;
  informers: ResourceInformers;
  pipeline: CompilePipeline | undefined;
  applier: Applier;
  events: EventRecorder;
  registry: Registry;
  log: Logger;
  clock?: () => number;
}): HealthStatusWriter {
  const { config, informers, events } = deps;
  const log = deps.log.child({ component: 'health-status' });
  const clock = deps.clock ?? Date.now;
  const pollMs = config.pollMs ?? 10_000;
  const writeIntervalMs = config.writeIntervalMs ?? 30_000;
  const t: HealthThresholds = { ...DEFAULT_THRESHOLDS, ...config.thresholds };
  const resolutionMs = config.lastUsedResolutionMs ?? 60_000;
  const pendingPollMs = config.pendingPollMs ?? 1000;
  const staleAfterMs = config.staleAfterMs ?? 5 * 60_000;

  const healthyGauge = new Gauge({ name: 'byok_credential_upstream_healthy', help: 'BYOK credentials by UpstreamHealthy reason (Serving, Unauthorized, RateLimited, UpstreamErrors, Unused, Inconclusive).', labelNames: ['namespace', 'provider', 'reason'], registers: [deps.registry] });
  const podsGauge = new Gauge({ name: 'byok_gateway_pods_reporting', help: 'Gateway pods found and answering the status endpoint, by result (ok, failed).', labelNames: ['result'], registers: [deps.registry] });
  const staleGauge = new Gauge({ name: 'byok_gateway_pods_stale', help: 'Gateway pods that have not loaded the current credential versions of at least one account for longer than the stale threshold.', registers: [deps.registry] });
  const probesTotal = new Counter({ name: 'byok_credential_probes_total', help: 'Probes of idle credentials asked of gateway pods, by provider and result (done, refused, unreachable).', labelNames: ['provider', 'result'], registers: [deps.registry] });
  const writes = new Counter({ name: 'byok_health_status_writes_total', help: 'Status writes of the health writer, by kind (BYOKCredential, Account) and result.', labelNames: ['kind', 'result'], registers: [deps.registry] });
  const collector = new GatewayCollector({ config, kubeConfig: deps.kubeConfig, log, probesTotal });
  const statusWrites = new HealthStatusWrites({ applier: deps.applier, log, writes, writeIntervalMs, concurrency: config.writeConcurrency ?? 8 });

  /** pod → last report's counters and instance. */
  const previous = new Map<string, { instance: string; counters: Record<string, OutcomeCounts> }>();
  const windows = new Map<string, OutcomeWindow>();
  const lastUsed = new Map<string, number>();
  /** pod\0namespace → since when it lags, and whether it was reported. */
  const lagging = new Map<string, { since: number; warned: boolean }>();
  const startedAt = clock();
  /** The key version each credential's health window counts: a new version starts a new window. */
  const healthVersion = new Map<string, string>();
  /** Credentials rotated away from a False verdict: their first True after it is still an UpstreamRecovered. */
  const rotatedFromFalse = new Set<string>();
  /** Newest probe result per credential, across pods. */
  const probes = new Map<string, { at: number; outcome: keyof OutcomeCounts; status: number | null }>();
  const idleSince = (id: string) => Math.max(lastUsed.get(id) ?? startedAt, probes.get(id)?.at ?? 0);
  const context: PassContext = { clock, log, t, resolutionMs, staleAfterMs, informers, events, pipeline: deps.pipeline, collector, statusWrites, healthyGauge, podsGauge, staleGauge, previous, windows, lastUsed, lagging, healthVersion, rotatedFromFalse, probes, idleSince };

  async function syncOnce(): Promise<void> {
    if (await healthPass(context)) loop.soon(pendingPollMs);
  }

  const loop = periodicPass(syncOnce, pollMs, (err) => log.error({ err: err instanceof Error ? err.message : String(err) }, 'health pass failed'));
  // A compile that changed something may carry new credential versions: record them (Delivered False, Pending, in
  // the same write as the new version) now rather than at the next poll.
  let unsubscribe: (() => void) | undefined;
  return {
    syncOnce,
    start() {
      loop.start();
      unsubscribe ??= deps.pipeline?.onCompiled(() => loop.soon());
    },
    async stop() {
      unsubscribe?.();
      unsubscribe = undefined;
      await loop.stop();
    },
  };
}

/** What a pass reads and keeps: the writer's settings and metrics, and its memory between passes. */
interface PassContext {
  clock: () => number;
  log: Logger;
  t: HealthThresholds;
  resolutionMs: number;
  staleAfterMs: number;
  informers: ResourceInformers;
  events: EventRecorder;
  pipeline: CompilePipeline | undefined;
  collector: GatewayCollector;
  statusWrites: HealthStatusWrites;
  healthyGauge: Gauge<'namespace' | 'provider' | 'reason'>;
  podsGauge: Gauge<'result'>;
  staleGauge: Gauge;
  /** pod → last report's counters and instance. */
  previous: Map<string, { instance: string; counters: Record<string, OutcomeCounts> }>;
  windows: Map<string, OutcomeWindow>;
  lastUsed: Map<string, number>;
  /** pod\0namespace → since when it lags, and whether it was reported. */
  lagging: Map<string, { since: number; warned: boolean }>;
  /** The key version each credential's health window counts: a new version starts a new window. */
  healthVersion: Map<string, string>;
  /** Credentials rotated away from a False verdict: their first True after it is still an UpstreamRecovered. */
  rotatedFromFalse: Set<string>;
  /** Newest probe result per credential, across pods. */
  probes: Map<string, { at: number; outcome: keyof OutcomeCounts; status: number | null }>;
  idleSince: (id: string) => number;
}

/** One poll and write pass; true while a credential's new version is still pending on a pod (poll again soon). */
async function healthPass(c: PassContext): Promise<boolean> {
  const { clock, log, t, resolutionMs, informers, events, pipeline, collector, statusWrites, healthyGauge, podsGauge, staleGauge } = c;
  const { previous, windows, lastUsed, healthVersion, rotatedFromFalse, probes, idleSince } = c;
  const now = clock();
  let found: Target[];
  try {
    found = await collector.targets();
  } catch (err) {
    log.warn({ err: err instanceof Error ? err.message : String(err) }, 'listing gateway pods failed');
    return false;
  }
  const reports = await collector.reports(found);
  podsGauge.set({ result: 'ok' }, reports.size);
  podsGauge.set({ result: 'failed' }, found.length - reports.size);

  // Counters → windows.
  for (const [pod, report] of reports) {
    const prev = previous.get(pod);
    const before = prev && prev.instance === report.instance ? prev.counters : undefined;
    const counters: Record<string, OutcomeCounts> = {};
    for (const [id, c] of Object.entries(report.credentials)) {
      counters[id] = { ok: c.ok, unauthorized: c.unauthorized, rateLimited: c.rateLimited, upstreamError: c.upstreamError };
      const delta = counterDelta(counters[id], before?.[id]);
      let w = windows.get(id);
      if (!w) windows.set(id, (w = new OutcomeWindow()));
      w.add(now, delta);
      const used = Math.max(c.lastSuccess ?? 0, c.lastFailure ?? 0);
      if (used > (lastUsed.get(id) ?? 0)) lastUsed.set(id, used);
    }
    previous.set(pod, { instance: report.instance, counters });
    for (const [id, p] of Object.entries(report.probes ?? {})) if (p.at > (probes.get(id)?.at ?? 0)) probes.set(id, p);
  }
  for (const pod of previous.keys()) if (!found.some((f) => f.pod === pod)) previous.delete(pod);

  const total = found.length;
  // Each pod's routing index, as the compile run from which it is current: a routing entry changed in run n is
  // on the pods whose index is from run n or later.
  const routingRuns = new Map<PodReport, number>();
  for (const r of reports.values()) routingRuns.set(r, r.routing.version === null ? -1 : (pipeline?.routingRun(r.routing.version) ?? 0));
  const serves = (r: PodReport, id: string, d: CredentialDelivery) => servesVersion(r, id, d.envelope) && routingRuns.get(r)! >= d.since;
  healthyGauge.reset();
  const seen = new Set<string>();
  const staleNow = new Set<string>();
  const credentialsByNs = new Map<string, KubernetesObject[]>();
  for (const cred of informers.credentials.list()) {
    const ns = cred.metadata?.namespace ?? '';
    let list = credentialsByNs.get(ns);
    if (!list) credentialsByNs.set(ns, (list = []));
    list.push(cred);
  }
  const jobs: Promise<unknown>[] = [];
  let pending = false;
  for (const [ns, creds] of credentialsByNs) {
    const versions = pipeline?.credentialDelivery(ns);
    for (const cred of creds) {
      const name = cred.metadata?.name ?? '';
      const id = publicId('BYOKCredential', ns, name);
      seen.add(id);
      const stored = (cred as { status?: object }).status;
      const delivery = versions?.get(id);
      // The delivery version moves with the key and with the routing entry (a spec change); health follows the key.
      const version = delivery?.version;
      const keyVersion = delivery?.envelope;
      // A rotated key starts with a clean slate: the old key's 401s and 429s say nothing about the new one.
      const rotated = keyVersion !== undefined && healthVersion.has(id) && healthVersion.get(id) !== keyVersion;
      if (keyVersion !== undefined) healthVersion.set(id, keyVersion);
      if (rotated) {
        windows.delete(id);
        probes.delete(id);
      }
      const storedHealth = conditionOf(stored, ConditionType.UpstreamHealthy);
      // The verdict to build on; transitions and their Events still compare with what is stored.
      const prevHealth = rotated ? undefined : storedHealth;
      if (rotated && storedHealth?.status === 'False') rotatedFromFalse.add(id);
      const probe = probes.get(id);
      const health: DesiredCondition = decideUpstreamHealth(
        windows.get(id)?.sum(now, t.windowMs) ?? { ok: 0, unauthorized: 0, rateLimited: 0, upstreamError: 0 },
        prevHealth,
        t,
        windowText(t.windowMs),
        probe && now - probe.at < t.windowMs ? probe : undefined,
      );
      // The message carries the window's tally; between transitions the stored one stays, or every pass would write.
      if (prevHealth && prevHealth.status === health.status && prevHealth.reason === health.reason) health.message = prevHealth.message;
      healthyGauge.inc({ namespace: ns, provider: (cred as { spec?: { provider?: string } }).spec?.provider ?? '', reason: health.reason });
      const desired: DesiredCondition[] = [health];
      const part: Record<string, unknown> = {};
      const storedPart = healthPart(stored);
      // lastUsedTime: only when it moved by the resolution (or was never written).
      const used = lastUsed.get(id);
      const storedUsed = typeof storedPart.lastUsedTime === 'string' ? Date.parse(storedPart.lastUsedTime) : undefined;
      if (used !== undefined) part.lastUsedTime = storedUsed === undefined || used - storedUsed >= resolutionMs ? metaTime(new Date(used)) : storedPart.lastUsedTime;
      else if (storedPart.lastUsedTime !== undefined) part.lastUsedTime = storedPart.lastUsedTime;
      const storedDelivered = conditionOf(stored, ConditionType.Delivered);
      if (delivery !== undefined && version !== undefined) {
        const loaded = [...reports.values()].filter((r) => serves(r, id, delivery)).length;
        const delivered = decideDelivered(loaded, total, version);
        const storedDelivery = storedPart.delivery as { loaded?: number; total?: number; configVersion?: string } | undefined;
        // A delivered credential keeps its record when only the pod count moves (Account.status.delivery has it).
        const keep = storedDelivery && storedDelivered?.status === 'True' && delivered.status === 'True' && storedDelivery.configVersion === version;
        part.delivery = keep ? storedDelivery : { loaded, total, configVersion: version };
        desired.push(keep ? { type: ConditionType.Delivered, status: 'True', reason: storedDelivered.reason, message: storedDelivered.message } : delivered);
        if (delivered.status === 'False') pending = true;
      } else if (storedDelivered) {
        desired.push(storedDelivered);
        if (storedPart.delivery !== undefined) part.delivery = storedPart.delivery;
      }
      part.conditions = buildConditions(stored ? ((stored as { conditions?: Condition[] }).conditions ?? []) : [], desired, cred.metadata?.generation, new Date(now));
      if (sameStatus(storedPart, part)) {
        statusWrites.unchanged('BYOKCredential', ns, name, part);
        continue;
      }
      const transition = storedHealth?.status !== health.status || storedHealth?.reason !== health.reason;
      jobs.push(
        statusWrites.write('BYOKCredential', cred, part, now).then((done) => {
          if (!done || !transition) return;
          const recovered = storedHealth?.status === 'False' || rotatedFromFalse.has(id);
          if (health.status !== 'Unknown') rotatedFromFalse.delete(id);
          if (health.status === 'False') {
            const reason = health.reason === ConditionReason.Unauthorized ? EventReason.UpstreamUnauthorized : health.reason === ConditionReason.RateLimited ? EventReason.UpstreamRateLimited : EventReason.UpstreamErrors;
            // The condition's message already says what to do ("…refused this key (401/403): rotate it: <counts>").
            return events.record(cred, 'Warning', reason, health.message).catch(() => undefined);
          }
          if (health.status === 'True' && recovered) return events.record(cred, 'Normal', EventReason.UpstreamRecovered, `the provider accepts this credential again: ${health.message}`).catch(() => undefined);
          return undefined;
        }),
      );
    }
  }
  for (const id of [...windows.keys(), ...probes.keys(), ...healthVersion.keys()]) {
    if (seen.has(id)) continue;
    windows.delete(id);
    healthVersion.delete(id);
    rotatedFromFalse.delete(id);
    lastUsed.delete(id);
    probes.delete(id);
    collector.forget(id);
  }
  jobs.push(collector.probeIdle([...credentialsByNs.values()].flat(), found.filter((f) => reports.has(f.pod)), now, idleSince));

  accountsPass(c, { now, found, reports, total, serves, staleNow, jobs });
  staleGauge.set(staleNow.size);
  await Promise.all(jobs);
  return pending;
}

/** Accounts: every credential's current version, per pod; Warning Events for pods that lag too long. */
function accountsPass(
  c: PassContext,
  pass: { now: number; found: Target[]; reports: Map<string, PodReport>; total: number; serves: (r: PodReport, id: string, d: CredentialDelivery) => boolean; staleNow: Set<string>; jobs: Promise<unknown>[] },
): void {
  const { log, staleAfterMs, informers, events, pipeline, statusWrites, lagging } = c;
  const { now, found, reports, total, serves, staleNow, jobs } = pass;
  for (const account of informers.accounts.list()) {
    const ns = account.metadata?.namespace ?? '';
    const versions = pipeline?.credentialDelivery(ns);
    if (!versions) continue;
    const version = accountVersion(versions);
    let loaded = 0;
    for (const target of found) {
      const r = reports.get(target.pod);
      const current = r !== undefined && [...versions].every(([id, d]) => serves(r, id, d));
      const key = `${target.pod}\u0000${ns}`;
      if (current) {
        loaded++;
        lagging.delete(key);
        continue;
      }
      let lag = lagging.get(key);
      if (!lag) lagging.set(key, (lag = { since: now, warned: false }));
      if (now - lag.since >= staleAfterMs) {
        staleNow.add(target.pod);
        if (!lag.warned) {
          lag.warned = true;
          const note = r
            ? `gateway pod ${target.pod} has not loaded this account's current credentials (version ${version}) for ${Math.round((now - lag.since) / 1000)} s: check its projected volumes (a missing bundle slot or a Secret it cannot read)`
            : `gateway pod ${target.pod} has not answered the status endpoint for ${Math.round((now - lag.since) / 1000)} s`;
          log.warn({ pod: target.pod, namespace: ns }, note);
          jobs.push(events.record(account, 'Warning', EventReason.GatewayPodStale, note).catch(() => undefined));
        }
      }
    }
    const stored = (account as { status?: object }).status;
    const part = {
      delivery: { loaded, total, configVersion: version },
      conditions: buildConditions((stored as { conditions?: Condition[] } | undefined)?.conditions ?? [], [decideDelivered(loaded, total, version)], account.metadata?.generation, new Date(now)),
    };
    if (sameStatus(healthPart(stored), part)) continue;
    jobs.push(statusWrites.write('Account', account, part, now));
  }
  for (const key of lagging.keys()) if (!found.some((f) => key.startsWith(`${f.pod}\u0000`))) lagging.delete(key);
}

/**
 * A pod has a credential's current envelope live only when it has loaded a routing config at all (a pod that answers
 * 503 "no routing config yet" must not count toward Delivered) and its bundles hold that envelope version. The
 * routing entry is checked apart (CredentialDelivery.since).
 */
function servesVersion(r: PodReport, id: string, envelope: string): boolean {
  return r.routing.version !== null && r.bundle.credentials[id] === envelope;
}

/** The writer with its own fenced applier (HEALTH_FIELD_MANAGER); run.ts starts it on leading. */
export function createGatewayHealthStatus(
  config: GatewayStatusConfig,
  deps: { kubeConfig: KubeAccess; canWrite: () => boolean; informers: ResourceInformers; pipeline: CompilePipeline | undefined; events: EventRecorder; registry: Registry; log: Logger },
): HealthStatusWriter {
  return createHealthStatusWriter({ ...deps, config, applier: createApplier(deps.kubeConfig, { fieldManager: HEALTH_FIELD_MANAGER, canWrite: deps.canWrite }) });
}
