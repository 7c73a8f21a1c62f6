// The REST shapes (BYOKKey, requests, errors) and the OpenAPI 3.1 document, derived from the same schema nodes
// as the CRDs (src/schema/resources.ts), so a field's description, bounds and enumeration are written once.
import { FILTER_ENTRY_PATTERN, MODEL_SLUG_PATTERN } from '../domain/filters.ts';
import { MAX_PAYLOAD_LENGTH, payloadShapeFor, PLAIN_KEY_PATTERN } from '../domain/payloads.ts';
import { PROVIDER_SLUGS } from '../domain/providers.ts';
import type { SchemaNode } from '../schema/json-schema.ts';
import { byokCredential } from '../schema/resources.ts';

/** A JSON Schema (draft 2020-12, as OpenAPI 3.1 uses) object. */
export type JsonSchema = { [keyword: string]: unknown };

const specProps = byokCredential.spec.properties ?? {};
const statusProps = byokCredential.status.properties ?? {};

function node(props: Record<string, SchemaNode>, name: string): SchemaNode {
  const n = props[name];
  if (!n) throw new Error(`schema node ${name} missing from resources.ts`);
  return n;
}

/** SchemaNode → JSON Schema: drops the Kubernetes extensions and defaults; optionally admits null. */
export function toJsonSchema(n: SchemaNode, opts: { nullable?: boolean; description?: string } = {}): JsonSchema {
  const out: JsonSchema = {};
  for (const [k, v] of Object.entries(n)) {
    if (k.startsWith('x-kubernetes-') || k === 'default' || k === 'nullable') continue;
    if (k === 'items' && v) out.items = toJsonSchema(v as SchemaNode);
    else if (k === 'properties' && v) {
      out.properties = Object.fromEntries(Object.entries(v as Record<string, SchemaNode>).map(([p, c]) => [p, toJsonSchema(c)]));
    } else out[k] = v;
  }
  if (opts.description) out.description = opts.description;
  if (opts.nullable && typeof out.type === 'string') out.type = [out.type, 'null'];
  return out;
}

const REST_NOTE = {
  workspace: 'Public id of the Workspace the credential is scoped to. null means global: usable across every workspace of the account (it does not mean the default workspace).',
  filterNull: ' null means no restriction.',
};

const providerSchema: JsonSchema = { ...toJsonSchema(node(specProps, 'provider')), description: 'Upstream provider slug (BYOKProviderSlug).', enum: [...PROVIDER_SLUGS] };
const uuid = (description: string, nullable = false): JsonSchema => ({ type: nullable ? ['string', 'null'] : 'string', format: 'uuid', description });

/** Entry patterns the server enforces (src/domain/filters.ts) beyond the CRD's item schema. */
const ENTRY_PATTERN: Record<string, string> = { allowedModels: MODEL_SLUG_PATTERN, allowedUserIds: FILTER_ENTRY_PATTERN };

const filterSchema = (crdName: string): JsonSchema => {
  const s = toJsonSchema(node(specProps, crdName), { nullable: true });
  const pattern = ENTRY_PATTERN[crdName];
  const items = pattern ? { ...(s.items as JsonSchema), pattern } : s.items;
  return { ...s, ...(items ? { items } : {}), description: `${String(s.description)}${REST_NOTE.filterNull}` };
};

/** Providers whose key may be a JSON document; every other provider's key must satisfy the single-line rule. */
const JSON_KEY_PROVIDERS = PROVIDER_SLUGS.filter((p) => payloadShapeFor(p) !== 'plain');

/** The wire names of the three filters and the CRD fields they map to. */
export const FILTERS = {
  allowed_models: 'allowedModels',
  allowed_api_key_hashes: 'allowedApiKeyHashes',
  allowed_user_ids: 'allowedUserIds',
} as const;

const nullableString = (description: string): JsonSchema => ({ type: ['string', 'null'], description });

/**
 * The read-only `status` extension of BYOKKey (not in the public OpenRouter API, whose clients ignore unknown
 * response fields). Sent in a request body it is an unknown field (400), like `id` and `label`.
 */
export const byokKeyStatusSchema: JsonSchema = {
  type: 'object',
  title: 'BYOKKeyStatus',
  readOnly: true,
  description:
    'Extension, read-only: health and readiness from the BYOKCredential status the operator writes. Every field is present; null means not known yet. Never contains key material.',
  additionalProperties: false,
  properties: {
    ready: {
      type: ['boolean', 'null'],
      description: 'The Ready condition for the current generation: true when the credential is valid and compiled into routing, false when not (see reason), null while the operator has not reconciled the current generation.',
    },
    reason: nullableString("Ready's reason, e.g. Ready, SecretNotFound, KeyNotFound, PayloadInvalid, UnknownApiKeyHash, WorkspaceNotFound; Reconciling while the operator has not reconciled the current generation."),
    message: nullableString("Ready's message: what is wrong, naming fields and positions, never values."),
    upstream: nullableString("The UpstreamHealthy condition's reason, from the gateway pods' attempts: Serving, Unauthorized, RateLimited, UpstreamErrors, Unused or Inconclusive; null before any report."),
    last_used_at: { ...toJsonSchema(node(statusProps, 'lastUsedTime'), { nullable: true }), format: 'date-time' },
    delivered: { type: ['boolean', 'null'], description: 'The Delivered condition: true when every gateway pod has loaded delivered_version, false while some have not; null before any report.' },
    delivered_version: nullableString('status.delivery.configVersion: digest of the credential\'s current sealed version, the one the operator delivers to the gateway pods.'),
  },
  required: ['ready', 'reason', 'message', 'upstream', 'last_used_at', 'delivered', 'delivered_version'],
};

/** BYOKKey (spec 2.1 plus declared_zdr and the read-only status extension): every property is present in every response. */
export const byokKeySchema: JsonSchema = {
  type: 'object',
  title: 'BYOKKey',
  description: byokCredential.description,
  additionalProperties: false,
  properties: {
    id: uuid(String(node(statusProps, 'id').description)),
    provider: providerSchema,
    workspace_id: uuid(REST_NOTE.workspace, true),
    label: toJsonSchema(node(statusProps, 'label')),
    name: toJsonSchema(node(specProps, 'displayName'), { nullable: true, description: 'Optional human-readable name; null when unset.' }),
    disabled: toJsonSchema(node(specProps, 'disabled')),
    is_fallback: toJsonSchema(node(specProps, 'isFallback')),
    is_required: toJsonSchema(node(specProps, 'isRequired')),
    is_byok_only: toJsonSchema(node(specProps, 'isByokOnly')),
    allowed_models: filterSchema('allowedModels'),
    allowed_api_key_hashes: filterSchema('allowedApiKeyHashes'),
    allowed_user_ids: filterSchema('allowedUserIds'),
    sort_order: toJsonSchema(node(specProps, 'sortOrder'), { description: 'Position within the provider; credentials are tried in ascending order.' }),
    created_at: toJsonSchema(node(statusProps, 'createdAt'), { description: 'ISO 8601 timestamp of creation.' }),
    declared_zdr: toJsonSchema(node(specProps, 'declaredZdr'), { nullable: true }),
    status: byokKeyStatusSchema,
  },
  required: [
    'id', 'provider', 'workspace_id', 'label', 'name', 'disabled', 'is_fallback', 'is_required', 'is_byok_only',
    'allowed_models', 'allowed_api_key_hashes', 'allowed_user_ids', 'sort_order', 'created_at', 'declared_zdr', 'status',
  ],
};

const flag = (crdName: string, description?: string): JsonSchema => toJsonSchema(node(specProps, crdName), description ? { description } : {});

const keySchema = (description: string): JsonSchema => ({ type: 'string', minLength: 1, maxLength: MAX_PAYLOAD_LENGTH, description, writeOnly: true });

const writableCommon: Record<string, JsonSchema> = {
  name: toJsonSchema(node(specProps, 'displayName'), { nullable: true, description: 'Optional human-readable name. null clears it.' }),
  disabled: flag('disabled'),
  is_fallback: flag('isFallback'),
  is_required: flag('isRequired'),
  is_byok_only: flag('isByokOnly'),
  declared_zdr: toJsonSchema(node(specProps, 'declaredZdr'), { nullable: true }),
  allowed_models: filterSchema('allowedModels'),
  allowed_api_key_hashes: filterSchema('allowedApiKeyHashes'),
  allowed_user_ids: filterSchema('allowedUserIds'),
};

export const createRequestSchema: JsonSchema = {
  type: 'object',
  title: 'CreateBYOKKeyRequest',
  additionalProperties: false,
  required: ['provider', 'key'],
  // Plain-key providers: one line without control characters once surrounding whitespace is trimmed, not JSON.
  // Spelled as anyOf rather than if/then: the same meaning, and test generators (schemathesis) handle it.
  anyOf: [{ properties: { provider: { enum: JSON_KEY_PROVIDERS } } }, { properties: { key: { pattern: PLAIN_KEY_PATTERN } } }],
  properties: {
    provider: providerSchema,
    key: keySchema('The provider secret: a plain API key, or a JSON document for providers that take one (spec 2.4). Stored in a Kubernetes Secret; never returned.'),
    workspace_id: uuid('Workspace to scope the credential to. Omitted: the default workspace. null: global (every workspace of the account).', true),
    ...writableCommon,
  },
};

export const updateRequestSchema: JsonSchema = {
  type: 'object',
  title: 'UpdateBYOKKeyRequest',
  additionalProperties: false,
  properties: {
    key: keySchema('A new secret: rotates the credential in place and regenerates the label. Sending the current masked label changes nothing.'),
    sort_order: toJsonSchema(node(specProps, 'sortOrder'), { description: 'Position within the provider; credentials are tried in ascending order.' }),
    provider: { ...providerSchema, description: 'Immutable: accepted only when equal to the stored provider.' },
    workspace_id: uuid('Immutable: accepted only when equal to the stored workspace_id.', true),
    ...writableCommon,
  },
};

export const errorSchema: JsonSchema = {
  type: 'object',
  title: 'ErrorResponse',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: {
        code: { type: 'integer', description: 'Equals the HTTP status.' },
        message: { type: 'string' },
        metadata: { type: ['object', 'null'], description: 'Machine-readable details, e.g. the offending field.' },
      },
    },
    user_id: { type: ['string', 'null'] },
  },
};

const listResponseSchema: JsonSchema = {
  type: 'object',
  title: 'ListBYOKKeysResponse',
  additionalProperties: false,
  required: ['data', 'total_count'],
  properties: {
    data: { type: 'array', items: { $ref: '#/components/schemas/BYOKKey' } },
    total_count: { type: 'integer', minimum: 0, description: 'Total credentials matching the filters.' },
  },
};
const singleResponseSchema = (title: string): JsonSchema => ({
  type: 'object',
  title,
  additionalProperties: false,
  required: ['data'],
  properties: { data: { $ref: '#/components/schemas/BYOKKey' } },
});
const deleteResponseSchema: JsonSchema = {
  type: 'object',
  title: 'DeleteBYOKKeyResponse',
  additionalProperties: false,
  required: ['deleted'],
  properties: { deleted: { const: true, description: 'Confirmation that the credential and its Secret were deleted.' } },
};

const ERROR_TEXT: Record<number, string> = {
  400: 'Bad Request: invalid parameters or body (the message names the field)',
  401: 'Unauthorized: management key missing or unknown',
  403: 'Forbidden: a gateway API key that is not a management key; on create, also the account’s credential quota (metadata.reason QuotaExceeded)',
  404: 'Not Found: no credential with this id in the caller’s account',
  409: 'Conflict: the credential is managed by Git (GitOps), or a concurrent write won',
  413: 'Payload Too Large',
  415: 'Unsupported Media Type: the body must be application/json',
  422: 'Unprocessable: the Idempotency-Key was used for a different body, or longer ago than the replay window',
  429: 'Too Many Requests: per-key (or, unauthenticated, per-IP) rate limit exceeded',
  500: 'Internal Server Error',
  503: 'Service Unavailable: the Kubernetes API is unreachable or timed out; retry after Retry-After seconds',
};

function errors(...codes: number[]): Record<string, JsonSchema> {
  return Object.fromEntries(
    codes.map((c) => [String(c), { description: ERROR_TEXT[c], content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorResponse' } } } }]),
  );
}
const ok = (description: string, ref: string): JsonSchema => ({ description, content: { 'application/json': { schema: { $ref: `#/components/schemas/${ref}` } } } });
const json = (ref: string): JsonSchema => ({ required: true, content: { 'application/json': { schema: { $ref: `#/components/schemas/${ref}` } } } });
const idParam: JsonSchema = { name: 'id', in: 'path', required: true, description: 'The credential id (UUID).', schema: { type: 'string', format: 'uuid' } };
const fallbackError = { default: { description: 'Any other error (404 unknown route, 405 wrong method, ...)', content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorResponse' } } } } };

export const LIST_LIMIT_MAX = 100;
export const LIST_LIMIT_DEFAULT = 50;

/** The OpenAPI 3.1 document served at /api/v1/openapi.json. Paths are relative to the server URL (…/api/v1). */
export function buildOpenApiDocument(serverUrl = '/api/v1'): JsonSchema {
  return {
    openapi: '3.1.0',
    info: {
      title: 'byok-operator BYOK management API',
      version: '1.0.0',
      description:
        'Manage bring-your-own-key provider credentials. Wire-compatible with the public OpenRouter BYOK management API. ' +
        'Every request needs `Authorization: Bearer <management key>`. Credentials are BYOKCredential custom resources and Secrets; this API and Git are two doors to one truth.',
    },
    servers: [{ url: serverUrl }],
    security: [{ managementKey: [] }],
    paths: {
      '/byok': {
        get: {
          operationId: 'listBYOKKeys',
          summary: 'List credentials of a workspace (default workspace unless workspace_id), global credentials included',
          parameters: [
            {
              name: 'offset',
              in: 'query',
              description: 'Records to skip. Omit it for 0 (a query string cannot carry null: `offset=` and `offset=null` are refused).',
              schema: { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER, default: 0 },
            },
            { name: 'limit', in: 'query', description: 'Maximum records returned.', schema: { type: 'integer', minimum: 1, maximum: LIST_LIMIT_MAX, default: LIST_LIMIT_DEFAULT } },
            { name: 'workspace_id', in: 'query', description: 'Workspace to list; defaults to the account’s default workspace.', schema: { type: 'string', format: 'uuid' } },
            { name: 'provider', in: 'query', description: 'Only credentials of this provider.', schema: { $ref: '#/components/schemas/BYOKProviderSlug' } },
          ],
          responses: { '200': ok('A page of credentials', 'ListBYOKKeysResponse'), ...errors(400, 401, 403, 429, 500, 503), ...fallbackError },
        },
        post: {
          operationId: 'createBYOKKey',
          summary: 'Create a credential (writes a Secret and a BYOKCredential)',
          parameters: [
            {
              name: 'Idempotency-Key',
              in: 'header',
              required: false,
              description:
                'Makes a retried create safe: within 24 h, a request with the same key and the same body returns the credential the first one created (201, same id) instead of a duplicate; the same key with another body gets 422.',
              schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x21-\\x7e]+$' },
            },
          ],
          requestBody: json('CreateBYOKKeyRequest'),
          responses: {
            '201': {
              ...ok('The created credential, label included', 'CreateBYOKKeyResponse'),
              // What a client (or a stateful test) can do next with the new id.
              links: Object.fromEntries(
                ['getBYOKKey', 'updateBYOKKey', 'deleteBYOKKey'].map((op) => [op.replace('BYOKKey', 'Created'), { operationId: op, parameters: { id: '$response.body#/data/id' } }]),
              ),
            },
            ...errors(400, 401, 403, 413, 415, 422, 429, 500, 503),
            ...fallbackError,
          },
        },
      },
      '/byok/{id}': {
        get: {
          operationId: 'getBYOKKey',
          summary: 'Read one credential',
          parameters: [idParam],
          responses: { '200': ok('The credential', 'GetBYOKKeyResponse'), ...errors(400, 401, 403, 404, 429, 500, 503), ...fallbackError },
        },
        patch: {
          operationId: 'updateBYOKKey',
          summary: 'Update a credential; `key` rotates the secret in place',
          parameters: [idParam],
          requestBody: json('UpdateBYOKKeyRequest'),
          responses: { '200': ok('The updated credential', 'UpdateBYOKKeyResponse'), ...errors(400, 401, 403, 404, 409, 413, 415, 429, 500, 503), ...fallbackError },
        },
        delete: {
          operationId: 'deleteBYOKKey',
          summary: 'Delete a credential and its Secret',
          parameters: [idParam],
          responses: { '200': ok('Deleted', 'DeleteBYOKKeyResponse'), ...errors(400, 401, 403, 404, 409, 429, 500, 503), ...fallbackError },
        },
      },
    },
    components: {
      securitySchemes: { managementKey: { type: 'http', scheme: 'bearer', description: 'A management key (not a gateway API key).' } },
      schemas: {
        BYOKProviderSlug: providerSchema,
        BYOKKey: { ...byokKeySchema, properties: { ...(byokKeySchema.properties as object), provider: { $ref: '#/components/schemas/BYOKProviderSlug' } } },
        ListBYOKKeysResponse: listResponseSchema,
        CreateBYOKKeyRequest: createRequestSchema,
        UpdateBYOKKeyRequest: updateRequestSchema,
        CreateBYOKKeyResponse: singleResponseSchema('CreateBYOKKeyResponse'),
        GetBYOKKeyResponse: singleResponseSchema('GetBYOKKeyResponse'),
        UpdateBYOKKeyResponse: singleResponseSchema('UpdateBYOKKeyResponse'),
        DeleteBYOKKeyResponse: deleteResponseSchema,
        ErrorResponse: errorSchema,
      },
    },
  };
}

/**
 * The request schemas the server validates with: types, enums and unknown fields only. Entry counts, hash
 * syntax and the flag rules are left to the domain core (resolveCredentialWrite), so a 400 carries the same
 * violation code and message the reconciler writes into a condition.
 */
export function structural(schema: JsonSchema): JsonSchema {
  const props = { ...(schema.properties as Record<string, JsonSchema>) };
  for (const f of Object.keys(FILTERS)) {
    const p = props[f];
    if (!p) continue;
    props[f] = { type: ['array', 'null'], items: { type: 'string' } };
  }
  if (props.key) props.key = { type: 'string' };
  // The plain-key rule (anyOf) is checked by validatePayload, whose 400 names the rule.
  const { anyOf: _plainKeyRule, ...rest } = schema;
  return { ...rest, properties: props };
}
