// `byok-operator bundle-key stage | activate <keyId> | rotate`: rotate the data key that seals credential
// bundles. Stage first, let kubelet deliver the new key to gateway pods (about a minute), then activate; the
// leader reseals every bundle within seconds. See docs/compiler.md ("The key Secret and rotation").
import type { KubernetesListObject, KubernetesObject } from '@kubernetes/client-node';
import { ACTIVE_KEY_ENTRY, DEFAULT_BUNDLE_KEY_SECRET } from '../contract/envelope.ts';
import { ROUTING_LABEL } from '../contract/routing.ts';
import { kubeClient } from '../kube/client.ts';
import type { KubeAccess } from '../kube/kubeconfig.ts';
import { crPath } from '../kube/resources.ts';
import { activateBundleKey, addBundleKey, ensureBundleKey } from '../operator/compile/bundle-key.ts';
import { kubeRoutingStore } from '../operator/compile/store.ts';

export type BundleKeyAction = { action: 'stage' } | { action: 'rotate' } | { action: 'activate'; keyId: string };

/** How long activate and rotate wait for the operator to record the resealed versions. */
export const RESEAL_WAIT_MS = 60_000;

type Delivered = KubernetesObject & { status?: { id?: string; delivery?: { configVersion?: string } } };

export interface BundleKeyResult {
  keyId: string;
  /** Accounts whose new delivery version the operator had not recorded within the wait (activate and rotate). */
  unrecorded: string[];
}

/**
 * The delivery version of every Account with a credential sealed in this routing namespace's bundles (their data
 * keys are credential ids), by namespace: the Accounts a new active key moves. Accounts of another installation, or
 * of none, are not waited for; none at all when no health writer records delivery.
 */
async function sealedAccountVersions(kubeConfig: KubeAccess, routingNamespace: string): Promise<Map<string, string>> {
  const client = kubeClient(kubeConfig);
  const [bundles, accounts, credentials] = await Promise.all([
    client.request<KubernetesListObject<KubernetesObject & { data?: Record<string, string> }>>(
      'GET',
      `/api/v1/namespaces/${encodeURIComponent(routingNamespace)}/secrets`,
      { query: { labelSelector: `${ROUTING_LABEL}=bundle` } },
    ),
    client.request<KubernetesListObject<Delivered>>('GET', crPath('accounts')),
    client.request<KubernetesListObject<Delivered>>('GET', crPath('byokcredentials')),
  ]);
  const sealedIds = new Set(bundles.items.flatMap((b) => Object.keys(b.data ?? {})));
  const sealed = new Set(
    credentials.items
      .filter((c) => c.status?.id !== undefined && sealedIds.has(c.status.id))
      .map((c) => c.metadata?.namespace ?? ''),
  );
  const out = new Map<string, string>();
  for (const a of accounts.items) {
    const ns = a.metadata?.namespace ?? '';
    const version = a.status?.delivery?.configVersion;
    if (version !== undefined && sealed.has(ns)) out.set(ns, version);
  }
  return out;
}

/**
 * Waits until the operator has recorded a new delivery version on every Account in `before` (the write that records
 * it carries Delivered=False), so a `kubectl wait --for=condition=Delivered` run after this command returns can never
 * read the old key's True. Returns the namespaces still on their old version after `timeoutMs`.
 */
async function awaitResealRecorded(
  kubeConfig: KubeAccess,
  before: ReadonlyMap<string, string>,
  timeoutMs: number,
): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  let left = [...before.keys()];
  while (left.length > 0) {
    const client = kubeClient(kubeConfig);
    const accounts = await client.request<KubernetesListObject<Delivered>>('GET', crPath('accounts'));
    const now = new Map(accounts.items.map((a) => [a.metadata?.namespace ?? '', a.status?.delivery?.configVersion]));
    // An Account that is gone has nothing left to deliver.
    left = left.filter((ns) => now.has(ns) && now.get(ns) === before.get(ns));
    if (left.length === 0 || Date.now() >= deadline) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  return left;
}

/** Stages, activates or rotates; activate and rotate return once the operator has recorded the resealed versions. */
export async function bundleKeyCommand(
  kubeConfig: KubeAccess,
  routingNamespace: string,
  request: BundleKeyAction,
  secretName = DEFAULT_BUNDLE_KEY_SECRET,
  waitMs = RESEAL_WAIT_MS,
): Promise<BundleKeyResult> {
  const store = kubeRoutingStore(kubeConfig, routingNamespace);
  await ensureBundleKey(store, routingNamespace, secretName);
  if (request.action === 'stage')
    return { keyId: await addBundleKey(store, secretName, { activate: false }), unrecorded: [] };
  const before = await sealedAccountVersions(kubeConfig, routingNamespace);
  let keyId: string;
  if (request.action === 'activate') {
    const current = await store.readSecretWithVersion(secretName);
    // Activating the active key changes nothing: no version moves.
    if (current && Buffer.from(current.data[ACTIVE_KEY_ENTRY] ?? '', 'base64').toString() === request.keyId)
      return { keyId: request.keyId, unrecorded: [] };
    await activateBundleKey(store, secretName, request.keyId);
    keyId = request.keyId;
  } else keyId = await addBundleKey(store, secretName, { activate: true });
  return { keyId, unrecorded: await awaitResealRecorded(kubeConfig, before, waitMs) };
}
