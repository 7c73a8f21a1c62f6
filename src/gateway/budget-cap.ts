// Requests under a budget that is smaller than their longest answer (docs/ledger.md, "Requests without max_tokens"):
// the answer a request without max_tokens is capped to, the field that carries the cap upstream, and the 402's words.
// The cap is computed from what the ledger granted in its atomic check-and-reserve, never from a read before it, so
// concurrent capped requests together still never pass a limit. Pure: no I/O, no clock.

import { budgetResetWords, budgetWindowWords } from '../domain/budgets.ts';
import type { BudgetCheck, Micros } from '../domain/index.ts';
import { microsToUsd } from '../domain/money.ts';

/** The least answer a request without max_tokens is served with; below it, a 402 (a few tokens are no answer). */
export const MIN_CAPPED_TOKENS = 16;
/**
 * The share of a budget's room a request without max_tokens is granted when the room cannot cover its longest answer:
 * half, so the requests of an app that calls in parallel are each served (each leaves half for the next) instead of
 * the first holding all that is left while the rest get 402s. A lone request still gets half of what is left.
 */
export const CAPPED_SHARE = 0.5;
/** Response header with the per-choice max_tokens a request without one was forwarded with, when it was capped. */
export const CAPPED_HEADER = 'x-byok-max-tokens-capped';

/** The largest per-choice cap in 1..ceiling whose cost fits `micros` (costAt non-decreasing); 0 when not even 1 does. */
export function affordableTokens(costAt: (perChoice: number) => Micros, ceiling: number, micros: Micros): number {
  if (ceiling < 1 || costAt(1) > micros) return 0;
  let lo = 1;
  let hi = ceiling;
  while (lo < hi) {
    const mid = lo + Math.ceil((hi - lo) / 2);
    if (costAt(mid) <= micros) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** The field that carries a cap upstream: OpenAI's reasoning models refuse `max_tokens`; most other upstreams know only it. */
export function capField(provider: string): 'max_completion_tokens' | 'max_tokens' {
  return provider === 'openai' || provider === 'azure' ? 'max_completion_tokens' : 'max_tokens';
}

/** Why a budget refused a request, as the 402 tells it. */
export interface BudgetRefusal {
  check: BudgetCheck;
  heldMicros: Micros;
  /** What the request would hold: its maximum cost, or with `uncapped` the least it can be served with. */
  requestMicros: Micros;
  /** The window's end (ms since epoch); null for lifetime. */
  endsAt: number | null;
  /** The largest max_tokens that fits what is left (0: not even the prompt does). */
  fitsMaxTokens: number;
  /** The request set no max_tokens: it would have been capped, and not even MIN_CAPPED_TOKENS fit. */
  uncapped: boolean;
}

/** The two refusals a budget gives: it has reached its limit, or it has room but less than this request needs. */
export type BudgetRefusalReason = 'budget_reached' | 'request_over_budget';

export function refusalReason(check: BudgetCheck): BudgetRefusalReason {
  return check.countedMicros >= check.limitMicros ? 'budget_reached' : 'request_over_budget';
}

/** The 402 message: which budget, in words (never a window id), what it has counted, held and left, and what would fit. */
export function describeBudget(r: BudgetRefusal): string {
  const b = r.check;
  const what = `${budgetWindowWords(b.interval)} of ${b.scope} "${b.name}"`;
  const held = r.heldMicros > 0 ? `, ${microsToUsd(r.heldMicros)} USD held by requests in flight` : '';
  const counted = `${microsToUsd(b.countedMicros)} of ${microsToUsd(b.limitMicros)} USD counted${b.includesByok ? ', BYOK included' : ''}${held}`;
  const reset = budgetResetWords(r.endsAt);
  if (refusalReason(b) === 'budget_reached')
    return `budget reached: ${what} has reached its limit (${counted}); requests under it are refused: ${reset}`;
  const left = Math.max(0, b.limitMicros - b.countedMicros - r.heldMicros);
  const need = r.uncapped
    ? `this request needs at least ${microsToUsd(r.requestMicros)} USD (its prompt and a ${MIN_CAPPED_TOKENS}-token answer)`
    : `this request would need up to ${microsToUsd(r.requestMicros)} USD`;
  // What the app can do: a smaller max_tokens, waiting for requests in flight, a shorter prompt, or the reset.
  let act: string;
  if (r.fitsMaxTokens > 0)
    act = `a max_tokens of at most ${r.fitsMaxTokens} would fit, ${r.heldMicros > 0 ? 'or retry when requests in flight finish, ' : ''}or wait`;
  else if (r.heldMicros > 0)
    act = 'nothing fits while requests in flight hold the rest: retry when they finish, or wait';
  else act = 'not even its prompt fits: shorten it, or wait';
  return `request over budget: ${need} and ${what} has ${microsToUsd(left)} USD left (${counted}); ${act}: ${reset}`;
}
