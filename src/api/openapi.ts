// The OpenAPI 3.1 document of the REST door (/api/v1/openapi.json): paths, responses and the error body around the
// shared BYOKKey and request schemas of src/service/key-schema.ts.
import {
  byokKeySchema,
  createRequestSchema,
  type JsonSchema,
  LIST_LIMIT_DEFAULT,
  LIST_LIMIT_MAX,
  providerSchema,
  updateRequestSchema,
} from '../service/key-schema.ts';

/** On a create without workspace_id: the default workspace's id (docs/api.md, "Workspaces"). */
export const WORKSPACE_DEFAULTED_HEADER = 'X-Byok-Workspace-Defaulted';

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
  properties: {
    deleted: { const: true, description: 'Confirmation that the credential and its Secret were deleted.' },
  },
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
    codes.map((c) => [
      String(c),
      {
        description: ERROR_TEXT[c],
        content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorResponse' } } },
      },
    ]),
  );
}
const ok = (description: string, ref: string): JsonSchema => ({
  description,
  content: { 'application/json': { schema: { $ref: `#/components/schemas/${ref}` } } },
});
const json = (ref: string): JsonSchema => ({
  required: true,
  content: { 'application/json': { schema: { $ref: `#/components/schemas/${ref}` } } },
});
const idParam: JsonSchema = {
  name: 'id',
  in: 'path',
  required: true,
  description: 'The credential id (UUID).',
  schema: { type: 'string', format: 'uuid' },
};
const fallbackError = {
  default: {
    description: 'Any other error (404 unknown route, 405 wrong method, ...)',
    content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorResponse' } } },
  },
};

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
          summary:
            'List credentials of a workspace (default workspace unless workspace_id), global credentials included',
          parameters: [
            {
              name: 'offset',
              in: 'query',
              description:
                'Records to skip. Omit it for 0 (a query string cannot carry null: `offset=` and `offset=null` are refused).',
              schema: { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER, default: 0 },
            },
            {
              name: 'limit',
              in: 'query',
              description: 'Maximum records returned.',
              schema: { type: 'integer', minimum: 1, maximum: LIST_LIMIT_MAX, default: LIST_LIMIT_DEFAULT },
            },
            {
              name: 'workspace_id',
              in: 'query',
              description: 'Workspace to list; defaults to the account’s default workspace.',
              schema: { type: 'string', format: 'uuid' },
            },
            {
              name: 'provider',
              in: 'query',
              description: 'Only credentials of this provider.',
              schema: { $ref: '#/components/schemas/BYOKProviderSlug' },
            },
          ],
          responses: {
            '200': ok('A page of credentials', 'ListBYOKKeysResponse'),
            ...errors(400, 401, 403, 429, 500, 503),
            ...fallbackError,
          },
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
              headers: {
                [WORKSPACE_DEFAULTED_HEADER]: {
                  description:
                    'Set when the request had no workspace_id: the id of the default workspace the credential was put in. A BYOKCredential without spec.workspace is global instead; send workspace_id: null for a global credential.',
                  schema: { type: 'string', format: 'uuid' },
                },
              },
              // What a client (or a stateful test) can do next with the new id.
              links: Object.fromEntries(
                ['getBYOKKey', 'updateBYOKKey', 'deleteBYOKKey'].map((op) => [
                  op.replace('BYOKKey', 'Created'),
                  { operationId: op, parameters: { id: '$response.body#/data/id' } },
                ]),
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
          responses: {
            '200': ok('The credential', 'GetBYOKKeyResponse'),
            ...errors(400, 401, 403, 404, 429, 500, 503),
            ...fallbackError,
          },
        },
        patch: {
          operationId: 'updateBYOKKey',
          summary: 'Update a credential; `key` rotates the secret in place',
          parameters: [idParam],
          requestBody: json('UpdateBYOKKeyRequest'),
          responses: {
            '200': ok('The updated credential', 'UpdateBYOKKeyResponse'),
            ...errors(400, 401, 403, 404, 409, 413, 415, 429, 500, 503),
            ...fallbackError,
          },
        },
        delete: {
          operationId: 'deleteBYOKKey',
          summary: 'Delete a credential and its Secret',
          parameters: [idParam],
          responses: {
            '200': ok('Deleted', 'DeleteBYOKKeyResponse'),
            ...errors(400, 401, 403, 404, 409, 429, 500, 503),
            ...fallbackError,
          },
        },
      },
    },
    components: {
      securitySchemes: {
        managementKey: { type: 'http', scheme: 'bearer', description: 'A management key (not a gateway API key).' },
      },
      schemas: {
        BYOKProviderSlug: providerSchema,
        BYOKKey: {
          ...byokKeySchema,
          properties: {
            ...(byokKeySchema.properties as object),
            provider: { $ref: '#/components/schemas/BYOKProviderSlug' },
          },
        },
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
