// Credential flags and filters (spec 2.2), shared by the REST API (create/update) and the reconciler (whole spec).
// This layer speaks the REST wire names (snake_case); `patchFromSpec`/`specFromSettings` map the CRD's camelCase.
import { VIOLATIONS, type Violation, violation } from './errors.ts';
import { modelSlugHint } from './hints.ts';
import { textIssue, UNSAFE_TEXT_CLASS } from './text.ts';

export type { Violation, ViolationCode } from './errors.ts';
export { VIOLATIONS } from './errors.ts';

export const MAX_FILTER_ENTRIES = 100;
export const FILTER_FIELDS = ['allowed_models', 'allowed_api_key_hashes', 'allowed_user_ids'] as const;
export type FilterField = (typeof FILTER_FIELDS)[number];
export const FLAG_FIELDS = ['is_fallback', 'is_required', 'is_byok_only'] as const;
export type FlagField = (typeof FLAG_FIELDS)[number];

/** The routing-relevant settings of a credential, as stored (REST wire names). */
export interface CredentialSettings {
  is_fallback: boolean;
  is_required: boolean;
  is_byok_only: boolean;
  /** null = no restriction. */
  allowed_models: string[] | null;
  allowed_api_key_hashes: string[] | null;
  allowed_user_ids: string[] | null;
}

/**
 * A write: an omitted (undefined) field is unchanged on update and defaulted on create, `null` clears a filter,
 * an array replaces it. Values are typed `unknown` because they come straight from a JSON body or a manifest.
 */
export type CredentialPatch = { readonly [K in keyof CredentialSettings]?: unknown };

export interface CredentialWriteInput {
  mode: 'create' | 'update';
  /** The stored settings on update; ignored (may be null) on create. */
  stored: CredentialSettings | null;
  patch: CredentialPatch;
  /** Hashes of the live API keys of the same account; every hash in the patch must be one of them. */
  liveApiKeyHashes: ReadonlySet<string>;
}

export type CredentialWriteResult = { ok: true; settings: CredentialSettings } | { ok: false; violations: Violation[] };

export const DEFAULT_SETTINGS: Readonly<CredentialSettings> = Object.freeze({
  is_fallback: false,
  is_required: false,
  is_byok_only: false,
  allowed_models: null,
  allowed_api_key_hashes: null,
  allowed_user_ids: null,
});

const HASH = /^[0-9a-f]{64}$/;
/** `<vendor>/<model>`, as a JSON Schema (ECMA-262) pattern too, so the OpenAPI document says the same. */
export const MODEL_SLUG_PATTERN = `^[^\\s/${UNSAFE_TEXT_CLASS}]+/[^\\s${UNSAFE_TEXT_CLASS}]+$`;
const MODEL_SLUG = new RegExp(MODEL_SLUG_PATTERN);
/** A filter entry is non-empty without surrounding whitespace. */
export const FILTER_ENTRY_PATTERN = `^[^\\s${UNSAFE_TEXT_CLASS}](?:[^${UNSAFE_TEXT_CLASS}]*[^\\s${UNSAFE_TEXT_CLASS}])?$`;

/**
 * Shape rules for one filter value, without the live-key lookup (usable offline, e.g. `validate` on manifests).
 * `null` and `undefined` are valid (no restriction / unchanged).
 */
export function validateFilterShape(field: FilterField, value: unknown): Violation[] {
  if (value === null || value === undefined) return [];
  if (!Array.isArray(value)) return [violation(field, 'invalid_type')];
  const out: Violation[] = [];
  if (value.length > MAX_FILTER_ENTRIES) out.push(violation(field, 'too_many_entries'));
  if (field === 'allowed_api_key_hashes' && value.length === 0) out.push(violation(field, 'empty_api_key_hashes'));
  value.forEach((entry: unknown, i) => {
    const at = `${field}[${i}]`;
    if (field === 'allowed_api_key_hashes') {
      if (typeof entry !== 'string' || !HASH.test(entry)) out.push(violation(at, 'malformed_api_key_hash'));
    } else if (typeof entry === 'string' && textIssue(entry) !== null) {
      out.push(violation(at, 'invalid_text'));
    } else if (typeof entry !== 'string' || entry === '' || entry.trim() !== entry) {
      out.push(violation(at, 'invalid_entry'));
    } else if (field === 'allowed_models' && !MODEL_SLUG.test(entry)) {
      out.push({
        ...violation(at, 'malformed_model_slug'),
        message: `${VIOLATIONS.malformed_model_slug}${modelSlugHint(entry)}`,
      });
    }
  });
  return out;
}

/**
 * Applies a create or update to a credential's flags and filters (spec 2.2 rules 1-6) and returns the resulting
 * settings or every rule broken. Duplicate filter entries are dropped (first occurrence kept).
 */
export function resolveCredentialWrite(input: CredentialWriteInput): CredentialWriteResult {
  const { patch } = input;
  const base: CredentialSettings = input.mode === 'update' && input.stored !== null ? input.stored : DEFAULT_SETTINGS;
  const violations: Violation[] = [];
  const next: CredentialSettings = { ...base };

  for (const flag of FLAG_FIELDS) {
    const v = patch[flag];
    if (v === undefined) continue;
    if (typeof v !== 'boolean') violations.push(violation(flag, 'invalid_type'));
    else next[flag] = v;
  }

  for (const field of FILTER_FIELDS) {
    const v = patch[field];
    if (v === undefined) continue;
    const shape = validateFilterShape(field, v);
    if (shape.length > 0) {
      violations.push(...shape);
      continue;
    }
    const list = v as string[] | null;
    if (field === 'allowed_api_key_hashes' && list !== null) {
      list.forEach((h, i) => {
        if (!input.liveApiKeyHashes.has(h)) violations.push(violation(`${field}[${i}]`, 'unknown_api_key_hash'));
      });
    }
    next[field] = list === null ? null : [...new Set(list)];
  }

  // Rule 6 holds within one request and against the stored value of the flag not sent.
  if (
    next.is_byok_only &&
    next.is_fallback &&
    !violations.some((x) => x.field === 'is_byok_only' || x.field === 'is_fallback')
  ) {
    violations.push(
      violation(
        patch.is_byok_only === true || patch.is_fallback !== true ? 'is_byok_only' : 'is_fallback',
        'byok_only_with_fallback',
      ),
    );
  }

  return violations.length === 0 ? { ok: true, settings: next } : { ok: false, violations };
}

/** CRD (camelCase) to wire names. */
export const SPEC_FIELD_NAMES: Readonly<Record<keyof CredentialSettings, string>> = Object.freeze({
  is_fallback: 'isFallback',
  is_required: 'isRequired',
  is_byok_only: 'isByokOnly',
  allowed_models: 'allowedModels',
  allowed_api_key_hashes: 'allowedApiKeyHashes',
  allowed_user_ids: 'allowedUserIds',
});

/** Reads the camelCase fields of a BYOKCredential spec as a patch (absent fields stay omitted). */
export function patchFromSpec(spec: Readonly<Record<string, unknown>>): CredentialPatch {
  const out: Record<string, unknown> = {};
  for (const [wire, camel] of Object.entries(SPEC_FIELD_NAMES)) {
    if (spec[camel] !== undefined) out[wire] = spec[camel];
  }
  return out as CredentialPatch;
}

/** Wire-named settings to the camelCase spec fields. */
export function specFromSettings(s: CredentialSettings): {
  isFallback: boolean;
  isRequired: boolean;
  isByokOnly: boolean;
  allowedModels: string[] | null;
  allowedApiKeyHashes: string[] | null;
  allowedUserIds: string[] | null;
} {
  return {
    isFallback: s.is_fallback,
    isRequired: s.is_required,
    isByokOnly: s.is_byok_only,
    allowedModels: s.allowed_models,
    allowedApiKeyHashes: s.allowed_api_key_hashes,
    allowedUserIds: s.allowed_user_ids,
  };
}

/** Field path of a violation in the CRD's camelCase (`allowed_models[2]` -> `allowedModels[2]`) for conditions. */
export function specFieldPath(field: string): string {
  const m = /^([a-z_]+)(.*)$/.exec(field);
  if (!m) return field;
  const camel = (SPEC_FIELD_NAMES as Record<string, string>)[m[1] ?? ''];
  return camel === undefined ? field : camel + (m[2] ?? '');
}
