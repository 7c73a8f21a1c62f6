// The pipeline's only contact with the apiserver: list / apply / delete its own ConfigMaps and Secrets in the
// routing namespace, through the shared Kubernetes edge (src/kube). An interface so unit tests can count writes.
import type { KubernetesObject } from '@kubernetes/client-node';
import { ROUTING_LABEL, SHA_ANNOTATION } from '../../contract/routing.ts';
import { type Applier, createApplier } from '../../kube/apply.ts';
import { isConflict, isNotFound, kubeClient } from '../../kube/client.ts';
import type { KubeAccess } from '../../kube/kubeconfig.ts';

export type StoredKind = 'ConfigMap' | 'Secret';

export interface StoredObject {
  kind: StoredKind;
  name: string;
  /** The payload sha256 annotation (absent on objects written by something else). */
  sha256?: string;
}

export interface RoutingStore {
  /** Objects labelled byok.gateway.dev/routing in the routing namespace. */
  list(kind: StoredKind): Promise<StoredObject[]>;
  /** `dryRun`: validated by the apiserver, stored nowhere (used to find which account a refused write stems from). */
  apply(obj: KubernetesObject, opts?: { dryRun?: boolean }): Promise<void>;
  delete(kind: StoredKind, name: string): Promise<void>;
  /** Secret data (base64 values) or undefined when absent. */
  readSecret(name: string): Promise<Record<string, string> | undefined>;
  /** Creates a Secret unless it exists (create, not apply: two replicas racing keep the first key). */
  createSecret(obj: KubernetesObject & { type?: string; data: Record<string, string> }): Promise<'created' | 'exists'>;
  /** Replaces a Secret's data with optimistic concurrency (rotation). */
  updateSecretData(name: string, data: Record<string, string>, resourceVersion: string): Promise<void>;
  readSecretWithVersion(name: string): Promise<{ data: Record<string, string>; resourceVersion: string } | undefined>;
}

interface ListResponse {
  items: { metadata: { name: string; annotations?: Record<string, string> } }[];
}

interface SecretResponse {
  metadata: { resourceVersion?: string };
  data?: Record<string, string>;
}

export function kubeRoutingStore(kubeConfig: KubeAccess, namespace: string, applier?: Applier): RoutingStore {
  const client = kubeClient(kubeConfig);
  const writer = applier ?? createApplier(kubeConfig);
  const collection = (kind: StoredKind) =>
    `/api/v1/namespaces/${encodeURIComponent(namespace)}/${kind === 'ConfigMap' ? 'configmaps' : 'secrets'}`;
  const readSecretWithVersion = async (name: string) => {
    try {
      const s = await client.request<SecretResponse>('GET', `${collection('Secret')}/${encodeURIComponent(name)}`);
      return { data: s.data ?? {}, resourceVersion: s.metadata.resourceVersion ?? '' };
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  };
  return {
    async list(kind) {
      const res = await client.request<ListResponse>('GET', collection(kind), {
        query: { labelSelector: ROUTING_LABEL },
      });
      return res.items.map((item) => {
        const sha = item.metadata.annotations?.[SHA_ANNOTATION];
        return sha === undefined ? { kind, name: item.metadata.name } : { kind, name: item.metadata.name, sha256: sha };
      });
    },
    async apply(obj, opts) {
      await writer.write(obj, opts?.dryRun ? { dryRun: true } : {});
    },
    async delete(kind, name) {
      await writer.delete('v1', kind, namespace, name);
    },
    async readSecret(name) {
      return (await readSecretWithVersion(name))?.data;
    },
    readSecretWithVersion,
    async createSecret(obj) {
      try {
        await client.request('POST', collection('Secret'), { body: obj });
        return 'created';
      } catch (err) {
        if (isConflict(err)) return 'exists';
        throw err;
      }
    },
    async updateSecretData(name, data, resourceVersion) {
      await client.request('PATCH', `${collection('Secret')}/${encodeURIComponent(name)}`, {
        body: { metadata: { resourceVersion }, data },
        contentType: 'application/merge-patch+json',
      });
    },
  };
}
