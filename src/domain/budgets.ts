// Budget decisions (spec 1.1 rule 12): BYOK spend is left out of guardrail and workspace budgets unless the budget's
// include_byok_in_budgets flag is set, in which case what the gateway would have charged counts too.
// Amounts are integer micros throughout; limits come converted from the loaded account (see prepareAccount).
import {
  applicableGuardrails,
  type BudgetedGuardrail,
  type BudgetedWorkspace,
  type PreparedAccount,
  type PreparedGuardrail,
  type PreparedWorkspace,
  prepareAccount,
  type RequestIdentity,
} from './account.ts';
import type { BudgetInterval, CompiledAccount } from './compiled.ts';
import { assertNonNegativeMicros, type Micros } from './money.ts';

/** Spend recorded in the current window of one budget. */
export interface SpendSnapshot {
  /** Gateway charges of non-BYOK requests (always count). */
  nonByokMicros: Micros;
  /** What the gateway would have charged for the BYOK requests (their list cost); counts only with the flag. */
  byokMicros: Micros;
}

export interface BudgetDecisionInput {
  /** The request's guardrails (see applicableGuardrails), each with the spend of its current reset window. */
  guardrails: readonly { guardrail: BudgetedGuardrail; spend: SpendSnapshot }[];
  /** The request's workspace with the spend of each interval's current window; a missing interval counts as 0. */
  workspace: { workspace: BudgetedWorkspace; spend: Partial<Record<BudgetInterval, SpendSnapshot>> } | null;
}

export interface BudgetCheck {
  scope: 'guardrail' | 'workspace';
  /** Guardrail or workspace public id. */
  id: string;
  /** Its name (metadata.name), what a 402 shows. */
  name: string;
  interval: BudgetInterval;
  limitMicros: Micros;
  /** What counts against the limit: non-BYOK spend, plus BYOK would-have-charged when includesByok. */
  countedMicros: Micros;
  includesByok: boolean;
  /** The combined total has reached the limit. */
  blocked: boolean;
}

export interface BudgetDecision {
  allowed: boolean;
  /** One entry per budget with a limit, guardrails first, in input order. */
  checks: BudgetCheck[];
  /** The first blocking check, or null. */
  blockedBy: BudgetCheck | null;
}

function micros(m: Micros, what: string): Micros {
  assertNonNegativeMicros(m, what);
  return m;
}

function counted(spend: SpendSnapshot | undefined, includeByok: boolean): Micros {
  if (spend === undefined) return 0;
  const base = micros(spend.nonByokMicros, 'non-BYOK spend');
  return includeByok ? base + micros(spend.byokMicros, 'BYOK would-have-charged spend') : base;
}

/**
 * Whether a request may run under its budgets. A guardrail without a budget limit is not checked (its
 * include_byok_in_budgets has no effect); a budget blocks once its counted total has reached the limit.
 */
export function decideBudget(input: BudgetDecisionInput): BudgetDecision {
  const checks: BudgetCheck[] = [];
  for (const { guardrail, spend } of input.guardrails) {
    const b = guardrail.budget;
    if (b === null) continue;
    const limit = micros(b.limitMicros, 'budget limit');
    const total = counted(spend, b.includeByokInBudgets);
    checks.push({
      scope: 'guardrail',
      id: guardrail.id,
      name: guardrail.name,
      interval: b.resetInterval,
      limitMicros: limit,
      countedMicros: total,
      includesByok: b.includeByokInBudgets,
      blocked: total >= limit,
    });
  }
  if (input.workspace !== null) {
    const { workspace, spend } = input.workspace;
    // One flag for every interval of the workspace budget.
    for (const b of workspace.budgets) {
      const limit = micros(b.limitMicros, 'budget limit');
      const total = counted(spend[b.interval], workspace.includeByokInBudgets);
      checks.push({
        scope: 'workspace',
        id: workspace.id,
        name: workspace.name,
        interval: b.interval,
        limitMicros: limit,
        countedMicros: total,
        includesByok: workspace.includeByokInBudgets,
        blocked: total >= limit,
      });
    }
  }
  const blockedBy = checks.find((c) => c.blocked) ?? null;
  return { allowed: blockedBy === null, checks, blockedBy };
}

/**
 * What one finished request adds to a budget's counted total: the gateway charge for a non-BYOK request; for a BYOK
 * request the would-have-charged amount (list cost) when the budget includes BYOK, else nothing (the 5% fee is part
 * of BYOK spend and is excluded with it).
 */
export function budgetContributionMicros(input: {
  isByok: boolean;
  /** The gateway charge of a non-BYOK request. */
  chargedMicros: Micros;
  /** List cost of the same model and provider, i.e. what the gateway would have charged. */
  wouldHaveChargedMicros: Micros;
  includeByokInBudgets: boolean;
}): Micros {
  if (!input.isByok) return micros(input.chargedMicros, 'charge');
  return input.includeByokInBudgets ? micros(input.wouldHaveChargedMicros, 'would-have-charged amount') : 0;
}

/** The budgets a request is subject to: its guardrails (see applicableGuardrails) and its workspace. */
export function budgetScopes(
  account: CompiledAccount | PreparedAccount,
  who: RequestIdentity,
): { guardrails: PreparedGuardrail[]; workspace: PreparedWorkspace | null } {
  const acc = prepareAccount(account);
  const g = applicableGuardrails(acc, who);
  const guardrails: PreparedGuardrail[] = [];
  if (g.apiKey !== null) guardrails.push(g.apiKey);
  if (g.member !== null) guardrails.push(g.member);
  return { guardrails, workspace: acc.workspaces.get(who.workspaceId) ?? null };
}

const WINDOW_WORDS: Record<BudgetInterval, string> = {
  daily: "today's (UTC) daily budget",
  weekly: "this week's (UTC, from Monday) weekly budget",
  monthly: "this month's (UTC) monthly budget",
  lifetime: 'the lifetime budget',
};

/** A budget window in words for people (402 bodies, Events), never the ledger's window id: `today's (UTC) daily budget`. */
export function budgetWindowWords(interval: BudgetInterval): string {
  return WINDOW_WORDS[interval];
}

/** When a budget window starts over, in words: `it resets at 2026-11-29T00:00:00Z`, or that a lifetime budget never does. */
export function budgetResetWords(endsAt: number | null): string {
  return endsAt === null
    ? 'a lifetime budget never resets'
    : `it resets at ${new Date(endsAt).toISOString().replace('.000Z', 'Z')}`;
}
