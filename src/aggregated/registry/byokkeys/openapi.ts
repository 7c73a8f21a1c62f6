// The OpenAPI of byokkeys: one schema, derived from the REST BYOKKey schema so descriptions are written once.
import { byokKeySchema, byokKeyStatusSchema, type JsonSchema } from '../../../service/key-schema.ts';
import { AGG_GROUP, AGG_PREFIX, AGG_VERSION } from '../../group.ts';
import type { OpenApiParts } from '../../handlers/resource.ts';
import { HEALTH_FIELDS, KIND, PROVIDER_LABEL, RESOURCE, SPEC_FIELDS, WORKSPACE_LABEL } from './object.ts';

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
      specProps[kube] = prop(
        rest,
        v2,
        'Public id of the Workspace the credential is scoped to; null means global (every workspace). Omitted on create: the default workspace. Immutable.',
      );
    } else if (rest === 'name') {
      specProps[kube] = prop(rest, v2, 'Optional human-readable name (the REST `name`; metadata.name is the id).');
    } else if (rest === 'sort_order') {
      specProps[kube] = prop(
        rest,
        v2,
        'Position within the provider and section; tried in ascending order. Omitted on create: after the existing credentials.',
      );
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
        apiVersion: {
          type: 'string',
          description: 'APIVersion defines the versioned schema of this representation of an object.',
        },
        kind: {
          type: 'string',
          description: 'Kind is a string value representing the REST resource this object represents.',
        },
        metadata: {
          $ref: ref(META_DEF),
          description: 'Standard object metadata. name is the credential id, namespace the account.',
        },
        spec: {
          type: 'object',
          description: 'The credential: the fields of the REST BYOKKey, in camelCase.',
          required: ['provider'],
          properties: specProps,
        },
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
        labels: {
          type: 'object',
          additionalProperties: { type: 'string' },
          description: `Synthesized: ${PROVIDER_LABEL}, ${WORKSPACE_LABEL} (absent on global credentials), app.kubernetes.io/managed-by.`,
        },
        annotations: {
          type: 'object',
          additionalProperties: { type: 'string' },
          description: 'Synthesized: the backing BYOKCredential name.',
        },
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
  const resp = (name: string) =>
    v2
      ? { description: 'OK', schema: ref(name) }
      : { description: 'OK', content: { 'application/json': { schema: ref(name) } } };
  const ns = {
    name: 'namespace',
    in: 'path',
    required: true,
    ...(v2 ? { type: 'string' } : { schema: { type: 'string' } }),
  };
  const name = {
    name: 'name',
    in: 'path',
    required: true,
    ...(v2 ? { type: 'string' } : { schema: { type: 'string' } }),
  };
  const action = (a: string, kind = KIND) => ({
    'x-kubernetes-action': a,
    'x-kubernetes-group-version-kind': { group: AGG_GROUP, version: AGG_VERSION, kind },
  });
  const body = v2 ? [{ name: 'body', in: 'body', required: true, schema: ref(KIND_DEF) }] : [];
  const reqBody = v2
    ? {}
    : { requestBody: { required: true, content: { 'application/json': { schema: ref(KIND_DEF) } } } };
  return {
    [`${AGG_PREFIX}/namespaces/{namespace}/${RESOURCE}`]: {
      parameters: [ns],
      get: {
        operationId: 'listApiByokGatewayDevV1NamespacedBYOKKey',
        responses: { 200: resp(LIST_DEF) },
        ...action('list', `${KIND}List`),
      },
      post: {
        operationId: 'createApiByokGatewayDevV1NamespacedBYOKKey',
        parameters: body,
        ...reqBody,
        responses: { 201: resp(KIND_DEF) },
        ...action('post'),
      },
    },
    [`${AGG_PREFIX}/namespaces/{namespace}/${RESOURCE}/{name}`]: {
      parameters: [ns, name],
      get: {
        operationId: 'readApiByokGatewayDevV1NamespacedBYOKKey',
        responses: { 200: resp(KIND_DEF) },
        ...action('get'),
      },
      put: {
        operationId: 'replaceApiByokGatewayDevV1NamespacedBYOKKey',
        parameters: body,
        ...reqBody,
        responses: { 200: resp(KIND_DEF) },
        ...action('put'),
      },
      delete: {
        operationId: 'deleteApiByokGatewayDevV1NamespacedBYOKKey',
        responses: { 200: { description: 'OK' } },
        ...action('delete'),
      },
    },
  };
}

export const byokKeysOpenApi: OpenApiParts = { definitions: byokKeyDefinitions, paths: operations };
