// The reconcilers. Informer events only enqueue keys ("namespace/name"); every reconcile reads the caches,
// computes the complete status, and writes it with Server-Side Apply only when it differs from what is cached.
// The operator never writes spec. Credential verdicts feed the compile pipeline through markDirty().
import type { KubernetesObject, V1Secret } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Account, BYOKCredential, GatewayAPIKey, Guardrail, Workspace } from '../schema/generated/types.ts';
import { publicId, type IdentifiedKind } from '../domain/ids.ts';
import { isApiKeyLive, validatePayload, type EgressAllowList, maskLabel, resolveCredentialWrite, patchFromSpec, specFieldPath, describePayloadIssues, type Violation } from '../domain/index.ts';
import { creationTime, electAccount, electDefaultWorkspace, olderFirst, overQuota } from '../compiler/elect.ts';
import { DEFAULT_MAX_CREDENTIALS, quotaMessage } from '../domain/quota.ts';
import { placementOrderKey } from '../contract/routing.ts';
import { isNotFound, KubeApiError, type KubeClient } from '../kube/client.ts';
import type { Quarantine } from './compile/pipeline.ts';
import type { Applier } from '../kube/apply.ts';
import type { EventRecorder } from '../kube/events.ts';
import { CREDENTIAL_SECRET_LABEL, DEFAULT_SECRET_KEY, INDEX, secretPayload, secretPayloadBytes, type ResourceInformers } from '../kube/resources.ts';
import { bytesIssue } from '../domain/text.ts';
import { buildConditions, readyFrom, sameStatus, type Condition, type DesiredCondition } from './conditions.ts';
import type { OperatorMetrics } from './metrics.ts';
import { ownedStatus } from './spend-status.ts';
import type { VerdictStore } from './state.ts';
import { WorkQueue, type ReconcileResult } from './workqueue.ts';

export interface ControllerContext {
  informers: ResourceInformers;
  applier: Applier;
  events: EventRecorder;
  client: KubeClient;
  log: Logger;
  metrics: OperatorMetrics;
  verdicts: VerdictStore;
  markDirty: (namespace: string) => void;
  /** Cap of the missing-Secret requeue backoff (default 5000 ms): a Secret created later is seen within this. */
  missingSecretMaxDelayMs?: number;
  concurrency?: { credentials?: number; others?: number };
  /** Credentials per account when its Account sets no spec.limits.maxCredentials (default 1000). */
  defaultMaxCredentials?: number;
  /** What tenant URLs in payloads may point at beyond the egress policy (`--egress-allow`). */
  egress?: EgressAllowList;
}

/** Consecutive failed status writes of one object before a Warning Event, and the least time between two such Events. */
export const STATUS_WRITE_FAILURES_BEFORE_EVENT = 3;
const STATUS_WRITE_EVENT_INTERVAL_MS = 10 * 60_000;
/** Credentials that carry a quarantine Event when the namespace has no Account object. */
const QUARANTINE_EVENT_FANOUT = 20;

// Timers beyond ~24.8 days overflow; far-away expiries are simply re-checked hourly.
const MAX_REQUEUE_MS = 3_600_000;
const readyCondition = (status: object | undefined): Condition | undefined =>
  ((status as { conditions?: Condition[] } | undefined)?.conditions ?? []).find((c) => c.type === 'Ready');
/** status.workspaceScope of a credential without spec.workspace (the `kubectl get byok` Workspace column). */
const GLOBAL_WORKSPACE_SCOPE = 'GLOBAL';

type Kind = 'BYOKCredential' | 'Workspace' | 'Guardrail' | 'GatewayAPIKey' | 'Account';

const split = (key: string): [string, string] => {
  const i = key.indexOf('/');
  return [key.slice(0, i), key.slice(i + 1)];
};
const keyOf = (o: KubernetesObject) => `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;
const nsOf = (o: KubernetesObject) => o.metadata?.namespace ?? '';
const generationChanged = (a: KubernetesObject, b: KubernetesObject) =>
  a.metadata?.generation !== b.metadata?.generation || !!a.metadata?.deletionTimestamp !== !!b.metadata?.deletionTimestamp;

const section = (c: BYOKCredential) => (c.spec.isFallback ? 'fallback' : 'prioritized');

/**
 * Effective sort order: spec.sortOrder, or after every explicit position in the same provider and section,
 * ranked by age (creationTimestamp, then name). Pure function of the cached specs, so every replica agrees.
 */
export function effectiveSortOrder(cred: BYOKCredential, all: readonly BYOKCredential[]): number {
  if (cred.spec.sortOrder !== undefined) return cred.spec.sortOrder;
  const group = all.filter((c) => c.spec.provider === cred.spec.provider && section(c) === section(cred));
  const explicitMax = Math.max(-1, ...group.map((c) => c.spec.sortOrder ?? -1));
  const implicit = group.filter((c) => c.spec.sortOrder === undefined).sort(olderFirst);
  const rank = implicit.findIndex((c) => c.metadata.name === cred.metadata.name);
  return explicitMax + 1 + Math.max(0, rank);
}

function violationReason(v: Violation): string {
  switch (v.code) {
    case 'unknown_api_key_hash':
      return 'UnknownApiKeyHash';
    case 'byok_only_with_fallback':
      return 'ConflictingFlags';
    default:
      return 'InvalidFilters';
  }
}

export class Controllers {
  readonly queues: Record<'credentials' | 'workspaces' | 'guardrails' | 'apiKeys' | 'accounts', WorkQueue>;
  private readonly ctx: ControllerContext;
  private readonly inf: ResourceInformers;
  private readonly missingSecretAttempts = new Map<string, number>();
  private readonly quarantines = new Map<string, Quarantine>();
  private readonly statusWriteFailures = new Map<string, { count: number; eventAt: number }>();
  /** Credentials (ns/name) last found beyond their account's quota: re-checked when a sibling goes away. */
  private readonly overQuota = new Set<string>();

  private readonly backlogThreshold: number;

  /** More credentials queued than two rounds of workers: a cold start or a mass change is under way. */
  credentialBacklog(): boolean {
    return this.queues.credentials.len() > this.backlogThreshold;
  }

  constructor(ctx: ControllerContext) {
    this.ctx = ctx;
    this.inf = ctx.informers;
    const credentialConcurrency = ctx.concurrency?.credentials ?? 8;
    // Routing depends on credential verdicts only; Account, Workspace, Guardrail and key statuses are for people.
    // While credentials are backed up (a cold start, a mass rotation) those statuses wait, so the apiserver's
    // writes go to what the gateways need first (issue 11: at 10 credentials per account they were +30 % writes).
    const credentialBacklog = () => this.credentialBacklog();
    this.backlogThreshold = 2 * credentialConcurrency;
    const mk = (name: string, concurrency: number, yieldToCredentials = true) =>
      new WorkQueue({
        name,
        concurrency,
        ...(yieldToCredentials ? { yieldWhile: credentialBacklog } : {}),
        metrics: ctx.metrics,
        baseDelayMs: 5,
        maxDelayMs: 60_000,
        onError: (key, err) => ctx.log.warn({ controller: name, object: key, err: err instanceof Error ? err.message : String(err) }, 'reconcile failed; will retry with backoff'),
      });
    // One worker per status-only kind: after a cold start their deferred writes drain without crowding the
    // apiserver for the credential changes that follow (issue 11).
    const others = ctx.concurrency?.others ?? 1;
    this.queues = {
      credentials: mk('byokcredential', credentialConcurrency, false),
      workspaces: mk('workspace', others),
      guardrails: mk('guardrail', others),
      apiKeys: mk('gatewayapikey', others),
      accounts: mk('account', others),
    };
    this.wire();
  }

  // ---- event wiring: events only enqueue keys ----

  private wire(): void {
    const { credentials, workspaces, guardrails, apiKeys, accounts, secrets } = this.inf;
    const q = this.queues;
    const dirty = (o: KubernetesObject) => this.ctx.markDirty(nsOf(o));

    const credChanged = (c: BYOKCredential, old?: BYOKCredential) => {
      q.credentials.add(keyOf(c));
      const sortRelevant = !old || old.spec.provider !== c.spec.provider || section(old) !== section(c) || old.spec.sortOrder !== c.spec.sortOrder;
      if (sortRelevant) this.enqueueImplicitSiblings(c, old);
      dirty(c);
    };
    credentials.on('add', (c) => credChanged(c));
    credentials.on('update', (c, old) => {
      if (generationChanged(c, old)) credChanged(c, old);
    });
    credentials.on('delete', (c) => {
      this.ctx.verdicts.delete(nsOf(c), c.metadata.name ?? '');
      // A freed place in the quota goes to the oldest credential waiting for one.
      this.overQuota.delete(keyOf(c));
      for (const k of this.overQuota) if (k.startsWith(`${nsOf(c)}/`)) q.credentials.add(k);
      this.missingSecretAttempts.delete(keyOf(c));
      this.enqueueImplicitSiblings(c);
      dirty(c);
    });

    const secretChanged = (s: V1Secret) => {
      for (const c of credentials.byIndex(INDEX.secret, `${nsOf(s)}/${s.metadata?.name ?? ''}`)) q.credentials.add(keyOf(c));
    };
    secrets.on('add', secretChanged);
    secrets.on('update', (s, old) => {
      if (s.metadata?.resourceVersion !== old.metadata?.resourceVersion) secretChanged(s);
    });
    secrets.on('delete', secretChanged);

    const apiKeyChanged = (k: GatewayAPIKey, old?: GatewayAPIKey) => {
      q.apiKeys.add(keyOf(k));
      for (const h of new Set([k.spec.hash, old?.spec.hash])) {
        if (h) for (const c of credentials.byIndex(INDEX.apiKeyHash, `${nsOf(k)}/${h}`)) q.credentials.add(keyOf(c));
      }
      dirty(k);
    };
    apiKeys.on('add', (k) => apiKeyChanged(k));
    apiKeys.on('update', (k, old) => {
      if (generationChanged(k, old)) apiKeyChanged(k, old);
    });
    apiKeys.on('delete', (k) => apiKeyChanged(k));

    const workspaceChanged = (w: Workspace, old?: Workspace) => {
      const ns = nsOf(w);
      q.workspaces.add(keyOf(w));
      // Default-ness decides conflicts between siblings.
      if (w.spec.default || old?.spec.default) for (const other of workspaces.list(ns)) if (other.spec.default) q.workspaces.add(keyOf(other));
      for (const c of credentials.byIndex(INDEX.workspace, `${ns}/${w.metadata.name ?? ''}`)) q.credentials.add(keyOf(c));
      for (const k of apiKeys.byIndex(INDEX.workspace, `${ns}/${w.metadata.name ?? ''}`)) q.apiKeys.add(keyOf(k));
      dirty(w);
    };
    workspaces.on('add', (w) => workspaceChanged(w));
    workspaces.on('update', (w, old) => {
      if (generationChanged(w, old)) workspaceChanged(w, old);
    });
    workspaces.on('delete', (w) => workspaceChanged(w));

    const guardrailChanged = (g: Guardrail) => {
      const ns = nsOf(g);
      q.guardrails.add(keyOf(g));
      for (const w of workspaces.list(ns)) q.workspaces.add(keyOf(w));
      for (const k of apiKeys.list(ns)) if (k.spec.guardrail) q.apiKeys.add(keyOf(k));
      dirty(g);
    };
    guardrails.on('add', guardrailChanged);
    guardrails.on('update', (g, old) => {
      if (generationChanged(g, old)) guardrailChanged(g);
    });
    guardrails.on('delete', guardrailChanged);

    const accountChanged = (a: Account) => {
      for (const other of accounts.list(nsOf(a))) q.accounts.add(keyOf(other));
      // The credential quota may have changed.
      for (const c of credentials.list(nsOf(a))) q.credentials.add(keyOf(c));
      q.accounts.add(keyOf(a));
      dirty(a);
    };
    accounts.on('add', accountChanged);
    accounts.on('update', (a, old) => {
      if (generationChanged(a, old)) accountChanged(a);
    });
    accounts.on('delete', accountChanged);
  }

  private enqueueImplicitSiblings(c: BYOKCredential, old?: BYOKCredential): void {
    for (const other of this.inf.credentials.list(nsOf(c))) {
      if (other.spec.sortOrder !== undefined || other.metadata.name === c.metadata.name) continue;
      const same = (x: BYOKCredential) => x.spec.provider === other.spec.provider && section(x) === section(other);
      if (same(c) || (old && same(old))) this.queues.credentials.add(keyOf(other));
    }
  }

  /** Enqueue every cached object (on becoming leader, and periodically). */
  enqueueAll(opts: { background?: boolean } = {}): void {
    // Credentials in shard placement order (an account's credentials together, the accounts of one routing
    // shard together): on a cold start the compile pipeline then finds a few shards changed per run instead of
    // every shard, which saves hundreds of ConfigMap and bundle Secret writes at 10k credentials.
    const order = new Map<string, number>();
    const rank = (ns: string) => {
      let r = order.get(ns);
      if (r === undefined) order.set(ns, (r = placementOrderKey(ns)));
      return r;
    };
    const creds = this.inf.credentials.list().map((c) => ({ key: keyOf(c), ns: nsOf(c), rank: rank(nsOf(c)) }));
    creds.sort((a, b) => a.rank - b.rank || (a.ns < b.ns ? -1 : a.ns > b.ns ? 1 : 0) || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    const q = this.queues;
    // The periodic resync re-checks in the background, behind any real change; becoming leader queues for real.
    const put = (queue: WorkQueue, keys: string[]) => (opts.background ? queue.addBackground(keys) : keys.forEach((k) => queue.add(k)));
    if (opts.background) q.credentials.addBackground(creds.map((c) => c.key));
    else q.credentials.addAllInOrder(creds.map((c) => c.key));
    put(q.workspaces, this.inf.workspaces.list().map(keyOf));
    put(q.guardrails, this.inf.guardrails.list().map(keyOf));
    put(q.apiKeys, this.inf.apiKeys.list().map(keyOf));
    put(q.accounts, this.inf.accounts.list().map(keyOf));
  }

  start(): void {
    this.queues.credentials.start((k) => this.reconcileCredential(k));
    this.queues.workspaces.start((k) => this.reconcileWorkspace(k));
    this.queues.guardrails.start((k) => this.reconcileGuardrail(k));
    this.queues.apiKeys.start((k) => this.reconcileApiKey(k));
    this.queues.accounts.start((k) => this.reconcileAccount(k));
  }

  async stop(): Promise<void> {
    await Promise.all(Object.values(this.queues).map((q) => q.stop()));
  }

  async shutdown(): Promise<void> {
    await Promise.all(Object.values(this.queues).map((q) => q.shutdown()));
  }

  isIdle(): boolean {
    return Object.values(this.queues).every((q) => q.isIdle());
  }

  async waitForIdle(): Promise<void> {
    while (!this.isIdle()) await Promise.all(Object.values(this.queues).map((q) => q.waitForIdle()));
  }

  // ---- status writing ----

  private async writeStatus<T extends KubernetesObject & { status?: object }>(kind: Kind, obj: T, status: object, informer: { observe(o: T): void }): Promise<void> {
    if (sameStatus(ownedStatus(obj.status), status)) return;
    const key = `${kind}/${keyOf(obj)}`;
    try {
      const written = await this.ctx.applier.applyStatus<T>(kind, nsOf(obj), obj.metadata?.name ?? '', status);
      this.statusWriteFailures.delete(key);
      informer.observe(written);
    } catch (err) {
      if (isNotFound(err)) return; // deleted meanwhile; the delete event cleans up
      this.statusWriteFailed(key, obj, err);
      throw err;
    }
    this.readyTransition(kind, obj, readyCondition(obj.status), readyCondition(status));
  }

  /** Ready changes are logged (a fall from True at warn), and becoming Ready gets a Normal Event, like
   *  cert-manager's: a healthy object then says so in `kubectl describe`, not only by the absence of warnings. */
  private readyTransition(kind: Kind, obj: KubernetesObject, was: Condition | undefined, now: Condition | undefined): void {
    if (!now || was?.status === now.status) return;
    const fields = { kind, namespace: nsOf(obj), name: obj.metadata?.name, from: was?.status ?? 'Unknown', to: now.status, reason: now.reason };
    if (was?.status === 'True' && now.status !== 'True') this.ctx.log.warn({ ...fields, message: now.message }, `${kind} is no longer Ready`);
    else this.ctx.log.info(fields, `${kind} Ready is ${now.status}`);
    if (now.status === 'True' && this.takeNormalEventToken()) void this.ctx.events.record(obj, 'Normal', 'Ready', now.message);
  }

  /** Normal Events are a courtesy: at most a burst of 25 and 2/s, so a cold start of thousands of objects does
   *  not add thousands of Event writes (client-go's event broadcaster limits the same way; at 10/s they were
   *  ~7 % of a 10k cold start's apiserver time). Warnings are not limited. */
  private normalEventTokens = 25;
  private normalEventRefilledAt = performance.now();
  private takeNormalEventToken(): boolean {
    const now = performance.now();
    this.normalEventTokens = Math.min(25, this.normalEventTokens + ((now - this.normalEventRefilledAt) / 1000) * 2);
    this.normalEventRefilledAt = now;
    if (this.normalEventTokens < 1) return false;
    this.normalEventTokens -= 1;
    return true;
  }

  /** A status write that keeps failing is visible to the object's owner, not only in the operator's log. */
  private statusWriteFailed(key: string, obj: KubernetesObject, err: unknown): void {
    const f = this.statusWriteFailures.get(key) ?? { count: 0, eventAt: -Infinity };
    f.count++;
    this.statusWriteFailures.set(key, f);
    const now = Date.now();
    if (f.count < STATUS_WRITE_FAILURES_BEFORE_EVENT || now - f.eventAt < STATUS_WRITE_EVENT_INTERVAL_MS) return;
    f.eventAt = now;
    // Status code and reason only: the apiserver's message can quote the refused value.
    const why = err instanceof KubeApiError ? `${err.status} ${err.reason ?? ''}`.trim() : err instanceof Error ? err.name : 'unknown error';
    this.warn(obj, 'StatusWriteFailed', `the operator could not write this object's status ${f.count} times in a row (${why}); retrying with backoff`);
  }

  /** Called by the compile pipeline when an account is quarantined (q) or released (undefined). */
  setQuarantine(ns: string, q: Quarantine | undefined): void {
    if (q) this.quarantines.set(ns, q);
    else if (!this.quarantines.delete(ns)) return;
    const accounts = this.inf.accounts.list(ns);
    for (const a of accounts) this.queues.accounts.add(keyOf(a));
    // The Account object is where the owner looks; a namespace without one gets the Event on its credentials.
    const { winner } = electAccount(accounts);
    const targets: KubernetesObject[] = winner ? [winner] : this.inf.credentials.list(ns).slice(0, QUARANTINE_EVENT_FANOUT);
    for (const t of targets) {
      // An Account gets its Warning from reconcileAccount (Ready=False, reason Quarantined), with the condition.
      if (q && !winner) this.warn(t, 'Quarantined', q.message);
      else if (!q) void this.ctx.events.record(t, 'Normal', 'QuarantineLifted', "the account's routing is written again");
    }
  }

  private warn(obj: KubernetesObject, reason: string, message: string, secrets: string[] = []): void {
    void this.ctx.events.record(obj, 'Warning', reason, message, secrets);
  }

  // ---- BYOKCredential ----

  private async resolveSecret(ns: string, name: string): Promise<V1Secret | undefined> {
    const cached = this.inf.secrets.get(ns, name);
    if (cached) return cached;
    // Not in the labelled cache: read it directly, then label it so its future changes reach the informer.
    let secret: V1Secret;
    try {
      secret = await this.ctx.client.request<V1Secret>('GET', `/api/v1/namespaces/${encodeURIComponent(ns)}/secrets/${encodeURIComponent(name)}`);
    } catch (err) {
      if (isNotFound(err)) {
        this.ctx.metrics.secretLookups.inc({ result: 'not_found' });
        return undefined;
      }
      throw err;
    }
    this.ctx.metrics.secretLookups.inc({ result: 'found' });
    const labelled = await this.ctx.applier.apply<V1Secret>({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name, namespace: ns, labels: { [CREDENTIAL_SECRET_LABEL]: 'true' } },
    });
    this.inf.secrets.observe({ ...labelled, apiVersion: 'v1', kind: 'Secret' });
    return labelled ?? secret;
  }

  async reconcileCredential(key: string): Promise<ReconcileResult> {
    const [ns, name] = split(key);
    const cred = this.inf.credentials.get(ns, name);
    if (!cred || cred.metadata.deletionTimestamp) {
      if (!cred && this.ctx.verdicts.delete(ns, name)) this.ctx.markDirty(ns);
      this.missingSecretAttempts.delete(key);
      return;
    }
    const gen = cred.metadata.generation;
    const spec = cred.spec;
    const secretKey = spec.secretRef.key ?? DEFAULT_SECRET_KEY;
    const secret = await this.resolveSecret(ns, spec.secretRef.name);
    const raw = secret ? secretPayload(secret, secretKey) : undefined;

    const conds: DesiredCondition[] = [];
    let label: string | undefined;
    let payloadOk = false;
    let requeueAfterMs: number | undefined;
    if (!secret) {
      conds.push({ type: 'SecretResolved', status: 'False', reason: 'SecretNotFound', message: `Secret "${spec.secretRef.name}" not found in namespace ${ns}` });
      conds.push({ type: 'PayloadValid', status: 'Unknown', reason: 'SecretNotResolved', message: 'the Secret is not resolved' });
      // Missing (not malformed): poll with a short capped backoff, since an unlabelled Secret created later
      // produces no event in our label-selected informer.
      const n = this.missingSecretAttempts.get(key) ?? 0;
      this.missingSecretAttempts.set(key, n + 1);
      requeueAfterMs = Math.min(this.ctx.missingSecretMaxDelayMs ?? 5000, 250 * 2 ** Math.min(n, 10));
    } else if (raw === undefined) {
      this.missingSecretAttempts.delete(key);
      conds.push({ type: 'SecretResolved', status: 'False', reason: 'KeyNotFound', message: `Secret "${spec.secretRef.name}" has no key "${secretKey}"` });
      conds.push({ type: 'PayloadValid', status: 'Unknown', reason: 'SecretNotResolved', message: 'the Secret is not resolved' });
    } else {
      this.missingSecretAttempts.delete(key);
      conds.push({ type: 'SecretResolved', status: 'True', reason: 'Resolved', message: `Secret "${spec.secretRef.name}" key "${secretKey}"` });
      // Invalid UTF-8 would be decoded to U+FFFD silently: the key used would differ from the one stored.
      const badBytes = bytesIssue(secretPayloadBytes(secret, secretKey) ?? new Uint8Array());
      const result = badBytes ? { ok: false as const, errors: [{ field: '', message: badBytes.message }] } : validatePayload(spec.provider, raw, this.ctx.egress ? { egress: this.ctx.egress } : {});
      if (result.ok) {
        payloadOk = true;
        label = maskLabel(spec.provider, raw);
        conds.push({ type: 'PayloadValid', status: 'True', reason: 'Valid', message: `valid ${spec.provider} payload` });
      } else {
        // Malformed: no requeue; the Secret's next change (it is labelled, so watched) re-runs this.
        conds.push({ type: 'PayloadValid', status: 'False', reason: 'PayloadInvalid', message: describePayloadIssues(result.errors) });
      }
    }

    // Filters and flags, with the same rules (codes and messages) as the REST API.
    const hashes = spec.allowedApiKeyHashes ?? [];
    const live = new Set<string>();
    const now = Date.now();
    for (const h of hashes) {
      for (const k of this.inf.apiKeys.byIndex(INDEX.apiKeyHash, `${ns}/${h}`)) {
        if (!isApiKeyLive(k.spec, now)) continue;
        live.add(h);
        const exp = k.spec.expiresAt ? Date.parse(k.spec.expiresAt) : NaN;
        // Re-check when a key this credential depends on expires.
        if (!Number.isNaN(exp)) requeueAfterMs = Math.min(requeueAfterMs ?? Infinity, exp - now + 50, MAX_REQUEUE_MS);
      }
    }
    if (spec.workspace && !this.inf.workspaces.get(ns, spec.workspace)) {
      conds.push({ type: 'FiltersValid', status: 'False', reason: 'WorkspaceNotFound', message: `Workspace "${spec.workspace}" not found in namespace ${ns}` });
    } else {
      const write = resolveCredentialWrite({ mode: 'create', stored: null, patch: patchFromSpec(spec as unknown as Record<string, unknown>), liveApiKeyHashes: live });
      if (write.ok) {
        conds.push({ type: 'FiltersValid', status: 'True', reason: 'Valid', message: 'flags and filters are valid' });
      } else {
        const first = write.violations[0]!;
        const message = write.violations.map((v) => `${specFieldPath(v.field)}: ${v.message}`).join('; ');
        conds.push({ type: 'FiltersValid', status: 'False', reason: violationReason(first), message });
      }
    }
    // Quota (REST and Git together): the oldest win; the newer ones stay uncompiled until a place frees up.
    const siblings = this.inf.credentials.list(ns);
    const limit = electAccount(this.inf.accounts.list(ns)).winner?.spec.limits?.maxCredentials ?? this.ctx.defaultMaxCredentials ?? DEFAULT_MAX_CREDENTIALS;
    if (overQuota(siblings, limit).has(name)) {
      this.overQuota.add(key);
      conds.unshift({ type: 'WithinQuota', status: 'False', reason: 'QuotaExceeded', message: quotaMessage(siblings.length, limit) });
    } else {
      this.overQuota.delete(key);
    }
    const ready = readyFrom(conds, 'the credential is valid');
    const conditions = buildConditions(cred.status?.conditions as Condition[] | undefined, [ready, ...conds], gen);

    const sortOrder = effectiveSortOrder(cred, this.inf.credentials.list(ns));
    const status = {
      id: publicId('BYOKCredential', ns, name),
      observedGeneration: gen,
      conditions,
      ...(label !== undefined ? { label } : {}),
      createdAt: creationTime(cred.metadata),
      sortOrder,
      ...(spec.workspace ? { workspaceId: publicId('Workspace', ns, spec.workspace) } : {}),
      workspaceScope: spec.workspace ?? GLOBAL_WORKSPACE_SCOPE,
      ...(secret?.metadata?.resourceVersion ? { secretResourceVersion: secret.metadata.resourceVersion } : {}),
    };
    const valid = ready.status === 'True' && payloadOk;
    const withPayload = valid && raw !== undefined && secret !== undefined;
    // Every field present, in one order: one object layout for 100k verdicts (optional spreads gave each its own
    // out-of-object property array).
    const changed = this.ctx.verdicts.set(ns, name, {
      valid,
      sortOrder,
      label,
      payloadSecret: withPayload ? secret : undefined,
      payloadKey: withPayload ? secretKey : undefined,
      generation: gen,
      secretResourceVersion: secret?.metadata?.resourceVersion,
    }, key);
    await this.writeStatus('BYOKCredential', cred, status, this.inf.credentials);
    if (changed) this.ctx.markDirty(ns);
    if (ready.status !== 'True') this.warn(cred, ready.reason, ready.message, raw !== undefined ? [raw] : []);
    return requeueAfterMs !== undefined && Number.isFinite(requeueAfterMs) ? { requeueAfterMs: Math.max(1, requeueAfterMs) } : undefined;
  }

  // ---- the other kinds ----

  private baseStatus(kind: IdentifiedKind, obj: KubernetesObject) {
    return { id: publicId(kind, nsOf(obj), obj.metadata?.name ?? ''), observedGeneration: obj.metadata?.generation };
  }

  private missingGuardrails(ns: string, names: (string | undefined)[]): string[] {
    return [...new Set(names.filter((n): n is string => !!n))].filter((n) => !this.inf.guardrails.get(ns, n)).sort();
  }

  async reconcileWorkspace(key: string): Promise<ReconcileResult> {
    const [ns, name] = split(key);
    const ws = this.inf.workspaces.get(ns, name);
    if (!ws || ws.metadata.deletionTimestamp) return;
    let ready: DesiredCondition = { type: 'Ready', status: 'True', reason: 'Ready', message: ws.spec.default ? 'the default workspace' : 'the workspace is valid' };
    const missing = this.missingGuardrails(ns, [ws.spec.defaultGuardrail, ...(ws.spec.members ?? []).map((m) => m.guardrail)]);
    if (missing.length > 0) ready = { type: 'Ready', status: 'False', reason: 'GuardrailNotFound', message: `Guardrail(s) not found: ${missing.join(', ')}` };
    if (ws.spec.default) {
      const { winner } = electDefaultWorkspace(this.inf.workspaces.list(ns));
      if (winner && winner.metadata.name !== name) {
        ready = { type: 'Ready', status: 'False', reason: 'Conflicting', message: `Workspace "${winner.metadata.name}" is already the default workspace of this namespace (oldest wins)` };
      }
    }
    const status = { ...this.baseStatus('Workspace', ws), conditions: buildConditions(ws.status?.conditions as Condition[] | undefined, [ready], ws.metadata.generation) };
    await this.writeStatus('Workspace', ws, status, this.inf.workspaces);
    if (ready.status !== 'True') this.warn(ws, ready.reason, ready.message);
  }

  async reconcileGuardrail(key: string): Promise<ReconcileResult> {
    const [ns, name] = split(key);
    const g = this.inf.guardrails.get(ns, name);
    if (!g || g.metadata.deletionTimestamp) return;
    const ready: DesiredCondition = { type: 'Ready', status: 'True', reason: 'Ready', message: 'the guardrail is valid' };
    const status = { ...this.baseStatus('Guardrail', g), conditions: buildConditions(g.status?.conditions as Condition[] | undefined, [ready], g.metadata.generation) };
    await this.writeStatus('Guardrail', g, status, this.inf.guardrails);
  }

  async reconcileApiKey(key: string): Promise<ReconcileResult> {
    const [ns, name] = split(key);
    const k = this.inf.apiKeys.get(ns, name);
    if (!k || k.metadata.deletionTimestamp) return;
    const now = Date.now();
    const live = isApiKeyLive(k.spec, now);
    const exp = k.spec.expiresAt ? Date.parse(k.spec.expiresAt) : NaN;
    const liveCond: DesiredCondition = live
      ? { type: 'Live', status: 'True', reason: 'Live', message: Number.isNaN(exp) ? 'the key does not expire' : `the key expires at ${k.spec.expiresAt}` }
      : k.spec.disabled
        ? { type: 'Live', status: 'False', reason: 'Disabled', message: 'the key is disabled' }
        : { type: 'Live', status: 'False', reason: 'Expired', message: `the key expired at ${k.spec.expiresAt}` };
    let ready: DesiredCondition = { type: 'Ready', status: 'True', reason: 'Ready', message: 'the API key record is valid' };
    const missing = this.missingGuardrails(ns, [k.spec.guardrail]);
    if (k.spec.workspace && !this.inf.workspaces.get(ns, k.spec.workspace)) {
      ready = { type: 'Ready', status: 'False', reason: 'WorkspaceNotFound', message: `Workspace "${k.spec.workspace}" not found in namespace ${ns}` };
    } else if (missing.length > 0) {
      ready = { type: 'Ready', status: 'False', reason: 'GuardrailNotFound', message: `Guardrail "${missing[0]}" not found in namespace ${ns}` };
    }
    const status = { ...this.baseStatus('GatewayAPIKey', k), live, conditions: buildConditions(k.status?.conditions as Condition[] | undefined, [ready, liveCond], k.metadata.generation) };
    const wasLive = k.status?.live;
    await this.writeStatus('GatewayAPIKey', k, status, this.inf.apiKeys);
    if (wasLive !== undefined && wasLive !== live) {
      // Expiry is not an apiserver event: tell the dependants ourselves.
      for (const c of this.inf.credentials.byIndex(INDEX.apiKeyHash, `${ns}/${k.spec.hash}`)) this.queues.credentials.add(keyOf(c));
      this.ctx.markDirty(ns);
    }
    if (ready.status !== 'True') this.warn(k, ready.reason, ready.message);
    if (live && !Number.isNaN(exp)) return { requeueAfterMs: Math.max(1, Math.min(exp - now + 50, MAX_REQUEUE_MS)) };
    return undefined;
  }

  async reconcileAccount(key: string): Promise<ReconcileResult> {
    const [ns, name] = split(key);
    const a = this.inf.accounts.get(ns, name);
    if (!a || a.metadata.deletionTimestamp) return;
    const { winner } = electAccount(this.inf.accounts.list(ns));
    const conflicting = winner && winner.metadata.name !== name;
    const q = conflicting ? undefined : this.quarantines.get(ns);
    // Compiled is shown only while quarantined: otherwise the compile pipeline, not this reconcile, knows when
    // the routing is written (see docs/operator.md "Quarantine").
    const compiled: DesiredCondition[] = q ? [{ type: 'Compiled', status: 'False', reason: 'Quarantined', message: q.message }] : [];
    const ready: DesiredCondition = conflicting
      ? { type: 'Ready', status: 'False', reason: 'Conflicting', message: `Account "${winner.metadata.name}" already defines this namespace's account (exactly one per namespace; oldest wins)` }
      : q
        ? readyFrom(compiled, 'the account is valid')
        : { type: 'Ready', status: 'True', reason: 'Ready', message: 'the account is valid' };
    const status = { ...this.baseStatus('Account', a), conditions: buildConditions(a.status?.conditions as Condition[] | undefined, [ready, ...compiled], a.metadata.generation) };
    await this.writeStatus('Account', a, status, this.inf.accounts);
    if (ready.status !== 'True') this.warn(a, ready.reason, ready.message);
  }
}
