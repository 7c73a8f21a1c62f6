// Requests and accounts for the ledger tests (the compiled account shape the gateway hands the spend gate).
import { randomUUID } from 'node:crypto';
import type { FinishedRequest, SpendRequestContext } from '../../src/contract/spend-gate.ts';
import type { CompiledAccount, CompiledGuardrail, CompiledWorkspace } from '../../src/domain/index.ts';
import { account, guardrail, K1, K2, WS1, workspace } from './fixtures/domain.ts';

export const USD = 1_000_000;
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
