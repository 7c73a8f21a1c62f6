// The spend journal under generated faults (fast-check, fixed seed). What the generator attacks: the journal's
// promise that nothing acknowledged to a client is lost or counted twice, through sequences of
// - appends (each request finished and answered: record() was called),
// - short writes and ENOSPC cutting a write part way (through the journal's file-writing port; the bytes that do go
//   are really written), with ftruncate failing too at times,
// - ledger outages (records queue; a small queue bound makes them spill past it),
// - kills (the process stops without close: acks still buffered, the lock left behind) and restarts, some of them
//   long after (the ledger's id sets have lapsed: only the journal's keep marks can tell a landed record),
// - a second opener on the live directory (it must be refused, and the first must go on journaling),
// - bad lines left in a segment between two processes (`null`, holds and records missing fields, torn JSON).
// The ledger is the embedded one on a fake clock, shared by every "process" as Redis is; each process sees it
// through its own switch, cut for good when it is killed. A request is its own account, so the account's charged
// counter says how many times it was counted.

import { appendFileSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, test } from '@jest/globals';
import fc from 'fast-check';
import { type JournalWriter, nodeWriter } from '../../../src/ledger/gate/journal.ts';
import { JournalLockedError } from '../../../src/ledger/gate/journal-lock.ts';
import {
  createEmbeddedLedger,
  createSpendGate,
  type EmbeddedLedger,
  keySpace,
  type LedgerSpendGate,
  readAccountMonth,
} from '../../../src/ledger/index.ts';
import { ctx, finished, ledgerAccount } from '../../support/ledger-fixtures.ts';
import { expectEqual, propertyRuns } from '../../support/properties.ts';
import { type SwitchedLedger, switchedLedger } from './outage.ts';

const SEED = 410504;
const RUNS = Number(process.env.JOURNAL_PROPERTY_RUNS ?? 500);
const AT = new Date('2026-11-23T10:00:00Z');
const keys = keySpace();
const RETENTION_MS = 60_000;

type Op =
  | { op: 'record'; cost: number }
  | { op: 'enospc'; after: number; truncateFails: boolean }
  | { op: 'short'; after: number }
  | { op: 'outage'; down: boolean }
  | { op: 'tick' }
  | { op: 'kill' }
  | { op: 'restart'; longAfter: boolean }
  | { op: 'second' }
  | { op: 'badLine'; line: string };

const BAD_LINES = [
  'null',
  '{"h":{}}',
  '{"h":{"id":"gen-x","holdKeys":"k"}}',
  '{"r":{"id":"gen-y"}}',
  '{"r":null}',
  '[]',
  '{"a":[1]}',
  '{"r":{"id":"gen-z","increments":[{"key":"p:{a}:k","by":-5,"expiresAt":null}],"chargedMicros":5}}',
  '{"r":{"id":"gen-',
  '\u0000\u0001garbage',
  '{"r":{},"h":{}}',
];

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 8, arbitrary: fc.record({ op: fc.constant('record' as const), cost: fc.integer({ min: 1, max: 999 }) }) },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('enospc' as const),
      after: fc.integer({ min: 0, max: 400 }),
      truncateFails: fc.boolean(),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('short' as const), after: fc.integer({ min: 1, max: 400 }) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('outage' as const), down: fc.boolean() }) },
  { weight: 3, arbitrary: fc.constant({ op: 'tick' as const }) },
  { weight: 2, arbitrary: fc.constant({ op: 'kill' as const }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('restart' as const), longAfter: fc.boolean() }) },
  { weight: 1, arbitrary: fc.constant({ op: 'second' as const }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('badLine' as const), line: fc.constantFrom(...BAD_LINES) }) },
);

/** The real node:fs writer, with the next fault armed: a write that stops after `after` bytes (ENOSPC, or a short count). */
class FaultyWriter implements JournalWriter {
  fault: { kind: 'enospc' | 'short'; after: number; truncateFails: boolean } | null = null;
  /** ENOSPC thrown since the counter was last read. */
  failures = 0;
  private failNextTruncate = false;
  write(fd: number, buf: Buffer, offset: number, length: number): number {
    const f = this.fault;
    if (!f) return nodeWriter.write(fd, buf, offset, length);
    if (f.after >= length) {
      f.after -= length;
      return nodeWriter.write(fd, buf, offset, length);
    }
    // write(2) reports the bytes it wrote before the disk filled (a short count); the call after that fails. A short
    // write without a full disk returns its count and the rest goes with the next call.
    if (f.after > 0) {
      const wrote = nodeWriter.write(fd, buf, offset, f.after);
      if (f.kind === 'short') this.fault = null;
      else f.after = 0;
      return wrote;
    }
    this.fault = null;
    this.failNextTruncate = f.truncateFails;
    this.failures++;
    throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
  }
  truncate(fd: number, length: number): void {
    if (this.failNextTruncate) {
      this.failNextTruncate = false;
      throw Object.assign(new Error('EIO: i/o error, ftruncate'), { code: 'EIO' });
    }
    nodeWriter.truncate(fd, length);
  }
}

interface Process {
  view: SwitchedLedger;
  gate: LedgerSpendGate;
}

const roots: string[] = [];
afterAll(() => {
  for (const d of roots) rmSync(d, { recursive: true, force: true });
});

const settle = async (ms = 1) => {
  await new Promise((r) => setTimeout(r, ms));
};

async function runCase(ops: readonly Op[]): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'byok-journal-prop-'));
  roots.push(dir);
  let clock = AT.getTime();
  const ledger: EmbeddedLedger = createEmbeddedLedger({ now: () => clock, idRetentionMs: RETENTION_MS });
  const writer = new FaultyWriter();
  let down = false;
  /** Requests answered (record() called) whose record reached the journal or the ledger: must count exactly once. */
  const acknowledged = new Map<string, { accountId: string; cost: number }>();
  /** Every request answered: none may count twice. */
  const all = new Map<string, { accountId: string; cost: number }>();
  const open = (): Process => {
    const view = switchedLedger(ledger);
    view.down = down;
    const gate = createSpendGate(view, {
      retryMinMs: 1,
      retryMaxMs: 4,
      maxPendingRecords: 3,
      journal: { dir, fsync: 'none', batchMs: 2, segmentBytes: 2048, writer },
    });
    return { view, gate };
  };
  let proc: Process | null = open();
  let intruder: Process | null = null;
  let secondAccepted = 0;
  const kill = () => {
    if (intruder) {
      intruder.gate.abandon();
      Object.defineProperty(intruder.view, 'down', { get: () => true, set: () => {} });
      intruder = null;
    }
    if (!proc) return;
    proc.gate.abandon();
    // A dead process reaches nothing any more.
    Object.defineProperty(proc.view, 'down', { get: () => true, set: () => {} });
    proc = null;
  };
  try {
    for (const op of ops) {
      switch (op.op) {
        case 'record': {
          if (!proc) break;
          const acc = ledgerAccount();
          const req = finished(ctx(acc, AT), op.cost, false);
          const failuresBefore = writer.failures;
          const p = proc.gate.record(req);
          const entry = { accountId: acc.accountId, cost: op.cost };
          all.set(req.generationId, entry);
          // Journaled unless its own write failed; landed if its promise resolves.
          if (writer.failures === failuresBefore) acknowledged.set(req.generationId, entry);
          p.then(
            () => acknowledged.set(req.generationId, entry),
            () => {},
          );
          break;
        }
        case 'enospc':
          writer.fault = { kind: 'enospc', after: op.after, truncateFails: op.truncateFails };
          break;
        case 'short':
          writer.fault = { kind: 'short', after: op.after, truncateFails: false };
          break;
        case 'outage':
          down = op.down;
          if (proc) proc.view.down = down;
          if (intruder) intruder.view.down = down;
          break;
        case 'tick':
          await settle();
          break;
        case 'kill':
          kill();
          break;
        case 'restart':
          kill();
          if (op.longAfter) clock += 3 * RETENTION_MS;
          proc = open();
          break;
        case 'second': {
          if (!proc || intruder) break;
          try {
            // Refused, or (the bug) it runs beside the first until the next kill, doing what a second gateway does.
            intruder = open();
            secondAccepted++;
          } catch (err) {
            if (!(err instanceof JournalLockedError)) throw err;
          }
          break;
        }
        case 'badLine': {
          if (proc) break; // only between two processes: the journal's own appends are whole lines
          const segs = readdirSync(dir)
            .filter((f) => f.startsWith('spend-'))
            .sort();
          const target = segs.at(-1);
          if (target) appendFileSync(join(dir, target), `${op.line}\n`);
          break;
        }
      }
    }
    // The end: the disk heals, the ledger is up, one more restart drains everything.
    writer.fault = null;
    down = false;
    kill();
    clock += op2Long(ops) ? 3 * RETENTION_MS : 0;
    const last = open();
    await last.gate.drain(5000);
    // A record spilled past the queue bound is queued again once the queue empties (on the next turn).
    for (let i = 0; i < 500 && (last.gate.pendingRecords() > 0 || i < 3); i++) await settle();
    await last.gate.drain(5000);
    await last.gate.close();
    // Counted: once for every acknowledged request; never twice for any.
    const counted = new Map<string, number>();
    for (const [id, r] of all) {
      const month = await readAccountMonth(ledger, keys, r.accountId, 'pay-as-you-go', AT);
      counted.set(id, month.chargedMicros / r.cost);
    }
    const lost = [...acknowledged.keys()].filter((id) => counted.get(id) !== 1);
    const twice = [...counted].filter(([, n]) => n > 1).map(([id]) => id);
    expectEqual({ lost, twice, secondAccepted }, { lost: [], twice: [], secondAccepted: 0 });
  } finally {
    kill();
    await ledger.close();
  }
}

/** Whether the last stretch should be a long restart too (the ids of the last process's landed records lapse). */
const op2Long = (ops: readonly Op[]) => ops.length % 2 === 0;

describe(`the spend journal under generated faults (properties, seed ${SEED})`, () => {
  test(`nothing acknowledged is lost or counted twice through appends, short writes, ENOSPC, outages, kills, restarts, a second opener and bad lines (${RUNS} runs)`, async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 40 }), async (ops) => {
        await runCase(ops);
      }),
      { seed: SEED, numRuns: propertyRuns(RUNS) },
    );
  }, 600_000);
});
