// The BYOKKey Kubernetes object of the aggregated API (group api.byok.gateway.dev/v1, resource byokkeys) and its
// mapping to and from the REST bodies ByokService takes. Pure functions: no I/O.
import type { CredentialEntry } from '../service/state.ts';
import { MANAGED_BY_LABEL } from '../service/mapping.ts';
import { byokKeySchema, byokKeyStatusSchema, type JsonSchema } from '../service/key-schema.ts';
import { SPEC_FIELD_NAMES } from '../domain/filters.ts';
import { routingRule } from '../domain/routing-rules.ts';

export const AGG_GROUP = 'api.byok.gateway.dev';
export const AGG_VERSION = 'v1';
export const AGG_GROUP_VERSION = `${AGG_GROUP}/${AGG_VERSION}`;
export const AGG_PREFIX = `/apis/${AGG_GROUP}/${AGG_VERSION}`;
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

type RestField = keyof typeof SPEC_FIELDS;
const REST_OF_SPEC: Record<string, RestField> = Object.fromEntries(Object.entries(SPEC_FIELDS).map(([rest, kube]) => [kube, rest as RestField]));

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  creationTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  [k: string]: unknown;
}

export interface ByokKeyObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  spec: Record<string, unknown>;
  status?: Record<string, unknown>;
}

/** The read model entry as a Kubernetes object. The secret is write-only: `spec.key` is never set here. */
export function toKubeObject(e: CredentialEntry, resourceVersion?: string): ByokKeyObject {
  const k = e.key;
  // A global credential has no workspace label ("GLOBAL" is not a valid workspace name): select it with !label.
  const labels: Record<string, string> = { [PROVIDER_LABEL]: k.provider, ...(e.obj.spec.workspace !== undefined ? { [WORKSPACE_LABEL]: e.obj.spec.workspace } : {}) };
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
      ...Object.fromEntries(Object.entries(HEALTH_FIELDS).map(([rest, kube]) => [kube, k.status[rest as keyof typeof HEALTH_FIELDS]])),
    },
  };
}

export interface FieldCause {
  field: string;
  message: string;
}

/** A body that cannot become a REST request (unknown field, wrong kind): 422 Invalid with these causes. */
export class InvalidObject extends Error {
  readonly causes: FieldCause[];
  constructor(causes: FieldCause[]) {
    super(causes.map((c) => `${c.field}: ${c.message}`).join('; '));
    this.name = 'InvalidObject';
    this.causes = causes;
  }
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function checkEnvelope(body: unknown): { metadata: ObjectMeta; spec: Record<string, unknown> } {
  if (!isRecord(body)) throw new InvalidObject([{ field: '', message: 'the body must be a BYOKKey object' }]);
  const causes: FieldCause[] = [];
  if (body.apiVersion !== undefined && body.apiVersion !== AGG_GROUP_VERSION) causes.push({ field: 'apiVersion', message: `must be ${AGG_GROUP_VERSION}` });
  if (body.kind !== undefined && body.kind !== KIND) causes.push({ field: 'kind', message: `must be ${KIND}` });
  for (const k of Object.keys(body)) if (!['apiVersion', 'kind', 'metadata', 'spec', 'status'].includes(k)) causes.push({ field: k, message: 'unknown field' });
  if (body.metadata !== undefined && !isRecord(body.metadata)) causes.push({ field: 'metadata', message: 'must be an object' });
  if (!isRecord(body.spec)) causes.push({ field: 'spec', message: 'is required and must be an object' });
  else for (const k of Object.keys(body.spec)) if (!Object.hasOwn(REST_OF_SPEC, k)) causes.push({ field: `spec.${k}`, message: 'unknown field' });
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
    causes.push({ field: 'metadata.name', message: 'is assigned by the server (the credential id): omit it, or use metadata.generateName' });
  }
  if (metadata.namespace !== undefined && metadata.namespace !== namespace) causes.push({ field: 'metadata.namespace', message: 'does not match the namespace of the request' });
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
export function updateRequestFrom(desired: unknown, current: CredentialEntry, namespace: string): Record<string, unknown> {
  const { metadata, spec } = checkEnvelope(desired);
  const causes: FieldCause[] = [];
  if (metadata.name !== undefined && metadata.name !== current.key.id) causes.push({ field: 'metadata.name', message: 'does not match the name in the URL' });
  if (metadata.namespace !== undefined && metadata.namespace !== namespace) causes.push({ field: 'metadata.namespace', message: 'does not match the namespace of the request' });
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
  if (typeof body.workspace_id === 'string' ? body.workspace_id.toLowerCase() === current.key.workspace_id : body.workspace_id === null && current.key.workspace_id === null) delete body.workspace_id;
  // declaredZdr null is "not declared"; the REST update takes null as well.
  if (!('declaredZdr' in spec)) body.declared_zdr = null;
  // An unchanged default must not trip the fallback/byok-only rule on the stored side: send only what changes.
  const k = current.key;
  const unchanged = (rest: keyof typeof k, v: unknown) => JSON.stringify(k[rest] ?? null) === JSON.stringify(v ?? null);
  for (const f of ['name', 'disabled', 'is_fallback', 'is_required', 'is_byok_only', 'allowed_models', 'allowed_api_key_hashes', 'allowed_user_ids', 'sort_order', 'declared_zdr'] as const) {
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
  return message.replace(/\b(workspace_id|is_fallback|is_required|is_byok_only|allowed_models|allowed_api_key_hashes|allowed_user_ids|sort_order|declared_zdr)\b/g, (f) => kubeFieldOf(f));
}

// ---- label and field selectors (equality-based, on the synthesized labels) ----

export interface Requirement {
  key: string;
  op: '=' | '!=' | 'exists' | '!exists';
  value: string;
}

export class SelectorError extends Error {}

export function parseSelector(text: string | undefined): Requirement[] {
  if (text === undefined || text.trim() === '') return [];
  return text.split(',').map((part) => {
    const p = part.trim();
    let m = /^([^=!\s]+)\s*(==|=|!=)\s*([^=!\s]*)$/.exec(p);
    if (m) return { key: m[1] as string, op: m[2] === '!=' ? '!=' : '=', value: m[3] as string };
    m = /^(!?)([^=!\s()]+)$/.exec(p);
    if (m) return { key: m[2] as string, op: m[1] === '!' ? '!exists' : 'exists', value: '' };
    throw new SelectorError(`unsupported selector "${p}": use key=value, key!=value, key or !key`);
  });
}

export function matches(reqs: readonly Requirement[], values: Record<string, string | undefined>): boolean {
  return reqs.every((r) => {
    // Keys are tenant input (`-l constructor`): only the object's own labels count, never what a plain object inherits.
    const v = Object.hasOwn(values, r.key) ? values[r.key] : undefined;
    switch (r.op) {
      case '=':
        return v === r.value;
      case '!=':
        return v !== r.value;
      case 'exists':
        return v !== undefined;
      default:
        return v === undefined;
    }
  });
}

export const SUPPORTED_FIELDS = ['metadata.name', 'metadata.namespace'];

export function fieldValues(o: ByokKeyObject): Record<string, string | undefined> {
  return { 'metadata.name': o.metadata.name, 'metadata.namespace': o.metadata.namespace };
}

// ---- server-side Table (kubectl get) ----

export const TABLE_COLUMNS = [
  { name: 'ID', type: 'string', format: 'name', description: 'The credential id (metadata.name).', priority: 0 },
  { name: 'Credential', type: 'string', format: '', description: 'The backing BYOKCredential (kubectl get byok <name>).', priority: 0 },
  { name: 'Provider', type: 'string', format: '', description: 'Upstream provider slug.', priority: 0 },
  { name: 'Label', type: 'string', format: '', description: 'Masked snippet of the key.', priority: 0 },
  { name: 'Workspace', type: 'string', format: '', description: 'Workspace name, or GLOBAL (usable in every workspace of the account), as in kubectl get byok.', priority: 0 },
  { name: 'Fallback', type: 'boolean', format: '', description: `true: the fallback section, tried after shared capacity; false: prioritized, as in kubectl get byok (${routingRule('sections')}).`, priority: 0 },
  { name: 'Order', type: 'integer', format: '', description: 'sort_order within the provider.', priority: 0 },
  { name: 'Disabled', type: 'boolean', format: '', description: 'Whether the credential is disabled.', priority: 0 },
  { name: 'Ready', type: 'string', format: '', description: 'The Ready condition: True, False, or Unknown while the operator has not reconciled the current generation (status.ready).', priority: 0 },
  { name: 'Reason', type: 'string', format: '', description: 'Why Ready has its status, e.g. PayloadInvalid, KeyNotFound, Reconciling (status.reason).', priority: 0 },
  { name: 'Upstream', type: 'string', format: '', description: 'UpstreamHealthy reason from the gateways: Serving, Unauthorized, RateLimited, UpstreamErrors, Unused (status.upstream).', priority: 0 },
  { name: 'Age', type: 'string', format: '', description: 'Time since creation.', priority: 0 },
  { name: 'Last Used', type: 'string', format: '', description: 'Time since a gateway last used the credential upstream (status.lastUsedTime).', priority: 1 },
  { name: 'Delivered', type: 'string', format: '', description: 'Every gateway pod has loaded the current version (status.delivered).', priority: 1 },
  { name: 'Version', type: 'string', format: '', description: 'The credential\'s current sealed version, the one delivered to gateway pods (status.deliveredVersion).', priority: 1 },
];

/** A tri-state as kubectl shows conditions. */
const tri = (v: unknown): string => (v === true ? 'True' : v === false ? 'False' : 'Unknown');
const text = (v: unknown): string => (typeof v === 'string' && v !== '' ? v : '<none>');

/** Like kubectl's short durations: 45s, 12m, 5h, 3d, 2y. */
export function humanAge(fromIso: string, now = Date.now()): string {
  const t = Date.parse(fromIso);
  if (Number.isNaN(t)) return '<unknown>';
  const s = Math.max(0, Math.floor((now - t) / 1000));
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 10) return `${m}m${s % 60 === 0 ? '' : `${s % 60}s`}`;
  if (m < 180) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h`;
  const d = Math.floor(h / 24);
  return d < 365 * 2 ? `${d}d` : `${Math.floor(d / 365)}y`;
}

export function tableCells(o: ByokKeyObject, now = Date.now()): unknown[] {
  const s = o.spec;
  const st = o.status ?? {};
  return [
    o.metadata.name,
    o.metadata.annotations?.[CREDENTIAL_ANNOTATION] ?? '<none>',
    s.provider,
    st.label,
    o.metadata.labels?.[WORKSPACE_LABEL] ?? GLOBAL_WORKSPACE,
    s.isFallback === true,
    s.sortOrder,
    s.disabled,
    tri(st.ready),
    text(st.reason),
    text(st.upstream),
    humanAge(String(o.metadata.creationTimestamp ?? ''), now),
    typeof st.lastUsedTime === 'string' ? humanAge(st.lastUsedTime, now) : '<none>',
    tri(st.delivered),
    text(st.deliveredVersion),
  ];
}

export type IncludeObject = 'None' | 'Metadata' | 'Object';

export function tableRow(o: ByokKeyObject, include: IncludeObject): Record<string, unknown> {
  const object =
    include === 'None' ? undefined : include === 'Object' ? o : { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: o.metadata };
  return { cells: tableCells(o), ...(object ? { object } : {}) };
}

export function table(objects: readonly ByokKeyObject[], include: IncludeObject, listMeta: Record<string, unknown>, withColumns = true): Record<string, unknown> {
  return {
    kind: 'Table',
    apiVersion: 'meta.k8s.io/v1',
    metadata: listMeta,
    ...(withColumns ? { columnDefinitions: TABLE_COLUMNS } : {}),
    rows: objects.map((o) => tableRow(o, include)),
  };
}

// ---- OpenAPI: one schema, derived from the REST BYOKKey schema so descriptions are written once ----

const restProps = (byokKeySchema.properties ?? {}) as Record<string, JsonSchema>;

/** OpenAPI 3.0 / Swagger 2 friendly: `type: [x, 'null']` → `type: x, nullable: true` (dropped for v2). */
function downlevel(s: JsonSchema, v2: boolean): JsonSchema {
  const out: JsonSchema = {};
  for (const [k, v] of Object.entries(s)) {
    if (k === 'type' && Array.isArray(v)) {
      out.type = v.find((t) => t !== 'null');
      if (!v2) out.nullable = true;
    } else if (k === 'items' && v && typeof v === 'object') out.items = downlevel(v as JsonSchema, v2);
    else if (k === 'const' || k === 'title' || k === '$schema') continue;
    else out[k] = v;
  }
  return out;
}

function prop(rest: string, v2: boolean, description?: string): JsonSchema {
  const s = restProps[rest];
  if (!s) throw new Error(`REST schema has no ${rest}`);
  return downlevel(description ? { ...s, description } : s, v2);
}

const healthProps = (byokKeyStatusSchema.properties ?? {}) as Record<string, JsonSchema>;

function statusProp(rest: string, v2: boolean): JsonSchema {
  const s = healthProps[rest];
  if (!s) throw new Error(`REST status schema has no ${rest}`);
  // Descriptions name REST fields (delivered_version): point at the camelCase names a kubectl user sees.
  const description = String(s.description ?? '').replace(/\b(delivered_version)\b/g, 'deliveredVersion');
  return downlevel({ ...s, description }, v2);
}

const META_DEF = 'io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta';
const LIST_META_DEF = 'io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta';
export const KIND_DEF = 'dev.gateway.byok.api.v1.BYOKKey';
export const LIST_DEF = 'dev.gateway.byok.api.v1.BYOKKeyList';

export function byokKeyDefinitions(v2: boolean): Record<string, JsonSchema> {
  const ref = (name: string) => (v2 ? `#/definitions/${name}` : `#/components/schemas/${name}`);
  const gvk = (kind: string) => [{ group: AGG_GROUP, version: AGG_VERSION, kind }];
  const specProps: Record<string, JsonSchema> = {};
  for (const [rest, kube] of Object.entries(SPEC_FIELDS)) {
    if (rest === 'key') {
      specProps.key = {
        type: 'string',
        description:
          'Write-only: the provider secret (a plain API key, or a JSON document for azure, amazon-bedrock and google-vertex). Required on create; on update it rotates the key. Never returned.',
      };
    } else if (rest === 'workspace_id') {
      specProps[kube] = prop(rest, v2, 'Public id of the Workspace the credential is scoped to; null means global (every workspace). Omitted on create: the default workspace. Immutable.');
    } else if (rest === 'name') {
      specProps[kube] = prop(rest, v2, 'Optional human-readable name (the REST `name`; metadata.name is the id).');
    } else if (rest === 'sort_order') {
      specProps[kube] = prop(rest, v2, 'Position within the provider and section; tried in ascending order. Omitted on create: after the existing credentials.');
    } else {
      specProps[kube] = prop(rest, v2);
    }
  }
  return {
    [KIND_DEF]: {
      type: 'object',
      description: `${String(byokKeySchema.description ?? '')} Served by the byok-operator aggregated API: the same credentials as /api/v1/byok. metadata.name is the credential id.`,
      required: ['spec'],
      properties: {
        apiVersion: { type: 'string', description: 'APIVersion defines the versioned schema of this representation of an object.' },
        kind: { type: 'string', description: 'Kind is a string value representing the REST resource this object represents.' },
        metadata: { $ref: ref(META_DEF), description: 'Standard object metadata. name is the credential id, namespace the account.' },
        spec: { type: 'object', description: 'The credential: the fields of the REST BYOKKey, in camelCase.', required: ['provider'], properties: specProps },
        status: {
          type: 'object',
          description: 'Read-only fields computed by the server.',
          properties: {
            id: prop('id', v2),
            label: prop('label', v2),
            createdAt: prop('created_at', v2),
            ...Object.fromEntries(Object.entries(HEALTH_FIELDS).map(([rest, kube]) => [kube, statusProp(rest, v2)])),
          },
        },
      },
      'x-kubernetes-group-version-kind': gvk(KIND),
    },
    [LIST_DEF]: {
      type: 'object',
      description: 'A list of BYOKKeys.',
      required: ['items'],
      properties: {
        apiVersion: { type: 'string', description: 'APIVersion of this list.' },
        kind: { type: 'string', description: 'BYOKKeyList.' },
        metadata: { $ref: ref(LIST_META_DEF) },
        items: { type: 'array', items: { $ref: ref(KIND_DEF) } },
      },
      'x-kubernetes-group-version-kind': gvk(`${KIND}List`),
    },
    [META_DEF]: {
      type: 'object',
      description: 'Standard object metadata.',
      properties: {
        name: { type: 'string', description: 'The credential id (assigned by the server).' },
        generateName: { type: 'string', description: 'Accepted and ignored on create: the server assigns the name.' },
        namespace: { type: 'string', description: 'The account namespace.' },
        uid: { type: 'string', description: 'Unique id of the stored object.' },
        resourceVersion: { type: 'string', description: 'Opaque version for optimistic concurrency and watch.' },
        creationTimestamp: { type: 'string', format: 'date-time', description: 'Creation time.' },
        labels: { type: 'object', additionalProperties: { type: 'string' }, description: `Synthesized: ${PROVIDER_LABEL}, ${WORKSPACE_LABEL} (absent on global credentials), app.kubernetes.io/managed-by.` },
        annotations: { type: 'object', additionalProperties: { type: 'string' }, description: 'Synthesized: the backing BYOKCredential name.' },
      },
    },
    [LIST_META_DEF]: {
      type: 'object',
      description: 'Standard list metadata.',
      properties: {
        resourceVersion: { type: 'string', description: 'Where a watch can start.' },
        continue: { type: 'string', description: 'Token for the next page.' },
        remainingItemCount: { type: 'integer', format: 'int64', description: 'Items after this page.' },
      },
    },
  };
}

function operations(v2: boolean): Record<string, unknown> {
  const ref = (name: string) => (v2 ? { $ref: `#/definitions/${name}` } : { $ref: `#/components/schemas/${name}` });
  const resp = (name: string) => (v2 ? { description: 'OK', schema: ref(name) } : { description: 'OK', content: { 'application/json': { schema: ref(name) } } });
  const ns = { name: 'namespace', in: 'path', required: true, ...(v2 ? { type: 'string' } : { schema: { type: 'string' } }) };
  const name = { name: 'name', in: 'path', required: true, ...(v2 ? { type: 'string' } : { schema: { type: 'string' } }) };
  const action = (a: string, kind = KIND) => ({ 'x-kubernetes-action': a, 'x-kubernetes-group-version-kind': { group: AGG_GROUP, version: AGG_VERSION, kind } });
  const body = v2 ? [{ name: 'body', in: 'body', required: true, schema: ref(KIND_DEF) }] : [];
  const reqBody = v2 ? {} : { requestBody: { required: true, content: { 'application/json': { schema: ref(KIND_DEF) } } } };
  return {
    [`${AGG_PREFIX}/namespaces/{namespace}/${RESOURCE}`]: {
      parameters: [ns],
      get: { operationId: 'listApiByokGatewayDevV1NamespacedBYOKKey', responses: { 200: resp(LIST_DEF) }, ...action('list', `${KIND}List`) },
      post: { operationId: 'createApiByokGatewayDevV1NamespacedBYOKKey', parameters: body, ...reqBody, responses: { 201: resp(KIND_DEF) }, ...action('post') },
    },
    [`${AGG_PREFIX}/namespaces/{namespace}/${RESOURCE}/{name}`]: {
      parameters: [ns, name],
      get: { operationId: 'readApiByokGatewayDevV1NamespacedBYOKKey', responses: { 200: resp(KIND_DEF) }, ...action('get') },
      put: { operationId: 'replaceApiByokGatewayDevV1NamespacedBYOKKey', parameters: body, ...reqBody, responses: { 200: resp(KIND_DEF) }, ...action('put') },
      delete: { operationId: 'deleteApiByokGatewayDevV1NamespacedBYOKKey', responses: { 200: { description: 'OK' } }, ...action('delete') },
    },
  };
}

export function openApiV2(): JsonSchema {
  return {
    swagger: '2.0',
    info: { title: 'byok-operator aggregated API', version: AGG_VERSION },
    paths: operations(true),
    definitions: byokKeyDefinitions(true),
  };
}

export function openApiV3(): JsonSchema {
  return {
    openapi: '3.0.0',
    info: { title: 'byok-operator aggregated API', version: AGG_VERSION },
    paths: operations(false),
    components: { schemas: byokKeyDefinitions(false) },
  };
}
