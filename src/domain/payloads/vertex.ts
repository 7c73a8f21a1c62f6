// Google Vertex AI: the service-account key JSON document as Google issues it, plus optional `region` and `bucket`
// fields. The gateway exchanges the key for an access token at the document's token_uri (a tenant URL, so it is
// checked against the egress policy here and at connect time).
import { urlEgressProblem } from '../egress.ts';
import type { PayloadShapeModule } from './shape.ts';
import {
  compileSchema,
  fillTemplate,
  HTTPS,
  isObject,
  jsonDocument,
  NO_SPACE,
  runSchema,
  stringField,
} from './validation.ts';

/** The Google service-account key document, as issued. */
export interface VertexServiceAccount {
  type: 'service_account';
  project_id: string;
  private_key_id: string;
  private_key: string;
  client_email: string;
  client_id: string;
  auth_uri: string;
  token_uri: string;
  auth_provider_x509_cert_url: string;
  client_x509_cert_url: string;
  universe_domain?: string;
}

export interface VertexPayload {
  kind: 'vertex';
  /** The key document without `region` and `bucket` (other fields Google adds are kept). */
  serviceAccount: VertexServiceAccount;
  projectId: string;
  /** 'global' (run in any region) or a region id. Defaults to 'global'. */
  region: string;
  /** Bare bucket name (a `gs://` prefix is removed); null = the default bucket per region. */
  bucket: string | null;
}

export type VertexFacts = { kind: 'vertex'; projectId: string; region: string };

const validateDocument = compileSchema({
  type: 'object',
  required: [
    'type',
    'project_id',
    'private_key_id',
    'private_key',
    'client_email',
    'client_id',
    'auth_uri',
    'token_uri',
    'auth_provider_x509_cert_url',
    'client_x509_cert_url',
  ],
  // Google adds fields to the key document over time; unknown ones are kept, not rejected.
  additionalProperties: true,
  properties: {
    type: { type: 'string', const: 'service_account' },
    project_id: { type: 'string', minLength: 1, pattern: '^([a-z][a-z0-9.-]*[a-z0-9]:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$' },
    private_key_id: { type: 'string', minLength: 1, pattern: '^[A-Za-z0-9]{8,128}$' },
    private_key: {
      type: 'string',
      minLength: 1,
      pattern: '^\\s*-----BEGIN (RSA )?PRIVATE KEY-----[\\s\\S]+-----END (RSA )?PRIVATE KEY-----\\s*$',
    },
    client_email: { type: 'string', minLength: 1, format: 'email' },
    client_id: { type: 'string', minLength: 1, pattern: '^[0-9]{1,64}$' },
    auth_uri: { type: 'string', minLength: 1, format: 'uri', pattern: HTTPS },
    token_uri: { type: 'string', minLength: 1, format: 'uri', pattern: HTTPS },
    auth_provider_x509_cert_url: { type: 'string', minLength: 1, format: 'uri', pattern: HTTPS },
    client_x509_cert_url: { type: 'string', minLength: 1, format: 'uri', pattern: HTTPS },
    universe_domain: { type: 'string', minLength: 1, pattern: NO_SPACE },
    region: { type: 'string', minLength: 1, pattern: '^global$|^[a-z]+-[a-z]+[0-9]+$' },
    bucket: { type: 'string', minLength: 1 },
  },
});

const RULES = {
  project_id: 'must be a Google Cloud project id',
  private_key_id: 'must be the key id from the service-account key file',
  private_key: 'must be a PEM-encoded private key (-----BEGIN PRIVATE KEY----- ... -----END PRIVATE KEY-----)',
  client_email: 'must be an e-mail address',
  client_id: 'must be the numeric client id',
  auth_uri: 'must be an https URL',
  token_uri: 'must be an https URL',
  auth_provider_x509_cert_url: 'must be an https URL',
  client_x509_cert_url: 'must be an https URL',
  universe_domain: 'must be a domain name',
  region: "must be 'global' or a Google Cloud region id such as us-central1",
};

const SHAPE_RULE = 'must be a Google service-account key JSON document';
const BUCKET_NAME = /^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$/;

export const vertexShape: PayloadShapeModule<VertexPayload, VertexFacts> = {
  kinds: ['vertex'],
  takesJson: true,
  validate({ text, looksJson, egress }, errors) {
    const v = jsonDocument(text, looksJson, SHAPE_RULE, errors);
    if (v === undefined) return null;
    if (!isObject(v)) {
      errors.push({ field: '', message: SHAPE_RULE });
      return null;
    }
    const schemaOk = runSchema(validateDocument, v, '', RULES, errors);
    // The gateway POSTs the signed assertion to token_uri: a tenant URL like an Azure endpoint_url.
    const tokenUriProblem =
      schemaOk && typeof v['token_uri'] === 'string' ? urlEgressProblem(v['token_uri'], egress) : null;
    if (tokenUriProblem !== null) errors.push({ field: 'token_uri', message: tokenUriProblem });
    let bucket: string | null = null;
    if (typeof v['bucket'] === 'string' && v['bucket'] !== '') {
      const b = bucketName(v['bucket']);
      if (b.ok) bucket = b.name;
      else errors.push({ field: 'bucket', message: b.message });
    }
    if (!schemaOk || errors.length > 0) return null;
    const { region, bucket: _bucket, ...serviceAccount } = v;
    return {
      kind: 'vertex',
      serviceAccount: serviceAccount as unknown as VertexServiceAccount,
      projectId: v['project_id'] as string,
      region: typeof region === 'string' ? region : 'global',
      bucket,
    };
  },
  labelField: (document) => stringField(document, 'private_key_id'),
  upstream(payload, spec) {
    const location = payload.region;
    const base = fillTemplate(spec.baseUrl, {
      project: payload.projectId,
      location,
      location_prefix: location === 'global' ? '' : `${location}-`,
      region: location,
    });
    return { url: { chat: base }, model: spec.model, auth: { kind: 'google-service-account' } };
  },
  facts: (payload) => ({ kind: 'vertex', projectId: payload.projectId, region: payload.region }),
  // The key document as Google issued it: our `region` and `bucket` fields are already taken out.
  secret: (payload) => ({ kind: 'google-service-account', document: JSON.stringify(payload.serviceAccount) }),
};

/** A bucket name or `gs://name`, normalised to the name; object paths are rejected. */
export function bucketName(value: string): { ok: true; name: string } | { ok: false; message: string } {
  const name = value.startsWith('gs://') ? value.slice(5) : value;
  if (name.replace(/\/+$/, '').includes('/')) {
    return { ok: false, message: 'must name a bucket, not an object path (use the bucket name or gs://<bucket>)' };
  }
  const bare = name.replace(/\/+$/, '');
  if (!BUCKET_NAME.test(bare)) {
    return {
      ok: false,
      message: 'must be a bucket name (3-63 lower-case letters, digits, dots, hyphens, underscores) or gs://<bucket>',
    };
  }
  return { ok: true, name: bare };
}

/**
 * The bucket the gateway creates for Vertex batch jobs when none is configured: `or-batch-<project>-<region>`.
 * Domain-scoped project ids (`example.com:proj`) have `:` and `.` replaced by `-` to stay a valid bucket name.
 */
export function defaultBatchBucket(projectId: string, region: string): string {
  return `or-batch-${projectId}-${region}`.toLowerCase().replace(/[:.]/g, '-');
}

/** The bucket a Vertex batch job in `region` uses. */
export function batchBucketFor(payload: VertexPayload, region: string): string {
  return payload.bucket ?? defaultBatchBucket(payload.projectId, region);
}

/** Result of a bucket-ownership check. `not-checked` means nobody looked; it is not a pass. */
export type BucketOwnershipResult =
  | { status: 'owned' }
  | { status: 'not-owned'; message: string }
  | { status: 'not-checked'; reason: string };

/**
 * Hook for verifying, at Google, that a user-managed bucket belongs to the key's project. Only the provider can
 * answer, so the domain core ships no real implementation: the gateway or an online validator plugs one in (for
 * example a storage.buckets.get with the key's credentials, comparing the project number).
 */
export interface BucketOwnershipCheck {
  check(input: { projectId: string; bucket: string; payload: VertexPayload }): Promise<BucketOwnershipResult>;
}

/** The offline default: reports honestly that no check was performed. */
export const OFFLINE_BUCKET_OWNERSHIP_CHECK: BucketOwnershipCheck = Object.freeze({
  check(): Promise<BucketOwnershipResult> {
    return Promise.resolve({
      status: 'not-checked',
      reason: 'bucket ownership can only be verified at the provider; not performed offline',
    } as const);
  },
});
