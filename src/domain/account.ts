// Per-account indexes for the planner and budget checks, built once per compiled account (prepareAccount), and the
// resolution of which guardrails govern a request.
import { PROVIDER_INDEX } from './catalog.ts';
import type {
  BudgetInterval,
  CompiledAccount,
  CompiledApiKey,
  CompiledCredential,
  CompiledGuardrail,
  CompiledWorkspace,
} from './compiled.ts';
import { assertNonNegativeMicros, type Micros, usdToMicros } from './money.ts';
import type { ProviderSlug } from './providers.ts';

export interface PreparedCredential {
  readonly source: CompiledCredential;
  readonly id: string;
  readonly provider: ProviderSlug;
  readonly providerIdx: number;
  /** Position in PreparedAccount.credentials. */
  readonly pos: number;
  // Hot fields copied from the source so the planner reads one object shape.
  readonly workspaceId: string | null;
  readonly disabled: boolean;
  readonly isFallback: boolean;
  readonly isRequired: boolean;
  readonly isByokOnly: boolean;
  readonly declaredZdr: boolean;
  readonly models: ReadonlySet<string> | null;
  readonly hashes: ReadonlySet<string> | null;
  readonly users: ReadonlySet<string> | null;
  /** Frozen plan objects, cached so a plan allocates almost nothing. */
  readonly subject: { readonly kind: 'credential'; readonly credentialId: string };
  readonly exclusions: unknown[];
  /** Attempt objects for the endpoints of the model last planned (keyed by that model's index object). */
  attemptsFor: unknown;
  attempts: unknown[];
}

export interface PreparedProviderGroup {
  readonly provider: ProviderSlug;
  readonly providerIdx: number;
  /** Ascending sort_order, then id. */
  readonly prioritized: readonly PreparedCredential[];
  readonly fallback: readonly PreparedCredential[];
}

/** A guardrail as budget checks read it: its limit in micros (converted once, when the account is prepared). */
export interface BudgetedGuardrail {
  readonly id: string;
  readonly name: string;
  /** null = no budget limit. */
  readonly budget: {
    readonly limitMicros: Micros;
    readonly resetInterval: BudgetInterval;
    readonly includeByokInBudgets: boolean;
  } | null;
}

/** A workspace as budget checks read it: one limit in micros per interval that has one. */
export interface BudgetedWorkspace {
  readonly id: string;
  readonly name: string;
  readonly budgets: readonly { readonly interval: BudgetInterval; readonly limitMicros: Micros }[];
  readonly includeByokInBudgets: boolean;
}

export interface PreparedGuardrail extends BudgetedGuardrail {
  readonly source: CompiledGuardrail;
  readonly allowed: ReadonlySet<string> | null;
  readonly ignored: ReadonlySet<string>;
  /** Per-endpoint verdicts (1 = blocked) for the model last planned, keyed by that model's index object. */
  blockedFor: unknown;
  blocked: Uint8Array;
}

export interface PreparedWorkspace extends BudgetedWorkspace {
  readonly source: CompiledWorkspace;
  /** userId -> the member's own guardrail id (null = none, the workspace default applies). */
  readonly members: ReadonlyMap<string, string | null>;
}

export interface PreparedAccount {
  readonly prepared: true;
  readonly account: CompiledAccount;
  readonly credentials: readonly PreparedCredential[];
  readonly groups: readonly PreparedProviderGroup[];
  readonly apiKeys: ReadonlyMap<string, CompiledApiKey>;
  readonly workspaces: ReadonlyMap<string, PreparedWorkspace>;
  readonly guardrails: ReadonlyMap<string, PreparedGuardrail>;
}

const cache = new WeakMap<CompiledAccount, PreparedAccount>();

/**
 * Indexes a compiled account for planning. The result is cached per account object, so passing the same
 * CompiledAccount to planRoute repeatedly costs one WeakMap lookup; treat the account as immutable afterwards.
 */
export function prepareAccount(account: CompiledAccount | PreparedAccount): PreparedAccount {
  if (isPrepared(account)) return account;
  const hit = cache.get(account);
  if (hit) return hit;
  const credentials: PreparedCredential[] = account.credentials.map((c, pos) => ({
    source: c,
    id: c.id,
    provider: c.provider,
    providerIdx: PROVIDER_INDEX.get(c.provider) ?? -1,
    pos,
    workspaceId: c.workspaceId,
    disabled: c.disabled,
    isFallback: c.isFallback,
    isRequired: c.isRequired,
    isByokOnly: c.isByokOnly,
    declaredZdr: c.declaredZdr === true,
    models: c.allowedModels === null ? null : new Set(c.allowedModels),
    hashes: c.allowedApiKeyHashes === null ? null : new Set(c.allowedApiKeyHashes),
    users: c.allowedUserIds === null ? null : new Set(c.allowedUserIds),
    subject: Object.freeze({ kind: 'credential' as const, credentialId: c.id }),
    exclusions: [],
    attemptsFor: undefined,
    attempts: [],
  }));
  const byProvider = new Map<ProviderSlug, PreparedCredential[]>();
  for (const c of credentials) {
    const list = byProvider.get(c.provider);
    if (list) list.push(c);
    else byProvider.set(c.provider, [c]);
  }
  const order = (a: PreparedCredential, b: PreparedCredential): number =>
    a.source.sortOrder - b.source.sortOrder || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
  const groups: PreparedProviderGroup[] = [...byProvider.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([provider, list]) => ({
      provider,
      providerIdx: PROVIDER_INDEX.get(provider) ?? -1,
      prioritized: list.filter((c) => !c.source.isFallback).sort(order),
      fallback: list.filter((c) => c.source.isFallback).sort(order),
    }));
  const prepared: PreparedAccount = {
    prepared: true,
    account,
    credentials,
    groups,
    apiKeys: new Map(account.apiKeys.map((k) => [k.hash, k])),
    workspaces: new Map(account.workspaces.map((w) => [w.id, prepareWorkspace(w)])),
    guardrails: new Map(account.guardrails.map((g) => [g.id, prepareGuardrail(g)])),
  };
  cache.set(account, prepared);
  return prepared;
}

/**
 * A budget limit in micros. One beyond the exact range (over ~9 billion USD) becomes NaN rather than throwing here:
 * the budget checks that read it refuse it (assertNonNegativeMicros), and planning the account's other requests
 * is unaffected.
 */
function limitMicros(limitUsd: number): Micros {
  try {
    const m = usdToMicros(limitUsd);
    assertNonNegativeMicros(m, 'budget limit');
    return m;
  } catch {
    return Number.NaN;
  }
}

/** A compiled guardrail indexed for planning and budget checks (its limit in micros). */
export function prepareGuardrail(g: CompiledGuardrail): PreparedGuardrail {
  return {
    source: g,
    id: g.id,
    name: g.name,
    budget:
      g.budget === null
        ? null
        : {
            limitMicros: limitMicros(g.budget.limitUsd),
            resetInterval: g.budget.resetInterval,
            includeByokInBudgets: g.budget.includeByokInBudgets,
          },
    allowed: g.dataPolicy.allowedProviders === null ? null : new Set(g.dataPolicy.allowedProviders),
    ignored: new Set(g.dataPolicy.ignoredProviders),
    blockedFor: undefined,
    blocked: new Uint8Array(0),
  };
}

/** A compiled workspace indexed for guardrail resolution and budget checks (its limits in micros). */
export function prepareWorkspace(w: CompiledWorkspace): PreparedWorkspace {
  return {
    source: w,
    id: w.id,
    name: w.name,
    budgets: w.budgets.map((b) => ({ interval: b.interval, limitMicros: limitMicros(b.limitUsd) })),
    includeByokInBudgets: w.includeByokInBudgets,
    members: new Map(w.members.map((m) => [m.userId, m.guardrailId])),
  };
}

export function isPrepared(account: CompiledAccount | PreparedAccount): account is PreparedAccount {
  return (account as PreparedAccount).prepared === true;
}

export interface RequestIdentity {
  apiKeyHash: string;
  workspaceId: string;
  userId: string | null;
}

/** The guardrails governing a request, as found by {@link applicableGuardrails}. */
export interface ApplicableGuardrails {
  /** The API key's guardrail. */
  readonly apiKey: PreparedGuardrail | null;
  /** The member's own guardrail, or else the workspace default guardrail. */
  readonly member: PreparedGuardrail | null;
  /** Whether `member` is the workspace default guardrail (a member without a guardrail of their own). */
  readonly memberIsWorkspaceDefault: boolean;
}

/**
 * Guardrail precedence: the member's own guardrail replaces the workspace default guardrail for that member (a
 * default applies when nothing more specific is set); the API key's guardrail applies on top. All applicable
 * guardrails are enforced together: data policies combine to the most restrictive, and every budget must pass.
 * A guardrail id that does not resolve is ignored (the compiler only emits valid references).
 */
export function applicableGuardrails(account: PreparedAccount, who: RequestIdentity): ApplicableGuardrails {
  const key = account.apiKeys.get(who.apiKeyHash);
  const apiKey = key?.guardrailId != null ? (account.guardrails.get(key.guardrailId) ?? null) : null;
  const ws = account.workspaces.get(who.workspaceId);
  let member: PreparedGuardrail | null = null;
  let isDefault = false;
  if (ws !== undefined) {
    const own = who.userId === null ? undefined : ws.members.get(who.userId);
    if (own != null) member = account.guardrails.get(own) ?? null;
    if (member === null && ws.source.defaultGuardrailId !== null) {
      member = account.guardrails.get(ws.source.defaultGuardrailId) ?? null;
      isDefault = member !== null;
    }
  }
  if (member !== null && apiKey !== null && member.source.id === apiKey.source.id) {
    member = null;
    isDefault = false;
  }
  return { apiKey, member, memberIsWorkspaceDefault: isDefault };
}

/** The distinct guardrails of a request as a list (API key's first). */
export function resolveGuardrails(
  account: CompiledAccount | PreparedAccount,
  who: RequestIdentity,
): CompiledGuardrail[] {
  const g = applicableGuardrails(prepareAccount(account), who);
  const out: CompiledGuardrail[] = [];
  if (g.apiKey) out.push(g.apiKey.source);
  if (g.member) out.push(g.member.source);
  return out;
}
