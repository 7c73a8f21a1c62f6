// The rules that decide a BYOKCredential's conditions, as an ordered chain of pure checks over what the
// reconcile gathered (cert-manager's readiness policy chain is the model). Each check either passes (undefined)
// or returns the failing condition. A condition's first failing check stands; a condition whose prerequisite
// failed is Unknown; Ready carries the first failing condition in status order, which is the chain's order.
// No I/O here: the reconcile gathers, this decides, the status writer writes.

import { overQuota } from '../../compiler/elect.ts';
import { accountMissingMessage } from '../../compiler/gate.ts';
import {
  describePayloadIssues,
  type EgressAllowList,
  maskLabel,
  patchFromSpec,
  resolveCredentialWrite,
  specFieldPath,
  type Violation,
  validatePayload,
} from '../../domain/index.ts';
import { quotaMessage } from '../../domain/quota.ts';
import { bytesIssue } from '../../domain/text.ts';
import { ConditionReason as R, ConditionType as T } from '../../schema/conditions.ts';
import type { BYOKCredential } from '../../schema/generated/types.ts';
import { type CatalogCondition, type DesiredCondition, readyFrom } from '../conditions.ts';

/** The conditions a credential's reconcile decides, in the order status lists them (after Ready). */
export const CREDENTIAL_CONDITIONS = [T.WithinQuota, T.SecretResolved, T.PayloadValid, T.FiltersValid] as const;
export type CredentialConditionType = (typeof CREDENTIAL_CONDITIONS)[number];
export type CredentialCondition = CatalogCondition<CredentialConditionType>;

/** The referenced Secret's value under the credential's key. */
export interface SecretValue {
  /** The stored bytes (base64-decoded `data`, or UTF-8 of `stringData`). */
  bytes: Uint8Array;
  /** The same value decoded as UTF-8. */
  text: string;
}

/** What the reconcile gathered from the caches (and at most one GET) before deciding. */
export interface CredentialFacts {
  namespace: string;
  name: string;
  spec: BYOKCredential['spec'];
  /** spec.secretRef.key, or the default key. */
  secretKey: string;
  /** undefined: no such Secret; `{ value: undefined }`: the Secret has no such key. */
  secret: { value: SecretValue | undefined } | undefined;
  /** The referenced API-key hashes that resolve to a live GatewayAPIKey of this namespace. */
  liveApiKeyHashes: ReadonlySet<string>;
  /** Whether spec.workspace names an existing Workspace (true when it names none). */
  workspaceExists: boolean;
  /** Whether the namespace holds an Account: without one nothing in it is compiled (src/compiler/gate.ts). */
  accountExists: boolean;
  /** The namespace's credentials (this one included) and its account's credential limit. */
  quota: { credentials: readonly Pick<BYOKCredential, 'metadata'>[]; limit: number };
  /** What tenant URLs in payloads may point at beyond the egress policy. */
  egress?: EgressAllowList;
}

/** One rule: undefined when it passes (or does not apply), else the condition it fails with. */
export interface CredentialCheck {
  /** What is checked, for tests and logs (e.g. "secret found"). */
  readonly name: string;
  readonly condition: CredentialConditionType;
  readonly run: (facts: CredentialFacts) => CredentialCondition | undefined;
}

const failed = (type: CredentialConditionType, reason: R, message: string): CredentialCondition => ({
  type,
  status: 'False',
  reason,
  message,
});

// ---- the checks, in chain order ----

/** The oldest `limit` credentials of the namespace (REST and Git together) are compiled; newer ones wait. */
export function withinQuota(f: CredentialFacts): CredentialCondition | undefined {
  const { credentials, limit } = f.quota;
  if (!overQuota(credentials, limit).has(f.name)) return undefined;
  return failed(T.WithinQuota, R.QuotaExceeded, quotaMessage(credentials.length, limit));
}

export function secretFound(f: CredentialFacts): CredentialCondition | undefined {
  if (f.secret) return undefined;
  return failed(
    T.SecretResolved,
    R.SecretNotFound,
    `Secret "${f.spec.secretRef.name}" not found in namespace ${f.namespace}`,
  );
}

export function keyPresent(f: CredentialFacts): CredentialCondition | undefined {
  if (!f.secret || f.secret.value) return undefined;
  return failed(T.SecretResolved, R.KeyNotFound, `Secret "${f.spec.secretRef.name}" has no key "${f.secretKey}"`);
}

/** Invalid UTF-8 would be decoded to U+FFFD silently: the key used would differ from the one stored. */
export function payloadIsText(f: CredentialFacts): CredentialCondition | undefined {
  const value = f.secret?.value;
  const issue = value ? bytesIssue(value.bytes) : null;
  if (!issue) return undefined;
  return failed(T.PayloadValid, R.PayloadInvalid, describePayloadIssues([{ field: '', message: issue.message }]));
}

/** The provider's payload rules (the message names fields and positions, never values). */
export function payloadValid(f: CredentialFacts): CredentialCondition | undefined {
  const value = f.secret?.value;
  if (!value) return undefined;
  const result = validatePayload(f.spec.provider, value.text, f.egress ? { egress: f.egress } : {});
  if (result.ok) return undefined;
  return failed(T.PayloadValid, R.PayloadInvalid, describePayloadIssues(result.errors));
}

export function workspaceFound(f: CredentialFacts): CredentialCondition | undefined {
  if (!f.spec.workspace || f.workspaceExists) return undefined;
  return failed(
    T.FiltersValid,
    R.WorkspaceNotFound,
    `Workspace "${f.spec.workspace}" not found in namespace ${f.namespace}`,
  );
}

function violationReason(v: Violation): R {
  switch (v.code) {
    case 'unknown_api_key_hash':
      return R.UnknownApiKeyHash;
    case 'byok_only_with_fallback':
      return R.ConflictingFlags;
    default:
      return R.InvalidFilters;
  }
}

/** Flags and filters, with the same rules (codes and messages) as the REST API; the first violation names the reason. */
export function filtersValid(f: CredentialFacts): CredentialCondition | undefined {
  const write = resolveCredentialWrite({
    mode: 'create',
    stored: null,
    patch: patchFromSpec(f.spec as unknown as Record<string, unknown>),
    liveApiKeyHashes: f.liveApiKeyHashes,
  });
  if (write.ok) return undefined;
  const message = write.violations.map((v) => `${specFieldPath(v.field)}: ${v.message}`).join('; ');
  return failed(T.FiltersValid, violationReason(write.violations[0]!), message);
}

/** The chain. Its order is the status order of the conditions, so its first failure is Ready's reason. */
export const CREDENTIAL_CHECKS: readonly CredentialCheck[] = [
  { name: 'within quota', condition: T.WithinQuota, run: withinQuota },
  { name: 'secret found', condition: T.SecretResolved, run: secretFound },
  { name: 'key present', condition: T.SecretResolved, run: keyPresent },
  { name: 'payload is UTF-8 text', condition: T.PayloadValid, run: payloadIsText },
  { name: 'payload valid', condition: T.PayloadValid, run: payloadValid },
  { name: 'workspace found', condition: T.FiltersValid, run: workspaceFound },
  { name: 'filters valid', condition: T.FiltersValid, run: filtersValid },
];

/** A condition that cannot be judged while another one fails. */
const PREREQUISITE: Partial<
  Record<CredentialConditionType, { needs: CredentialConditionType; unknown: CredentialCondition }>
> = {
  PayloadValid: {
    needs: T.SecretResolved,
    unknown: {
      type: T.PayloadValid,
      status: 'Unknown',
      reason: R.SecretNotResolved,
      message: 'the Secret is not resolved',
    },
  },
};

/** The condition when every check of its type passed; WithinQuota is shown only when it fails. */
function passed(type: CredentialConditionType, f: CredentialFacts): CredentialCondition | undefined {
  switch (type) {
    case T.WithinQuota:
      return undefined;
    case T.SecretResolved:
      return {
        type,
        status: 'True',
        reason: R.Resolved,
        message: `Secret "${f.spec.secretRef.name}" key "${f.secretKey}"`,
      };
    case T.PayloadValid:
      return { type, status: 'True', reason: R.Valid, message: `valid ${f.spec.provider} payload` };
    case T.FiltersValid:
      return { type, status: 'True', reason: R.Valid, message: 'flags and filters are valid' };
  }
}

export const CREDENTIAL_READY_MESSAGE = 'the credential is valid';

export interface CredentialEvaluation {
  ready: DesiredCondition<typeof T.Ready, R>;
  /** The conditions after Ready, in status order. */
  conditions: CredentialCondition[];
  /** PayloadValid is True: the payload may be compiled. */
  payloadValid: boolean;
  /** The masked label of a valid payload (the only trace of the key in status). */
  label: string | undefined;
  overQuota: boolean;
}

/** Run the chain over the gathered facts. */
export function evaluateCredential(
  f: CredentialFacts,
  checks: readonly CredentialCheck[] = CREDENTIAL_CHECKS,
): CredentialEvaluation {
  const failures = new Map<CredentialConditionType, CredentialCondition>();
  for (const check of checks) {
    if (failures.has(check.condition)) continue;
    const pre = PREREQUISITE[check.condition];
    if (pre && failures.has(pre.needs)) {
      failures.set(check.condition, pre.unknown);
      continue;
    }
    const failure = check.run(f);
    if (failure) failures.set(check.condition, failure);
  }
  const conditions = CREDENTIAL_CONDITIONS.flatMap((type) => failures.get(type) ?? passed(type, f) ?? []);
  const payloadOk = !failures.has(T.PayloadValid) && !failures.has(T.SecretResolved);
  const value = f.secret?.value;
  // The gate outranks the chain: the other conditions still say what else is wrong, but nothing here is compiled.
  const ready: CredentialEvaluation['ready'] = f.accountExists
    ? readyFrom(conditions, CREDENTIAL_READY_MESSAGE)
    : {
        type: T.Ready,
        status: 'False',
        reason: R.AccountMissing,
        message: accountMissingMessage(f.namespace, 'credential'),
      };
  return {
    ready,
    conditions,
    payloadValid: payloadOk,
    label: payloadOk && value ? maskLabel(f.spec.provider, value.text) : undefined,
    overQuota: failures.has(T.WithinQuota),
  };
}
