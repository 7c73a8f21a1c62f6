// The gateway's spend accounting as the CLI wires it: the embedded ledger by default (one replica, optional
// snapshot file), Redis when several replicas share budgets. The gateway only knows the SpendGate contract.
import type { Logger } from 'pino';
import { Counter, type Registry } from 'prom-client';
import { openLedger } from '../ledger/open.ts';
import { countRefusals } from '../ledger/refusals.ts';
import { createSpendGate, type LedgerSpendGate } from '../ledger/spend-gate.ts';
import type { FsyncPolicy } from '../ledger/gate/journal.ts';

const FSYNC_POLICIES: readonly string[] = ['none', 'batch', 'record'] satisfies FsyncPolicy[];

export interface GatewayLedgerOptions {
  redisUrl?: string;
  snapshotPath?: string;
  /**
   * Redis only: the spend journal's directory (the chart's emptyDir). Every record and reservation is written there
   * before the response completes and replayed by the restarted gateway (docs/ledger.md, "Durability of records").
   */
  journalDir?: string;
  journalFsync?: string;
  registry: Registry;
  logger: Logger;
}

export async function openGatewaySpendGate(opts: GatewayLedgerOptions): Promise<LedgerSpendGate> {
  if (opts.journalDir && !opts.redisUrl) throw new Error('--ledger-journal needs --ledger-redis-url: the embedded ledger keeps its month in its snapshot (--ledger-snapshot)');
  const fsync = opts.journalFsync ?? 'batch';
  if (!FSYNC_POLICIES.includes(fsync)) throw new Error(`invalid --ledger-journal-fsync ${fsync}: use ${FSYNC_POLICIES.join(', ')}`);
  const quarantined = new Counter({ name: 'byok_ledger_snapshot_quarantined_total', help: 'Embedded ledger snapshot entries left out at load because they were malformed.', registers: [opts.registry] });
  const { ledger, keys } = await openLedger({
    ...(opts.redisUrl ? { redisUrl: opts.redisUrl } : {}),
    ...(opts.snapshotPath ? { snapshotPath: opts.snapshotPath } : {}),
    onSnapshotError: (err) => opts.logger.error({ err: err.message }, 'ledger snapshot could not be written; spend since the last snapshot would be lost on restart'),
    onQuarantine: (key, reason) => {
      quarantined.inc();
      opts.logger.error({ key, reason }, 'ledger snapshot entry quarantined (kept in <snapshot>.quarantine.json); the rest loaded');
    },
  });
  opts.logger.info({ backend: opts.redisUrl ? 'redis' : 'embedded', snapshot: opts.snapshotPath ?? null, journal: opts.journalDir ?? null }, 'spend ledger open');
  // Every 402 is counted in the ledger, where the operator turns it into a BudgetExceeded Event (docs/ledger.md, "Refusals").
  return countRefusals(createSpendGate(ledger, { keys, registry: opts.registry, logger: opts.logger, ...(opts.journalDir ? { journal: { dir: opts.journalDir, fsync: fsync as FsyncPolicy } } : {}) }), ledger, keys, { logger: opts.logger });
}
