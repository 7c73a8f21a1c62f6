// Provider key payloads: the table of payload shapes, which provider takes which, and the one entry point that
// validates a payload. Each shape is one module under payloads/ that owns its validation, the field its label masks,
// its upstream authentication (the pure part), its export facts and its exported Secret's key material; adding a
// shape is a module there and a row here (docs/ARCHITECTURE.md).
import { type EgressAllowList, NO_EGRESS_EXCEPTIONS } from './egress.ts';
import type { PayloadIssue } from './errors.ts';
import { type ApiKeyRegionFacts, type ApiKeyRegionPayload, apiKeyOrRegionShape } from './payloads/api-key-or-region.ts';
import { type AzureFacts, type AzurePayload, azureShape } from './payloads/azure.ts';
import { type BedrockFacts, type BedrockIamPayload, type BedrockKeyPayload, bedrockShape } from './payloads/bedrock.ts';
import { type ApiKeyFacts, type ApiKeyPayload, plainShape } from './payloads/plain.ts';
import type { PayloadShapeModule } from './payloads/shape.ts';
import { type VertexFacts, type VertexPayload, vertexShape } from './payloads/vertex.ts';
import type { ProviderSlug } from './providers.ts';
import { textIssue } from './text.ts';

export type { PayloadIssue } from './errors.ts';
export type { ApiKeyRegionPayload } from './payloads/api-key-or-region.ts';
export {
  type AzureDeploymentConfig,
  type AzureEntryFacts,
  type AzurePayload,
  type AzureResourceConfig,
  type AzureResourceType,
  azureDeploymentFor,
  endpointUrlProblem,
} from './payloads/azure.ts';
export type { BedrockIamPayload, BedrockKeyPayload } from './payloads/bedrock.ts';
export type { ApiKeyPayload } from './payloads/plain.ts';
export type { SecretMaterial, UpstreamAuthPlan, UpstreamPlan } from './payloads/shape.ts';
export { PLAIN_KEY_PATTERN } from './payloads/validation.ts';
export {
  type BucketOwnershipCheck,
  type BucketOwnershipResult,
  batchBucketFor,
  bucketName,
  defaultBatchBucket,
  OFFLINE_BUCKET_OWNERSHIP_CHECK,
  type VertexPayload,
  type VertexServiceAccount,
} from './payloads/vertex.ts';

/** A payload as the gateway and the export use it, parsed by its shape. */
export type ProviderPayload =
  | ApiKeyPayload
  | ApiKeyRegionPayload
  | AzurePayload
  | BedrockKeyPayload
  | BedrockIamPayload
  | VertexPayload;

/** What routing needs from a payload: its kind and the non-secret fields (regions, projects, Azure resources). */
export type CredentialFacts = ApiKeyFacts | ApiKeyRegionFacts | AzureFacts | BedrockFacts | VertexFacts;

/** The table: every payload shape and its module. */
export const PAYLOAD_SHAPES = {
  plain: plainShape,
  'api-key-or-region': apiKeyOrRegionShape,
  azure: azureShape,
  bedrock: bedrockShape,
  vertex: vertexShape,
} as const satisfies Record<string, PayloadShapeModule<ProviderPayload, CredentialFacts>>;

/** The payload shape a provider accepts. */
export type PayloadShape = keyof typeof PAYLOAD_SHAPES;

/** Providers that take a shape other than the plain key; every other provider takes a plain key. */
const SHAPE_OF_PROVIDER: ReadonlyMap<string, PayloadShape> = new Map<string, PayloadShape>([
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
  return SHAPE_OF_PROVIDER.get(provider) ?? 'plain';
}

type AnyShape = PayloadShapeModule<ProviderPayload, CredentialFacts>;

/** The module of a shape, with its payload and facts types widened to the unions (the table's one cast). */
export function payloadShapeModule(shape: PayloadShape): AnyShape {
  return PAYLOAD_SHAPES[shape] as unknown as AnyShape;
}

/** Parsed kind -> the shape that owns it (the plain key, also produced by api-key-or-region, is the plain shape's). */
const SHAPE_OF_KIND = new Map<ProviderPayload['kind'], PayloadShape>(
  (Object.keys(PAYLOAD_SHAPES) as PayloadShape[]).flatMap((shape) =>
    PAYLOAD_SHAPES[shape].kinds.map((kind) => [kind, shape] as const),
  ),
);

/** The module that owns a parsed payload: its upstream authentication, export facts and Secret material. */
export function shapeOfPayload(payload: ProviderPayload): AnyShape {
  const shape = SHAPE_OF_KIND.get(payload.kind);
  if (shape === undefined) throw new RangeError(`no payload shape owns the kind ${payload.kind}`);
  return payloadShapeModule(shape);
}

/** Largest payload accepted, in UTF-16 code units (a service-account document is about 2.4 KB). */
export const MAX_PAYLOAD_LENGTH = 65_536;

export type PayloadResult = { ok: true; payload: ProviderPayload } | { ok: false; errors: PayloadIssue[] };

export interface PayloadOptions {
  /** Addresses and hosts an operator allows tenant URLs to use in spite of the egress policy (docs/gateway.md). */
  egress?: EgressAllowList;
}

/**
 * Validates the secret given for a provider (the REST `key` field or the Secret's value) and returns its parsed
 * form. Surrounding whitespace is ignored. Errors name the field and the rule, never the value.
 */
export function validatePayload(provider: ProviderSlug, raw: string, opts: PayloadOptions = {}): PayloadResult {
  if (typeof raw !== 'string') return { ok: false, errors: [{ field: '', message: 'must be a string' }] };
  if (raw.length > MAX_PAYLOAD_LENGTH) {
    return { ok: false, errors: [{ field: '', message: `is too long (at most ${MAX_PAYLOAD_LENGTH} characters)` }] };
  }
  // Text hygiene first (both doors): a JSON document may span lines, nothing may carry other controls, separators,
  // noncharacters, lone surrogates or U+FFFD (what invalid UTF-8 decodes to).
  const bad = textIssue(raw, { multiline: true });
  if (bad) return { ok: false, errors: [{ field: '', message: bad.message }] };
  const text = raw.trim();
  const errors: PayloadIssue[] = [];
  const input = {
    text,
    looksJson: text.startsWith('{') || text.startsWith('['),
    egress: opts.egress ?? NO_EGRESS_EXCEPTIONS,
  };
  const payload = payloadShapeModule(payloadShapeFor(provider)).validate(input, errors);
  return payload !== null && errors.length === 0 ? { ok: true, payload } : { ok: false, errors };
}
