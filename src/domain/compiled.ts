// The compiled routing state of one account: what the compiler writes, what gateway pods load, and what the
// route planner and budget checks read. Plain data, JSON-serialisable, no key material (payloads live in
// encrypted credential bundles and are referenced by credential id).
import type { ProviderSlug } from './providers.ts';

export type PlanName = 'pay-as-you-go' | 'enterprise';
export type BudgetInterval = 'daily' | 'weekly' | 'monthly' | 'lifetime';

export interface CompiledCredential {
  /** Public UUID (publicId('BYOKCredential', namespace, name)). */
  id: string;
  /** Kubernetes object name in the account namespace. */
  name: string;
  provider: ProviderSlug;
  /** Workspace public id; null = global to the account (not the default workspace). */
  workspaceId: string | null;
  label: string;
  displayName: string | null;
  disabled: boolean;
  isFallback: boolean;
  isRequired: boolean;
  isByokOnly: boolean;
  /** The credential's provider agreement declares zero data retention (routing rule 10 exception). */
  declaredZdr: boolean | null;
  allowedModels: string[] | null;
  allowedApiKeyHashes: string[] | null;
  allowedUserIds: string[] | null;
  sortOrder: number;
  createdAt: string;
}

export interface BudgetLimit {
  limitUsd: number;
  interval: BudgetInterval;
}

export interface CompiledGuardrail {
  id: string;
  name: string;
  /** null = no budget limit (then includeByokInBudgets has no effect, rule 12). */
  budget: { limitUsd: number; resetInterval: BudgetInterval; includeByokInBudgets: boolean } | null;
  dataPolicy: {
    requireZdr: boolean;
    denyDataCollection: boolean;
    /** null = every provider allowed. */
    allowedProviders: string[] | null;
    ignoredProviders: string[];
  };
}

export interface CompiledWorkspace {
  id: string;
  name: string;
  displayName: string | null;
  isDefault: boolean;
  budgets: BudgetLimit[];
  /** One flag for every interval of the workspace budget (rule 12). */
  includeByokInBudgets: boolean;
  defaultGuardrailId: string | null;
  members: { userId: string; guardrailId: string | null }[];
}

export interface CompiledApiKey {
  /** SHA-256 hex of the gateway API key (never the key). Only live keys are compiled. */
  hash: string;
  workspaceId: string | null;
  guardrailId: string | null;
  /** ISO 8601; the gateway re-checks expiry at request time. */
  expiresAt: string | null;
  /** User id of the member owning the key (the requesting member for allowed_user_ids); absent = no member. */
  owner?: string;
  /**
   * The GatewayAPIKey object's name: what its rate limits and its spend are counted under, the same for both secrets
   * of a rotation (two entries, two hashes, one name). Absent only in configs compiled before it existed.
   */
  name?: string;
  /** Models this key may request (sorted); absent = every model. */
  models?: string[];
  /** Rate limits counted across replicas in the ledger; absent = none. */
  limits?: KeyRateLimits;
}

/** A key's rate limits (GatewayAPIKey spec.limits); each absent = no limit. */
export interface KeyRateLimits {
  requestsPerMinute?: number;
  tokensPerMinute?: number;
  maxInFlight?: number;
}

export interface CompiledAccount {
  /** The account namespace. */
  namespace: string;
  accountId: string;
  plan: PlanName;
  privacy: { denyDataCollection: boolean; alwaysZdr: boolean };
  /** Sorted by provider, then section (prioritized first), then sortOrder, then id. */
  credentials: CompiledCredential[];
  workspaces: CompiledWorkspace[];
  guardrails: CompiledGuardrail[];
  apiKeys: CompiledApiKey[];
}
