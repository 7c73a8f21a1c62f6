// The gateway's spend accounting as the CLI wires it: the embedded ledger by default (one replica, optional
// snapshot file), Redis when several replicas share budgets. The gateway only knows the SpendGate contract.
import type { Logger } from 'pino';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { FsyncPolicy } from '../ledger/gate/journal.ts';
import { openLedger } from '../ledger/open.ts';
import { countRefusals } from '../ledger/refusals.ts';
import { createSpendGate, type LedgerSpendGate } from '../ledger/spend-gate.ts';

const FSYNC_POLICIES: readonly string[] = ['none', 'batch', 'record'] satisfies FsyncPolicy[];

export interface GatewayLedgerOptions {
  redisUrl?: string;
  snapshotPath?: string;
  /**
   * Redis only, and required with it: the spend journal's directory (the chart's emptyDir), or 'none' to run
   * without one. Every record and reservation is written there before the response completes and replayed by the
   * restarted gateway (docs/ledger.md, "Durability of records").
   */
  journalDir?: string;
  journalFsync?: string;
  registry: Registry;
  logger: Logger;
}

/** --ledger-journal none: a Redis gateway without a journal, said out loud. */
export const NO_JOURNAL = 'none';

/**
 * A Redis gateway without a journal loses what it had queued through an outage when it is killed (docs/ledger.md),
 * so one is required unless turned off by name; the embedded ledger keeps its month in its snapshot instead.
 */
export function journalDirOf(opts: Pick<GatewayLedgerOptions, 'redisUrl' | 'journalDir'>): string | undefined {
  if (!opts.redisUrl) {
    if (opts.journalDir !== undefined && opts.journalDir !== NO_JOURNAL)
      throw new Error(
        '--ledger-journal needs --ledger-redis-url: the embedded ledger keeps its month in its snapshot (--ledger-snapshot)',
      );
    return undefined;
  }
  if (opts.journalDir === undefined || opts.journalDir === '') {
    throw new Error(
      '--ledger-redis-url needs --ledger-journal <dir>: without a spend journal, the spend queued while Redis is unreachable is lost when the gateway is killed. ' +
        `Give it a directory of its own (the chart mounts an emptyDir), or --ledger-journal ${NO_JOURNAL} to run without one`,
    );
  }
  return opts.journalDir === NO_JOURNAL ? undefined : opts.journalDir;
}

export async function openGatewaySpendGate(opts: GatewayLedgerOptions): Promise<LedgerSpendGate> {
  const journalDir = journalDirOf(opts);
  const fsync = opts.journalFsync ?? 'batch';
  if (!FSYNC_POLICIES.includes(fsync))
    throw new Error(`invalid --ledger-journal-fsync ${fsync}: use ${FSYNC_POLICIES.join(', ')}`);
  const quarantined = new Counter({
    name: 'byok_ledger_snapshot_quarantined_total',
    help: 'Embedded ledger snapshot entries left out at load because they were malformed.',
    registers: [opts.registry],
  });
  const { ledger, keys } = await openLedger({
    ...(opts.redisUrl ? { redisUrl: opts.redisUrl } : {}),
    ...(opts.snapshotPath ? { snapshotPath: opts.snapshotPath } : {}),
    onSnapshotError: (err) =>
      opts.logger.error(
        { err: err.message },
        'ledger snapshot could not be written; spend since the last snapshot would be lost on restart',
      ),
    onQuarantine: (key, reason) => {
      quarantined.inc();
      opts.logger.error(
        { key, reason },
        'ledger snapshot entry quarantined (kept in <snapshot>.quarantine.json); the rest loaded',
      );
    },
  });
  const idCount = ledger.idCount?.bind(ledger);
  if (idCount) {
    // The embedded ledger's exactly-once memory lives in this heap: how close it comes to the limit is worth a graph.
    new Gauge({
      name: 'byok_ledger_exactly_once_ids',
      help: 'Ids of records and releases the embedded ledger remembers for exactly-once (20 to 40 minutes of writes, about 13 B of heap per id this gateway made).',
      registers: [opts.registry],
      collect() {
        this.set(idCount());
      },
    });
  }
  opts.logger.info(
    { backend: opts.redisUrl ? 'redis' : 'embedded', snapshot: opts.snapshotPath ?? null, journal: journalDir ?? null },
    'spend ledger open',
  );
  // Every 402 is counted in the ledger, where the operator turns it into a BudgetExceeded Event (docs/ledger.md, "Refusals").
  return countRefusals(
    createSpendGate(ledger, {
      keys,
      registry: opts.registry,
      logger: opts.logger,
      ...(journalDir ? { journal: { dir: journalDir, fsync: fsync as FsyncPolicy } } : {}),
    }),
    ledger,
    keys,
    { logger: opts.logger },
  );
}
