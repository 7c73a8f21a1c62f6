// GatewayAPIKey: gather (its workspace and guardrail, who holds its hash, the clock) → evaluate (Live and Ready) →
// write. Expiry is not an apiserver event, so the reconcile requeues itself at expiresAt and re-enqueues the
// credentials that depend on the key when `live` flips.

import { nextHashClaims, sameObject } from '../../compiler/elect.ts';
import { accountMissingMessage, isRoutedNamespace } from '../../compiler/gate.ts';
import { isApiKeyLive } from '../../domain/index.ts';
import { INDEX, type ResourceInformers } from '../../kube/resources.ts';
import { ConditionReason as R, ConditionType as T } from '../../schema/conditions.ts';
import type { GatewayAPIKey } from '../../schema/generated/types.ts';
import { buildConditions, type CatalogCondition, type Condition } from '../conditions.ts';
import type { ReconcileResult } from '../workqueue.ts';
import { missingGuardrails } from './guardrail.ts';
import { holderOf } from './key-holders.ts';
import { baseStatus, MAX_REQUEUE_MS, namespacedName, nsOf, splitKey } from './objects.ts';
import type { StatusWriter } from './status-writer.ts';

export interface ApiKeyFacts {
  namespace: string;
  spec: GatewayAPIKey['spec'];
  now: number;
  /** Whether spec.workspace names an existing Workspace (true when it names none). */
  workspaceExists: boolean;
  /** Whether the namespace holds an Account: without one the key is not compiled (src/compiler/gate.ts). */
  accountExists: boolean;
  /** Whether the namespace has a default Workspace: where a key that names none lands. */
  hasDefaultWorkspace: boolean;
  missingGuardrails: readonly string[];
  /**
   * The key that holds spec.hash (it named it first) when this key does not (holderOf in ./key-holders.ts): its name when it is
   * in this account; another account's key is never named.
   */
  hashHeldBy?: { sameAccount: true; name: string } | { sameAccount: false } | undefined;
}

export interface ApiKeyEvaluation {
  live: boolean;
  ready: CatalogCondition<'Ready'>;
  liveCondition: CatalogCondition<'Live'>;
  /** When a live key with an expiry should be looked at again (ms from now). */
  requeueAfterMs: number | undefined;
}

/** ApiKeyFacts.hashHeldBy for `key`, given its hash's holder (holderOf): absent when the key holds its hash. */
export function hashHeldBy(key: GatewayAPIKey, holder: GatewayAPIKey | undefined): ApiKeyFacts['hashHeldBy'] {
  if (!holder || sameObject(holder, key)) return undefined;
  return nsOf(holder) === nsOf(key) ? { sameAccount: true, name: holder.metadata.name ?? '' } : { sameAccount: false };
}

export function evaluateApiKey(f: ApiKeyFacts): ApiKeyEvaluation {
  const { spec, now, namespace } = f;
  const live = isApiKeyLive(spec, now);
  const exp = spec.expiresAt ? Date.parse(spec.expiresAt) : NaN;
  const liveCondition: CatalogCondition<'Live'> = live
    ? {
        type: T.Live,
        status: 'True',
        reason: R.Live,
        message: Number.isNaN(exp) ? 'the key does not expire' : `the key expires at ${spec.expiresAt}`,
      }
    : spec.disabled
      ? { type: T.Live, status: 'False', reason: R.Disabled, message: 'the key is disabled' }
      : { type: T.Live, status: 'False', reason: R.Expired, message: `the key expired at ${spec.expiresAt}` };
  let ready: CatalogCondition<'Ready'> = {
    type: T.Ready,
    status: 'True',
    reason: R.Ready,
    message: 'the API key record is valid',
  };
  // The gate and then a conflict outrank the rest: such a key is never compiled, whatever else is right or wrong with it.
  if (!f.accountExists) {
    ready = {
      type: T.Ready,
      status: 'False',
      reason: R.AccountMissing,
      message: accountMissingMessage(namespace, 'key'),
    };
  } else if (f.hashHeldBy) {
    const holder = f.hashHeldBy.sameAccount
      ? `GatewayAPIKey "${f.hashHeldBy.name}" of this namespace`
      : "another account's key";
    ready = {
      type: T.Ready,
      status: 'False',
      reason: R.Conflicting,
      message: `this hash is already held by ${holder} (the key that named a hash first holds it): this key is not compiled and the gateway never routes it to this account`,
    };
  } else if (spec.workspace && !f.workspaceExists) {
    // The gateway answers such a key 403 (no-workspace): Ready says so before the first request does.
    ready = {
      type: T.Ready,
      status: 'False',
      reason: R.NoWorkspace,
      message: `Workspace "${spec.workspace}" not found in namespace ${namespace}: the gateway refuses this key (403) until you create that Workspace or set spec.workspace to an existing one`,
    };
  } else if (!spec.workspace && !f.hasDefaultWorkspace) {
    ready = {
      type: T.Ready,
      status: 'False',
      reason: R.NoWorkspace,
      message: `the key names no workspace and namespace ${namespace} has no default Workspace: the gateway refuses this key (403) until you create a Workspace with spec.default: true or set spec.workspace`,
    };
  } else if (f.missingGuardrails.length > 0) {
    ready = {
      type: T.Ready,
      status: 'False',
      reason: R.GuardrailNotFound,
      message: `Guardrail "${f.missingGuardrails[0]}" not found in namespace ${namespace}`,
    };
  }
  // Looked at again when the key expires, and when a rotation's overlap ends (its old hash is compiled out then).
  const ends = [live ? exp : NaN, previousHashEnd(spec)].filter((t) => !Number.isNaN(t) && t > now);
  const requeueAfterMs =
    ends.length > 0 ? Math.max(1, Math.min(Math.min(...ends) - now + 50, MAX_REQUEUE_MS)) : undefined;
  return { live, ready, liveCondition, requeueAfterMs };
}

/** When the previous secret of a rotation stops working (ms since epoch), or NaN. */
function previousHashEnd(spec: GatewayAPIKey['spec']): number {
  return spec.previousHash && spec.previousHashExpiresAt ? Date.parse(spec.previousHashExpiresAt) : NaN;
}

/**
 * How long after a rotation's overlap ended a reconcile still recompiles the account: the requeue at the end lands
 * inside it; later reconciles have nothing to drop (a restarted operator compiles every account anyway).
 */
const OVERLAP_END_RECOMPILE_MS = 5 * 60_000;

export interface ApiKeyReconcileDeps {
  informers: ResourceInformers;
  writer: StatusWriter;
  markDirty: (namespace: string) => void;
  enqueueCredential: (key: string) => void;
}

export async function reconcileApiKey(deps: ApiKeyReconcileDeps, key: string): Promise<ReconcileResult> {
  const [ns, name] = splitKey(key);
  const inf = deps.informers;
  const k = inf.apiKeys.get(ns, name);
  if (!k || k.metadata.deletionTimestamp) return;
  const verdict = evaluateApiKey({
    namespace: ns,
    spec: k.spec,
    now: Date.now(),
    workspaceExists: !k.spec.workspace || inf.workspaces.get(ns, k.spec.workspace) !== undefined,
    accountExists: isRoutedNamespace(inf.accounts.list(ns)),
    hasDefaultWorkspace: inf.workspaces.list(ns).some((w) => w.spec.default === true),
    missingGuardrails: missingGuardrails(inf.guardrails, ns, [k.spec.guardrail]),
    hashHeldBy: hashHeldBy(k, holderOf(inf.apiKeys, k.spec.hash)),
  });
  const { live, ready } = verdict;
  const status = {
    ...baseStatus('GatewayAPIKey', k),
    live,
    // Recorded once per hash and kept: which key holds a hash is decided by who named it first.
    hashClaims: nextHashClaims(k, Date.now()),
    conditions: buildConditions(
      k.status?.conditions as Condition[] | undefined,
      [ready, verdict.liveCondition],
      k.metadata.generation,
    ),
  };
  const wasLive = k.status?.live;
  await deps.writer.write('GatewayAPIKey', k, status, inf.apiKeys);
  const sinceOverlapEnd = Date.now() - previousHashEnd(k.spec);
  if (sinceOverlapEnd >= 0 && sinceOverlapEnd < OVERLAP_END_RECOMPILE_MS) deps.markDirty(ns);
  if (wasLive !== undefined && wasLive !== live) {
    // Expiry is not an apiserver event: tell the dependants ourselves.
    for (const c of inf.credentials.byIndex(INDEX.apiKeyHash, `${ns}/${k.spec.hash}`))
      deps.enqueueCredential(namespacedName(c));
    deps.markDirty(ns);
  }
  if (ready.status !== 'True') deps.writer.warn(k, ready.reason, ready.message);
  return verdict.requeueAfterMs !== undefined ? { requeueAfterMs: verdict.requeueAfterMs } : undefined;
}
