// Stable error vocabulary of the domain core. The REST API puts these codes and messages in 400 bodies and the
// reconciler copies them into status conditions, so changing a string here is a wire change.

/** One rule broken by a credential write (spec 2.2). `field` uses the REST wire name, with an index for entries. */
export interface Violation {
  /** Wire (snake_case) path, e.g. `allowed_api_key_hashes[2]` or `is_byok_only`. */
  readonly field: string;
  readonly code: ViolationCode;
  readonly message: string;
}

export const VIOLATIONS = {
  too_many_entries: 'must contain at most 100 entries',
  empty_api_key_hashes: 'must contain at least one API key hash; send null to remove the restriction',
  malformed_api_key_hash: 'must be exactly 64 lowercase hexadecimal characters (the SHA-256 hash of a gateway API key)',
  unknown_api_key_hash: 'does not match a live API key of this account',
  invalid_entry: 'must be a non-empty string without leading or trailing whitespace',
  invalid_text:
    'must not contain control characters, Unicode line separators, noncharacters, unpaired surrogates or U+FFFD',
  malformed_model_slug: 'must be a model slug of the form <vendor>/<model>',
  invalid_type: 'has the wrong type',
  byok_only_with_fallback: 'is_byok_only=true cannot be combined with is_fallback=true',
} as const;

export type ViolationCode = keyof typeof VIOLATIONS;

export function violation(field: string, code: ViolationCode): Violation {
  return { field, code, message: VIOLATIONS[code] };
}

/** One problem with a provider key payload (spec 2.4). Messages never contain any part of the payload. */
export interface PayloadIssue {
  /** Path inside the payload: '' for the payload itself, `accessKeyId`, `[1].endpoint_url`. */
  readonly field: string;
  readonly message: string;
}

/** Why the planner could not produce any attempt. */
export const ROUTE_ERRORS = {
  model_not_in_catalog: 'the model has no endpoints in the gateway catalog',
  no_compliant_endpoint:
    'no endpoint complies with the data policies (request, account privacy settings and guardrails) for this model',
  no_available_endpoint:
    'no endpoint remains for this request after applying credentials, filters and provider restrictions',
} as const;

export type RouteErrorCode = keyof typeof ROUTE_ERRORS;

/** Renders payload issues as one line for an HTTP error message or a status condition, e.g. `key[1].endpoint_url ...`. */
export function describePayloadIssues(issues: readonly PayloadIssue[], root = 'key'): string {
  return issues
    .map(
      (i) => `${i.field === '' ? root : i.field.startsWith('[') ? root + i.field : `${root}.${i.field}`} ${i.message}`,
    )
    .join('; ');
}
