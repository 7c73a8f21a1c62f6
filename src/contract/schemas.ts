// JSON Schemas (draft 2020-12) of the gateway contract: the routing index, a decoded shard document, a bundle
// envelope and the gateway status report. Each object schema is built by `obj<T>()` from the TypeScript type the compiler writes and the SDK
// reads: its properties must name exactly T's fields (a field added to the code without the schema, or the other
// way round, fails the type-check) and all are required; test/unit/contract validates real compiler output
// against them, so the value types cannot drift either. Published as
// docs/contract/*.schema.json by `npm run generate:contract`; test/unit/contract checks they are current.

import type {
  CompiledAccount,
  CompiledApiKey,
  CompiledCredential,
  CompiledGuardrail,
  CompiledWorkspace,
  KeyRateLimits,
} from '../domain/compiled.ts';
import { PROVIDER_SLUGS } from '../domain/providers.ts';
import type { BundleEnvelope } from './envelope.ts';
import {
  type CredentialCounters,
  type DeliveryReport,
  GATEWAY_STATUS_FORMAT,
  type GatewayStatusReport,
  HEALTH_OUTCOMES,
  type ProbeResult,
} from './gateway-status.ts';
import { INDEX_FORMAT, type IndexPart, type IndexShard, type RoutingIndex, type ShardDocument } from './routing.ts';

const BASE = 'https://byok.gateway.dev/schemas/v1';
const SHA256 = { type: 'string', pattern: '^[0-9a-f]{64}$' } as const;
type Schema = Readonly<Record<string, unknown>>;
type ObjectSchema = {
  type: 'object';
  description?: string;
  properties: Record<string, Schema>;
  required: string[];
  additionalProperties: false;
};

/** An object schema with exactly the fields of T, all required but the `optional` ones (absent when unset). */
function obj<T>(
  properties: { readonly [K in keyof T]-?: Schema },
  description?: string,
  optional: readonly (keyof T & string)[] = [],
): ObjectSchema {
  const required = Object.keys(properties).filter((k) => !optional.includes(k as keyof T & string));
  return { type: 'object', ...(description ? { description } : {}), properties, required, additionalProperties: false };
}
const nullable = (schema: Schema): Schema => ({ anyOf: [schema, { type: 'null' }] });
const str: Schema = { type: 'string' };
const nullableString = nullable(str);

const indexPart = obj<IndexPart>(
  {
    name: { type: 'string', description: 'ConfigMap name (byok-routing-<n>[-<part>]).' },
    key: { type: 'string', description: '`<name>.json` (data) or `<name>.gz` (binaryData); the mounted file name.' },
    sha256: { ...SHA256, description: "sha256 of this part's bytes." },
    bytes: { type: 'integer', minimum: 0 },
  },
  'One ConfigMap holding (part of) a shard.',
);

const indexShard = obj<IndexShard>({
  bucket: {
    type: 'integer',
    minimum: 0,
    description: 'Linear-hashing bucket of the accounts in this shard (bucketOf in src/contract/routing.ts).',
  },
  encoding: { type: 'string', enum: ['json', 'gzip'], description: 'json: UTF-8 JSON; gzip: gzip of the same JSON.' },
  sha256: { ...SHA256, description: 'sha256 of the whole encoded payload (parts concatenated in order).' },
  bytes: { type: 'integer', minimum: 0, description: 'Encoded size (sum of parts).' },
  rawBytes: { type: 'integer', minimum: 0, description: 'Size of the decoded JSON.' },
  accounts: { type: 'integer', minimum: 0 },
  parts: { type: 'array', items: indexPart, minItems: 1 },
});

const DRAFT = 'https://json-schema.org/draft/2020-12/schema';

export const routingIndexSchema = {
  $schema: DRAFT,
  $id: `${BASE}/routing-index.schema.json`,
  title: 'byok routing index (ConfigMap byok-routing-index, key byok-routing-index.json)',
  ...obj<RoutingIndex>({
    format: { type: 'string', const: INDEX_FORMAT },
    version: {
      ...SHA256,
      description: 'sha256 of the canonical JSON of {format, buckets, shards}: changes iff any shard changes.',
    },
    buckets: { type: 'integer', minimum: 1 },
    shards: { type: 'array', items: indexShard, description: 'Sorted by bucket; empty buckets are omitted.' },
  }),
};

const stringList = nullable({ type: 'array', items: str });
const intervals = ['daily', 'weekly', 'monthly', 'lifetime'];

const credential = obj<CompiledCredential>({
  id: {
    type: 'string',
    description:
      'Public id (a UUID in compiled config); also the entry name of its sealed payload in the bundle Secrets.',
  },
  name: str,
  provider: { type: 'string', enum: [...PROVIDER_SLUGS] },
  workspaceId: { ...nullableString, description: 'null = global to the account (every workspace).' },
  label: { type: 'string', description: 'Masked key; never key material.' },
  displayName: nullableString,
  disabled: { type: 'boolean' },
  isFallback: { type: 'boolean' },
  isRequired: { type: 'boolean' },
  isByokOnly: { type: 'boolean' },
  declaredZdr: nullable({ type: 'boolean' }),
  allowedModels: stringList,
  allowedApiKeyHashes: stringList,
  allowedUserIds: stringList,
  sortOrder: { type: 'integer', minimum: 0 },
  createdAt: str,
});

const workspace = obj<CompiledWorkspace>({
  id: str,
  name: str,
  displayName: nullableString,
  isDefault: { type: 'boolean' },
  budgets: {
    type: 'array',
    items: obj<CompiledWorkspace['budgets'][number]>({
      limitUsd: { type: 'number', minimum: 0 },
      interval: { type: 'string', enum: intervals },
    }),
  },
  includeByokInBudgets: { type: 'boolean' },
  defaultGuardrailId: nullableString,
  members: {
    type: 'array',
    items: obj<CompiledWorkspace['members'][number]>({ userId: str, guardrailId: nullableString }),
  },
});

const guardrail = obj<CompiledGuardrail>({
  id: str,
  name: str,
  budget: nullable(
    obj<NonNullable<CompiledGuardrail['budget']>>({
      limitUsd: { type: 'number', minimum: 0 },
      resetInterval: { type: 'string', enum: intervals },
      includeByokInBudgets: { type: 'boolean' },
    }),
  ),
  dataPolicy: obj<CompiledGuardrail['dataPolicy']>({
    requireZdr: { type: 'boolean' },
    denyDataCollection: { type: 'boolean' },
    allowedProviders: stringList,
    ignoredProviders: { type: 'array', items: str },
  }),
});

const apiKey = obj<CompiledApiKey>(
  {
    hash: { ...SHA256, description: 'SHA-256 of a live gateway API key (never the key).' },
    workspaceId: nullableString,
    guardrailId: nullableString,
    expiresAt: { ...nullableString, description: 'RFC 3339; the gateway re-checks expiry per request.' },
    owner: {
      ...str,
      description:
        "User id of the key's owner: the requesting member for allowed_user_ids. Absent when the key names none.",
    },
    name: {
      ...str,
      description:
        'The GatewayAPIKey name: its rate limits and spend are counted under it (both secrets of a rotation).',
    },
    models: { type: 'array', items: str, description: 'Models the key may request; absent: every model.' },
    limits: obj<KeyRateLimits>(
      {
        requestsPerMinute: { type: 'integer', minimum: 1 },
        tokensPerMinute: { type: 'integer', minimum: 1 },
        maxInFlight: { type: 'integer', minimum: 1 },
      },
      'Rate limits of the key; each absent: none.',
      ['requestsPerMinute', 'tokensPerMinute', 'maxInFlight'],
    ),
  },
  undefined,
  ['owner', 'name', 'models', 'limits'],
);

const compiledAccount = obj<CompiledAccount>({
  namespace: str,
  accountId: str,
  plan: { type: 'string', enum: ['pay-as-you-go', 'enterprise'] },
  privacy: obj<CompiledAccount['privacy']>({ denyDataCollection: { type: 'boolean' }, alwaysZdr: { type: 'boolean' } }),
  credentials: {
    type: 'array',
    items: credential,
    description: 'Sorted by provider, then section (prioritized first), then sortOrder, then id.',
  },
  workspaces: { type: 'array', items: workspace },
  guardrails: { type: 'array', items: guardrail },
  apiKeys: { type: 'array', items: apiKey },
});

export const shardDocumentSchema = {
  $schema: DRAFT,
  $id: `${BASE}/shard.schema.json`,
  title: "byok routing shard (decoded payload of the index's parts)",
  ...obj<ShardDocument>({
    bucket: { type: 'integer', minimum: 0 },
    accounts: { type: 'array', items: compiledAccount, description: 'Sorted by namespace.' },
  }),
};

export const bundleEnvelopeSchema = {
  $schema: DRAFT,
  $id: `${BASE}/bundle-envelope.schema.json`,
  title:
    'byok credential bundle envelope (one entry of a byok-bundle-<n> Secret; mounted as <bundleDir>/<credential id>)',
  ...obj<BundleEnvelope>(
    {
      v: { type: 'integer', const: 1 },
      alg: { type: 'string', const: 'A256GCM' },
      kid: {
        type: 'string',
        description: 'Id of the data key that sealed this payload (an entry of the byok-bundle-key Secret).',
      },
      ns: { type: 'string', description: 'Account namespace (bound into the AAD).' },
      id: { type: 'string', description: 'Credential public id (bound into the AAD).' },
      iv: { type: 'string', contentEncoding: 'base64', description: '12-byte nonce, base64.' },
      tag: { type: 'string', contentEncoding: 'base64', description: '16-byte GCM tag, base64.' },
      ct: { type: 'string', contentEncoding: 'base64', description: 'Ciphertext, base64.' },
    },
    'AES-256-GCM with the 32-byte key `kid`; AAD = UTF-8 of "byok-bundle/v1\\n" + ns + "\\n" + id; plaintext = the provider payload (UTF-8).',
  ),
};

const count: Schema = { type: 'integer', minimum: 0 };
const epochMs: Schema = { type: 'number', minimum: 0, description: 'Epoch milliseconds.' };
const outcome: Schema = { type: 'string', enum: [...HEALTH_OUTCOMES] };
/** A map keyed by credential id. */
const byCredential = (value: Schema, description: string): Schema => ({
  type: 'object',
  description,
  additionalProperties: value,
});

const counters = obj<CredentialCounters>(
  {
    ok: count,
    unauthorized: { ...count, description: 'Upstream 401/403.' },
    rateLimited: { ...count, description: 'Upstream 429.' },
    upstreamError: {
      ...count,
      description: '5xx, invalid JSON in a 2xx, timeout, transport error, stream broken before the first byte.',
    },
    lastSuccess: epochMs,
    lastFailure: epochMs,
  },
  'Monotonic for the life of the process (`instance`).',
  ['lastSuccess', 'lastFailure'],
);

const probe = obj<ProbeResult>({
  at: epochMs,
  outcome,
  status: {
    ...nullable({ type: 'integer' }),
    description: 'Upstream HTTP status; null when none (token exchange, transport error).',
  },
});

export const gatewayStatusSchema = {
  $schema: DRAFT,
  $id: `${BASE}/gateway-status.schema.json`,
  title: "byok gateway status report (GET /byok/status on a gateway pod's ops port; read by the operator's leader)",
  ...obj<GatewayStatusReport>(
    {
      format: { type: 'string', const: GATEWAY_STATUS_FORMAT },
      instance: {
        type: 'string',
        minLength: 1,
        description: 'Random per process start: a new value means the counters restarted.',
      },
      at: epochMs,
      routing: obj<GatewayStatusReport['routing']>({
        version: { ...nullableString, description: 'Version of the loaded routing index; null before the first load.' },
      }),
      bundle: obj<GatewayStatusReport['bundle']>({
        keyId: { ...nullableString, description: 'Active bundle key id; null when no key is mounted.' },
        generation: {
          type: 'string',
          description: "Kubelet generation directory of the bundle volume ('' for a plain directory).",
        },
        credentials: byCredential(
          { type: 'string' },
          'Credential id -> envelope version (first 16 hex of the sha256 of the envelope file).',
        ),
      }),
      credentials: byCredential(counters, 'Credential id -> attempt outcome counters.'),
      probes: byCredential(probe, 'Credential id -> its last probe (not counted in credentials).'),
      delivery: obj<DeliveryReport>(
        {
          seq: {
            ...count,
            description:
              'Moves on every stream batch and every reload of what the pod serves; a status request with ?after=<seq>&waitMs=<ms> is held until it does.',
          },
          stream: {
            type: 'string',
            enum: ['connected', 'down', 'off'],
            description: "The operator's delivery stream: held now, configured but down, or not configured.",
          },
          lastBatch: obj<NonNullable<DeliveryReport['lastBatch']>>(
            {
              batch: count,
              result: { type: 'string', enum: ['loaded', 'refused'] },
              reason: {
                type: 'string',
                maxLength: 512,
                description:
                  'Why the batch was refused: object names of the routing namespace, key ids and fixed phrases, never key material.',
              },
            },
            'The last stream batch the pod acknowledged.',
            ['reason'],
          ),
        },
        'What the pod loaded and acknowledged; absent from gateways that cannot hold a status request.',
        ['lastBatch'],
      ),
    },
    undefined,
    ['delivery'],
  ),
};

export const CONTRACT_SCHEMAS = {
  'routing-index.schema.json': routingIndexSchema,
  'shard.schema.json': shardDocumentSchema,
  'bundle-envelope.schema.json': bundleEnvelopeSchema,
  'gateway-status.schema.json': gatewayStatusSchema,
} as const;
