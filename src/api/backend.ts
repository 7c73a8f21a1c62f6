// The write side: Secrets and BYOKCredentials through the Kubernetes API, as field manager `byok-api`.
import type { V1Secret } from '@kubernetes/client-node';
import { KubeApiError, type KubeClient } from '../kube/client.ts';
import { API_VERSION, GROUP, VERSION } from '../schema/resources.ts';
import type { BYOKCredential } from '../schema/generated/types.ts';

export const API_FIELD_MANAGER = 'byok-api';
const MERGE_PATCH = 'application/merge-patch+json';

export interface Backend {
  createSecret(namespace: string, body: V1Secret): Promise<V1Secret>;
  patchSecret(namespace: string, name: string, patch: object): Promise<V1Secret>;
  deleteSecret(namespace: string, name: string): Promise<void>;
  createCredential(namespace: string, body: BYOKCredential): Promise<BYOKCredential>;
  getCredential(namespace: string, name: string): Promise<BYOKCredential | undefined>;
  patchCredential(namespace: string, name: string, patch: object): Promise<BYOKCredential>;
  deleteCredential(namespace: string, name: string): Promise<void>;
}

const crPath = (ns: string, name?: string) =>
  `/apis/${GROUP}/${VERSION}/namespaces/${encodeURIComponent(ns)}/byokcredentials${name !== undefined ? `/${encodeURIComponent(name)}` : ''}`;
const secretPath = (ns: string, name?: string) => `/api/v1/namespaces/${encodeURIComponent(ns)}/secrets${name !== undefined ? `/${encodeURIComponent(name)}` : ''}`;
const q = { fieldManager: API_FIELD_MANAGER };

export function kubeBackend(client: KubeClient): Backend {
  return {
    createSecret: (ns, body) => client.request<V1Secret>('POST', secretPath(ns), { body, query: q }),
    patchSecret: (ns, name, patch) => client.request<V1Secret>('PATCH', secretPath(ns, name), { body: patch, contentType: MERGE_PATCH, query: q }),
    deleteSecret: async (ns, name) => {
      await client.request('DELETE', secretPath(ns, name));
    },
    createCredential: (ns, body) => client.request<BYOKCredential>('POST', crPath(ns), { body: { ...body, apiVersion: API_VERSION, kind: 'BYOKCredential' }, query: q }),
    getCredential: async (ns, name) => {
      try {
        return await client.request<BYOKCredential>('GET', crPath(ns, name));
      } catch (err) {
        if (err instanceof KubeApiError && err.status === 404) return undefined;
        throw err;
      }
    },
    patchCredential: (ns, name, patch) => client.request<BYOKCredential>('PATCH', crPath(ns, name), { body: patch, contentType: MERGE_PATCH, query: q }),
    deleteCredential: async (ns, name) => {
      await client.request('DELETE', crPath(ns, name));
    },
  };
}
