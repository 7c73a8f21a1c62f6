// Refusals counted beside the spend they protect (docs/ledger.md, "Refusals"): every 402 a budget gives adds one to
// that budget window's `refused` counter in the ledger, where the operator's spend pass reads it and raises a
// throttled BudgetExceeded Event on the Guardrail or Workspace (operator/spend/budget-events.ts). The gateway never talks
// to the Kubernetes API for this and needs no RBAC: the ledger is the channel it already writes.
//
// Off the request path: a refusal only bumps an in-process tally; the tally is flushed every flushMs as one ledger
// add (no id: a count, not money), so a client hammering a closed budget costs one write per budget window per
// flush, not one per request. A failed flush keeps the tally for the next one; close() flushes before the gate closes.
import type { Logger } from 'pino';
import type { AdmitDecision, AdmitRequest } from '../contract/spend-gate.ts';
import type { KeySpace } from './keys.ts';
import type { CounterIncrement, Ledger } from './ledger.ts';
import type { LedgerSpendGate } from './spend-gate.ts';
import { windowOf } from './windows.ts';

export interface RefusalCountOptions {
  /** How often the tally is written to the ledger; default 1000 ms. */
  flushMs?: number;
  logger?: Logger;
}

/** The gate, with every refusal it gives counted in the ledger under keys.refused. */
export function countRefusals(
  gate: LedgerSpendGate,
  ledger: Ledger,
  keys: KeySpace,
  opts: RefusalCountOptions = {},
): LedgerSpendGate & { flushRefusals(): Promise<void> } {
  const flushMs = opts.flushMs ?? 1000;
  const log = opts.logger?.child({ component: 'ledger-refusals' });
  /** key → refusals not yet written, and the counter's expiry (its window's end plus the usual margin). */
  const tally = new Map<string, CounterIncrement>();
  let timer: NodeJS.Timeout | undefined;
  let flushing: Promise<void> = Promise.resolve();

  function note(req: AdmitRequest, decision: AdmitDecision): void {
    if (decision.allowed) return;
    const b = decision.blockedBy;
    const window = windowOf(b.interval, req.at);
    const count = (key: string) => {
      const hit = tally.get(key);
      if (hit) hit.by += 1;
      else tally.set(key, { key, by: 1, expiresAt: keys.expiresAt(window) });
    };
    count(keys.refused(req.account.accountId, b.scope, b.id, window));
    // Not reached: this request needed more than was left (a RequestOverBudget Event, not BudgetExceeded).
    if (b.countedMicros < b.limitMicros) count(keys.refusedOver(req.account.accountId, b.scope, b.id, window));
    timer ??= setTimeout(() => void flush(), flushMs).unref();
  }

  function flush(): Promise<void> {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    if (tally.size === 0) return flushing;
    const batch = [...tally.values()];
    tally.clear();
    // One add per key: counters of different accounts never share a script call (one Redis Cluster slot each).
    flushing = flushing.then(async () => {
      const results = await Promise.allSettled(batch.map((inc) => ledger.add([inc])));
      const failed = batch.filter((_, i) => results[i]!.status === 'rejected');
      if (failed.length === 0) return;
      for (const inc of failed) {
        const hit = tally.get(inc.key);
        if (hit) hit.by += inc.by;
        else tally.set(inc.key, inc);
      }
      log?.debug({ counters: failed.length }, 'refusal counts not written; kept for the next flush');
      timer ??= setTimeout(() => void flush(), flushMs).unref();
    });
    return flushing;
  }

  // Delegates method by method (not a spread): the gate may be a class instance whose methods live on its prototype.
  return {
    record: (req) => gate.record(req),
    release: (reservation) => gate.release(reservation),
    admitRate: (req) => gate.admitRate(req),
    settleRate: (hold, used) => gate.settleRate(hold, used),
    pendingRecords: () => gate.pendingRecords(),
    drain: (timeoutMs) => gate.drain(timeoutMs),
    abandon: () => gate.abandon(),
    async admit(req) {
      const decision = await gate.admit(req);
      note(req, decision);
      return decision;
    },
    flushRefusals: flush,
    async close() {
      await flush();
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
      await gate.close();
    },
  };
}
