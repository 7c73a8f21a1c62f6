// The wiring of the reconcilers (src/operator/reconcile/<kind>.ts): informer events only enqueue keys
// ("namespace/name") on one work queue per kind; every reconcile reads the caches, computes the complete status,
// and writes it through the status writer only when it differs from what is cached. The operator never writes
// spec. Credential verdicts feed the compile pipeline through markDirty().
import type { KubernetesObject, V1Secret } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Account, BYOKCredential, GatewayAPIKey, Guardrail, Workspace } from '../schema/generated/types.ts';
import type { EgressAllowList } from '../domain/index.ts';
import { placementOrderKey } from '../contract/routing.ts';
import type { KubeClient } from '../kube/client.ts';
import type { Quarantine } from './compile/pipeline.ts';
import type { Applier } from '../kube/apply.ts';
import type { EventRecorder } from '../kube/events.ts';
import { INDEX, type ResourceInformers } from '../kube/resources.ts';
import type { OperatorMetrics } from './metrics.ts';
import type { VerdictStore } from './state.ts';
import { WorkQueue } from './workqueue.ts';
import { AccountReconciler } from './reconcile/account.ts';
import { CredentialReconciler } from './reconcile/credential.ts';
import { reconcileApiKey } from './reconcile/gateway-api-key.ts';
import { reconcileGuardrail } from './reconcile/guardrail.ts';
import { generationChanged, keyOf, nsOf } from './reconcile/objects.ts';
import { sortSection } from './reconcile/sort-order.ts';
import { StatusWriter } from './reconcile/status-writer.ts';
import { reconcileWorkspace } from './reconcile/workspace.ts';

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

export class Controllers {
  readonly queues: Record<'credentials' | 'workspaces' | 'guardrails' | 'apiKeys' | 'accounts', WorkQueue>;
  private readonly ctx: ControllerContext;
  private readonly inf: ResourceInformers;
  private readonly writer: StatusWriter;
  private readonly credential: CredentialReconciler;
  private readonly account: AccountReconciler;

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
    this.writer = new StatusWriter({ applier: ctx.applier, events: ctx.events, log: ctx.log });
    this.credential = new CredentialReconciler({
      informers: ctx.informers,
      client: ctx.client,
      applier: ctx.applier,
      metrics: ctx.metrics,
      verdicts: ctx.verdicts,
      markDirty: (ns) => ctx.markDirty(ns),
      writer: this.writer,
      ...(ctx.missingSecretMaxDelayMs !== undefined ? { missingSecretMaxDelayMs: ctx.missingSecretMaxDelayMs } : {}),
      ...(ctx.defaultMaxCredentials !== undefined ? { defaultMaxCredentials: ctx.defaultMaxCredentials } : {}),
      ...(ctx.egress ? { egress: ctx.egress } : {}),
    });
    this.account = new AccountReconciler({ informers: ctx.informers, writer: this.writer, enqueueAccount: (k) => this.queues.accounts.add(k) });
    this.wire();
  }

  // ---- event wiring: events only enqueue keys ----

  private wire(): void {
    const { credentials, workspaces, guardrails, apiKeys, accounts, secrets } = this.inf;
    const q = this.queues;
    const dirty = (o: KubernetesObject) => this.ctx.markDirty(nsOf(o));

    const credChanged = (c: BYOKCredential, old?: BYOKCredential) => {
      q.credentials.add(keyOf(c));
      const sortRelevant = !old || old.spec.provider !== c.spec.provider || sortSection(old) !== sortSection(c) || old.spec.sortOrder !== c.spec.sortOrder;
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
      for (const k of this.credential.forget(c)) q.credentials.add(k);
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
      // Keys that name no workspace use the default one: their NoWorkspace verdict follows the default flag.
      if (w.spec.default || old?.spec.default) for (const k of apiKeys.list(ns)) if (!k.spec.workspace) q.apiKeys.add(keyOf(k));
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
      const same = (x: BYOKCredential) => x.spec.provider === other.spec.provider && sortSection(x) === sortSection(other);
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
    const { informers } = this.ctx;
    const markDirty = (ns: string) => this.ctx.markDirty(ns);
    const writer = this.writer;
    this.queues.credentials.start((k) => this.credential.reconcile(k));
    this.queues.workspaces.start((k) => reconcileWorkspace({ informers, writer }, k));
    this.queues.guardrails.start((k) => reconcileGuardrail({ informers, writer }, k));
    this.queues.apiKeys.start((k) => reconcileApiKey({ informers, writer, markDirty, enqueueCredential: (c) => this.queues.credentials.add(c) }, k));
    this.queues.accounts.start((k) => this.account.reconcile(k));
  }

  /** Called by the compile pipeline when an account is quarantined (q) or released (undefined). */
  setQuarantine(ns: string, q: Quarantine | undefined): void {
    this.account.setQuarantine(ns, q);
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

}
