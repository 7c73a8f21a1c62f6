// Applies a SpendRecord to the ledger: one add (idempotent by the generation id, settling the reservation), then for
// a BYOK request above the free allowance its fee, a write of its own (`<id>:fee`) retried until it lands, so a
// failure there never replays the list cost.
import type { Logger } from 'pino';
import type { RecordedSpend } from '../../contract/spend-gate.ts';
import { byokCharge } from '../../domain/billing.ts';
import { type CounterIncrement, type Ledger, LedgerUnavailableError } from '../ledger.ts';
import type { GateMetrics } from './metrics.ts';
import type { SpendRecord } from './spend-record.ts';

/** The gate closed while a BYOK fee was still being retried: the list cost is recorded, the fee is not. */
export class FeeNotRecordedError extends Error {
  constructor(id: string, cause: unknown) {
    super(`spend gate closed before the BYOK fee of ${id} was recorded`, { cause });
    this.name = 'FeeNotRecordedError';
  }
}

export interface RecorderOptions {
  ledger: Ledger;
  metrics: GateMetrics;
  retry: { minMs: number; maxMs: number };
  /** True once the gate is closing: the fee is no longer retried. */
  stopped: () => boolean;
  log?: Logger | undefined;
}

/**
 * What a record cost once its add returned the totals, and the BYOK fee still to write (null: none). A replayed add
 * returns the month-to-date its first application saw, so the fee is the same whenever it lands.
 */
function spendAfter(
  plan: SpendRecord,
  totals: readonly number[],
): { spend: RecordedSpend; fee: CounterIncrement[] | null } {
  if (!plan.byok)
    return { spend: { feeMicros: 0, chargedMicros: plan.chargedMicros, freeListCostMicros: 0 }, fee: null };
  const cost = plan.byok.listCostMicros;
  const before = (totals[0] ?? cost) - cost;
  const charge = byokCharge({ plan: plan.byok.plan, monthToDateListCostMicros: before, requestListCostMicros: cost });
  return {
    spend: { feeMicros: charge.feeMicros, chargedMicros: 0, freeListCostMicros: charge.freeListCostMicros },
    fee:
      charge.feeMicros > 0
        ? [{ key: plan.byok.feeKey, by: charge.feeMicros, expiresAt: plan.byok.feeExpiresAt }]
        : null,
  };
}

export class Recorder {
  private readonly opts: RecorderOptions;

  constructor(opts: RecorderOptions) {
    this.opts = opts;
  }

  async apply(plan: SpendRecord): Promise<RecordedSpend> {
    const totals = await this.opts.ledger.add(plan.increments, plan.settle, plan.id, plan.keep);
    const { spend, fee } = spendAfter(plan, totals);
    if (fee) await this.addWithRetry(fee, `${plan.id}:fee`, plan.keep);
    return spend;
  }

  /** In-process ledgers (Ledger.addNow): the same writes in the caller's turn; such a ledger is never unreachable. */
  applyNow(plan: SpendRecord): RecordedSpend {
    const { ledger } = this.opts;
    if (!ledger.addNow) throw new Error('applyNow needs a ledger with addNow (an in-process ledger)');
    const { spend, fee } = spendAfter(plan, ledger.addNow(plan.increments, plan.settle, plan.id, plan.keep));
    if (fee) ledger.addNow(fee, undefined, `${plan.id}:fee`, plan.keep);
    return spend;
  }

  private async addWithRetry(increments: CounterIncrement[], id: string, keep: string | undefined): Promise<void> {
    const { ledger, metrics, retry, stopped } = this.opts;
    let delay = retry.minMs;
    for (;;) {
      try {
        await ledger.add(increments, undefined, id, keep);
        return;
      } catch (err) {
        if (!(err instanceof LedgerUnavailableError)) throw err;
        // Not a LedgerUnavailableError: the list cost is recorded, so the record must not be queued again.
        if (stopped()) throw new FeeNotRecordedError(id, err);
        metrics.unavailable.inc({ op: 'record' });
        await new Promise((r) => setTimeout(r, delay).unref());
        delay = Math.min(delay * 2, retry.maxMs);
      }
    }
  }
}
