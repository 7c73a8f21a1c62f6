// The BYOKKey shape and the create/update request schemas both doors share (the REST door's OpenAPI document, the
// aggregated door's BYOKKey definitions, the service's validators), derived from the same schema nodes as the CRDs
// (src/schema/resources.ts), so a field's description, bounds and enumeration are written once.
import { FILTER_ENTRY_PATTERN, MODEL_SLUG_PATTERN } from '../domain/filters.ts';
import { MAX_PAYLOAD_LENGTH, PLAIN_KEY_PATTERN, payloadShapeFor } from '../domain/payloads.ts';
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
      out.properties = Object.fromEntries(
        Object.entries(v as Record<string, SchemaNode>).map(([p, c]) => [p, toJsonSchema(c)]),
      );
    } else out[k] = v;
  }
  if (opts.description) out.description = opts.description;
  if (opts.nullable && typeof out.type === 'string') out.type = [out.type, 'null'];
  return out;
}

const REST_NOTE = {
  workspace:
    'Public id of the Workspace the credential is scoped to. null means global: usable across every workspace of the account (it does not mean the default workspace).',
  filterNull: ' null means no restriction.',
};

export const providerSchema: JsonSchema = {
  ...toJsonSchema(node(specProps, 'provider')),
  description: 'Upstream provider slug (BYOKProviderSlug).',
  enum: [...PROVIDER_SLUGS],
};
const uuid = (description: string, nullable = false): JsonSchema => ({
  type: nullable ? ['string', 'null'] : 'string',
  format: 'uuid',
  description,
});

/** Entry patterns the server enforces (src/domain/filters.ts) beyond the CRD's item schema. */
const ENTRY_PATTERN: Record<string, string> = {
  allowedModels: MODEL_SLUG_PATTERN,
  allowedUserIds: FILTER_ENTRY_PATTERN,
};

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
      description:
        'The Ready condition for the current generation: true when the credential is valid and compiled into routing, false when not (see reason), null while the operator has not reconciled the current generation.',
    },
    reason: nullableString(
      "Ready's reason, e.g. Ready, SecretNotFound, KeyNotFound, PayloadInvalid, UnknownApiKeyHash, WorkspaceNotFound; Reconciling while the operator has not reconciled the current generation.",
    ),
    message: nullableString("Ready's message: what is wrong, naming fields and positions, never values."),
    upstream: nullableString(
      "The UpstreamHealthy condition's reason, from the gateway pods' attempts: Serving, Unauthorized, RateLimited, UpstreamErrors, Unused or Inconclusive; null before any report.",
    ),
    last_used_at: { ...toJsonSchema(node(statusProps, 'lastUsedTime'), { nullable: true }), format: 'date-time' },
    delivered: {
      type: ['boolean', 'null'],
      description:
        'The Delivered condition: true when every gateway pod has loaded delivered_version, false while some have not; null before any report.',
    },
    delivered_version: nullableString(
      "status.delivery.configVersion: digest of the credential's current sealed version, the one the operator delivers to the gateway pods.",
    ),
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
    name: toJsonSchema(node(specProps, 'displayName'), {
      nullable: true,
      description: 'Optional human-readable name; null when unset.',
    }),
    disabled: toJsonSchema(node(specProps, 'disabled')),
    is_fallback: toJsonSchema(node(specProps, 'isFallback')),
    is_required: toJsonSchema(node(specProps, 'isRequired')),
    is_byok_only: toJsonSchema(node(specProps, 'isByokOnly')),
    allowed_models: filterSchema('allowedModels'),
    allowed_api_key_hashes: filterSchema('allowedApiKeyHashes'),
    allowed_user_ids: filterSchema('allowedUserIds'),
    sort_order: toJsonSchema(node(specProps, 'sortOrder'), {
      description: 'Position within the provider; credentials are tried in ascending order.',
    }),
    created_at: toJsonSchema(node(statusProps, 'createdAt'), { description: 'ISO 8601 timestamp of creation.' }),
    declared_zdr: toJsonSchema(node(specProps, 'declaredZdr'), { nullable: true }),
    status: byokKeyStatusSchema,
  },
  required: [
    'id',
    'provider',
    'workspace_id',
    'label',
    'name',
    'disabled',
    'is_fallback',
    'is_required',
    'is_byok_only',
    'allowed_models',
    'allowed_api_key_hashes',
    'allowed_user_ids',
    'sort_order',
    'created_at',
    'declared_zdr',
    'status',
  ],
};

const flag = (crdName: string, description?: string): JsonSchema =>
  toJsonSchema(node(specProps, crdName), description ? { description } : {});

const keySchema = (description: string): JsonSchema => ({
  type: 'string',
  minLength: 1,
  maxLength: MAX_PAYLOAD_LENGTH,
  description,
  writeOnly: true,
});

const writableCommon: Record<string, JsonSchema> = {
  name: toJsonSchema(node(specProps, 'displayName'), {
    nullable: true,
    description: 'Optional human-readable name. null clears it.',
  }),
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
  anyOf: [
    { properties: { provider: { enum: JSON_KEY_PROVIDERS } } },
    { properties: { key: { pattern: PLAIN_KEY_PATTERN } } },
  ],
  properties: {
    provider: providerSchema,
    key: keySchema(
      'The provider secret: a plain API key, or a JSON document for providers that take one (e.g. azure, amazon-bedrock, google-vertex). Stored in a Kubernetes Secret; never returned.',
    ),
    workspace_id: uuid(
      'Workspace to scope the credential to. Omitted: the default workspace (the X-Byok-Workspace-Defaulted response header names it), unlike a BYOKCredential without spec.workspace, which is global. null: global (every workspace of the account).',
      true,
    ),
    ...writableCommon,
  },
};

export const updateRequestSchema: JsonSchema = {
  type: 'object',
  title: 'UpdateBYOKKeyRequest',
  additionalProperties: false,
  properties: {
    key: keySchema(
      'A new secret: rotates the credential in place and regenerates the label. Sending the current masked label changes nothing.',
    ),
    sort_order: toJsonSchema(node(specProps, 'sortOrder'), {
      description: 'Position within the provider; credentials are tried in ascending order.',
    }),
    provider: { ...providerSchema, description: 'Immutable: accepted only when equal to the stored provider.' },
    workspace_id: uuid('Immutable: accepted only when equal to the stored workspace_id.', true),
    ...writableCommon,
  },
};

/** Page size bounds of the REST list (offset pagination). */
export const LIST_LIMIT_MAX = 100;
export const LIST_LIMIT_DEFAULT = 50;

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
