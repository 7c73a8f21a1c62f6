// Provider key payloads (spec 2.4): which shape each provider takes, ajv validation, and the parsed forms the
// gateway uses. Secrets never reach an error: ajv runs with verbose off, and every message is written here from the
// keyword and the schema, never from the data.
import { NO_EGRESS_EXCEPTIONS, urlEgressProblem, type EgressAllowList } from './egress.ts';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { PayloadIssue } from './errors.ts';
import type { ProviderSlug } from './providers.ts';
import { textIssue, UNSAFE_TEXT_CLASS } from './text.ts';

export type { PayloadIssue } from './errors.ts';

// ---------------------------------------------------------------------------------------------------------------
// Shapes

/** The payload shape a provider accepts. */
export type PayloadShape = 'plain' | 'azure' | 'bedrock' | 'vertex' | 'api-key-or-region';

const SHAPES: ReadonlyMap<string, PayloadShape> = new Map<string, PayloadShape>([
  ['azure', 'azure'],
  // The Claude-on-AWS variants are served through Bedrock and take the same credentials.
  ['amazon-bedrock', 'bedrock'],
  ['amazon-bedrock/claude-on-aws', 'bedrock'],
  ['claude-on-aws', 'bedrock'],
  ['google-vertex', 'vertex'],
  ['openai', 'api-key-or-region'],
  ['fireworks', 'api-key-or-region'],
]);

export function payloadShapeFor(provider: ProviderSlug): PayloadShape {
  return SHAPES.get(provider) ?? 'plain';
}

/** Largest payload accepted, in UTF-16 code units (a service-account document is about 2.4 KB). */
export const MAX_PAYLOAD_LENGTH = 65_536;

export interface ApiKeyPayload {
  kind: 'api-key';
  /** The key with surrounding whitespace removed (a trailing newline from `kubectl create secret --from-file`). */
  apiKey: string;
}

export interface ApiKeyRegionPayload {
  kind: 'api-key-region';
  apiKey: string;
  region: string;
}

export type AzureResourceType = 'ai_foundry' | 'openai';

export interface AzureResourceConfig {
  type: 'resource';
  api_key: string;
  resource_name: string;
  resource_type: AzureResourceType;
}

export interface AzureDeploymentConfig {
  type: 'deployment';
  api_key: string;
  model_slug: string;
  endpoint_url: string;
  model_id: string;
}

export interface AzurePayload {
  kind: 'azure';
  /** Entries in the order given, each tagged with its type. */
  entries: (AzureResourceConfig | AzureDeploymentConfig)[];
}

export interface BedrockKeyPayload {
  kind: 'bedrock-key';
  /** A Bedrock API key; tied to the region it was issued in. */
  apiKey: string;
}

export interface BedrockIamPayload {
  kind: 'bedrock-iam';
  accessKeyId: string;
  secretAccessKey: string;
  region: string;
}

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

export type ProviderPayload =
  | ApiKeyPayload
  | ApiKeyRegionPayload
  | AzurePayload
  | BedrockKeyPayload
  | BedrockIamPayload
  | VertexPayload;

export type PayloadResult = { ok: true; payload: ProviderPayload } | { ok: false; errors: PayloadIssue[] };

// ---------------------------------------------------------------------------------------------------------------
// Schemas

const NO_SPACE = '^\\S+$';
const MODEL_SLUG = '^[^\\s/]+/\\S+$';
const AWS_REGION = '^[a-z]{2}(-[a-z]+)+-[0-9]+$';
const GCP_REGION = '^[a-z]+-[a-z]+[0-9]+$';
const HTTPS = '^https://';

const bedrockIamSchema = {
  type: 'object',
  required: ['accessKeyId', 'secretAccessKey', 'region'],
  additionalProperties: false,
  properties: {
    accessKeyId: { type: 'string', minLength: 1, pattern: '^[A-Z0-9]{16,128}$' },
    secretAccessKey: { type: 'string', minLength: 1, pattern: NO_SPACE },
    region: { type: 'string', minLength: 1, pattern: AWS_REGION },
  },
} as const;

const apiKeyRegionSchema = {
  type: 'object',
  required: ['api_key', 'region'],
  additionalProperties: false,
  properties: {
    api_key: { type: 'string', minLength: 1, pattern: NO_SPACE },
    region: { type: 'string', minLength: 1, pattern: '^[a-z0-9]+(-[a-z0-9]+)*$' },
  },
} as const;

const azureResourceSchema = {
  type: 'object',
  required: ['api_key', 'resource_name'],
  additionalProperties: false,
  properties: {
    api_key: { type: 'string', minLength: 1, pattern: NO_SPACE },
    resource_name: { type: 'string', minLength: 1, pattern: '^[A-Za-z0-9]([A-Za-z0-9-]{0,62}[A-Za-z0-9])?$' },
    resource_type: { type: 'string', enum: ['ai_foundry', 'openai'] },
  },
} as const;

const azureDeploymentSchema = {
  type: 'object',
  required: ['api_key', 'model_slug', 'endpoint_url', 'model_id'],
  additionalProperties: false,
  properties: {
    api_key: { type: 'string', minLength: 1, pattern: NO_SPACE },
    model_slug: { type: 'string', minLength: 1, pattern: MODEL_SLUG },
    endpoint_url: { type: 'string', minLength: 1, format: 'uri', pattern: HTTPS },
    model_id: { type: 'string', minLength: 1, pattern: NO_SPACE },
  },
} as const;

const vertexSchema = {
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
    region: { type: 'string', minLength: 1, pattern: `^global$|${GCP_REGION}` },
    bucket: { type: 'string', minLength: 1 },
  },
} as const;

// `verbose: false` keeps the validated data out of error objects; messages below are built from keyword + schema.
const ajv = new Ajv({ allErrors: true, verbose: false, strict: true, allowUnionTypes: false });
// ajv-formats is CommonJS; under NodeNext its default import is the module object or the plugin, depending on loader.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (
  a: Ajv,
  formats: string[],
) => Ajv;
addFormats(ajv, ['email', 'uri']);

const validators = {
  bedrockIam: ajv.compile(bedrockIamSchema),
  apiKeyRegion: ajv.compile(apiKeyRegionSchema),
  azureResource: ajv.compile(azureResourceSchema),
  azureDeployment: ajv.compile(azureDeploymentSchema),
  vertex: ajv.compile(vertexSchema),
};

// Field-specific text for `pattern` and `format` failures.
const FIELD_RULES: Readonly<Record<string, string>> = {
  accessKeyId: 'must be an AWS access key id (16 to 128 upper-case letters and digits)',
  secretAccessKey: 'must not contain whitespace',
  region: 'must be a region identifier',
  api_key: 'must not contain whitespace',
  resource_name: 'must be the Azure resource subdomain name (letters, digits and hyphens), not a URL',
  model_slug: 'must be a gateway model slug of the form <vendor>/<model>',
  endpoint_url: 'must be a full https URL',
  model_id: 'must be the deployment name, without whitespace',
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
};

const VERTEX_REGION_RULE = "must be 'global' or a Google Cloud region id such as us-central1";
const AWS_REGION_RULE = 'must be an AWS region id such as us-east-1';

// Unknown property names are echoed only when they look like field names, since a pasted secret could be a key.
const FIELD_NAME_LIKE = /^[a-z][a-z_]*(?:[A-Z][a-z]+)*$/;

function joinPath(prefix: string, pointer: string): string {
  let out = prefix;
  if (pointer === '') return out;
  for (const raw of pointer.slice(1).split('/')) {
    const seg = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    out += /^[0-9]+$/.test(seg) ? `[${seg}]` : out === '' ? seg : `.${seg}`;
  }
  return out;
}

function child(path: string, name: string): string {
  return path === '' ? name : `${path}.${name}`;
}

function lastSegment(path: string): string {
  const dot = path.lastIndexOf('.');
  return dot < 0 ? path : path.slice(dot + 1);
}

function issueFor(e: ErrorObject, prefix: string, regionRule: string): PayloadIssue {
  const path = joinPath(prefix, e.instancePath);
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'required':
      return { field: child(path, String(p['missingProperty'])), message: 'is required' };
    case 'additionalProperty':
    case 'additionalProperties': {
      const name = String(p['additionalProperty']);
      return name.length <= 32 && FIELD_NAME_LIKE.test(name)
        ? { field: child(path, name), message: 'is not a recognised field' }
        : { field: path, message: 'contains an unrecognised field' };
    }
    case 'type':
      return { field: path, message: `must be ${article(String(p['type']))}` };
    case 'minLength':
      return { field: path, message: 'must not be empty' };
    case 'const':
      return { field: path, message: `must be ${JSON.stringify(p['allowedValue'])}` };
    case 'enum':
      return { field: path, message: `must be one of: ${(p['allowedValues'] as unknown[]).join(', ')}` };
    case 'pattern':
    case 'format': {
      const name = lastSegment(path);
      const rule = name === 'region' ? regionRule : Object.hasOwn(FIELD_RULES, name) ? FIELD_RULES[name] : undefined;
      return { field: path, message: rule ?? 'has an invalid format' };
    }
    default:
      return { field: path, message: 'is invalid' };
  }
}

function article(type: string): string {
  return type === 'object' || type === 'array' || type === 'integer' ? `an ${type}` : `a ${type}`;
}

function run(validate: ValidateFunction, data: unknown, prefix: string, regionRule: string, into: PayloadIssue[]): boolean {
  if (validate(data)) return true;
  const seen = new Set<string>();
  for (const e of validate.errors ?? []) {
    const issue = issueFor(e, prefix, regionRule);
    const key = `${issue.field}\u0000${issue.message}`;
    // A failing format and pattern on one field would otherwise say the same thing twice.
    if (!seen.has(key)) {
      seen.add(key);
      into.push(issue);
    }
  }
  return false;
}

// ---------------------------------------------------------------------------------------------------------------
// Parsing

type Parsed = { ok: true; value: unknown } | { ok: false; issue: PayloadIssue };

function parseJson(text: string): Parsed {
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (err) {
    // V8's message can quote the input, so only the position number is kept.
    const pos = /position (\d+)/.exec(err instanceof Error ? err.message : '');
    return { ok: false, issue: { field: '', message: `is not valid JSON${pos ? ` (at character ${pos[1]})` : ''}` } };
  }
}

/** The parsed document of a JSON-only provider, or undefined after recording why there is none. */
function jsonDocument(text: string, looksJson: boolean, shapeRule: string, errors: PayloadIssue[]): unknown {
  if (!looksJson) {
    errors.push({ field: '', message: text === '' ? 'must not be empty' : shapeRule });
    return undefined;
  }
  const parsed = parseJson(text);
  if (!parsed.ok) {
    errors.push(parsed.issue);
    return undefined;
  }
  return parsed.value;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** What trim() removes around a key that textIssue allows there: \s without VT, FF and U+2028/2029. */
const TRIMMABLE = '[\\t\\n\\r \\u00a0\\u1680\\u2000-\\u200a\\u202f\\u205f\\u3000\\ufeff]';
/**
 * The plain-key rule below as one JSON Schema pattern: after trimming whitespace, non-empty, one line without
 * control characters, separators or noncharacters, not starting with a bracket (a JSON document pasted for a
 * plain-key provider).
 */
export const PLAIN_KEY_PATTERN = `^${TRIMMABLE}*[^\\s${UNSAFE_TEXT_CLASS}\\[{][^${UNSAFE_TEXT_CLASS}]*${TRIMMABLE}*$`;

function plainKey(text: string, errors: PayloadIssue[]): string | null {
  if (text === '') {
    errors.push({ field: '', message: 'must not be empty' });
    return null;
  }
  // A key travels in an HTTP header, which cannot carry control characters (a pasted line break, two keys pasted).
  const bad = textIssue(text);
  if (bad) {
    errors.push({ field: '', message: `must be a single line without control characters; it ${bad.message}` });
    return null;
  }
  return text;
}

/**
 * Validates the secret given for a provider (the REST `key` field or the Secret's value) and returns its parsed
 * form. Surrounding whitespace is ignored. Errors name the field and the rule, never the value.
 */
export interface PayloadOptions {
  /** Addresses and hosts an operator allows tenant URLs to use in spite of the egress policy (docs/gateway.md). */
  egress?: EgressAllowList;
}

export function validatePayload(provider: ProviderSlug, raw: string, opts: PayloadOptions = {}): PayloadResult {
  const egress = opts.egress ?? NO_EGRESS_EXCEPTIONS;
  const errors: PayloadIssue[] = [];
  if (typeof raw !== 'string') return { ok: false, errors: [{ field: '', message: 'must be a string' }] };
  if (raw.length > MAX_PAYLOAD_LENGTH) {
    return { ok: false, errors: [{ field: '', message: `is too long (at most ${MAX_PAYLOAD_LENGTH} characters)` }] };
  }
  // Text hygiene first (both doors): a JSON document may span lines, nothing may carry other controls, separators,
  // noncharacters, lone surrogates or U+FFFD (what invalid UTF-8 decodes to).
  const bad = textIssue(raw, { multiline: true });
  if (bad) return { ok: false, errors: [{ field: '', message: bad.message }] };
  const text = raw.trim();
  const shape = payloadShapeFor(provider);
  const looksJson = text.startsWith('{') || text.startsWith('[');
  let payload: ProviderPayload | null = null;

  switch (shape) {
    case 'plain': {
      // No provider key starts with a bracket; this catches a JSON document pasted for a plain-key provider.
      if (looksJson) {
        errors.push({ field: '', message: 'must be a plain API key string; this provider does not take a JSON payload' });
        break;
      }
      const key = plainKey(text, errors);
      if (key !== null) payload = { kind: 'api-key', apiKey: key };
      break;
    }
    case 'api-key-or-region':
    case 'bedrock': {
      if (!looksJson) {
        const key = plainKey(text, errors);
        if (key !== null) payload = shape === 'bedrock' ? { kind: 'bedrock-key', apiKey: key } : { kind: 'api-key', apiKey: key };
        break;
      }
      const parsed = parseJson(text);
      if (!parsed.ok) {
        errors.push(parsed.issue);
        break;
      }
      const v = parsed.value;
      const wanted = shape === 'bedrock' ? 'an object {accessKeyId, secretAccessKey, region}' : 'an object {api_key, region}';
      if (!isObject(v)) {
        errors.push({ field: '', message: `must be a plain API key or ${wanted}` });
        break;
      }
      if (shape === 'bedrock') {
        if (run(validators.bedrockIam, v, '', AWS_REGION_RULE, errors)) {
          payload = {
            kind: 'bedrock-iam',
            accessKeyId: v['accessKeyId'] as string,
            secretAccessKey: v['secretAccessKey'] as string,
            region: v['region'] as string,
          };
        }
      } else if (run(validators.apiKeyRegion, v, '', 'must be a region identifier (lower-case letters, digits, hyphens)', errors)) {
        payload = { kind: 'api-key-region', apiKey: v['api_key'] as string, region: v['region'] as string };
      }
      break;
    }
    case 'azure':
      payload = azure(text, looksJson, errors, egress);
      break;
    case 'vertex':
      payload = vertex(text, looksJson, errors, egress);
      break;
  }
  return payload !== null && errors.length === 0 ? { ok: true, payload } : { ok: false, errors };
}

function azure(text: string, looksJson: boolean, errors: PayloadIssue[], egress: EgressAllowList): AzurePayload | null {
  const shapeRule = 'must be a JSON array of Azure resource configs and/or per-deployment configs';
  const v = jsonDocument(text, looksJson, shapeRule, errors);
  if (v === undefined) return null;
  if (!Array.isArray(v)) {
    errors.push({ field: '', message: shapeRule });
    return null;
  }
  if (v.length === 0) {
    errors.push({ field: '', message: 'must contain at least one entry' });
    return null;
  }
  const entries: (AzureResourceConfig | AzureDeploymentConfig)[] = [];
  const slugs = new Map<string, number>();
  v.forEach((entry: unknown, i) => {
    const at = `[${i}]`;
    if (!isObject(entry)) {
      errors.push({ field: at, message: 'must be an object' });
      return;
    }
    // An entry naming any per-deployment field is a per-deployment config, so its errors talk about those fields.
    const isDeployment = 'model_slug' in entry || 'endpoint_url' in entry || 'model_id' in entry;
    if (!isDeployment) {
      if (run(validators.azureResource, entry, at, 'must be a region identifier', errors)) {
        entries.push({
          type: 'resource',
          api_key: entry['api_key'] as string,
          resource_name: entry['resource_name'] as string,
          resource_type: (entry['resource_type'] as AzureResourceType | undefined) ?? 'openai',
        });
      }
      return;
    }
    const schemaOk = run(validators.azureDeployment, entry, at, 'must be a region identifier', errors);
    const url = entry['endpoint_url'];
    let urlOk = true;
    if (typeof url === 'string' && url !== '') {
      const problem = endpointUrlProblem(url) ?? urlEgressProblem(url, egress);
      if (problem !== null) {
        urlOk = false;
        // Replace the generic https message with the specific one.
        const idx = errors.findIndex((e) => e.field === `${at}.endpoint_url`);
        if (idx >= 0) errors.splice(idx, 1);
        errors.push({ field: `${at}.endpoint_url`, message: problem });
      }
    }
    const slug = entry['model_slug'];
    if (typeof slug === 'string') {
      const first = slugs.get(slug);
      if (first !== undefined) errors.push({ field: `${at}.model_slug`, message: `duplicates the model_slug of entry [${first}]` });
      else slugs.set(slug, i);
    }
    if (schemaOk && urlOk) {
      entries.push({
        type: 'deployment',
        api_key: entry['api_key'] as string,
        model_slug: slug as string,
        endpoint_url: url as string,
        model_id: entry['model_id'] as string,
      });
    }
  });
  return errors.length === 0 ? { kind: 'azure', entries } : null;
}

/** Why an Azure deployment URL is unusable, or null. */
export function endpointUrlProblem(url: string): string | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return 'must be a full https URL';
  }
  if (u.protocol !== 'https:') return 'must use https';
  if (u.username !== '' || u.password !== '') return 'must not contain credentials';
  if (!/\/chat\/completions\/?$/.test(u.pathname)) return 'must include the chat-completions path (…/chat/completions)';
  const version = u.searchParams.get('api-version');
  if (version === null || version.trim() === '') return 'must include an api-version query parameter';
  return null;
}

/**
 * The Azure entry serving a model: a per-deployment config whose model_slug matches wins over resource configs;
 * otherwise the first resource config (which needs no per-model setup); null when neither applies.
 */
export function azureDeploymentFor(
  payload: AzurePayload,
  modelSlug: string,
): AzureDeploymentConfig | AzureResourceConfig | null {
  let resource: AzureResourceConfig | null = null;
  for (const e of payload.entries) {
    if (e.type === 'deployment') {
      if (e.model_slug === modelSlug) return e;
    } else if (resource === null) {
      resource = e;
    }
  }
  return resource;
}

const BUCKET_NAME = /^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$/;

function vertex(text: string, looksJson: boolean, errors: PayloadIssue[], egress: EgressAllowList): VertexPayload | null {
  const shapeRule = 'must be a Google service-account key JSON document';
  const v = jsonDocument(text, looksJson, shapeRule, errors);
  if (v === undefined) return null;
  if (!isObject(v)) {
    errors.push({ field: '', message: shapeRule });
    return null;
  }
  const schemaOk = run(validators.vertex, v, '', VERTEX_REGION_RULE, errors);
  // The gateway POSTs the signed assertion to token_uri: a tenant URL like an Azure endpoint_url.
  const tokenUriProblem = schemaOk && typeof v['token_uri'] === 'string' ? urlEgressProblem(v['token_uri'], egress) : null;
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
}

/** A bucket name or `gs://name`, normalised to the name; object paths are rejected. */
export function bucketName(value: string): { ok: true; name: string } | { ok: false; message: string } {
  const name = value.startsWith('gs://') ? value.slice(5) : value;
  if (name.replace(/\/+$/, '').includes('/')) {
    return { ok: false, message: 'must name a bucket, not an object path (use the bucket name or gs://<bucket>)' };
  }
  const bare = name.replace(/\/+$/, '');
  if (!BUCKET_NAME.test(bare)) {
    return { ok: false, message: 'must be a bucket name (3-63 lower-case letters, digits, dots, hyphens, underscores) or gs://<bucket>' };
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
 * Hook for verifying, at Google, that a user-managed bucket belongs to the key's project (spec 2.4). Only the
 * provider can answer, so the domain core ships no real implementation: the gateway or an online validator plugs
 * one in (for example a storage.buckets.get with the key's credentials, comparing the project number).
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
