// What one finished request writes to the ledger, as plain data: its counter increments, the hold it settles, and
// what its BYOK fee is computed from. Computed once when the request finishes (the routing config of that moment),
// then journaled and applied, possibly by a later process: it never needs the config again.

import type { FinishedRequest } from '../../contract/spend-gate.ts';
import { budgetContributionMicros, budgetScopes } from '../../domain/budgets.ts';
import type { PlanName } from '../../domain/compiled.ts';
import { assertNonNegativeMicros, type Micros } from '../../domain/money.ts';
import type { CounterIncrement, HoldRelease } from '../ledger.ts';
import { INTERVALS, windowsAt } from '../windows.ts';
import type { GateKeyCache, ScopeKeys } from './key-cache.ts';

export interface SpendRecord {
  /** The request's generation id: the write's idempotency key. */
  id: string;
  /** For a BYOK request the first increment is the month's BYOK list cost: its new total gives the month-to-date. */
  increments: CounterIncrement[];
  /** The request's reservation, dropped in the same write. */
  settle?: HoldRelease;
  /** BYOK only: the fee is charged from the month-to-date before this request. */
  byok?: { plan: PlanName; listCostMicros: Micros; feeKey: string; feeExpiresAt: number | null };
  /** Shared capacity: what the gateway charged (the list cost); 0 for BYOK. */
  chargedMicros: Micros;
  /**
   * Journaled records only: a key of the account where the ledger keeps this id's landed mark until the journal
   * segment holding the record is deleted (set by the journal; docs/ledger.md, "Replays at any age").
   */
  keep?: string;
}

// Every window of every budget scope of the request gets both parts, whatever the scope's limits and flag are
// today: decideBudget applies include_byok_in_budgets at read time, and a limit added or an interval changed
// mid-window sees the spend already made in that window.
function budgetIncrements(
  req: FinishedRequest,
  cache: GateKeyCache,
  nonByok: Micros,
  byok: Micros,
): CounterIncrement[] {
  const windows = windowsAt(req.at);
  const { guardrails, workspace } = budgetScopes(req.account, req.who);
  const out: CounterIncrement[] = [];
  const add = (k: ScopeKeys) => {
    for (const interval of INTERVALS) {
      const w = k[interval];
      if (nonByok > 0) out.push({ key: w.nonbyok, by: nonByok, expiresAt: w.expiresAt });
      if (byok > 0) out.push({ key: w.byok, by: byok, expiresAt: w.expiresAt });
    }
  };
  for (const g of guardrails) add(cache.scope(req.account.accountId, 'guardrail', g, windows));
  if (workspace !== null) add(cache.scope(req.account.accountId, 'workspace', workspace, windows));
  return out;
}

export function spendRecordOf(req: FinishedRequest, cache: GateKeyCache): SpendRecord {
  const cost = req.listCostMicros;
  assertNonNegativeMicros(cost, 'list cost');
  const isByok = req.byokCredentialId !== null;
  // The part that counts against every budget, and the part that counts only where BYOK is included.
  const always = budgetContributionMicros({
    isByok,
    chargedMicros: cost,
    wouldHaveChargedMicros: cost,
    includeByokInBudgets: false,
  });
  const withFlag =
    budgetContributionMicros({
      isByok,
      chargedMicros: cost,
      wouldHaveChargedMicros: cost,
      includeByokInBudgets: true,
    }) - always;
  const acct = cache.account(req.account, windowsAt(req.at));
  const increments = budgetIncrements(req, cache, always, withFlag);
  const r = req.reservation;
  const settle = r && r.holdKeys.length > 0 ? { id: r.id, amount: r.amountMicros, holdKeys: r.holdKeys } : undefined;
  // The key's month (kubectl get gwkey), in the same atomic write as the budgets.
  if (req.keyName !== undefined && cost > 0)
    increments.push({
      key: cache.keys.keySpend(req.account.accountId, req.keyName, windowsAt(req.at).monthly),
      by: cost,
      expiresAt: acct.expiresAt,
    });
  const plan: SpendRecord = {
    id: req.generationId,
    increments,
    chargedMicros: isByok ? 0 : cost,
    ...(settle ? { settle } : {}),
  };
  if (!isByok) {
    increments.push({ key: acct.charged, by: cost, expiresAt: acct.expiresAt });
    return plan;
  }
  // The month's BYOK list cost first, atomically with the budget windows: the total it returns minus this request is
  // exactly the month-to-date before it, even with many replicas writing at once.
  increments.unshift({ key: acct.byokList, by: cost, expiresAt: acct.expiresAt });
  plan.byok = { plan: req.account.plan, listCostMicros: cost, feeKey: acct.fee, feeExpiresAt: acct.expiresAt };
  return plan;
}
