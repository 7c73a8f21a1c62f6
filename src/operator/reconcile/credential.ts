// BYOKCredential: gather (the caches, and for a Secret not yet labelled one GET and a label) → evaluate (the
// pure check chain in credential-checks.ts) → write (status, the verdict the compile pipeline reads, Events).
import type { V1Secret } from '@kubernetes/client-node';
import { creationTime, electAccount, sameObject } from '../../compiler/elect.ts';
import { isRoutedNamespace } from '../../compiler/gate.ts';
import { publicId } from '../../domain/ids.ts';
import { type EgressAllowList, isApiKeyLive } from '../../domain/index.ts';
import { DEFAULT_MAX_CREDENTIALS } from '../../domain/quota.ts';
import { secretRefKey } from '../../domain/secret-ref.ts';
import type { Applier } from '../../kube/apply.ts';
import { isNotFound, type KubeClient } from '../../kube/client.ts';
import { CREDENTIAL_SECRET_LABEL, INDEX, type ResourceInformers, secretPayloadValue } from '../../kube/resources.ts';
import type { BYOKCredential } from '../../schema/generated/types.ts';
import { buildConditions, type Condition } from '../conditions.ts';
import type { OperatorMetrics } from '../metrics.ts';
import type { VerdictStore } from '../verdicts.ts';
import type { ReconcileResult } from '../workqueue.ts';
import { type CredentialEvaluation, type CredentialFacts, evaluateCredential } from './credential-checks.ts';
import { holderOf } from './key-holders.ts';
import { MAX_REQUEUE_MS, namespacedName, nsOf, splitKey } from './objects.ts';
import { effectiveSortOrder } from './sort-order.ts';
import type { StatusWriter } from './status-writer.ts';

/** status.workspaceScope of a credential without spec.workspace (the `kubectl get byok` Workspace column). */
export const GLOBAL_WORKSPACE_SCOPE = 'GLOBAL';

export interface CredentialReconcilerDeps {
  informers: ResourceInformers;
  client: KubeClient;
  applier: Applier;
  metrics: Pick<OperatorMetrics, 'secretLookups'>;
  verdicts: VerdictStore;
  markDirty: (namespace: string) => void;
  writer: StatusWriter;
  /** Cap of the missing-Secret requeue backoff (default 5000 ms). */
  missingSecretMaxDelayMs?: number;
  /** Credentials per account when its Account sets no spec.limits.maxCredentials. */
  defaultMaxCredentials?: number;
  egress?: EgressAllowList;
}

/** What gather found besides the facts the checks read. */
interface Gathered {
  facts: CredentialFacts;
  secret: V1Secret | undefined;
  /** The namespace's credentials, read once for the quota and the sort order. */
  siblings: BYOKCredential[];
  /** When the soonest-expiring live API key this credential depends on runs out (ms from now, capped). */
  apiKeyExpiryMs: number | undefined;
}

export class CredentialReconciler {
  private readonly missingSecretAttempts = new Map<string, number>();
  /** Credentials (ns/name) last found beyond their account's quota: re-checked when a sibling goes away. */
  private readonly overQuota = new Set<string>();

  private readonly deps: CredentialReconcilerDeps;

  constructor(deps: CredentialReconcilerDeps) {
    this.deps = deps;
  }

  /**
   * Forget a deleted credential, its verdict first (the compile pipeline drops it at once); returns the credentials
   * of its namespace waiting for a place in the quota.
   */
  forget(c: BYOKCredential): string[] {
    this.deps.verdicts.delete(nsOf(c), c.metadata.name ?? '');
    const key = namespacedName(c);
    this.overQuota.delete(key);
    const waiting = [...this.overQuota].filter((k) => k.startsWith(`${nsOf(c)}/`));
    this.missingSecretAttempts.delete(key);
    return waiting;
  }

  async reconcile(key: string): Promise<ReconcileResult> {
    const [ns, name] = splitKey(key);
    const cred = this.deps.informers.credentials.get(ns, name);
    if (!cred || cred.metadata.deletionTimestamp) {
      if (!cred && this.deps.verdicts.delete(ns, name)) this.deps.markDirty(ns);
      this.missingSecretAttempts.delete(key);
      return;
    }
    const gathered = await this.gather(ns, name, cred);
    return this.write(key, cred, gathered, evaluateCredential(gathered.facts));
  }

  // ---- gather ----

  private async gather(ns: string, name: string, cred: BYOKCredential): Promise<Gathered> {
    const { spec } = cred;
    const inf = this.deps.informers;
    const secretKey = secretRefKey(spec.secretRef);
    const secret = await this.resolveSecret(ns, spec.secretRef.name);
    const value = secret ? secretPayloadValue(secret, secretKey) : undefined;

    const live = new Set<string>();
    let apiKeyExpiryMs: number | undefined;
    const now = Date.now();
    for (const h of spec.allowedApiKeyHashes ?? []) {
      for (const k of inf.apiKeys.byIndex(INDEX.apiKeyHash, `${ns}/${h}`)) {
        // A key whose hash an older key (maybe another account's) holds is never compiled: it resolves nothing.
        if (!isApiKeyLive(k.spec, now) || !sameObject(holderOf(inf.apiKeys, h) ?? k, k)) continue;
        live.add(h);
        const exp = k.spec.expiresAt ? Date.parse(k.spec.expiresAt) : NaN;
        // Re-check when a key this credential depends on expires.
        if (!Number.isNaN(exp)) apiKeyExpiryMs = Math.min(apiKeyExpiryMs ?? Infinity, exp - now + 50, MAX_REQUEUE_MS);
      }
    }
    const siblings = inf.credentials.list(ns);
    const accounts = inf.accounts.list(ns);
    const limit =
      electAccount(accounts).winner?.spec.limits?.maxCredentials ??
      this.deps.defaultMaxCredentials ??
      DEFAULT_MAX_CREDENTIALS;
    const facts: CredentialFacts = {
      namespace: ns,
      name,
      spec,
      secretKey,
      secret: secret ? { value } : undefined,
      liveApiKeyHashes: live,
      workspaceExists: !spec.workspace || inf.workspaces.get(ns, spec.workspace) !== undefined,
      accountExists: isRoutedNamespace(accounts),
      quota: { credentials: siblings, limit },
      ...(this.deps.egress ? { egress: this.deps.egress } : {}),
    };
    return { facts, secret, siblings, apiKeyExpiryMs };
  }

  private async resolveSecret(ns: string, name: string): Promise<V1Secret | undefined> {
    const { informers, client, applier, metrics } = this.deps;
    const cached = informers.secrets.get(ns, name);
    if (cached) return cached;
    // Not in the labelled cache: read it directly, then label it so its future changes reach the informer.
    let secret: V1Secret;
    try {
      secret = await client.request<V1Secret>(
        'GET',
        `/api/v1/namespaces/${encodeURIComponent(ns)}/secrets/${encodeURIComponent(name)}`,
      );
    } catch (err) {
      if (isNotFound(err)) {
        metrics.secretLookups.inc({ result: 'not_found' });
        return undefined;
      }
      throw err;
    }
    metrics.secretLookups.inc({ result: 'found' });
    const labelled = await applier.apply<V1Secret>({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name, namespace: ns, labels: { [CREDENTIAL_SECRET_LABEL]: 'true' } },
    });
    informers.secrets.observe({ ...labelled, apiVersion: 'v1', kind: 'Secret' });
    return labelled ?? secret;
  }

  // ---- write ----

  private async write(
    key: string,
    cred: BYOKCredential,
    gathered: Gathered,
    verdict: CredentialEvaluation,
  ): Promise<ReconcileResult> {
    const { facts, secret, siblings } = gathered;
    const { namespace: ns, name, spec, secretKey } = facts;
    const gen = cred.metadata.generation;

    let requeueAfterMs = gathered.apiKeyExpiryMs;
    if (!secret) {
      // Missing (not malformed): poll with a short capped backoff, since an unlabelled Secret created later
      // produces no event in our label-selected informer. A malformed one is not requeued: the Secret is
      // labelled, so its next change re-runs this.
      const n = this.missingSecretAttempts.get(key) ?? 0;
      this.missingSecretAttempts.set(key, n + 1);
      requeueAfterMs = Math.min(
        this.deps.missingSecretMaxDelayMs ?? 5000,
        250 * 2 ** Math.min(n, 10),
        requeueAfterMs ?? Infinity,
      );
    } else {
      this.missingSecretAttempts.delete(key);
    }
    if (verdict.overQuota) this.overQuota.add(key);
    else this.overQuota.delete(key);

    const { ready, label } = verdict;
    const conditions = buildConditions(
      cred.status?.conditions as Condition[] | undefined,
      [ready, ...verdict.conditions],
      gen,
    );
    const sortOrder = effectiveSortOrder(cred, siblings);
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
    const raw = facts.secret?.value?.text;
    const valid = ready.status === 'True' && verdict.payloadValid;
    const withPayload = valid && raw !== undefined && secret !== undefined;
    // Every field present, in one order: one object layout for 100k verdicts (optional spreads gave each its own
    // out-of-object property array).
    const changed = this.deps.verdicts.set(
      ns,
      name,
      {
        valid,
        sortOrder,
        label,
        payloadSecret: withPayload ? secret : undefined,
        payloadKey: withPayload ? secretKey : undefined,
        generation: gen,
        secretResourceVersion: secret?.metadata?.resourceVersion,
      },
      key,
    );
    await this.deps.writer.write('BYOKCredential', cred, status, this.deps.informers.credentials);
    if (changed) this.deps.markDirty(ns);
    if (ready.status !== 'True')
      this.deps.writer.warn(cred, ready.reason, ready.message, raw !== undefined ? [raw] : []);
    return requeueAfterMs !== undefined && Number.isFinite(requeueAfterMs)
      ? { requeueAfterMs: Math.max(1, requeueAfterMs) }
      : undefined;
  }
}
