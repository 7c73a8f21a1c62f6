// The figures the spend writer publishes, computed from the ledger's window counters and the compiled budgets:
// pure, no I/O. A window's "blocked" comes from decideBudget, the one definition the gateway also uses.

import type { PreparedGuardrail, PreparedWorkspace } from '../../domain/account.ts';
import { decideBudget } from '../../domain/budgets.ts';
import type { BudgetInterval } from '../../domain/compiled.ts';
import { type Micros, microsToUsd } from '../../domain/money.ts';
import type { WindowFigures } from '../../ledger/spend-view.ts';
import { INTERVALS, windowOf } from '../../ledger/windows.ts';
import type { BudgetEvents, BudgetRefusals } from './budget-events.ts';

export interface SpendWindowStatus {
  interval: BudgetInterval;
  window: string;
  limitUsd?: number;
  nonByokUsd: number;
  byokUsd: number;
  countedUsd: number;
  blocked: boolean;
  /** RFC 3339; absent for lifetime. */
  resetsAt?: string;
  /** Requests this budget refused (402) in the window; absent when none. */
  refusedRequests?: number;
  /** Of those, the ones refused before the limit was reached; absent when none. */
  overBudgetRequests?: number;
}

export const ZERO: WindowFigures = { nonByokMicros: 0, byokMicros: 0, refused: 0, refusedOver: 0 };

/** A budget limit as configured (what status shows) and in micros (what decides), converted once per compile. */
interface Limit {
  usd: number;
  micros: Micros;
}

function windowStatus(
  interval: BudgetInterval,
  at: Date,
  spend: WindowFigures,
  limit: Limit | undefined,
  includeByok: boolean,
): SpendWindowStatus {
  const counted = spend.nonByokMicros + (includeByok ? spend.byokMicros : 0);
  // decideBudget is the one definition of "blocked" (counted total has reached the limit).
  const blocked =
    limit !== undefined &&
    decideBudget({
      guardrails: [],
      workspace: {
        workspace: {
          id: '',
          name: '',
          budgets: [{ interval, limitMicros: limit.micros }],
          includeByokInBudgets: includeByok,
        },
        spend: { [interval]: spend },
      },
    }).blockedBy !== null;
  const window = windowOf(interval, at);
  return {
    interval,
    window: window.id,
    ...(window.endsAt !== null ? { resetsAt: new Date(window.endsAt).toISOString() } : {}),
    ...(limit !== undefined ? { limitUsd: limit.usd } : {}),
    nonByokUsd: microsToUsd(spend.nonByokMicros),
    byokUsd: microsToUsd(spend.byokMicros),
    countedUsd: microsToUsd(counted),
    blocked,
    ...(spend.refused > 0 ? { refusedRequests: spend.refused } : {}),
    ...(spend.refusedOver > 0 ? { overBudgetRequests: Math.min(spend.refusedOver, spend.refused) } : {}),
  };
}

/** A Guardrail's status.spend: its budget window. */
export function guardrailSpend(
  g: PreparedGuardrail,
  at: Date,
  spend: Partial<Record<BudgetInterval, WindowFigures>> | undefined,
): { window: SpendWindowStatus; includeByokInBudgets: boolean; blocked: boolean } {
  const interval = g.budget?.resetInterval ?? 'monthly';
  const include = g.budget?.includeByokInBudgets ?? false;
  const limit =
    g.budget !== null && g.source.budget !== null
      ? { usd: g.source.budget.limitUsd, micros: g.budget.limitMicros }
      : undefined;
  const window = windowStatus(interval, at, spend?.[interval] ?? ZERO, limit, include);
  return { window, includeByokInBudgets: include, blocked: window.blocked };
}

/** A Workspace's status.spend: every interval, limited or not. */
export function workspaceSpend(
  ws: PreparedWorkspace,
  at: Date,
  spend: Partial<Record<BudgetInterval, WindowFigures>> | undefined,
): { includeByokInBudgets: boolean; blocked: boolean; windows: SpendWindowStatus[] } {
  const limits = new Map(
    ws.budgets.map((b, i) => [b.interval, { usd: ws.source.budgets[i]!.limitUsd, micros: b.limitMicros }]),
  );
  const windows = INTERVALS.map((i) => windowStatus(i, at, spend?.[i] ?? ZERO, limits.get(i), ws.includeByokInBudgets));
  return { includeByokInBudgets: ws.includeByokInBudgets, blocked: windows.some((w) => w.blocked), windows };
}

export type BudgetObject = { metadata: { uid?: string; name?: string; namespace?: string }; status?: unknown };

/**
 * Hands the refusal counter of each limited window to the Event writer (operator/spend/budget-events.ts), with what
 * status.spend last mirrored for the same window: the base a new leader counts from.
 */
export function observeRefusals(
  events: BudgetEvents | undefined,
  kind: BudgetRefusals['regarding']['kind'],
  obj: BudgetObject,
  windows: readonly SpendWindowStatus[],
  stored: readonly unknown[],
  includesByok: boolean,
  at: Date,
): void {
  const uid = obj.metadata.uid;
  if (!events || !uid) return;
  for (const w of windows) {
    if (w.limitUsd === undefined) continue;
    const before = stored.find(
      (s): s is Partial<SpendWindowStatus> =>
        typeof s === 'object' &&
        s !== null &&
        (s as SpendWindowStatus).interval === w.interval &&
        (s as SpendWindowStatus).window === w.window,
    );
    const base = {
      regarding: { kind, namespace: obj.metadata.namespace ?? '', name: obj.metadata.name ?? '', uid },
      interval: w.interval,
      window: { id: w.window, endsAt: windowOf(w.interval, at).endsAt },
      limitUsd: w.limitUsd,
      includesByok,
    };
    // Two series per window: the limit reached (all refusals but the over-budget ones), and requests too large for what was left.
    const over = w.overBudgetRequests ?? 0;
    const overBefore = before === undefined ? undefined : (before.overBudgetRequests ?? 0);
    events.observe(
      {
        ...base,
        reason: 'reached',
        refused: (w.refusedRequests ?? 0) - over,
        mirrored: before === undefined ? undefined : (before.refusedRequests ?? 0) - (overBefore ?? 0),
      },
      at,
    );
    events.observe({ ...base, reason: 'over', refused: over, mirrored: overBefore }, at);
  }
}

/** A stored status.spend without updatedAt: what a pass compares with. */
export const withoutTimestamp = (spend: unknown): unknown => {
  if (spend === null || typeof spend !== 'object') return spend;
  const { updatedAt: _updatedAt, ...rest } = spend as Record<string, unknown>;
  return rest;
};
