// The spend journal: what is appended and not done is what a new process finds; done entries and their segments go.
import { afterEach, describe, expect, test } from '@jest/globals';
import { appendFileSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SpendJournal, type FsyncPolicy } from '../../../src/ledger/gate/journal.ts';
import type { RecordPlan } from '../../../src/ledger/gate/record-plan.ts';

const dirs: string[] = [];
const tmp = () => {
  const d = mkdtempSync(join(tmpdir(), 'byok-journal-'));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const segments = (dir: string) => readdirSync(dir).filter((f) => f.startsWith('spend-'));
const plan = (id: string, by = 1): RecordPlan => ({ id, increments: [{ key: `p:{a}:k:${id}`, by, expiresAt: null }], chargedMicros: by });
const hold = (id: string) => ({ id, amountMicros: 5, holdKeys: ['p:{a}:gr:g:d2026-11-23:holds'] });

describe('SpendJournal', () => {
  test.each<FsyncPolicy>(['none', 'batch', 'record'])('fsync %s: a new process finds the records and holds not done, in order', (fsync) => {
    const dir = tmp();
    const { journal, recovered } = SpendJournal.open({ dir, fsync });
    expect(recovered).toEqual({ records: [], holds: [], unreadableLines: 0, skipped: [], tookOverLock: null });
    journal.hold(hold('gen-1'));
    journal.hold(hold('gen-2'));
    journal.hold(hold('gen-3'));
    journal.record(plan('gen-1'));
    journal.record(plan('gen-4'));
    journal.record(plan('gen-5'));
    journal.done('gen-1'); // recorded: its hold and record are done
    journal.done('gen-2'); // released
    journal.done('gen-5');
    expect(journal.size()).toBe(2);
    if (fsync === 'record') expect(journal.stats.fsyncs).toBe(6);
    // No close(): the process is killed with the acks still buffered (they ride on the next write, or leave after
    // batchMs). A lost ack only replays an entry that counts nothing again (idempotent by id).
    journal.abandon();
    const again = SpendJournal.open({ dir, fsync });
    expect(again.recovered.records.map((p) => p.id)).toEqual(['gen-1', 'gen-4', 'gen-5']);
    expect(again.recovered.holds.map((h) => h.id)).toEqual(['gen-2', 'gen-3']);
    again.journal.close();
  });

  test('acks written (flushed with the next append, or by close) are honoured: only what is open comes back', () => {
    const dir = tmp();
    const { journal } = SpendJournal.open({ dir, fsync: 'none' });
    journal.hold(hold('gen-1'));
    journal.record(plan('gen-1'));
    journal.record(plan('gen-2'));
    journal.hold(hold('gen-3'));
    journal.done('gen-1');
    journal.record(plan('gen-4')); // carries the ack of gen-1
    journal.abandon();
    const { journal: next, recovered } = SpendJournal.open({ dir });
    // Each record names where the ledger keeps its landed mark while the journal holds it: its segment's keep hash.
    expect(recovered.records).toEqual([plan('gen-2'), plan('gen-4')].map((p) => ({ ...p, keep: `p:{a}:jids:${journal.id}:1` })));
    expect(recovered.holds).toEqual([hold('gen-3')]);
    // The new process settles them: close writes the acks, and no segment is left.
    for (const id of ['gen-2', 'gen-4', 'gen-3']) next.done(id);
    next.close();
    expect(segments(dir)).toEqual([]);
    expect(SpendJournal.open({ dir }).recovered.records).toEqual([]);
  });

  test('segments rotate by size and a segment whose entries are all done is deleted', () => {
    const dir = tmp();
    const { journal } = SpendJournal.open({ dir, fsync: 'none', segmentBytes: 300 });
    for (let i = 0; i < 20; i++) journal.record(plan(`gen-${i}`));
    const many = segments(dir).length;
    expect(many).toBeGreaterThan(3);
    for (let i = 0; i < 19; i++) journal.done(`gen-${i}`);
    // Only the segment of gen-19 and the one being written are left.
    expect(segments(dir).length).toBeLessThanOrEqual(2);
    journal.record(plan('gen-20'));
    journal.abandon();
    const { recovered } = SpendJournal.open({ dir });
    expect(recovered.records.map((p) => p.id)).toEqual(['gen-19', 'gen-20']);
  });

  test('a line cut by the kill is skipped and counted; the rest loads', () => {
    const dir = tmp();
    const { journal } = SpendJournal.open({ dir, fsync: 'none' });
    journal.record(plan('gen-a'));
    const file = join(dir, segments(dir)[0]!);
    appendFileSync(file, '{"r":{"id":"gen-b","incr');
    journal.abandon();
    const { recovered } = SpendJournal.open({ dir });
    expect(recovered.records.map((p) => p.id)).toEqual(['gen-a']);
    expect(recovered.unreadableLines).toBe(1);
    expect(readFileSync(file, 'utf8').startsWith('{"r":{"id":"gen-a"')).toBe(true);
  });
});
