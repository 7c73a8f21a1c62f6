// How a BYOKKey becomes a request of ByokService and back (sample-apiserver's strategy): the object a client sends
// checked and mapped to the REST create or update body, the service's field names mapped to the object's paths,
// the fields a selector may name, the list order, and the answers this resource gives in its own words. Pure.

import { MANAGED_BY_API, MANAGED_BY_LABEL } from '../../../service/mapping.ts';
import type { CredentialEntry } from '../../../service/read-model.ts';
import { AGG_GROUP, AGG_GROUP_VERSION } from '../../group.ts';
import type { CursorField, ObjectMeta, Strategy } from '../../handlers/resource.ts';
import { type FieldCause, InvalidObject, StatusError, type StatusTarget } from '../../status.ts';
import { type ByokKeyObject, KIND, RESOURCE, type RestField, SPEC_FIELDS, toKubeObject } from './object.ts';

const REST_OF_SPEC: Record<string, RestField> = Object.fromEntries(
  Object.entries(SPEC_FIELDS).map(([rest, kube]) => [kube, rest as RestField]),
);

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function checkEnvelope(body: unknown): { metadata: ObjectMeta; spec: Record<string, unknown> } {
  if (!isRecord(body)) throw new InvalidObject([{ field: '', message: 'the body must be a BYOKKey object' }]);
  const causes: FieldCause[] = [];
  if (body.apiVersion !== undefined && body.apiVersion !== AGG_GROUP_VERSION)
    causes.push({ field: 'apiVersion', message: `must be ${AGG_GROUP_VERSION}` });
  if (body.kind !== undefined && body.kind !== KIND) causes.push({ field: 'kind', message: `must be ${KIND}` });
  for (const k of Object.keys(body))
    if (!['apiVersion', 'kind', 'metadata', 'spec', 'status'].includes(k))
      causes.push({ field: k, message: 'unknown field' });
  if (body.metadata !== undefined && !isRecord(body.metadata))
    causes.push({ field: 'metadata', message: 'must be an object' });
  if (!isRecord(body.spec)) causes.push({ field: 'spec', message: 'is required and must be an object' });
  else
    for (const k of Object.keys(body.spec))
      if (!Object.hasOwn(REST_OF_SPEC, k)) causes.push({ field: `spec.${k}`, message: 'unknown field' });
  if (causes.length > 0) throw new InvalidObject(causes);
  return { metadata: (body.metadata ?? {}) as ObjectMeta, spec: body.spec as Record<string, unknown> };
}

function specToRest(spec: Record<string, unknown>, skip: readonly string[] = []): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [kube, v] of Object.entries(spec)) {
    const rest = Object.hasOwn(REST_OF_SPEC, kube) ? REST_OF_SPEC[kube] : undefined;
    if (rest === undefined || skip.includes(kube) || v === undefined) continue;
    out[rest] = v;
  }
  return out;
}

export interface CreateRequest {
  body: Record<string, unknown>;
  /** spec.sortOrder, which the REST create does not take: applied by an update right after the create. */
  sortOrder: unknown;
}

/** A BYOKKey to create → the REST create body. The name is the server-assigned id, so it must be absent. */
export function createRequestFrom(raw: unknown, namespace: string): CreateRequest {
  const { metadata, spec } = checkEnvelope(raw);
  const causes: FieldCause[] = [];
  if (metadata.name !== undefined && metadata.name !== '') {
    causes.push({
      field: 'metadata.name',
      message: 'is assigned by the server (the credential id): omit it, or use metadata.generateName',
    });
  }
  if (metadata.namespace !== undefined && metadata.namespace !== namespace)
    causes.push({ field: 'metadata.namespace', message: 'does not match the namespace of the request' });
  if (causes.length > 0) throw new InvalidObject(causes);
  const body = specToRest(spec, ['sortOrder']);
  // In a Kubernetes object an absent workspaceId and an explicit null both read as "global" after a round trip;
  // the REST default (the default workspace) applies only when the field is absent.
  return { body, sortOrder: spec.sortOrder };
}

/**
 * A full desired object (PUT, or the result of a patch) → the REST update body: every mutable field as desired,
 * absent filters and names as null (cleared), `key` only when present (a rotation).
 */
export function updateRequestFrom(
  desired: unknown,
  current: CredentialEntry,
  namespace: string,
): Record<string, unknown> {
  const { metadata, spec } = checkEnvelope(desired);
  const causes: FieldCause[] = [];
  if (metadata.name !== undefined && metadata.name !== current.key.id)
    causes.push({ field: 'metadata.name', message: 'does not match the name in the URL' });
  if (metadata.namespace !== undefined && metadata.namespace !== namespace)
    causes.push({ field: 'metadata.namespace', message: 'does not match the namespace of the request' });
  if (causes.length > 0) throw new InvalidObject(causes);
  const body: Record<string, unknown> = {
    name: null,
    allowed_models: null,
    allowed_api_key_hashes: null,
    allowed_user_ids: null,
    disabled: false,
    is_fallback: false,
    is_required: false,
    is_byok_only: false,
    ...specToRest(spec),
  };
  // Absent immutable fields mean "unchanged"; only a different value is an error (the REST rule).
  if (spec.provider === undefined) delete body.provider;
  if (!('workspaceId' in spec)) delete body.workspace_id;
  if (body.provider === current.key.provider) delete body.provider;
  if (
    typeof body.workspace_id === 'string'
      ? body.workspace_id.toLowerCase() === current.key.workspace_id
      : body.workspace_id === null && current.key.workspace_id === null
  )
    delete body.workspace_id;
  // declaredZdr null is "not declared"; the REST update takes null as well.
  if (!('declaredZdr' in spec)) body.declared_zdr = null;
  // An unchanged default must not trip the fallback/byok-only rule on the stored side: send only what changes.
  const k = current.key;
  const unchanged = (rest: keyof typeof k, v: unknown) => JSON.stringify(k[rest] ?? null) === JSON.stringify(v ?? null);
  for (const f of [
    'name',
    'disabled',
    'is_fallback',
    'is_required',
    'is_byok_only',
    'allowed_models',
    'allowed_api_key_hashes',
    'allowed_user_ids',
    'sort_order',
    'declared_zdr',
  ] as const) {
    if (Object.hasOwn(body, f) && unchanged(f, body[f])) delete body[f];
  }
  return body;
}

/** REST field names in a ByokService message → the BYOKKey paths a kubectl user sees. */
export function kubeFieldOf(restField: string): string {
  const m = /^([a-z_]+)(.*)$/.exec(restField);
  if (!m) return restField;
  const head = m[1] as string;
  const spec = SPEC_FIELDS[head as RestField];
  return spec !== undefined ? `spec.${spec}${m[2] ?? ''}` : restField;
}

export function kubeMessageOf(message: string): string {
  return message.replace(
    /\b(workspace_id|is_fallback|is_required|is_byok_only|allowed_models|allowed_api_key_hashes|allowed_user_ids|sort_order|declared_zdr)\b/g,
    (f) => kubeFieldOf(f),
  );
}

/**
 * Server-side apply is refused rather than half done: this door keeps no managedFields, so it could not tell one
 * manager's fields from another's, and GitOps tools that rely on field ownership (Flux always applies server-side)
 * would silently fight. The answer says where GitOps belongs.
 */
export const APPLY_UNSUPPORTED =
  'server-side apply is not supported for byokkeys.api.byok.gateway.dev: this API records no field ownership (managedFields). ' +
  'For GitOps, apply BYOKCredential resources (byok.gateway.dev/v1alpha1) and their Secrets instead; ' +
  'to change a BYOKKey, use kubectl apply without --server-side, kubectl patch or kubectl edit';

export const byokKeysErrors: StatusTarget = {
  group: AGG_GROUP,
  resource: RESOURCE,
  kind: KIND,
  fieldOf: kubeFieldOf,
  messageOf: kubeMessageOf,
};

/** List order: by namespace, then as the REST door lists them (the order routing tries them in; see compareKeys). */
const LIST_ORDER_TYPES: readonly CursorField[] = ['string', 'string', 'boolean', 'integer', 'string', 'string'];
export const listOrderKey = (e: CredentialEntry) =>
  [e.namespace, e.key.provider, e.key.is_fallback, e.key.sort_order, e.key.created_at, e.key.id] as const;

export const byokKeysStrategy: Strategy<CredentialEntry, ByokKeyObject> = {
  toObject: toKubeObject,
  selectableFields: ['metadata.name', 'metadata.namespace'],
  fieldValues: (o) => ({ 'metadata.name': o.metadata.name, 'metadata.namespace': o.metadata.namespace }),
  listOrder: { types: LIST_ORDER_TYPES, key: listOrderKey },
  errors: byokKeysErrors,
  collectionRefused: (namespace, refused, total) =>
    new StatusError(
      409,
      'Conflict',
      `${refused.length} of the ${total} selected ${RESOURCE} in the namespace "${namespace}" are managed by Git and cannot be deleted through this API: nothing was deleted. ` +
        `Remove them from Git, or select only the API's own with -l ${MANAGED_BY_LABEL}=${MANAGED_BY_API}`,
      {
        group: AGG_GROUP,
        kind: RESOURCE,
        causes: refused
          .slice(0, 20)
          .map((id) => ({ type: 'FieldValueForbidden', field: 'metadata.name', message: `${id}: managed by Git` })),
      },
    ),
};
