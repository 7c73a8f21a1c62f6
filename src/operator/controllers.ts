// The reconcilers' work queues, one per kind, and their start, stop and idleness. Each reconciler declares what
// wakes it (reconcile/<kind>-controller.ts); add() registers those watches, so informer events only enqueue keys
// ("namespace/name"), and every reconcile reads the caches, computes the complete status and writes it through the
// status writer only when it differs from what is cached. The operator never writes spec. Credential verdicts feed
// the compile pipeline through markDirty().
import type { Logger } from 'pino';
import { placementOrderKey } from '../contract/routing.ts';
import type { EgressAllowList } from '../domain/index.ts';
import type { Applier } from '../kube/apply.ts';
import type { KubeClient } from '../kube/client.ts';
import type { ResourceInformers } from '../kube/resources.ts';
import type { Component } from './manager.ts';
import type { OperatorMetrics } from './metrics.ts';
import type { AccountReconciler } from './reconcile/account.ts';
import { accountController } from './reconcile/account-controller.ts';
import type { Controller, Enqueue, ReconciledKind } from './reconcile/controller.ts';
import { CredentialReconciler } from './reconcile/credential.ts';
import { credentialController } from './reconcile/credential-controller.ts';
import { apiKeyController } from './reconcile/gateway-api-key-controller.ts';
import { guardrailController } from './reconcile/guardrail-controller.ts';
import { namespacedName, nsOf } from './reconcile/objects.ts';
import type { StatusWriter } from './reconcile/status-writer.ts';
import { workspaceController } from './reconcile/workspace-controller.ts';
import type { VerdictStore } from './verdicts.ts';
import { WorkQueue } from './workqueue.ts';

/** The reconcilers, a leader component: on taking the lead every object is queued, then the queues run. */
export class Controllers implements Component {
  readonly name = 'controllers';
  readonly queues: Record<ReconciledKind, WorkQueue>;
  private readonly informers: ResourceInformers;
  private readonly controllers: Controller[] = [];
  private readonly backlogThreshold: number;

  constructor(opts: {
    informers: ResourceInformers;
    metrics: OperatorMetrics;
    log: Logger;
    concurrency?: { credentials?: number; others?: number };
  }) {
    this.informers = opts.informers;
    const credentialConcurrency = opts.concurrency?.credentials ?? 8;
    // Routing depends on credential verdicts only; Account, Workspace, Guardrail and key statuses are for people.
    // While credentials are backed up (a cold start, a mass rotation) those statuses wait, so the apiserver's
    // writes go to what the gateways need first (at 10 credentials per account they were +30 % writes).
    const credentialBacklog = () => this.credentialBacklog();
    this.backlogThreshold = 2 * credentialConcurrency;
    const mk = (name: string, concurrency: number, yieldToCredentials = true) =>
      new WorkQueue({
        name,
        concurrency,
        ...(yieldToCredentials ? { yieldWhile: credentialBacklog } : {}),
        metrics: opts.metrics,
        baseDelayMs: 5,
        maxDelayMs: 60_000,
        onError: (key, err) =>
          opts.log.warn(
            { controller: name, object: key, err: err instanceof Error ? err.message : String(err) },
            'reconcile failed; will retry with backoff',
          ),
      });
    // One worker per status-only kind: after a cold start their deferred writes drain without crowding the
    // apiserver for the credential changes that follow.
    const others = opts.concurrency?.others ?? 1;
    this.queues = {
      credentials: mk('byokcredential', credentialConcurrency, false),
      workspaces: mk('workspace', others),
      guardrails: mk('guardrail', others),
      apiKeys: mk('gatewayapikey', others),
      accounts: mk('account', others),
    };
  }

  /** More credentials queued than two rounds of workers: a cold start or a mass change is under way. */
  credentialBacklog(): boolean {
    return this.queues.credentials.len() > this.backlogThreshold;
  }

  /** Adds keys to the queue of a kind. */
  enqueuer(kind: ReconciledKind): Enqueue {
    const queue = this.queues[kind];
    return (key) => queue.add(key);
  }

  /** Registers a reconciler's watches now; its workers run from start() to stop(). */
  add(controller: Controller): void {
    controller.watch(this.informers, this.enqueuer(controller.for));
    this.controllers.push(controller);
  }

  /** Enqueue every cached object (on becoming leader, and periodically). */
  enqueueAll(opts: { background?: boolean } = {}): void {
    const inf = this.informers;
    // Credentials in shard placement order (an account's credentials together, the accounts of one routing
    // shard together): on a cold start the compile pipeline then finds a few shards changed per run instead of
    // every shard, which saves hundreds of ConfigMap and bundle Secret writes at 10k credentials.
    const order = new Map<string, number>();
    const rank = (ns: string) => {
      let r = order.get(ns);
      if (r === undefined) order.set(ns, (r = placementOrderKey(ns)));
      return r;
    };
    const creds = inf.credentials.list().map((c) => ({ key: namespacedName(c), ns: nsOf(c), rank: rank(nsOf(c)) }));
    creds.sort(
      (a, b) =>
        a.rank - b.rank || (a.ns < b.ns ? -1 : a.ns > b.ns ? 1 : 0) || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0),
    );
    const q = this.queues;
    // The periodic resync re-checks in the background, behind any real change; becoming leader queues for real.
    const put = (queue: WorkQueue, keys: string[]) =>
      opts.background ? queue.addBackground(keys) : keys.forEach((k) => queue.add(k));
    if (opts.background) q.credentials.addBackground(creds.map((c) => c.key));
    else q.credentials.addAllInOrder(creds.map((c) => c.key));
    put(q.workspaces, inf.workspaces.list().map(namespacedName));
    put(q.guardrails, inf.guardrails.list().map(namespacedName));
    put(q.apiKeys, inf.apiKeys.list().map(namespacedName));
    put(q.accounts, inf.accounts.list().map(namespacedName));
  }

  start(): void {
    this.enqueueAll();
    for (const c of this.controllers) this.queues[c.for].start((key) => c.reconcile(key));
  }

  async stop(): Promise<void> {
    await Promise.all(Object.values(this.queues).map((q) => q.stop()));
  }

  async close(): Promise<void> {
    await Promise.all(Object.values(this.queues).map((q) => q.shutdown()));
  }

  isIdle(): boolean {
    return Object.values(this.queues).every((q) => q.isIdle());
  }

  async waitForIdle(): Promise<void> {
    while (!this.isIdle()) await Promise.all(Object.values(this.queues).map((q) => q.waitForIdle()));
  }
}

export interface ReconcilerDeps {
  informers: ResourceInformers;
  client: KubeClient;
  applier: Applier;
  metrics: OperatorMetrics;
  verdicts: VerdictStore;
  writer: StatusWriter;
  /** Created before the compile pipeline, which reports its quarantines to it. */
  accounts: AccountReconciler;
  markDirty: (namespace: string) => void;
  /** Cap of the missing-Secret requeue backoff (default 5000 ms): a Secret created later is seen within this. */
  missingSecretMaxDelayMs?: number;
  /** Credentials per account when its Account sets no spec.limits.maxCredentials (default 1000). */
  defaultMaxCredentials?: number;
  /** What tenant URLs in payloads may point at beyond the egress policy (`--egress-allow`). */
  egress?: EgressAllowList;
}

/** The operator's five reconcilers, credentials first (routing waits on them), each with its watches. */
export function addReconcilers(controllers: Controllers, deps: ReconcilerDeps): void {
  const { informers, writer, markDirty } = deps;
  const credential = new CredentialReconciler({
    informers,
    client: deps.client,
    applier: deps.applier,
    metrics: deps.metrics,
    verdicts: deps.verdicts,
    markDirty,
    writer,
    ...(deps.missingSecretMaxDelayMs !== undefined ? { missingSecretMaxDelayMs: deps.missingSecretMaxDelayMs } : {}),
    ...(deps.defaultMaxCredentials !== undefined ? { defaultMaxCredentials: deps.defaultMaxCredentials } : {}),
    ...(deps.egress ? { egress: deps.egress } : {}),
  });
  controllers.add(credentialController(credential));
  controllers.add(workspaceController({ informers, writer }));
  controllers.add(guardrailController({ informers, writer }));
  controllers.add(
    apiKeyController({ informers, writer, markDirty, enqueueCredential: controllers.enqueuer('credentials') }),
  );
  controllers.add(accountController(deps.accounts));
}
