// The status vocabulary of the five kinds: condition types and the reasons they carry, as users see them in
// `kubectl get/describe/wait`, Events, the REST API's `status.reason` and the `byok_credential_ready` metric.
// The texts are a public contract (docs, runbooks, alerts and tests match on them): add, never rename.

/** metav1.Condition types written by the operator (status) and its health writer. */
export const ConditionType = {
  /** Every kind: the resource is valid (and, for credentials, compiled into routing). */
  Ready: 'Ready',
  /** BYOKCredential: spec.secretRef names an existing Secret that has the key. */
  SecretResolved: 'SecretResolved',
  /** BYOKCredential: the Secret's payload passes the provider's payload rules. */
  PayloadValid: 'PayloadValid',
  /** BYOKCredential: flags and filters pass the same rules as the REST API. */
  FiltersValid: 'FiltersValid',
  /** BYOKCredential: present (False) only while the credential is beyond its account's quota. */
  WithinQuota: 'WithinQuota',
  /** GatewayAPIKey: neither disabled nor expired (mirrors status.live). */
  Live: 'Live',
  /** Account: present (False) only while the compile pipeline holds the account's routing back. */
  Compiled: 'Compiled',
  /** BYOKCredential: what the gateway pods' attempts say about the provider (health writer). */
  UpstreamHealthy: 'UpstreamHealthy',
  /** BYOKCredential, Account and GatewayAPIKey: every gateway pod has loaded the current routing version (health writer). */
  Delivered: 'Delivered',
  /** BYOKCredential: present only with the export controller on: what the target (Envoy AI Gateway, agentgateway) keeps and drops. */
  Exported: 'Exported',
} as const;
export type ConditionType = (typeof ConditionType)[keyof typeof ConditionType];

/** Reasons carried by the conditions above (a failing condition's reason is also Ready's). */
export const ConditionReason = {
  Ready: 'Ready',
  // SecretResolved
  Resolved: 'Resolved',
  SecretNotFound: 'SecretNotFound',
  KeyNotFound: 'KeyNotFound',
  // PayloadValid and FiltersValid
  Valid: 'Valid',
  PayloadInvalid: 'PayloadInvalid',
  SecretNotResolved: 'SecretNotResolved',
  WorkspaceNotFound: 'WorkspaceNotFound',
  UnknownApiKeyHash: 'UnknownApiKeyHash',
  ConflictingFlags: 'ConflictingFlags',
  InvalidFilters: 'InvalidFilters',
  // WithinQuota
  QuotaExceeded: 'QuotaExceeded',
  // Ready of Workspace, GatewayAPIKey and Account
  Conflicting: 'Conflicting',
  GuardrailNotFound: 'GuardrailNotFound',
  /** BYOKCredential and GatewayAPIKey: the namespace has no Account, so nothing in it is compiled or routed. */
  AccountMissing: 'AccountMissing',
  /** GatewayAPIKey: no usable workspace (none named and no default Workspace, or the named one is missing). */
  NoWorkspace: 'NoWorkspace',
  // Live
  Live: 'Live',
  Disabled: 'Disabled',
  Expired: 'Expired',
  // Compiled (and Account Ready)
  Quarantined: 'Quarantined',
  // UpstreamHealthy
  Serving: 'Serving',
  Unauthorized: 'Unauthorized',
  RateLimited: 'RateLimited',
  UpstreamErrors: 'UpstreamErrors',
  Unused: 'Unused',
  Inconclusive: 'Inconclusive',
  // Delivered
  Delivered: 'Delivered',
  Pending: 'Pending',
  NoGateways: 'NoGateways',
  // Exported
  Exported: 'Exported',
  NotExported: 'NotExported',
} as const;
export type ConditionReason = (typeof ConditionReason)[keyof typeof ConditionReason];

type Status = 'True' | 'False' | 'Unknown';

/**
 * Which reasons each condition type carries, by status. Ready's False reasons are those of the conditions it
 * summarises (a credential's first failing condition) or its own (Workspace, GatewayAPIKey, Account).
 */
export const REASONS_BY_CONDITION = {
  Ready: {
    True: ['Ready'],
    False: [
      'SecretNotFound',
      'KeyNotFound',
      'PayloadInvalid',
      'WorkspaceNotFound',
      'UnknownApiKeyHash',
      'ConflictingFlags',
      'InvalidFilters',
      'QuotaExceeded',
      'Conflicting',
      'GuardrailNotFound',
      'NoWorkspace',
      'Quarantined',
      'AccountMissing',
    ],
  },
  SecretResolved: { True: ['Resolved'], False: ['SecretNotFound', 'KeyNotFound'] },
  PayloadValid: { True: ['Valid'], False: ['PayloadInvalid'], Unknown: ['SecretNotResolved'] },
  FiltersValid: {
    True: ['Valid'],
    False: ['WorkspaceNotFound', 'UnknownApiKeyHash', 'ConflictingFlags', 'InvalidFilters'],
  },
  WithinQuota: { False: ['QuotaExceeded'] },
  Live: { True: ['Live'], False: ['Disabled', 'Expired'] },
  Compiled: { False: ['Quarantined'] },
  UpstreamHealthy: {
    True: ['Serving'],
    False: ['Unauthorized', 'RateLimited', 'UpstreamErrors'],
    Unknown: ['Unused', 'Inconclusive'],
  },
  Delivered: { True: ['Delivered'], False: ['Pending'], Unknown: ['NoGateways'] },
  Exported: { True: ['Exported'], False: ['NotExported'] },
} as const satisfies Record<ConditionType, Partial<Record<Status, readonly ConditionReason[]>>>;

/** Event reasons beyond a failing condition's own reason (a Warning for Ready=False carries Ready's reason). */
export const EventReason = {
  /** Normal: the object became Ready. */
  Ready: 'Ready',
  /** Warning: the account's routing is held back (on the Account; on its credentials if it has no winning Account). */
  Quarantined: 'Quarantined',
  /** Normal: the account's routing is written again. */
  QuarantineLifted: 'QuarantineLifted',
  /** Warning: the object's status could not be written several times in a row. */
  StatusWriteFailed: 'StatusWriteFailed',
  /** Warning and Normal from the health writer when UpstreamHealthy changes. */
  UpstreamUnauthorized: 'UpstreamUnauthorized',
  UpstreamRateLimited: 'UpstreamRateLimited',
  UpstreamErrors: 'UpstreamErrors',
  UpstreamRecovered: 'UpstreamRecovered',
  /** Warning on an Account: a gateway pod has not loaded the current routing for long. */
  GatewayPodStale: 'GatewayPodStale',
  /** Warning on an Account: a gateway pod refused a delivery stream batch and lacks the account's current version. */
  DeliveryRefused: 'DeliveryRefused',
  /** Warning on an Account: the spend ledger lost its state. */
  LedgerReset: 'LedgerReset',
  /** Warning on a Guardrail or Workspace: its budget has reached its limit and refused requests (402); one throttled series per window. */
  BudgetExceeded: 'BudgetExceeded',
  /** Warning on a Guardrail or Workspace: requests that would need more than its budget has left were refused (402), the limit not reached. */
  RequestOverBudget: 'RequestOverBudget',
  /** Warning on the routing index ConfigMap: more gateway slots are needed than configured. */
  GatewaySlotsExceeded: 'GatewaySlotsExceeded',
} as const;
export type EventReason = (typeof EventReason)[keyof typeof EventReason] | ConditionReason;

/** Reasons the API doors and metrics show where no condition exists yet. */
export const PendingReason = {
  /** REST and aggregated `status.reason`: the operator has not reconciled the current generation. */
  Reconciling: 'Reconciling',
  /** `byok_credential_ready{reason}`: a credential without a Ready condition. */
  NotReconciled: 'NotReconciled',
} as const;
export type PendingReason = (typeof PendingReason)[keyof typeof PendingReason];

/** `reason` in the metadata of REST API errors (besides the HTTP status and code). */
export const ApiErrorReason = {
  QuotaExceeded: 'QuotaExceeded',
  IdempotencyKeyReused: 'IdempotencyKeyReused',
  IdempotencyKeyExpired: 'IdempotencyKeyExpired',
} as const;
export type ApiErrorReason = (typeof ApiErrorReason)[keyof typeof ApiErrorReason];

/** Why the compiler leaves a credential out of an account's routing (`credentialExclusion`, src/compiler/compile.ts). */
export const ExclusionReason = {
  NotValid: 'NotValid',
  NoPayload: 'NoPayload',
  FallbackAndByokOnly: 'FallbackAndByokOnly',
  WorkspaceNotFound: 'WorkspaceNotFound',
  ApiKeyHashNotLive: 'ApiKeyHashNotLive',
} as const;
export type ExclusionReason = (typeof ExclusionReason)[keyof typeof ExclusionReason];
