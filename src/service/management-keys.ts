// Management keys authenticate the REST API. Each is a Secret in the account namespace, labelled
// `byok.gateway.dev/management-key=true`, that holds only the SHA-256 of the key: the key itself is shown once
// at creation and never stored, so reading the cluster never yields a usable key.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { V1Secret } from '@kubernetes/client-node';
import { sha256Hex } from '../contract/routing.ts';
import { MANAGEMENT_KEY_PREFIX } from '../domain/api-keys.ts';
import { kubeClient } from '../kube/client.ts';
import type { KubeAccess } from '../kube/kubeconfig.ts';
import { MANAGEMENT_KEY_LABEL } from '../kube/resources.ts';

/** Lowercase hex SHA-256 of a bearer token (management key or gateway API key): the one digest helper of src/. */
export { MANAGEMENT_KEY_LABEL, sha256Hex };
export const MANAGEMENT_KEY_SELECTOR = `${MANAGEMENT_KEY_LABEL}=true`;
/** Data key of the Secret holding the lowercase hex SHA-256 of the key. */
export const MANAGEMENT_KEY_HASH_FIELD = 'sha256';
export { MANAGEMENT_KEY_PREFIX };

/** Constant-time comparison of two hex digests of equal length. */
export function sameDigest(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  return timingSafeEqual(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

export function generateManagementKey(): string {
  return MANAGEMENT_KEY_PREFIX + randomBytes(32).toString('hex');
}

/** The stored hash of a management-key Secret, or null when the Secret is not a well-formed management key. */
export function managementKeyHash(secret: V1Secret): string | null {
  if (secret.metadata?.labels?.[MANAGEMENT_KEY_LABEL] !== 'true') return null;
  const encoded = secret.data?.[MANAGEMENT_KEY_HASH_FIELD];
  const hash =
    encoded !== undefined
      ? Buffer.from(encoded, 'base64').toString('utf8').trim()
      : secret.stringData?.[MANAGEMENT_KEY_HASH_FIELD]?.trim();
  return hash !== undefined && /^[0-9a-f]{64}$/.test(hash) ? hash : null;
}

/** The Secret object for a management key with the given hash. */
export function managementKeySecret(namespace: string, name: string, hash: string, description?: string): V1Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'Opaque',
    metadata: {
      name,
      namespace,
      labels: { [MANAGEMENT_KEY_LABEL]: 'true', 'app.kubernetes.io/managed-by': 'byok-operator' },
      ...(description ? { annotations: { 'byok.gateway.dev/description': description } } : {}),
    },
    data: { [MANAGEMENT_KEY_HASH_FIELD]: Buffer.from(hash, 'utf8').toString('base64') },
  };
}

export interface CreateManagementKeyOptions {
  /** Secret name; default `byok-management-key-<random>`. */
  name?: string;
  /** Free text stored as an annotation (who or what the key is for). */
  description?: string;
}

/**
 * Creates a management key for the account `namespace`. Returns the key, which exists nowhere else: the caller
 * prints it once. The Secret stores only its SHA-256.
 */
export async function createManagementKey(
  kubeConfig: KubeAccess,
  namespace: string,
  opts: CreateManagementKeyOptions = {},
): Promise<{ key: string; secretName: string }> {
  const key = generateManagementKey();
  const name = opts.name ?? `byok-management-key-${randomBytes(4).toString('hex')}`;
  await kubeClient(kubeConfig).request('POST', `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets`, {
    body: managementKeySecret(namespace, name, sha256Hex(key), opts.description),
  });
  return { key, secretName: name };
}

/**
 * Index of management-key hashes to account namespaces, fed by a Secret informer with MANAGEMENT_KEY_SELECTOR.
 * Tracks each Secret by namespace/name so an update that changes the hash, or a delete, removes the old hash.
 */
export class ManagementKeyIndex {
  private readonly byHash = new Map<string, string>();
  private readonly bySecret = new Map<string, string>();

  upsert(secret: V1Secret): void {
    const ns = secret.metadata?.namespace;
    const name = secret.metadata?.name;
    if (!ns || !name) return;
    const id = `${ns}/${name}`;
    this.removeById(id);
    const hash = managementKeyHash(secret);
    if (hash === null) return;
    this.bySecret.set(id, hash);
    this.byHash.set(hash, ns);
  }

  remove(secret: V1Secret): void {
    const ns = secret.metadata?.namespace;
    const name = secret.metadata?.name;
    if (ns && name) this.removeById(`${ns}/${name}`);
  }

  /** The account namespace of the key with this SHA-256, or undefined. */
  namespaceOf(hash: string): string | undefined {
    return this.byHash.get(hash);
  }

  get size(): number {
    return this.byHash.size;
  }

  private removeById(id: string): void {
    const old = this.bySecret.get(id);
    if (old === undefined) return;
    this.bySecret.delete(id);
    // Another Secret may hold the same hash (a copied key); keep it if so.
    for (const [otherId, hash] of this.bySecret) {
      if (hash === old) {
        this.byHash.set(hash, otherId.slice(0, otherId.indexOf('/')));
        return;
      }
    }
    this.byHash.delete(old);
  }
}
