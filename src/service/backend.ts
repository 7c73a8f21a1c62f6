// The write side: Secrets and BYOKCredentials through the Kubernetes API, as field manager `byok-api`.
import type { V1Secret } from '@kubernetes/client-node';
import { KubeApiError, type KubeClient } from '../kube/client.ts';
import type { BYOKCredential } from '../schema/generated/types.ts';
import { API_VERSION, GROUP, VERSION } from '../schema/resources.ts';

export const API_FIELD_MANAGER = 'byok-api';
const MERGE_PATCH = 'application/merge-patch+json';
/**
 * Every request of the write path gives up after this long. Well under a client's usual 30 s, so a stalled
 * etcd becomes a 503 the client can retry (with an Idempotency-Key) instead of a hung request.
 */
export const BACKEND_TIMEOUT_MS = 10_000;

/** Preconditions for a delete: it fails with 409 if the object changed (or was replaced) since it was read. */
export interface DeletePreconditions {
  uid?: string;
  resourceVersion?: string;
}

export interface Backend {
  createSecret(namespace: string, body: V1Secret): Promise<V1Secret>;
  patchSecret(namespace: string, name: string, patch: object): Promise<V1Secret>;
  deleteSecret(namespace: string, name: string, preconditions?: DeletePreconditions): Promise<void>;
  /** Secrets matching a label selector, in one namespace or (namespace undefined) in all. */
  listSecrets(namespace: string | undefined, labelSelector: string): Promise<V1Secret[]>;
  createCredential(namespace: string, body: BYOKCredential): Promise<BYOKCredential>;
  getCredential(namespace: string, name: string): Promise<BYOKCredential | undefined>;
  patchCredential(namespace: string, name: string, patch: object): Promise<BYOKCredential>;
  deleteCredential(namespace: string, name: string): Promise<void>;
}

const crPath = (ns: string, name?: string) =>
  `/apis/${GROUP}/${VERSION}/namespaces/${encodeURIComponent(ns)}/byokcredentials${name !== undefined ? `/${encodeURIComponent(name)}` : ''}`;
const secretPath = (ns: string, name?: string) =>
  `/api/v1/namespaces/${encodeURIComponent(ns)}/secrets${name !== undefined ? `/${encodeURIComponent(name)}` : ''}`;
const q = { fieldManager: API_FIELD_MANAGER };

export function kubeBackend(client: KubeClient, timeoutMs = BACKEND_TIMEOUT_MS): Backend {
  const t = { timeoutMs };
  return {
    createSecret: (ns, body) => client.request<V1Secret>('POST', secretPath(ns), { body, query: q, ...t }),
    patchSecret: (ns, name, patch) =>
      client.request<V1Secret>('PATCH', secretPath(ns, name), {
        body: patch,
        contentType: MERGE_PATCH,
        query: q,
        ...t,
      }),
    deleteSecret: async (ns, name, preconditions) => {
      const body = preconditions ? { apiVersion: 'v1', kind: 'DeleteOptions', preconditions } : undefined;
      await client.request('DELETE', secretPath(ns, name), { ...(body ? { body } : {}), ...t });
    },
    listSecrets: async (ns, labelSelector) => {
      const path = ns === undefined ? '/api/v1/secrets' : secretPath(ns);
      const list = await client.request<{ items?: V1Secret[] }>('GET', path, { query: { labelSelector }, ...t });
      return list.items ?? [];
    },
    createCredential: (ns, body) =>
      client.request<BYOKCredential>('POST', crPath(ns), {
        body: { ...body, apiVersion: API_VERSION, kind: 'BYOKCredential' },
        query: q,
        ...t,
      }),
    getCredential: async (ns, name) => {
      try {
        return await client.request<BYOKCredential>('GET', crPath(ns, name), t);
      } catch (err) {
        if (err instanceof KubeApiError && err.status === 404) return undefined;
        throw err;
      }
    },
    patchCredential: (ns, name, patch) =>
      client.request<BYOKCredential>('PATCH', crPath(ns, name), {
        body: patch,
        contentType: MERGE_PATCH,
        query: q,
        ...t,
      }),
    deleteCredential: async (ns, name) => {
      await client.request('DELETE', crPath(ns, name), t);
    },
  };
}
