// The export controller (`--export-target`, chart value export.target): keeps Envoy AI Gateway's or agentgateway's
// objects for every account in one namespace the platform chooses, beside the routing ConfigMaps. It rides on the
// compile pipeline: the pipeline hands it each account it compiled (observe), and after each compile run it exports
// the accounts whose input changed, so a change costs the writes of that account only.
//
// Writes are Server-Side Apply under its own field manager (byok-operator-export). Every object is labelled with its
// account (ACCOUNT_LABEL) or as shared (SHARED_LABEL); what an account no longer produces is deleted, and all of it
// when the account goes. Owner references cannot cross namespaces (the credential lives in the account's namespace,
// the objects in the export namespace), so clean-up is by this bookkeeping, seeded at start from one labelled list per
// kind. Derived Secrets hold key material: it goes into their data and nowhere else (not in a log, a status or an
// Event; their digests stay in memory).
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { Counter, Histogram, type Registry } from 'prom-client';
import type { CompiledAccount } from '../../domain/model.ts';
import type { ExportOptions, ExportTarget, TargetObject } from '../../export/index.ts';
import { KubeApiError, kindInfo, kubeClient, objectPath, type KubeClient } from '../../kube/client.ts';
import type { KubeAccess } from '../../kube/kubeconfig.ts';
import { NotAllowedToWriteError } from '../../kube/apply.ts';
import { canonicalJson } from '../../contract/canonical-json.ts';
import { API_VERSION } from '../../schema/resources.ts';
import { ConditionType } from '../../schema/conditions.ts';
import type { AccountSnapshot, CompilePipeline } from '../compile/pipeline.ts';
import { limited } from '../compile/writer.ts';
import { buildConditions, type Condition } from '../conditions.ts';
import { STATUS_OWNERS } from '../status/ownership.ts';
import { ACCOUNT_LABEL, DIGEST_ANNOTATION, SHARED_LABEL, desiredExport, exportInputDigest, SharedIndex, type AccountExport, type ExportCatalog, type SecretObject } from './desired.ts';

export const EXPORT_FIELD_MANAGER = STATUS_OWNERS.export.fieldManager;
/** Accounts exported per drain pass (see drain). */
const DRAIN_PASS = 256;

/** The kinds each target writes, with their plurals (the generic `<kind>s` is wrong for the policies). */
const KINDS: Record<ExportTarget, readonly { apiVersion: string; kind: string; plural: string }[]> = {
  'envoy-ai-gateway': [
    { apiVersion: 'aigateway.envoyproxy.io/v1beta1', kind: 'AIGatewayRoute', plural: 'aigatewayroutes' },
    { apiVersion: 'aigateway.envoyproxy.io/v1beta1', kind: 'AIServiceBackend', plural: 'aiservicebackends' },
    { apiVersion: 'aigateway.envoyproxy.io/v1beta1', kind: 'BackendSecurityPolicy', plural: 'backendsecuritypolicies' },
    { apiVersion: 'gateway.envoyproxy.io/v1alpha1', kind: 'Backend', plural: 'backends' },
    { apiVersion: 'gateway.envoyproxy.io/v1alpha1', kind: 'BackendTrafficPolicy', plural: 'backendtrafficpolicies' },
    { apiVersion: 'v1', kind: 'Secret', plural: 'secrets' },
  ],
  agentgateway: [
    { apiVersion: 'agentgateway.dev/v1alpha1', kind: 'AgentgatewayBackend', plural: 'agentgatewaybackends' },
    { apiVersion: 'agentgateway.dev/v1alpha1', kind: 'AgentgatewayPolicy', plural: 'agentgatewaypolicies' },
    { apiVersion: 'gateway.networking.k8s.io/v1', kind: 'HTTPRoute', plural: 'httproutes' },
    { apiVersion: 'v1', kind: 'Secret', plural: 'secrets' },
  ],
};

export interface ExportControllerConfig {
  target: ExportTarget;
  /** Where the target's objects and the derived Secrets go. */
  namespace: string;
  /** The gateway's model catalog and upstreams (the CLI loads them: the operator does not import the gateway). */
  catalog: ExportCatalog;
  /** The Gateway the routes attach to (default byok-gateway in the export namespace). */
  gateway?: { name: string; namespace?: string };
  sharedVertexProject?: string;
}

export interface ExportControllerDeps {
  kubeConfig: KubeAccess;
  /** Fencing: checked before every write (the leader alone writes). */
  canWrite: () => boolean;
  log: Logger;
  registry?: Registry;
  concurrency?: number;
}

type Pending = { snapshot: AccountSnapshot; account: CompiledAccount } | undefined;
type AnyObject = TargetObject | SecretObject;

const sha = (text: string): string => createHash('sha256').update(text).digest('hex');
const keyOf = (o: { apiVersion: string; kind: string; metadata: { name: string } }): string => `${o.apiVersion}|${o.kind}|${o.metadata.name}`;
/** What is applied, as a digest: the object's own fields (Secrets: in memory only, never written down). */
// 128 bits: the controller holds one per object it owns (hundreds of thousands at 100k credentials).
export const digestOf = (o: AnyObject): string => sha(canonicalJson(o)).slice(0, 32);

/** Writes and time of the export, for the metrics, the bench and the tests. */
export interface ExportStats {
  applies: number;
  deletes: number;
  statusWrites: number;
  accountsExported: number;
  /** Milliseconds spent building the desired objects (pure part) and writing them. */
  buildMs: number;
  writeMs: number;
}

export class ExportController {
  readonly stats: ExportStats = { applies: 0, deletes: 0, statusWrites: 0, accountsExported: 0, buildMs: 0, writeMs: 0 };
  private readonly config: ExportControllerConfig;
  private readonly deps: ExportControllerDeps;
  private readonly options: ExportOptions;
  private readonly client: KubeClient;
  private readonly writes: Counter;
  private readonly duration: Histogram;
  /** Accounts compiled since the last drain: the latest compile output of each (undefined: the account left). */
  private readonly pending = new Map<string, Pending>();
  /** Accounts whose export failed, retried with backoff. */
  private readonly failed = new Map<string, Pending>();
  /** Per account: key -> digest of each object it owns in the export namespace. */
  private readonly owned = new Map<string, Map<string, string>>();
  /** Per account: the input digest of its last successful export. */
  private readonly exportedFrom = new Map<string, string>();
  /** Every account's share of the shared objects, as the export built it. */
  private readonly shared = new SharedIndex();
  /** Shared objects written: key -> digest. */
  private readonly sharedWritten = new Map<string, string>();
  private seenSinceStart = new Set<string>();
  private firstRunDone = false;
  /** A compile run ended since this term began (the manager starts the pipeline and this side by side). */
  private runEnded = false;
  private started = false;
  private stopped = false;
  private draining: Promise<void> | undefined;
  private again = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private retryDelayMs = 1000;

  constructor(config: ExportControllerConfig, deps: ExportControllerDeps) {
    this.config = config;
    this.deps = deps;
    this.options = {
      target: config.target,
      mode: 'static',
      namespace: config.namespace,
      gateway: config.gateway ?? { name: 'byok-gateway' },
      ...(config.sharedVertexProject ? { sharedVertexProject: config.sharedVertexProject } : {}),
    };
    this.client = kubeClient(deps.kubeConfig);
    const registers = deps.registry ? [deps.registry] : [];
    this.writes = new Counter({ name: 'byok_export_writes_total', help: 'Writes of the export controller, by kind (apply, delete, status).', labelNames: ['kind'], registers });
    this.duration = new Histogram({ name: 'byok_export_duration_seconds', help: 'Time of one export pass over the accounts a compile run changed.', buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 30], registers });
  }

  /** The compile pipeline's per-account output (CompilePipelineOptions.onAccountCompiled). Cheap: kept for the next drain. */
  readonly observe = (namespace: string, compiled: Pending): void => {
    if (namespace === '') return;
    // Re-inserted: the most recently compiled accounts are exported first (drain).
    this.pending.delete(namespace);
    this.pending.set(namespace, compiled);
    if (!this.firstRunDone) this.seenSinceStart.add(namespace);
  };

  /** Drains after each compile run: the run has handed over every account it compiled. */
  follow(pipeline: CompilePipeline): void {
    pipeline.onCompiled(() => {
      this.runEnded = true;
      if (!this.started) return;
      if (!this.firstRunDone) this.afterFirstRun();
      this.kick();
    });
  }

  /** Leader start: what the export namespace already holds, so only differences are written. */
  async start(): Promise<void> {
    this.stopped = false;
    this.firstRunDone = false;
    for (let delayMs = 500; ; delayMs = Math.min(delayMs * 2, 30_000)) {
      this.owned.clear();
      this.sharedWritten.clear();
      this.exportedFrom.clear();
      this.shared.clear();
      try {
        for (const k of KINDS[this.config.target]) await this.seed(k);
        break;
      } catch (err) {
        // E.g. 429 while the apiserver's cache of freshly installed CRDs initializes, or the CRDs not installed yet.
        this.deps.log.warn({ ...(err instanceof KubeApiError ? { status: err.status, reason: err.reason } : { error: err instanceof Error ? err.message : 'unknown' }), retryInMs: delayMs }, 'export controller cannot list the export namespace yet');
        await new Promise((r) => setTimeout(r, delayMs).unref());
        if (this.stopped) return;
      }
    }
    this.seenSinceStart = new Set([...this.seenSinceStart, ...this.pending.keys()]);
    this.started = true;
    this.deps.log.info({ target: this.config.target, namespace: this.config.namespace, accounts: this.owned.size, shared: this.sharedWritten.size }, 'export controller started');
    if (this.runEnded) {
      this.afterFirstRun();
      this.kick();
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.started = false;
    this.runEnded = false;
    this.seenSinceStart = new Set();
    clearTimeout(this.retryTimer);
    await this.draining;
    this.pending.clear();
    this.failed.clear();
  }

  /** Resolves when everything handed over so far is exported (tests, the bench). */
  async flush(): Promise<void> {
    while (this.draining || (this.started && this.firstRunDone && this.pending.size > 0)) {
      if (!this.draining) this.kick();
      await this.draining;
    }
  }

  private async seed(k: { apiVersion: string; kind: string; plural: string }): Promise<void> {
    const path = `${kindInfo(k.apiVersion, k.kind, k.plural).collectionPath.replace(/\/([^/]+)$/, `/namespaces/${encodeURIComponent(this.config.namespace)}/$1`)}`;
    for (const selector of [ACCOUNT_LABEL, SHARED_LABEL]) {
      let cont: string | undefined;
      do {
        const page = await this.client.request<{ items: AnyObject[]; metadata?: { continue?: string } }>('GET', path, { query: { labelSelector: selector, limit: 500, ...(cont ? { continue: cont } : {}) } });
        for (const item of page.items) {
          const o = { ...item, apiVersion: k.apiVersion, kind: k.kind } as AnyObject;
          const key = keyOf(o);
          // Secrets: the digest of what they hold, computed here and kept in memory; others carry theirs.
          const digest = k.kind === 'Secret' ? digestOf(secretAsApplied(o as SecretObject)) : ((o.metadata as { annotations?: Record<string, string> }).annotations?.[DIGEST_ANNOTATION] ?? '');
          const account = o.metadata.labels?.[ACCOUNT_LABEL];
          if (selector === SHARED_LABEL) this.sharedWritten.set(key, digest);
          else if (account) this.ownedBy(account).set(key, digest);
        }
        cont = page.metadata?.continue || undefined;
      } while (cont);
    }
  }

  private ownedBy(ns: string): Map<string, string> {
    let m = this.owned.get(ns);
    if (!m) this.owned.set(ns, (m = new Map()));
    return m;
  }

  /** Accounts that went while no leader ran: the first compile run compiled every live one, so the rest are gone. */
  private afterFirstRun(): void {
    this.firstRunDone = true;
    const seen = this.seenSinceStart;
    this.seenSinceStart = new Set();
    for (const ns of this.owned.keys()) if (!seen.has(ns)) this.pending.set(ns, undefined);
  }

  private kick(): void {
    if (this.draining) {
      this.again = true;
      return;
    }
    this.draining = this.drain().finally(() => {
      this.draining = undefined;
      if (this.again && this.started) {
        this.again = false;
        this.kick();
      }
    });
  }

  private async drain(): Promise<void> {
    if (this.pending.size === 0) return;
    // One pass takes the most recently compiled accounts, so a change made during a long backlog (a cold start
    // exports every account) waits for one pass, not for the backlog.
    const keys = [...this.pending.keys()].slice(-DRAIN_PASS);
    const batch = new Map(keys.map((ns) => [ns, this.pending.get(ns)]));
    for (const ns of keys) this.pending.delete(ns);
    if (this.pending.size > 0) this.again = true;
    const end = this.duration.startTimer();
    const failed: string[] = [];
    await limited([...batch.keys()], this.deps.concurrency ?? 8, async (ns) => {
      try {
        await this.exportAccount(ns, batch.get(ns));
      } catch (err) {
        failed.push(ns);
        // Status and reason only: an apiserver message can quote what it refused.
        const why = err instanceof KubeApiError ? { status: err.status, reason: err.reason } : { error: err instanceof Error ? err.name : 'unknown' };
        if (!(err instanceof NotAllowedToWriteError)) this.deps.log.warn({ namespace: ns, ...why }, 'export of an account failed; retrying');
      }
    });
    try {
      await this.writeShared();
    } catch (err) {
      failed.push('');
      this.deps.log.warn(err instanceof KubeApiError ? { status: err.status, reason: err.reason } : {}, 'export of the shared objects failed; retrying');
    }
    end();
    if (failed.length === 0) {
      if (this.failed.size === 0) this.retryDelayMs = 1000;
      return;
    }
    for (const ns of failed) if (ns !== '') this.failed.set(ns, batch.get(ns));
    if (!this.started) return;
    clearTimeout(this.retryTimer);
    // A newer compile output supersedes the failed one; otherwise the same is tried again, with backoff.
    this.retryTimer = setTimeout(() => {
      for (const [ns, p] of this.failed) if (!this.pending.has(ns)) this.pending.set(ns, p);
      this.failed.clear();
      this.kick();
    }, this.retryDelayMs);
    this.retryTimer.unref();
    this.retryDelayMs = Math.min(this.retryDelayMs * 2, 60_000);
  }

  private async exportAccount(ns: string, compiled: Pending): Promise<void> {
    const inputDigest = compiled ? exportInputDigest(compiled.snapshot, compiled.account) : undefined;
    if (inputDigest !== undefined && this.exportedFrom.get(ns) === inputDigest) return;
    const t0 = performance.now();
    const desired: AccountExport = compiled ? desiredExport(compiled.snapshot, compiled.account, this.config.catalog, this.options) : { objects: [], shared: [], secrets: [], conditions: new Map() };
    this.stats.buildMs += performance.now() - t0;
    const t1 = performance.now();
    const had = this.owned.get(ns) ?? new Map<string, string>();
    const want = new Map<string, { object: AnyObject; digest: string }>();
    for (const o of [...desired.objects, ...desired.secrets]) want.set(keyOf(o), { object: o, digest: digestOf(o) });
    const concurrency = this.deps.concurrency ?? 8;
    // Secrets first, so no route points at a Secret that is not there yet; deletions last, for the same reason.
    const changed = [...want].filter(([key, w]) => had.get(key) !== w.digest).sort(([a], [b]) => Number(b.startsWith('v1|Secret|')) - Number(a.startsWith('v1|Secret|')));
    await limited(changed, concurrency, async ([key, w]) => {
      await this.apply(w.object, w.digest);
      this.ownedBy(ns).set(key, w.digest);
    });
    const gone = [...had.keys()].filter((key) => !want.has(key));
    await limited(gone, concurrency, async (key) => {
      await this.remove(key);
      this.owned.get(ns)?.delete(key);
    });
    if (compiled) await this.writeConditions(compiled.snapshot, desired);
    this.stats.writeMs += performance.now() - t1;
    if (compiled) {
      this.shared.set(ns, desired.shared);
      this.exportedFrom.set(ns, inputDigest!);
    } else {
      this.shared.set(ns, undefined);
      this.exportedFrom.delete(ns);
      this.owned.delete(ns);
    }
    this.stats.accountsExported++;
  }

  /** Each credential's Exported condition, written only when it differs from the one it has. */
  private async writeConditions(snapshot: AccountSnapshot, desired: AccountExport): Promise<void> {
    await limited(snapshot.credentials, this.deps.concurrency ?? 8, async ({ resource }) => {
      const want = desired.conditions.get(resource.metadata.name ?? '');
      if (!want) return;
      const existing = (resource.status?.conditions ?? []) as Condition[];
      const [condition] = buildConditions(existing, [want], resource.metadata.generation);
      const had = existing.find((c) => c.type === ConditionType.Exported);
      if (had && had.status === condition!.status && had.reason === condition!.reason && had.message === condition!.message && had.observedGeneration === condition!.observedGeneration) return;
      const ns = snapshot.namespace;
      const name = resource.metadata.name ?? '';
      await this.patch(objectPath(API_VERSION, 'BYOKCredential', ns, name, 'status'), { apiVersion: API_VERSION, kind: 'BYOKCredential', metadata: { name, namespace: ns }, status: { conditions: [condition] } }, `BYOKCredential ${ns}/${name} status`).catch((err: unknown) => {
        // Deleted meanwhile: its account's next compile says so.
        if (!(err instanceof KubeApiError && err.status === 404)) throw err;
      });
      this.stats.statusWrites++;
      this.writes.inc({ kind: 'status' });
    });
  }

  private async writeShared(): Promise<void> {
    // Until the first run handed over every account, an absent shared object may still be wanted by one not seen yet.
    const want = new Map(this.shared.merged().map((o) => [keyOf(o), o as AnyObject]));
    const changed = [...want].map(([key, o]) => ({ key, o, digest: digestOf(o) })).filter((w) => this.sharedWritten.get(w.key) !== w.digest);
    await limited(changed, this.deps.concurrency ?? 8, async (w) => {
      await this.apply(w.o, w.digest);
      this.sharedWritten.set(w.key, w.digest);
    });
    // Deleted only once every account handed over is exported: a share not counted yet may still need them.
    if (!this.firstRunDone || this.pending.size > 0 || this.failed.size > 0) return;
    const gone = [...this.sharedWritten.keys()].filter((key) => !want.has(key));
    await limited(gone, this.deps.concurrency ?? 8, async (key) => {
      await this.remove(key);
      this.sharedWritten.delete(key);
    });
  }

  private pathOf(apiVersion: string, kind: string, name: string): string {
    const plural = KINDS[this.config.target].find((k) => k.kind === kind && k.apiVersion === apiVersion)?.plural;
    const info = kindInfo(apiVersion, kind, plural);
    return info.collectionPath.replace(/\/([^/]+)$/, `/namespaces/${encodeURIComponent(this.config.namespace)}/$1/${encodeURIComponent(name)}`);
  }

  private async apply(o: AnyObject, digest: string): Promise<void> {
    const body = o.kind === 'Secret' ? o : { ...o, metadata: { ...o.metadata, annotations: { ...(o as TargetObject).metadata.annotations, [DIGEST_ANNOTATION]: digest } } };
    await this.patch(this.pathOf(o.apiVersion, o.kind, o.metadata.name), body, `${o.kind} ${o.metadata.name}`);
    this.stats.applies++;
    this.writes.inc({ kind: 'apply' });
  }

  private async remove(key: string): Promise<void> {
    const [apiVersion, kind, name] = key.split('|') as [string, string, string];
    if (!this.deps.canWrite()) throw new NotAllowedToWriteError(`delete ${kind} ${name}`);
    try {
      await this.client.request('DELETE', this.pathOf(apiVersion, kind, name));
    } catch (err) {
      if (!(err instanceof KubeApiError && err.status === 404)) throw err;
    }
    this.stats.deletes++;
    this.writes.inc({ kind: 'delete' });
  }

  private async patch(path: string, body: object, what: string): Promise<void> {
    if (!this.deps.canWrite()) throw new NotAllowedToWriteError(what);
    await this.client.request('PATCH', path, { query: { fieldManager: EXPORT_FIELD_MANAGER, force: true }, body, contentType: 'application/apply-patch+yaml', discardBody: true });
  }
}

/** A listed Secret reduced to what the controller applies (for its in-memory digest). */
function secretAsApplied(s: SecretObject): SecretObject {
  const labels = s.metadata.labels ?? {};
  const ours = Object.fromEntries(Object.entries(labels).filter(([k]) => k === ACCOUNT_LABEL || k === 'app.kubernetes.io/managed-by'));
  return { apiVersion: 'v1', kind: 'Secret', metadata: { name: s.metadata.name, namespace: s.metadata.namespace, labels: ours }, type: 'Opaque', data: s.data ?? {} };
}
