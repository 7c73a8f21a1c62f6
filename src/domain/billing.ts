// BYOK fee and the monthly free allowance (spec 1 and 8), in exact micro-dollars.
import type { PlanName } from './compiled.ts';
import { assertNonNegativeMicros, type Micros, microsToUsd, mulDivRound, type UsdInput, usdToMicros } from './money.ts';

/** The BYOK fee is 5% of the list cost of the same model and provider. */
export const BYOK_FEE_PERCENT = 5;

/** Free monthly allowance, measured in list-price inference cost of BYOK requests. */
export const FREE_ALLOWANCE_MICROS: Readonly<Record<PlanName, Micros>> = Object.freeze({
  'pay-as-you-go': 25_000 * 1_000_000,
  enterprise: 200_000 * 1_000_000,
});

/** 5% of a list cost in micros, rounded half up to the micro-dollar. */
export function byokFeeMicros(listCostMicros: Micros): Micros {
  assertNonNegativeMicros(listCostMicros, 'list cost');
  return mulDivRound(listCostMicros, BYOK_FEE_PERCENT, 100);
}

/** 5% of a list cost given in USD, for display; returns USD (computed through micros, so 5% of 0.01 is exactly 0.0005). */
export function byokFee(listCostUsd: UsdInput): number {
  return microsToUsd(byokFeeMicros(usdToMicros(listCostUsd)));
}

export interface ByokChargeInput {
  plan: PlanName;
  /** List-price cost of this account's BYOK requests earlier in the calendar month (before this request). */
  monthToDateListCostMicros: Micros;
  /** List-price cost of this request on the same model and provider. */
  requestListCostMicros: Micros;
}

export interface ByokCharge {
  /** Part of the request's list cost covered by the free allowance. */
  freeListCostMicros: Micros;
  /** Part of the request's list cost above the allowance; the fee is charged on this part only. */
  billableListCostMicros: Micros;
  feeMicros: Micros;
  feeUsd: number;
  /** Allowance left after this request. */
  allowanceRemainingMicros: Micros;
}

/** Fee for one BYOK request: a request straddling the allowance pays 5% of the part above it. */
export function byokCharge(input: ByokChargeInput): ByokCharge {
  const before = input.monthToDateListCostMicros;
  const cost = input.requestListCostMicros;
  assertNonNegativeMicros(before, 'month-to-date list cost');
  assertNonNegativeMicros(cost, 'request list cost');
  const allowance = FREE_ALLOWANCE_MICROS[input.plan];
  const left = Math.max(0, allowance - before);
  const free = Math.min(cost, left);
  const billable = cost - free;
  const fee = byokFeeMicros(billable);
  return {
    freeListCostMicros: free,
    billableListCostMicros: billable,
    feeMicros: fee,
    feeUsd: microsToUsd(fee),
    allowanceRemainingMicros: left - free,
  };
}
