// Reading spend back: the totals of one budget scope in each current window, and an account's month. Shared by the
// spend gate (admit) and the operator's status writer, so both read the same keys the same way.
import { FREE_ALLOWANCE_MICROS } from '../domain/billing.ts';
import type { SpendSnapshot } from '../domain/budgets.ts';
import type { BudgetInterval, PlanName } from '../domain/compiled.ts';
import { MICROS_PER_USD, type Micros } from '../domain/money.ts';
import type { BudgetScopeKind, KeySpace } from './keys.ts';
import type { Ledger } from './ledger.ts';
import { windowOf } from './windows.ts';

/** Spend of one budget window: the domain's SpendSnapshot, as the ledger's counters hold it. */
export type WindowSpend = SpendSnapshot;

export interface AccountMonth {
  /** Calendar month (UTC), e.g. 2026-11. */
  month: string;
  byokListCostMicros: Micros;
  feesMicros: Micros;
  chargedMicros: Micros;
  freeAllowanceMicros: Micros;
  freeAllowanceRemainingMicros: Micros;
}

/** Exact decimal text of an amount of micros (usdToMicros reads it back unchanged). */
export function microsText(micros: Micros): string {
  const sign = micros < 0 ? '-' : '';
  const abs = Math.abs(micros);
  return `${sign}${Math.trunc(abs / MICROS_PER_USD)}.${String(abs % MICROS_PER_USD).padStart(6, '0')}`;
}

export interface ScopeRef {
  scope: BudgetScopeKind;
  id: string;
  intervals: readonly BudgetInterval[];
}

/** Spend of one budget window with the requests it refused (402) in that window: what the operator publishes. */
export interface WindowFigures extends WindowSpend {
  refused: number;
  /** Of `refused`, those refused before the limit was reached (keys.refusedOver). */
  refusedOver: number;
}

/** Spend of each scope's current windows, in one read. */
export function readWindows(
  ledger: Ledger,
  keys: KeySpace,
  accountId: string,
  scopes: readonly ScopeRef[],
  at: Date,
): Promise<Map<string, Partial<Record<BudgetInterval, WindowSpend>>>> {
  return readScopes(ledger, keys, accountId, scopes, at, false);
}

/** Spend and refusals (keys.refused, counted by ledger/refusals.ts) of each scope's current windows, in one read. */
export function readWindowFigures(
  ledger: Ledger,
  keys: KeySpace,
  accountId: string,
  scopes: readonly ScopeRef[],
  at: Date,
): Promise<Map<string, Partial<Record<BudgetInterval, WindowFigures>>>> {
  return readScopes(ledger, keys, accountId, scopes, at, true);
}

function readScopes(
  ledger: Ledger,
  keys: KeySpace,
  accountId: string,
  scopes: readonly ScopeRef[],
  at: Date,
  refusals: false,
): Promise<Map<string, Partial<Record<BudgetInterval, WindowSpend>>>>;
function readScopes(
  ledger: Ledger,
  keys: KeySpace,
  accountId: string,
  scopes: readonly ScopeRef[],
  at: Date,
  refusals: true,
): Promise<Map<string, Partial<Record<BudgetInterval, WindowFigures>>>>;
async function readScopes(
  ledger: Ledger,
  keys: KeySpace,
  accountId: string,
  scopes: readonly ScopeRef[],
  at: Date,
  refusals: boolean,
): Promise<Map<string, Partial<Record<BudgetInterval, WindowSpend | WindowFigures>>>> {
  const names: string[] = [];
  const stride = refusals ? 4 : 2;
  for (const s of scopes) {
    for (const interval of s.intervals) {
      const w = windowOf(interval, at);
      names.push(keys.budget(accountId, s.scope, s.id, w, 'nonbyok'), keys.budget(accountId, s.scope, s.id, w, 'byok'));
      if (refusals)
        names.push(keys.refused(accountId, s.scope, s.id, w), keys.refusedOver(accountId, s.scope, s.id, w));
    }
  }
  const values = await ledger.read(names);
  const out = new Map<string, Partial<Record<BudgetInterval, WindowSpend | WindowFigures>>>();
  let i = 0;
  for (const s of scopes) {
    const perInterval = out.get(`${s.scope}/${s.id}`) ?? {};
    for (const interval of s.intervals) {
      const spend: WindowSpend = { nonByokMicros: values[i] ?? 0, byokMicros: values[i + 1] ?? 0 };
      perInterval[interval] = refusals
        ? { ...spend, refused: values[i + 2] ?? 0, refusedOver: values[i + 3] ?? 0 }
        : spend;
      i += stride;
    }
    out.set(`${s.scope}/${s.id}`, perInterval);
  }
  return out;
}

export async function readAccountMonth(
  ledger: Ledger,
  keys: KeySpace,
  accountId: string,
  plan: PlanName,
  at: Date,
): Promise<AccountMonth> {
  const month = windowOf('monthly', at);
  const [byokList = 0, fees = 0, charged = 0] = await ledger.read([
    keys.account(accountId, month, 'byok_list'),
    keys.account(accountId, month, 'fee'),
    keys.account(accountId, month, 'charged'),
  ]);
  const allowance = FREE_ALLOWANCE_MICROS[plan];
  return {
    month: month.id.slice(1),
    byokListCostMicros: byokList,
    feesMicros: fees,
    chargedMicros: charged,
    freeAllowanceMicros: allowance,
    freeAllowanceRemainingMicros: Math.max(0, allowance - byokList),
  };
}
