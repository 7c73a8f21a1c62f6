// Requests and accounts for the ledger tests (the compiled account shape the gateway hands the spend gate).
import { randomUUID } from 'node:crypto';
import type { FinishedRequest, SpendRequestContext } from '../../src/contract/spend-gate.ts';
import type { CompiledAccount, CompiledGuardrail, CompiledWorkspace } from '../../src/domain/index.ts';
import { account, guardrail, K1, K2, WS1, workspace } from './fixtures/domain.ts';

export const USD = 1_000_000;

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

/**
 * Monday 10:00 UTC of the week 10 hours ago (so never ahead of the clock): the time the ledger tests meter at. Both
 * ledgers forget a window's counters by the clock, Redis by its own and the embedded one by `Date.now()`, a week
 * after the window ends. A calendar date therefore stops counting a week after it: counts written at 2026-11-23
 * vanished as they were written from 2026-12-01 on. This week's Monday keeps its windows, and the days after it
 * the tests step to, for at least a week from any run.
 */
export function ledgerMonday(now: number): Date {
  const shifted = now - 10 * HOUR_MS;
  const midnight = shifted - (shifted % DAY_MS);
  const sinceMonday = (new Date(midnight).getUTCDay() + 6) % 7;
  return new Date(midnight - sinceMonday * DAY_MS + 10 * HOUR_MS);
}

export const MONDAY = ledgerMonday(Date.now());

/** 00:00 UTC `days` after MONDAY's date, plus `ms` (negative: the last instants of the day before). */
export const afterMonday = (days: number, ms = 0): Date =>
  new Date(MONDAY.getTime() - 10 * HOUR_MS + days * DAY_MS + ms);

/** 00:00 UTC on the first day of the month `months` after MONDAY's. */
export const monthStart = (months: number): Date =>
  new Date(Date.UTC(MONDAY.getUTCFullYear(), MONDAY.getUTCMonth() + months, 1));
export { K1, K2, WS1 };

export function ledgerAccount(
  over: {
    guardrails?: CompiledGuardrail[];
    workspace?: Partial<CompiledWorkspace>;
    plan?: CompiledAccount['plan'];
    keyGuardrail?: string | null;
  } = {},
): CompiledAccount {
  const id = randomUUID();
  return account([], {
    namespace: `ns-${id.slice(0, 8)}`,
    accountId: id,
    plan: over.plan ?? 'pay-as-you-go',
    guardrails: over.guardrails ?? [],
    workspaces: [workspace(WS1, over.workspace ?? {})],
    apiKeys: [
      { hash: K1, workspaceId: WS1, guardrailId: over.keyGuardrail ?? null, expiresAt: null },
      { hash: K2, workspaceId: WS1, guardrailId: null, expiresAt: null },
    ],
  });
}

export function budgetGuardrail(
  id: string,
  limitUsd: number,
  resetInterval: 'daily' | 'weekly' | 'monthly' | 'lifetime',
  includeByokInBudgets: boolean,
): CompiledGuardrail {
  return guardrail(id, {}, { limitUsd, resetInterval, includeByokInBudgets });
}

export function ctx(
  acc: CompiledAccount,
  at: Date,
  apiKeyHash = K1,
  userId: string | null = 'u1',
): SpendRequestContext {
  return { account: acc, who: { apiKeyHash, workspaceId: WS1, userId }, at };
}

let n = 0;
export function finished(c: SpendRequestContext, listCostMicros: number, byok: boolean): FinishedRequest {
  n += 1;
  return {
    ...c,
    generationId: `gen-test-${n}`,
    model: 'acme/chat',
    endpointId: 'openai',
    provider: 'openai',
    byokCredentialId: byok ? 'cred-1' : null,
    promptTokens: 10,
    completionTokens: 20,
    listCostMicros,
  };
}
