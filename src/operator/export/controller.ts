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
import { canonicalJson } from '../../contract/canonical-json.ts';
import type { CompiledAccount } from '../../domain/compiled.ts';
import {
  type ExportOptions,
  type ExportTarget,
  IDENTITY_ANNOTATION,
  type TargetObject,
  targetObjectKey,
} from '../../export/index.ts';
import { NotAllowedToWriteError } from '../../kube/apply.ts';
import { KubeApiError, type KubeClient, kindInfo, kubeClient, objectPath } from '../../kube/client.ts';
import type { EventRecorder } from '../../kube/events.ts';
import type { KubeAccess } from '../../kube/kubeconfig.ts';
import { ConditionReason, ConditionType } from '../../schema/conditions.ts';
import { API_VERSION } from '../../schema/resources.ts';
import type { AccountSnapshot, CompilePipeline } from '../compile/pipeline.ts';
import { limited } from '../compile/routing-writer.ts';
import { buildConditions, type Condition } from '../conditions.ts';
import type { Component } from '../manager.ts';
import { STATUS_OWNERS } from '../status/ownership.ts';
import {
  ACCOUNT_LABEL,
  type AccountExport,
  DIGEST_ANNOTATION,
  desiredExport,
  type ExportCatalog,
  type ExportCondition,
  exportInputDigest,
  type SecretObject,
  SHARED_LABEL,
  SharedIndex,
} from './desired.ts';

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
  /** Export hosts tenants name (ExportOptions.allowTenantHosts; `--export-allow-tenant-hosts`). */
  allowTenantHosts?: boolean;
}

export interface ExportControllerDeps {
  kubeConfig: KubeAccess;
  /** Fencing: checked before every write (the leader alone writes). */
  canWrite: () => boolean;
  log: Logger;
  registry?: Registry;
  concurrency?: number;
  /** Warning Events for refused exports (redacted like every Event). */
  events?: EventRecorder;
}

type Pending = { snapshot: AccountSnapshot; account: CompiledAccount } | undefined;
type AnyObject = TargetObject | SecretObject;

const sha = (text: string): string => createHash('sha256').update(text).digest('hex');
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

export class ExportController implements Component {
  readonly name = 'export';
  readonly stats: ExportStats = {
    applies: 0,
    deletes: 0,
    statusWrites: 0,
    accountsExported: 0,
    buildMs: 0,
    writeMs: 0,
  };
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
  /** key -> the account that owns it (the reverse of owned). */
  private readonly ownerByKey = new Map<string, string>();
  /** Per account: the input digest of its last successful export. */
  private readonly exportedFrom = new Map<string, string>();
  /** Every account's share of the shared objects, as the export built it. */
  private readonly shared = new SharedIndex();
  /** Shared objects written: key -> digest. */
  private readonly sharedWritten = new Map<string, string>();
  /** Shared objects refused for their content (or their name taken): not tried again until their digest changes. */
  private readonly sharedRefused = new Map<string, { digest: string; why: string }>();
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
      ...(config.allowTenantHosts ? { allowTenantHosts: true } : {}),
    };
    this.client = kubeClient(deps.kubeConfig);
    const registers = deps.registry ? [deps.registry] : [];
    this.writes = new Counter({
      name: 'byok_export_writes_total',
      help: 'Writes of the export controller, by kind (apply, delete, status).',
      labelNames: ['kind'],
      registers,
    });
    this.duration = new Histogram({
      name: 'byok_export_duration_seconds',
      help: 'Time of one export pass over the accounts a compile run changed.',
      buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 30],
      registers,
    });
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
      this.ownerByKey.clear();
      this.sharedWritten.clear();
      this.sharedRefused.clear();
      this.exportedFrom.clear();
      this.shared.clear();
      try {
        for (const k of KINDS[this.config.target]) await this.seed(k);
        break;
      } catch (err) {
        // E.g. 429 while the apiserver's cache of freshly installed CRDs initializes, or the CRDs not installed yet.
        this.deps.log.warn(
          {
            ...(err instanceof KubeApiError
              ? { status: err.status, reason: err.reason }
              : { error: err instanceof Error ? err.message : 'unknown' }),
            retryInMs: delayMs,
          },
          'export controller cannot list the export namespace yet',
        );
        await new Promise((r) => setTimeout(r, delayMs).unref());
        if (this.stopped) return;
      }
    }
    this.seenSinceStart = new Set([...this.seenSinceStart, ...this.pending.keys()]);
    this.started = true;
    this.deps.log.info(
      {
        target: this.config.target,
        namespace: this.config.namespace,
        accounts: this.owned.size,
        shared: this.sharedWritten.size,
      },
      'export controller started',
    );
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
        const page = await this.client.request<{ items: AnyObject[]; metadata?: { continue?: string } }>('GET', path, {
          query: { labelSelector: selector, limit: 500, ...(cont ? { continue: cont } : {}) },
        });
        for (const item of page.items) {
          const o = { ...item, apiVersion: k.apiVersion, kind: k.kind } as AnyObject;
          const key = targetObjectKey(o);
          // Secrets: the digest of what they hold, computed here and kept in memory; others carry theirs.
          const digest =
            k.kind === 'Secret'
              ? digestOf(secretAsApplied(o as SecretObject))
              : ((o.metadata as { annotations?: Record<string, string> }).annotations?.[DIGEST_ANNOTATION] ?? '');
          const account = o.metadata.labels?.[ACCOUNT_LABEL];
          if (selector === SHARED_LABEL) this.sharedWritten.set(key, digest);
          else if (account) this.own(account, key, digest);
        }
        cont = page.metadata?.continue || undefined;
      } while (cont);
    }
  }

  private own(ns: string, key: string, digest: string): void {
    let m = this.owned.get(ns);
    if (!m) this.owned.set(ns, (m = new Map()));
    m.set(key, digest);
    this.ownerByKey.set(key, ns);
  }

  private disown(ns: string, key?: string): void {
    for (const k of key === undefined ? [...(this.owned.get(ns)?.keys() ?? [])] : [key])
      if (this.ownerByKey.get(k) === ns) this.ownerByKey.delete(k);
    if (key === undefined) this.owned.delete(ns);
    else this.owned.get(ns)?.delete(key);
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
    const why = (err: unknown) =>
      err instanceof KubeApiError
        ? { status: err.status, reason: err.reason }
        : { error: err instanceof Error ? err.name : 'unknown' };
    // What each account wants, and its share of the shared objects, before anything is written: the shared objects
    // are then written (and verified) once for the batch, before the routes that point at them.
    const prepared = new Map<string, AccountExport>();
    for (const ns of keys) {
      const desired = this.prepare(ns, batch.get(ns));
      if (desired !== undefined) prepared.set(ns, desired);
    }
    let blocked = new Map<string, string>();
    try {
      blocked = await this.writeShared();
    } catch (err) {
      failed.push('');
      this.deps.log.warn(why(err), 'export of the shared objects failed; retrying');
    }
    await limited([...prepared.keys()], this.deps.concurrency ?? 8, async (ns) => {
      try {
        await this.exportAccount(ns, batch.get(ns), prepared.get(ns)!, blocked);
      } catch (err) {
        failed.push(ns);
        // Status and reason only: an apiserver message can quote what it refused.
        if (!(err instanceof NotAllowedToWriteError))
          this.deps.log.warn({ namespace: ns, ...why(err) }, 'export of an account failed; retrying');
      }
    });
    try {
      await this.deleteStaleShared();
    } catch (err) {
      failed.push('');
      this.deps.log.warn(why(err), 'deleting stale shared objects failed; retrying');
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

  /** The account's desired export (undefined: its input did not change), its share counted at once. */
  private prepare(ns: string, compiled: Pending): AccountExport | undefined {
    const inputDigest = compiled ? exportInputDigest(compiled.snapshot, compiled.account) : undefined;
    if (inputDigest !== undefined && this.exportedFrom.get(ns) === inputDigest) return undefined;
    const t0 = performance.now();
    const desired: AccountExport = compiled
      ? desiredExport(compiled.snapshot, compiled.account, this.config.catalog, this.options)
      : { objects: [], shared: [], secrets: [], conditions: new Map() };
    this.stats.buildMs += performance.now() - t0;
    // What it wants is known whatever its own writes do: a failing account keeps its shared objects, and stale
    // ones are deleted without waiting for it.
    this.shared.set(ns, compiled ? desired.shared : undefined);
    return desired;
  }

  private async exportAccount(
    ns: string,
    compiled: Pending,
    desired: AccountExport,
    blocked: ReadonlyMap<string, string>,
  ): Promise<void> {
    const inputDigest = compiled ? exportInputDigest(compiled.snapshot, compiled.account) : undefined;
    const t1 = performance.now();
    const had = this.owned.get(ns) ?? new Map<string, string>();
    const want = new Map<string, { object: AnyObject; digest: string }>();
    // A name another account already owns is refused here, never taken over: the later account is told.
    const taken: string[] = [];
    for (const o of [...desired.objects, ...desired.secrets]) {
      const key = targetObjectKey(o);
      const owner = this.ownerByKey.get(key);
      if (owner !== undefined && owner !== ns) taken.push(`${o.kind} ${o.metadata.name}`);
      else want.set(key, { object: o, digest: digestOf(o) });
    }
    const concurrency = this.deps.concurrency ?? 8;
    // Secrets first, so no route points at a Secret that is not there yet; deletions last, for the same reason.
    const changed = [...want]
      .filter(([key, w]) => had.get(key) !== w.digest)
      .sort(([a], [b]) => Number(b.startsWith('v1|Secret|')) - Number(a.startsWith('v1|Secret|')));
    await limited(changed, concurrency, async ([key, w]) => {
      await this.apply(w.object, w.digest);
      this.own(ns, key, w.digest);
    });
    const gone = [...had.keys()].filter((key) => !want.has(key));
    await limited(gone, concurrency, async (key) => {
      await this.remove(key);
      this.disown(ns, key);
    });
    if (compiled)
      await this.writeConditions(compiled.snapshot, refusedConditions(desired, taken, blocked, this.options.target));
    this.stats.writeMs += performance.now() - t1;
    if (compiled) {
      this.exportedFrom.set(ns, inputDigest!);
    } else {
      this.exportedFrom.delete(ns);
      this.disown(ns);
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
      if (
        had &&
        had.status === condition!.status &&
        had.reason === condition!.reason &&
        had.message === condition!.message &&
        had.observedGeneration === condition!.observedGeneration
      )
        return;
      const ns = snapshot.namespace;
      const name = resource.metadata.name ?? '';
      await this.patch(
        objectPath(API_VERSION, 'BYOKCredential', ns, name, 'status'),
        {
          apiVersion: API_VERSION,
          kind: 'BYOKCredential',
          metadata: { name, namespace: ns },
          status: { conditions: [condition] },
        },
        `BYOKCredential ${ns}/${name} status`,
      ).catch((err: unknown) => {
        // Deleted meanwhile: its account's next compile says so.
        if (!(err instanceof KubeApiError && err.status === 404)) throw err;
      });
      this.stats.statusWrites++;
      this.writes.inc({ kind: 'status' });
      // A refusal (a host, a name another account owns, a shared object refused) is also an Event on the credential.
      if (condition!.status === 'False' && desired.refusals?.has(name))
        void this.deps.events
          ?.record(
            {
              apiVersion: API_VERSION,
              kind: 'BYOKCredential',
              metadata: { name, namespace: ns, ...(resource.metadata.uid ? { uid: resource.metadata.uid } : {}) },
            },
            'Warning',
            ConditionReason.NotExported,
            condition!.message,
          )
          .catch(() => undefined);
    });
  }

  /**
   * Writes the shared objects that changed, each on its own: one refused object (the apiserver's 4xx, an existing
   * object of that name that is not this one, two accounts' conflicting copies) blocks no other write. Returns the
   * blocked ones, key -> why, for the Exported conditions of the accounts that use them.
   */
  private async writeShared(): Promise<Map<string, string>> {
    const blocked = new Map<string, string>();
    for (const c of this.shared.conflicts()) {
      blocked.set(c.key, 'accounts build it with different content (a name collision): it is not written');
      this.deps.log.warn(
        { object: c.key, accounts: c.accounts },
        'shared export object refused: accounts build it with different content',
      );
    }
    const want = new Map(this.shared.merged().map((o) => [targetObjectKey(o), o as AnyObject]));
    const changed = [...want]
      .map(([key, o]) => ({ key, o, digest: digestOf(o) }))
      .filter((w) => this.sharedWritten.get(w.key) !== w.digest);
    let retry: unknown;
    await limited(changed, this.deps.concurrency ?? 8, async (w) => {
      const refused = this.sharedRefused.get(w.key);
      if (refused?.digest === w.digest) {
        blocked.set(w.key, refused.why);
        return;
      }
      try {
        if (!this.sharedWritten.has(w.key)) await this.verifyFree(w.o);
        await this.apply(w.o, w.digest);
        this.sharedWritten.set(w.key, w.digest);
        this.sharedRefused.delete(w.key);
      } catch (err) {
        const why = refusalOf(err);
        if (why === undefined) {
          retry = err;
          return;
        }
        // Refused for what it is: tried again only when its content changes, never in a loop.
        this.sharedRefused.set(w.key, { digest: w.digest, why });
        blocked.set(w.key, why);
        this.deps.log.warn(
          {
            object: w.key,
            accounts: this.shared.users(w.key),
            ...(err instanceof KubeApiError ? { status: err.status, reason: err.reason } : {}),
          },
          'shared export object refused',
        );
      }
    });
    if (retry !== undefined) throw retry;
    return blocked;
  }

  /** An existing object of a shared object's name is taken over only when it is this export's copy of the same thing. */
  private async verifyFree(o: AnyObject): Promise<void> {
    let existing: { metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> } };
    try {
      existing = await this.client.request('GET', this.pathOf(o.apiVersion, o.kind, o.metadata.name));
    } catch (err) {
      if (err instanceof KubeApiError && err.status === 404) return;
      throw err;
    }
    const identity = (o as TargetObject).metadata.annotations?.[IDENTITY_ANNOTATION];
    const mine =
      existing.metadata?.labels?.[SHARED_LABEL] === 'true' &&
      existing.metadata.annotations?.[IDENTITY_ANNOTATION] === identity;
    if (!mine) throw new SharedNameTaken();
  }

  /** Shared objects no account wants any more; not held up by accounts whose writes fail (their shares count). */
  private async deleteStaleShared(): Promise<void> {
    // Until the first run handed over every account, an absent shared object may still be wanted by one not seen yet.
    if (!this.firstRunDone || this.pending.size > 0) return;
    const want = new Set([
      ...this.shared.merged().map((o) => targetObjectKey(o)),
      ...this.shared.conflicts().map((c) => c.key),
    ]);
    const gone = [...this.sharedWritten.keys()].filter((key) => !want.has(key));
    await limited(gone, this.deps.concurrency ?? 8, async (key) => {
      await this.remove(key);
      this.sharedWritten.delete(key);
    });
    for (const key of this.sharedRefused.keys()) if (!want.has(key)) this.sharedRefused.delete(key);
  }

  private pathOf(apiVersion: string, kind: string, name: string): string {
    const plural = KINDS[this.config.target].find((k) => k.kind === kind && k.apiVersion === apiVersion)?.plural;
    const info = kindInfo(apiVersion, kind, plural);
    return info.collectionPath.replace(
      /\/([^/]+)$/,
      `/namespaces/${encodeURIComponent(this.config.namespace)}/$1/${encodeURIComponent(name)}`,
    );
  }

  private async apply(o: AnyObject, digest: string): Promise<void> {
    const body =
      o.kind === 'Secret'
        ? o
        : {
            ...o,
            metadata: {
              ...o.metadata,
              annotations: { ...(o as TargetObject).metadata.annotations, [DIGEST_ANNOTATION]: digest },
            },
          };
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
    await this.client.request('PATCH', path, {
      query: { fieldManager: EXPORT_FIELD_MANAGER, force: true },
      body,
      contentType: 'application/apply-patch+yaml',
      discardBody: true,
    });
  }
}

/** A listed Secret reduced to what the controller applies (for its in-memory digest). */
function secretAsApplied(s: SecretObject): SecretObject {
  const labels = s.metadata.labels ?? {};
  const ours = Object.fromEntries(
    Object.entries(labels).filter(([k]) => k === ACCOUNT_LABEL || k === 'app.kubernetes.io/managed-by'),
  );
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: s.metadata.name, namespace: s.metadata.namespace, labels: ours },
    type: 'Opaque',
    data: s.data ?? {},
  };
}

/** An existing object has a shared object's name but is not this export's copy of it. */
class SharedNameTaken extends Error {
  constructor() {
    super("an object of that name exists and is not this export's copy of it");
    this.name = 'SharedNameTaken';
  }
}

/** Why a write is refused for what it is (not retried as such), or undefined for a failure worth retrying. */
function refusalOf(err: unknown): string | undefined {
  if (err instanceof SharedNameTaken) return err.message;
  // 403 is a permission (the Role), not the content: retried like any failure, and logged.
  if (
    err instanceof KubeApiError &&
    [400, 409, 422].includes(err.status) &&
    !(err.status === 409 && err.reason === 'AlreadyExists')
  ) {
    // Status and reason only: the apiserver's message can quote the object.
    return `the apiserver refused it (${err.status} ${err.reason ?? ''})`.replace(' )', ')');
  }
  return undefined;
}

/**
 * The account's Exported conditions with what was refused on its behalf: an object name another account owns (every
 * credential of this, the later, account is told), and a shared object it uses that was refused (the credentials
 * whose backends point at it).
 */
function refusedConditions(
  desired: AccountExport,
  taken: readonly string[],
  blocked: ReadonlyMap<string, string>,
  target: ExportTarget,
): AccountExport {
  const refused = new Map<string, string[]>();
  const all = [...desired.conditions.keys()];
  for (const t of taken)
    for (const name of all)
      refused.set(name, [
        ...(refused.get(name) ?? []),
        `${t}: the name belongs to another account's object; not written`,
      ]);
  for (const [key, why] of blocked) {
    const [, kind, name] = key.split('|');
    for (const o of desired.objects) {
      const source = o.metadata.annotations?.['byok.gateway.dev/source'];
      const ref = (o.spec['backendRef'] as { name?: string } | undefined)?.name;
      if (!source || (ref !== name && o.metadata.name !== name)) continue;
      const credential = source.replace(/ \(.*\)$/, '').split('/')[1];
      if (credential !== undefined)
        refused.set(credential, [
          ...new Set([...(refused.get(credential) ?? []), `the shared ${kind} ${name} it uses: ${why}`]),
        ]);
    }
  }
  if (refused.size === 0) return desired;
  const conditions = new Map(desired.conditions);
  const refusals = new Set(desired.refusals);
  for (const [name, lines] of refused) {
    if (!conditions.has(name)) continue;
    refusals.add(name);
    const condition: ExportCondition = {
      type: ConditionType.Exported,
      status: 'False',
      reason: ConditionReason.NotExported,
      message: `not exported to ${target}: ${lines.join('; ')}`,
    };
    conditions.set(name, condition);
  }
  return { ...desired, conditions, refusals };
}
