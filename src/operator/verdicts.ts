// What the reconciler knows per credential (its verdict) and the AccountStateSource the compile pipeline reads.
// Verdicts live in memory on the leader. After a failover the new leader has none yet, so a credential's
// verdict falls back to the status the previous leader wrote (Ready=True for the current generation and the
// Secret resourceVersion still in our cache): routing does not flap while the new leader catches up.
import type { V1Secret } from '@kubernetes/client-node';
import { electAccount } from '../compiler/elect.ts';
import { secretRefKey } from '../domain/secret-ref.ts';
import { type ResourceInformers, secretPayload } from '../kube/resources.ts';
import type { BYOKCredential } from '../schema/generated/types.ts';
import type { AccountSnapshot, AccountStateSource, CredentialVerdict } from './compile/pipeline.ts';
import { conflictingKeys, unheldPreviousHashes } from './reconcile/key-holders.ts';
import type { AccountBudgetView, SpendStateSource } from './spend/spend-status-writer.ts';

export interface StoredVerdict {
  valid: boolean;
  sortOrder: number;
  label?: string;
  /**
   * Where the validated payload is, when valid: the Secret object the reconciler read, and its key. Kept by
   * reference (cached objects are never modified) and decoded when an account compiles, so the payload is not
   * held twice: in the Secret cache and again here (a GCP service account is ~2.3 KB).
   */
  payloadSecret?: V1Secret;
  payloadKey?: string;
  generation: number | undefined;
  secretResourceVersion: string | undefined;
}

const payloadOf = (v: StoredVerdict): string | undefined =>
  v.payloadSecret && v.payloadKey !== undefined ? secretPayload(v.payloadSecret, v.payloadKey) : undefined;

/** Whether two verdicts carry the same payload: the same Secret object and key, or the same decoded text. */
function samePayload(a: StoredVerdict, b: StoredVerdict): boolean {
  if (a.payloadSecret === b.payloadSecret && a.payloadKey === b.payloadKey) return true;
  return payloadOf(a) === payloadOf(b);
}

export class VerdictStore {
  private readonly map = new Map<string, StoredVerdict>();

  get(namespace: string, name: string): StoredVerdict | undefined {
    return this.map.get(`${namespace}/${name}`);
  }

  /**
   * Stores a verdict; true when it differs from the previous one in anything the compiler uses. `key` is the
   * work-queue key (`namespace/name`) when the caller has it: kept as is, so the map does not hold a copy.
   */
  set(namespace: string, name: string, v: StoredVerdict, key = `${namespace}/${name}`): boolean {
    const prev = this.map.get(key);
    this.map.set(key, v);
    return (
      !prev ||
      prev.valid !== v.valid ||
      prev.label !== v.label ||
      prev.sortOrder !== v.sortOrder ||
      !samePayload(prev, v) ||
      prev.generation !== v.generation
    );
  }

  delete(namespace: string, name: string): boolean {
    return this.map.delete(`${namespace}/${name}`);
  }

  size(): number {
    return this.map.size;
  }
}

export function verdictFromStatus(cred: BYOKCredential, secret: V1Secret | undefined): CredentialVerdict {
  const status = cred.status;
  const ready = status?.conditions?.find((c) => c.type === 'Ready');
  const sortOrder = status?.sortOrder ?? cred.spec.sortOrder ?? 0;
  const current =
    ready?.status === 'True' &&
    status?.observedGeneration === cred.metadata.generation &&
    secret !== undefined &&
    status?.secretResourceVersion === secret.metadata?.resourceVersion;
  if (!current) return { valid: false, sortOrder, ...(status?.label ? { label: status.label } : {}) };
  const payload = secretPayload(secret, secretRefKey(cred.spec.secretRef));
  if (payload === undefined) return { valid: false, sortOrder };
  return { valid: true, sortOrder, label: status?.label ?? '', payload };
}

/**
 * A verdict whose payload is decoded from its Secret on first read, once: a snapshot is often built for parts of an
 * account that need no key material (a compile whose fingerprint shows nothing to reseal reads it all the same,
 * but the spend writer reads none).
 */
function lazyVerdict(stored: StoredVerdict): CredentialVerdict {
  const verdict: CredentialVerdict = {
    valid: stored.valid,
    sortOrder: stored.sortOrder,
    ...(stored.label !== undefined ? { label: stored.label } : {}),
  };
  if (!stored.payloadSecret) return verdict;
  let decoded: { text: string | undefined } | undefined;
  return Object.defineProperty(verdict, 'payload', {
    enumerable: true,
    get: () => (decoded ??= { text: payloadOf(stored) }).text,
  });
}

export function createAccountStateSource(
  informers: ResourceInformers,
  verdicts: VerdictStore,
  clock: () => Date = () => new Date(),
): AccountStateSource & SpendStateSource {
  // A namespace is an account while it holds an Account (the gate, src/compiler/gate.ts): its credentials, keys and
  // workspaces alone do not make it one.
  return {
    accountNamespaces(): string[] {
      return [...informers.accounts.namespaces()].sort();
    },
    isAccountNamespace(namespace: string): boolean {
      return informers.accounts.hasNamespace(namespace);
    },
    snapshot(namespace: string): AccountSnapshot {
      const credentials = informers.credentials.list(namespace).map((resource) => {
        const stored = verdicts.get(namespace, resource.metadata.name ?? '');
        const verdict = stored
          ? lazyVerdict(stored)
          : verdictFromStatus(resource, informers.secrets.get(namespace, resource.spec.secretRef.name));
        return { resource, verdict };
      });
      // Spend reads budgetView alone and needs no keys: only a compile asks who holds each key's hash.
      return {
        ...budgetView(namespace),
        conflictingApiKeys: conflictingKeys(informers.apiKeys, namespace),
        unheldPreviousHashes: unheldPreviousHashes(informers.apiKeys, namespace),
        credentials,
      };
    },
    budgetView,
  };

  function budgetView(namespace: string): AccountBudgetView {
    const { winner } = electAccount(informers.accounts.list(namespace));
    return {
      namespace,
      ...(winner ? { account: winner } : {}),
      workspaces: informers.workspaces.list(namespace),
      guardrails: informers.guardrails.list(namespace),
      apiKeys: informers.apiKeys.list(namespace),
      now: clock(),
    };
  }
}
