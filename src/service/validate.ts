// Request validation: structural checks (types, enums, unknown fields) with ajv, then the domain rules.
// Messages name the field and are built from the schema and fixed text, never from the submitted values
// (ajv runs with verbose off), so a secret sent in the wrong place is never echoed.

import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { type EgressAllowList, NO_EGRESS_EXCEPTIONS } from '../domain/egress.ts';
import { describePayloadIssues, VIOLATIONS, type Violation } from '../domain/errors.ts';
import { closestName, didYouMean, modelSlugHint } from '../domain/hints.ts';
import { validatePayload } from '../domain/payloads.ts';
import { isProviderSlug, PROVIDER_SLUGS, type ProviderSlug } from '../domain/providers.ts';
import { bytesIssue, textIssue } from '../domain/text.ts';
import { ApiError, badRequest } from './errors.ts';
import {
  createRequestSchema,
  type JsonSchema,
  LIST_LIMIT_DEFAULT,
  LIST_LIMIT_MAX,
  structural,
  updateRequestSchema,
} from './key-schema.ts';

const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (
  ajv: Ajv2020,
  formats: string[],
) => Ajv2020;

const ajv = new Ajv2020({ allErrors: true, verbose: false, strict: false });
addFormats(ajv, ['uuid', 'date-time']);

const schemas = { create: structural(createRequestSchema), update: structural(updateRequestSchema) };
const validators = {
  create: Object.assign(ajv.compile(schemas.create), { schema: schemas.create }),
  update: Object.assign(ajv.compile(schemas.update), { schema: schemas.update }),
};

export type CreateBody = {
  provider: ProviderSlug;
  key: string;
  workspace_id?: string | null;
  name?: string | null;
  disabled?: boolean;
  is_fallback?: boolean;
  is_required?: boolean;
  is_byok_only?: boolean;
  declared_zdr?: boolean | null;
  allowed_models?: unknown;
  allowed_api_key_hashes?: unknown;
  allowed_user_ids?: unknown;
};

export type UpdateBody = Partial<Omit<CreateBody, 'provider' | 'key'>> & {
  provider?: ProviderSlug;
  key?: string;
  sort_order?: number;
};

/** `/allowed_models/3` → `allowed_models[3]`. */
function fieldOf(e: ErrorObject): string {
  const parts = e.instancePath.split('/').slice(1);
  let out = '';
  for (const p of parts) out += /^\d+$/.test(p) ? `[${p}]` : out === '' ? p : `.${p}`;
  if (e.keyword === 'required')
    return out === '' ? String(e.params.missingProperty) : `${out}.${String(e.params.missingProperty)}`;
  if (e.keyword === 'additionalProperties')
    return out === '' ? String(e.params.additionalProperty) : `${out}.${String(e.params.additionalProperty)}`;
  return out;
}

/** The value at an ajv instancePath (`/allowed_models/3`), or undefined. */
function valueAt(body: unknown, instancePath: string): unknown {
  let v = body;
  for (const p of instancePath.split('/').slice(1))
    v = typeof v === 'object' && v !== null ? (v as Record<string, unknown>)[p] : undefined;
  return v;
}

/** The property names of the schema object at an ajv instancePath (request bodies nest no deeper than one object). */
function knownFields(schema: JsonSchema, instancePath: string): string[] {
  let node: JsonSchema | undefined = schema;
  for (const p of instancePath.split('/').slice(1))
    node = (node?.properties as Record<string, JsonSchema> | undefined)?.[p] ?? (node?.items as JsonSchema | undefined);
  return Object.keys((node?.properties as Record<string, JsonSchema> | undefined) ?? {});
}

/**
 * One message per error, with the did-you-mean hint `validate` gives (src/domain/hints.ts): `isByokOnly` → is_byok_only,
 * `open-ai` → openai. A hint names only a known field or slug, so the submitted value is still never echoed.
 */
function messageOf(e: ErrorObject, field: string, body: unknown, schema: JsonSchema): string {
  switch (e.keyword) {
    case 'required':
      return `${field} is required`;
    case 'additionalProperties':
      return `Unknown field: ${field}${didYouMean(closestName(String(e.params.additionalProperty), knownFields(schema, e.instancePath)))}`;
    case 'enum': {
      if (field !== 'provider') return `${field} must be one of the allowed values`;
      const sent = valueAt(body, e.instancePath);
      return `provider must be one of the BYOK provider slugs${typeof sent === 'string' ? didYouMean(closestName(sent, PROVIDER_SLUGS)) : ''}`;
    }
    case 'type': {
      const t = e.params.type as string | string[];
      return `${field} must be ${Array.isArray(t) ? t.join(' or ') : t}`;
    }
    case 'format':
      return `${field} must be a ${String(e.params.format)}`;
    case 'pattern':
      if (!field.startsWith('allowed_models[')) return `${field} ${e.message ?? 'is invalid'}`;
      return `${field} ${VIOLATIONS.malformed_model_slug}${modelSlugHint(valueAt(body, e.instancePath))}`;
    default:
      return `${field} ${e.message ?? 'is invalid'}`;
  }
}

function structuralCheck(validate: ValidateFunction & { schema: JsonSchema }, body: unknown): void {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw badRequest('The request body must be a JSON object', { field: null });
  }
  if (validate(body)) return;
  // Report unknown fields first (the most common mistake), then the rest, at most 10.
  const errs = [...(validate.errors ?? [])].sort(
    (a, b) => Number(b.keyword === 'additionalProperties') - Number(a.keyword === 'additionalProperties'),
  );
  const seen = new Set<string>();
  const problems: { field: string; message: string }[] = [];
  for (const e of errs) {
    const field = fieldOf(e);
    const message = messageOf(e, field, body, validate.schema);
    if (seen.has(message)) continue;
    seen.add(message);
    problems.push({ field, message });
    if (problems.length === 10) break;
  }
  const first = problems[0] ?? { field: '', message: 'Invalid request body' };
  throw badRequest(problems.map((p) => p.message).join('; '), { field: first.field, errors: problems });
}

export function checkCreateBody(body: unknown): CreateBody {
  textCheck(body);
  structuralCheck(validators.create, body);
  return body as CreateBody;
}

export function checkUpdateBody(body: unknown): UpdateBody {
  textCheck(body);
  structuralCheck(validators.update, body);
  return body as UpdateBody;
}

// ---- text hygiene (the same rules as the Git door; see docs/api.md "Text rules") ----

/** Every string in the body with its wire path (`allowed_models[3]`), depth first. */
function* strings(value: unknown, path: string): Generator<[string, string]> {
  if (typeof value === 'string') yield [path, value];
  else if (Array.isArray(value)) for (let i = 0; i < value.length; i++) yield* strings(value[i], `${path}[${i}]`);
  else if (typeof value === 'object' && value !== null)
    for (const [k, v] of Object.entries(value)) yield* strings(v, path === '' ? k : `${path}.${k}`);
}

/**
 * A 400 naming the first free-text field with a control character, separator, noncharacter or lone surrogate.
 * Runs before the schema check, whose pattern message would quote the pattern rather than say what is wrong.
 */
function textCheck(body: unknown): void {
  if (typeof body !== 'object' || body === null) return;
  for (const [field, value] of strings(body, '')) {
    // Only a JSON key payload may span lines (a pretty-printed service-account document).
    const issue = textIssue(value, { multiline: field === 'key' });
    if (issue) throw badRequest(`${field} ${issue.message}`, { field, code: issue.code });
  }
}

/**
 * The raw request body must be valid UTF-8: decoding would otherwise replace bad bytes with U+FFFD and store a
 * value other than the one sent. Returns the error (naming the field when the body still parses) or null.
 */
export function invalidUtf8Error(bytes: Uint8Array): ApiError | null {
  if (!bytesIssue(bytes)) return null;
  let field: string | null = null;
  try {
    for (const [path, value] of strings(JSON.parse(Buffer.from(bytes).toString('utf8')) as unknown, '')) {
      if (value.includes('\ufffd')) {
        field = path;
        break;
      }
    }
  } catch {
    // Not JSON either: the body as a whole is named.
  }
  return badRequest(`${field ?? 'The request body'} is not valid UTF-8`, { field, code: 'invalid_utf8' });
}

/** The provider payload per spec 2.4; a 400 names the offending part of `key` without quoting it. */
export function checkPayload(
  provider: ProviderSlug,
  key: string,
  egress: EgressAllowList = NO_EGRESS_EXCEPTIONS,
): void {
  const result = validatePayload(provider, key, { egress });
  if (!result.ok) {
    throw badRequest(describePayloadIssues(result.errors), {
      field: 'key',
      errors: result.errors.map((i) => ({ field: i.field, message: i.message })),
    });
  }
}

/** `allowed_models[3] must be …`; a message that already names its field (`is_byok_only=true cannot be …`) as is. */
export function violationText(v: Violation): string {
  const bare = v.field.replace(/\[\d+\]$/, '');
  return new RegExp(`(^|[^a-z_])${bare}([^a-z_]|$)`).test(v.message) ? v.message : `${v.field} ${v.message}`;
}

export function violationsError(violations: readonly Violation[]): ApiError {
  const first = violations[0];
  return badRequest(violations.map(violationText).join('; '), {
    field: first?.field ?? null,
    code: first?.code ?? null,
    violations: violations.map((v) => ({ field: v.field, code: v.code, message: v.message })),
  });
}

// ---- list query ----

export interface ListQuery {
  offset: number;
  limit: number;
  workspaceId: string | undefined;
  provider: ProviderSlug | undefined;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(v: string): boolean {
  return UUID.test(v);
}

function single(q: Record<string, unknown>, name: string): string | undefined {
  const v = q[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw badRequest(`${name} must be given at most once`, { field: name });
  return v;
}

function integer(q: Record<string, unknown>, name: string, dflt: number, min: number, max: number): number {
  const raw = single(q, name);
  // A query string cannot carry JSON null: absent means the default; `offset=`, `limit=null` and the like are
  // refused, exactly as the OpenAPI document (type integer) says, so generated clients and the server agree.
  if (raw === undefined) return dflt;
  if (!/^\d+$/.test(raw)) throw badRequest(`${name} must be an integer between ${min} and ${max}`, { field: name });
  const n = Number(raw);
  if (n < min || n > max) throw badRequest(`${name} must be an integer between ${min} and ${max}`, { field: name });
  return n;
}

export function parseListQuery(query: unknown): ListQuery {
  const q = (typeof query === 'object' && query !== null ? query : {}) as Record<string, unknown>;
  const offset = integer(q, 'offset', 0, 0, Number.MAX_SAFE_INTEGER);
  const limit = integer(q, 'limit', LIST_LIMIT_DEFAULT, 1, LIST_LIMIT_MAX);
  const workspaceId = single(q, 'workspace_id');
  if (workspaceId !== undefined && !isUuid(workspaceId))
    throw badRequest('workspace_id must be a uuid', { field: 'workspace_id' });
  const provider = single(q, 'provider');
  if (provider !== undefined && !isProviderSlug(provider))
    throw badRequest(
      `provider must be one of the BYOK provider slugs${didYouMean(closestName(provider, PROVIDER_SLUGS))}`,
      { field: 'provider' },
    );
  return { offset, limit, workspaceId: workspaceId?.toLowerCase(), provider: provider as ProviderSlug | undefined };
}

export type { JsonSchema };
