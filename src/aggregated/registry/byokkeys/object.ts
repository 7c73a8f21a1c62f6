// The BYOKKey object (group api.byok.gateway.dev/v1, resource byokkeys): its names, labels and fields, and the
// read model entry (a BYOKCredential and its REST shape) as that object. Pure: no I/O.

import { SPEC_FIELD_NAMES } from '../../../domain/filters.ts';
import { MANAGED_BY_LABEL } from '../../../service/mapping.ts';
import type { CredentialEntry } from '../../../service/read-model.ts';
import { AGG_GROUP, AGG_GROUP_VERSION } from '../../group.ts';
import type { KubeObject } from '../../handlers/resource.ts';

export const RESOURCE = 'byokkeys';
export const SINGULAR = 'byokkey';
export const KIND = 'BYOKKey';
export const SHORT_NAMES = ['bk'];
// Not in `byok-all`: a BYOKKey is a view of a BYOKCredential, which is in it already (listed twice otherwise), and
// `kubectl get byok-all` keeps working with the CRDs alone when the aggregated API is down or not installed.
export const CATEGORIES: string[] = [];
/** Only what is implemented: the namespace controller and the garbage collector act on advertised verbs. */
export const VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];

/** Labels synthesized on every object so list/watch can select by provider and workspace. */
export const PROVIDER_LABEL = `${AGG_GROUP}/provider`;
export const WORKSPACE_LABEL = `${AGG_GROUP}/workspace`;
/** The backing BYOKCredential's metadata.name. */
export const CREDENTIAL_ANNOTATION = `${AGG_GROUP}/credential`;
// The same word as the BYOKCredential's Workspace column (status.workspaceScope): one name for one fact at both doors.
export const GLOBAL_WORKSPACE = 'GLOBAL';

/** REST field (spec 2.1) → BYOKKey spec field. `name` is spec.displayName: metadata.name is the id. */
export const SPEC_FIELDS = {
  provider: 'provider',
  key: 'key',
  workspace_id: 'workspaceId',
  name: 'displayName',
  disabled: 'disabled',
  // The six routing settings keep the names the domain gives them (spec 2.2 rules, both doors).
  ...SPEC_FIELD_NAMES,
  sort_order: 'sortOrder',
  declared_zdr: 'declaredZdr',
} as const;
export const STATUS_FIELDS = { id: 'id', label: 'label', created_at: 'createdAt' } as const;
/** The REST `status` extension (health and readiness) → the BYOKKey status fields (Kubernetes camelCase). */
export const HEALTH_FIELDS = {
  ready: 'ready',
  reason: 'reason',
  message: 'message',
  upstream: 'upstream',
  last_used_at: 'lastUsedTime',
  delivered: 'delivered',
  delivered_version: 'deliveredVersion',
} as const;

export type RestField = keyof typeof SPEC_FIELDS;

export interface ByokKeyObject extends KubeObject {
  spec: Record<string, unknown>;
  status?: Record<string, unknown>;
}

/** The read model entry as a Kubernetes object. The secret is write-only: `spec.key` is never set here. */
export function toKubeObject(e: CredentialEntry, resourceVersion?: string): ByokKeyObject {
  const k = e.key;
  // A global credential has no workspace label ("GLOBAL" is not a valid workspace name): select it with !label.
  const labels: Record<string, string> = {
    [PROVIDER_LABEL]: k.provider,
    ...(e.obj.spec.workspace !== undefined ? { [WORKSPACE_LABEL]: e.obj.spec.workspace } : {}),
  };
  const managedBy = e.obj.metadata.labels?.[MANAGED_BY_LABEL];
  if (managedBy !== undefined) labels[MANAGED_BY_LABEL] = managedBy;
  return {
    apiVersion: AGG_GROUP_VERSION,
    kind: KIND,
    metadata: {
      name: k.id,
      namespace: e.namespace,
      // The BYOKCredential's uid: stable for the life of the stored object, like any Kubernetes uid.
      uid: e.obj.metadata.uid ?? k.id,
      resourceVersion: resourceVersion ?? e.obj.metadata.resourceVersion ?? '0',
      creationTimestamp: k.created_at.replace(/\.\d{3}Z$/, 'Z'),
      labels,
      annotations: { [CREDENTIAL_ANNOTATION]: e.name },
    },
    spec: {
      provider: k.provider,
      workspaceId: k.workspace_id,
      displayName: k.name,
      disabled: k.disabled,
      isFallback: k.is_fallback,
      isRequired: k.is_required,
      isByokOnly: k.is_byok_only,
      allowedModels: k.allowed_models,
      allowedApiKeyHashes: k.allowed_api_key_hashes,
      allowedUserIds: k.allowed_user_ids,
      sortOrder: k.sort_order,
      declaredZdr: k.declared_zdr,
    },
    status: {
      id: k.id,
      label: k.label,
      createdAt: k.created_at,
      ...Object.fromEntries(
        Object.entries(HEALTH_FIELDS).map(([rest, kube]) => [kube, k.status[rest as keyof typeof HEALTH_FIELDS]]),
      ),
    },
  };
}
