// Gateway API keys: what an app team sends to the gateway (`Authorization: Bearer <key>`). A GatewayAPIKey holds
// only the key's SHA-256 (the gateway hashes the bearer token and looks the digest up), so the key itself is
// generated here, shown once by the CLI and stored nowhere: reading the cluster never yields a usable key.
import { randomBytes } from 'node:crypto';
import { KubeApiError, kubeClient } from '../kube/client.ts';
import type { KubeAccess } from '../kube/kubeconfig.ts';
import { API_VERSION, GROUP, VERSION } from '../schema/resources.ts';
import type { Account, GatewayAPIKey, Workspace } from '../schema/generated/types.ts';
import { accountMissingMessage, isRoutedNamespace } from '../compiler/gate.ts';
import { sha256Hex } from './management-keys.ts';
import { GATEWAY_KEY_PREFIX } from '../domain/api-keys.ts';

export { GATEWAY_KEY_PREFIX };

export function generateGatewayKey(): string {
  return GATEWAY_KEY_PREFIX + randomBytes(32).toString('hex');
}

export interface CreateGatewayKeyOptions {
  /** GatewayAPIKey name; default `gateway-key-<random>`. */
  name?: string;
  /** spec.workspace; absent: the namespace's default Workspace. */
  workspace?: string;
  /** spec.guardrail. */
  guardrail?: string;
}

/** The GatewayAPIKey object for a key with the given hash. */
export function gatewayKeyObject(namespace: string, name: string, hash: string, opts: CreateGatewayKeyOptions = {}): GatewayAPIKey {
  return {
    apiVersion: API_VERSION,
    kind: 'GatewayAPIKey',
    metadata: { name, namespace, labels: { 'app.kubernetes.io/managed-by': 'byok-operator' } },
    spec: { hash, ...(opts.workspace ? { workspace: opts.workspace } : {}), ...(opts.guardrail ? { guardrail: opts.guardrail } : {}) },
  } as GatewayAPIKey;
}

/** A list of the namespace, or undefined when it cannot be read (no list rights): a warning is never worth failing for. */
async function listOf<T>(kubeConfig: KubeAccess, namespace: string, plural: string): Promise<T[] | undefined> {
  const path = `/apis/${GROUP}/${VERSION}/namespaces/${encodeURIComponent(namespace)}/${plural}`;
  // 429 is the apiserver saying "retry" (its watch cache still initializing right after the CRDs are installed).
  for (let attempt = 0; ; attempt++) {
    try {
      return (await kubeClient(kubeConfig).request<{ items: T[] }>('GET', path)).items;
    } catch (err) {
      if (!(err instanceof KubeApiError && err.status === 429) || attempt === 10) return undefined;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

/**
 * Why the key will not be usable yet, read before it is written (the operator will say the same as Ready=False
 * AccountMissing or NoWorkspace); empty when it will be. Never fails the command.
 */
async function usabilityWarnings(kubeConfig: KubeAccess, namespace: string, workspace: string | undefined): Promise<string[]> {
  const out: string[] = [];
  const accounts = await listOf<Account>(kubeConfig, namespace, 'accounts');
  if (accounts !== undefined && !isRoutedNamespace(accounts)) out.push(accountMissingMessage(namespace, 'key'));
  const items = await listOf<Workspace>(kubeConfig, namespace, 'workspaces');
  if (items === undefined) return out;
  if (workspace !== undefined) {
    if (!items.some((w) => w.metadata.name === workspace)) out.push(`Workspace "${workspace}" does not exist in namespace ${namespace}: the gateway refuses the key (403) until it does`);
  } else if (!items.some((w) => w.spec.default === true)) {
    out.push(`namespace ${namespace} has no default Workspace: the gateway refuses the key (403) until one exists (a Workspace with spec.default: true) or --workspace names one`);
  }
  return out;
}

/**
 * Creates a gateway API key in the account `namespace`. Returns the key, which exists nowhere else (the caller
 * prints it once), its SHA-256 (for credential filters, `allowedApiKeyHashes`) and why it cannot be used yet, if so.
 */
export async function createGatewayKey(
  kubeConfig: KubeAccess,
  namespace: string,
  opts: CreateGatewayKeyOptions = {},
): Promise<{ key: string; hash: string; name: string; warnings: string[] }> {
  const key = generateGatewayKey();
  const hash = sha256Hex(key);
  const name = opts.name ?? `gateway-key-${randomBytes(4).toString('hex')}`;
  const warnings = await usabilityWarnings(kubeConfig, namespace, opts.workspace);
  await kubeClient(kubeConfig).request('POST', `/apis/${GROUP}/${VERSION}/namespaces/${encodeURIComponent(namespace)}/gatewayapikeys`, { body: gatewayKeyObject(namespace, name, hash, opts) });
  return { key, hash, name, warnings };
}
