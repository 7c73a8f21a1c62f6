// The spend gate's metrics (docs/ledger.md, "When Redis is unreachable" and "Durability of records").
import { Counter, Gauge, type Registry } from 'prom-client';

export interface GateMetrics {
  unavailable: Counter<'op'>;
  admittedOpen: Counter;
  dropped: Counter;
  pending: Gauge;
  resetRefusals: Counter;
  /** Records found unsettled in the journal at start and replayed. */
  journalReplayed: Counter;
  /** Holds of requests the previous process never settled (killed mid-request), released at start. */
  journalHoldsReleased: Counter;
  /** Journal writes that failed (disk full, I/O error): those requests were kept in memory only. */
  journalWriteFailures: Counter;
  /** Journal lines that could not be used at start (cut by a kill or a full disk, or of the wrong shape): skipped. */
  journalUnreadableLines: Counter;
  /** Records past the replay queue's bound kept on disk only, queued again once it had room. */
  journalSpilled: Counter;
}

export function createGateMetrics(registry: Registry | undefined): GateMetrics {
  const registers = registry ? [registry] : [];
  return {
    unavailable: new Counter({
      name: 'byok_ledger_unavailable_total',
      help: 'Ledger operations that failed because the ledger was unreachable.',
      labelNames: ['op'],
      registers,
    }),
    admittedOpen: new Counter({
      name: 'byok_ledger_admitted_unchecked_total',
      help: 'Requests admitted without a budget check while the ledger was unreachable (fail open).',
      registers,
    }),
    dropped: new Counter({
      name: 'byok_ledger_records_dropped_total',
      help: 'Finished requests whose spend was never recorded (replay queue full or gate closed without a journal).',
      registers,
    }),
    pending: new Gauge({
      name: 'byok_ledger_pending_records',
      help: 'Finished requests waiting for the ledger to come back.',
      registers,
    }),
    resetRefusals: new Counter({
      name: 'byok_ledger_reset_refusals_total',
      help: 'Budgeted requests refused (503) because the ledger restarted and the operator has not rebuilt it from status yet.',
      registers,
    }),
    journalReplayed: new Counter({
      name: 'byok_ledger_journal_replayed_total',
      help: 'Records a previous gateway process journaled but never saw land, replayed at start.',
      registers,
    }),
    journalWriteFailures: new Counter({
      name: 'byok_ledger_journal_write_failures_total',
      help: 'Spend journal writes that failed (disk full, I/O error): those requests were kept in memory only, as without a journal.',
      registers,
    }),
    journalHoldsReleased: new Counter({
      name: 'byok_ledger_journal_holds_released_total',
      help: 'Reservations of requests a previous gateway process never finished (killed mid-request), released at start.',
      registers,
    }),
    journalUnreadableLines: new Counter({
      name: 'byok_ledger_journal_unreadable_lines_total',
      help: 'Spend journal lines skipped at start: cut by a kill or a full disk, or not of the shape this version writes.',
      registers,
    }),
    journalSpilled: new Counter({
      name: 'byok_ledger_journal_spilled_total',
      help: 'Records past the replay queue bound kept in the spend journal only (not dropped), queued again when the queue had room.',
      registers,
    }),
  };
}
