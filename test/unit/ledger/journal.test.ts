// The spend journal: what is appended and not done is what a new process finds; done entries and their segments go.

import { spawn, spawnSync } from 'node:child_process';
import { appendFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from '@jest/globals';
import { type FsyncPolicy, type JournalWriter, nodeWriter, SpendJournal } from '../../../src/ledger/gate/journal.ts';
import { JournalLockedError, LOCK_FILE } from '../../../src/ledger/gate/journal-lock.ts';
import type { SpendRecord } from '../../../src/ledger/gate/spend-record.ts';

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
const plan = (id: string, by = 1): SpendRecord => ({
  id,
  increments: [{ key: `p:{a}:k:${id}`, by, expiresAt: null }],
  chargedMicros: by,
});
const hold = (id: string) => ({ id, amountMicros: 5, holdKeys: ['p:{a}:gr:g:d2026-11-23:holds'] });

describe('SpendJournal', () => {
  test.each<FsyncPolicy>(['none', 'batch', 'record'])(
    'fsync %s: a new process finds the records and holds not done, in order',
    (fsync) => {
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
    },
  );

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
    expect(recovered.records).toEqual(
      [plan('gen-2'), plan('gen-4')].map((p) => ({ ...p, keep: `p:{a}:jids:${journal.id}:1` })),
    );
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

  test('acks that complete a segment part way through it do not delete it while it is read: entries after them still come back', () => {
    const dir = tmp();
    const { journal } = SpendJournal.open({ dir, fsync: 'none' });
    journal.record(plan('gen-1'));
    journal.done('gen-1');
    journal.record(plan('gen-2')); // the same segment: [r gen-1] [a gen-1] [r gen-2]
    journal.abandon();
    const second = SpendJournal.open({ dir });
    expect(second.recovered.records.map((p) => p.id)).toEqual(['gen-2']);
    // Killed again before gen-2 lands: the third process must still find it.
    second.journal.abandon();
    const third = SpendJournal.open({ dir });
    expect(third.recovered.records.map((p) => p.id)).toEqual(['gen-2']);
    third.journal.close();
  });
});

describe('SpendJournal: one process per directory', () => {
  test('a second opener of a live directory is refused, naming the directory, the holder and the way out; the first goes on journaling', () => {
    const dir = tmp();
    const { journal } = SpendJournal.open({ dir, fsync: 'none' });
    journal.record(plan('gen-1'));
    let refusal: unknown;
    try {
      SpendJournal.open({ dir });
    } catch (err) {
      refusal = err;
    }
    expect(refusal).toBeInstanceOf(JournalLockedError);
    const message = (refusal as Error).message;
    expect(message).toContain(`spend journal ${dir} is in use by another gateway`);
    expect(message).toContain(`pid ${process.pid} on ${hostname()}`);
    expect(message).toContain(`remove ${join(dir, LOCK_FILE)}`);
    // Nothing of the first was touched: its segment is there and keeps taking records.
    journal.record(plan('gen-2'));
    expect(segments(dir)).toHaveLength(1);
    journal.abandon();
    expect(SpendJournal.open({ dir }).recovered.records.map((p) => p.id)).toEqual(['gen-1', 'gen-2']);
  });

  const lockOf = (over: Record<string, unknown>) => {
    const own = JSON.parse(readFileSync(join(dir0, LOCK_FILE), 'utf8')) as Record<string, unknown>;
    return JSON.stringify({ ...own, instance: 'someone-else', ...over });
  };
  let dir0 = '';
  const ownLock = () => {
    dir0 = tmp();
    SpendJournal.open({ dir: dir0 }).journal.abandon();
  };

  test('a lock whose pid is gone, or reused by another process (another /proc start time), is taken over and said so', () => {
    ownLock();
    const dead = spawnSync('true').pid!;
    for (const [holder, why] of [
      [{ pid: dead }, `no process ${dead}`],
      [{ pid: process.ppid, procStart: '1' }, `pid ${process.ppid} is another process now`],
    ] as const) {
      const dir = tmp();
      writeFileSync(join(dir, LOCK_FILE), lockOf(holder));
      const { journal, recovered } = SpendJournal.open({ dir });
      expect(recovered.tookOverLock).toContain(why);
      journal.close();
    }
    // A live process of this pid namespace with its own start time holds it.
    const dir = tmp();
    writeFileSync(
      join(dir, LOCK_FILE),
      lockOf({
        pid: process.ppid,
        procStart: readFileSync(`/proc/${process.ppid}/stat`, 'utf8').split(') ')[1]!.split(' ')[19],
      }),
    );
    expect(() => SpendJournal.open({ dir })).toThrow(/process \d+ is running/);
  });

  test('a holder this host cannot look up (another pid namespace or host) is judged by its heartbeat: refused while it moves, taken over once it stops', async () => {
    ownLock();
    const dir = tmp();
    const lock = join(dir, LOCK_FILE);
    writeFileSync(lock, lockOf({ host: 'another-host' }));
    const toucher = spawn('sh', ['-c', `while true; do touch ${lock}; sleep 0.05; done`], { stdio: 'ignore' });
    try {
      await new Promise((r) => setTimeout(r, 100));
      expect(() => SpendJournal.open({ dir, lock: { staleMs: 2000 } })).toThrow(/its heartbeat is moving/);
    } finally {
      toucher.kill('SIGKILL');
    }
    await new Promise((r) => setTimeout(r, 100));
    const t0 = Date.now();
    const { journal, recovered } = SpendJournal.open({ dir, lock: { staleMs: 300 } });
    expect(recovered.tookOverLock).toMatch(/another-host.*heartbeat stopped/);
    expect(Date.now() - t0).toBeLessThan(2000);
    journal.close();
  });

  test('the holder keeps its heartbeat: the lock mtime moves while the journal is open, and close removes the lock', async () => {
    const dir = tmp();
    const { journal } = SpendJournal.open({ dir, lock: { heartbeatMs: 20 } });
    const before = statSync(join(dir, LOCK_FILE)).mtimeMs;
    await new Promise((r) => setTimeout(r, 80));
    expect(statSync(join(dir, LOCK_FILE)).mtimeMs).toBeGreaterThan(before);
    journal.close();
    expect(readdirSync(dir).includes(LOCK_FILE)).toBe(false);
  });
});

describe('SpendJournal: a full disk', () => {
  /** node:fs, with the next write stopped after `after` bytes (ENOSPC), and ftruncate failing `truncateFailures` times. */
  const full = (after: number, truncateFailures = 0) => {
    const w = { armed: false, truncateFailures };
    const writer: JournalWriter & { arm(): void } = {
      arm: () => {
        w.armed = true;
      },
      write(fd, buf, offset, length) {
        if (!w.armed) return nodeWriter.write(fd, buf, offset, length);
        w.armed = false;
        nodeWriter.write(fd, buf, offset, Math.min(after, length));
        throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
      },
      truncate(fd, length) {
        if (w.truncateFailures-- > 0) throw Object.assign(new Error('EIO: i/o error, ftruncate'), { code: 'EIO' });
        nodeWriter.truncate(fd, length);
      },
    };
    return writer;
  };

  test('a write cut by ENOSPC is cut back to the last newline: the next record is whole and readable', () => {
    const dir = tmp();
    const writer = full(17);
    const { journal } = SpendJournal.open({ dir, fsync: 'none', writer });
    journal.record(plan('gen-1'));
    writer.arm();
    expect(() => journal.record(plan('gen-2'))).toThrow(/ENOSPC/);
    journal.record(plan('gen-3'));
    expect(journal.stats).toMatchObject({ writeFailures: 1, tornTailsCut: 1, tornTailsLeft: 0 });
    journal.abandon();
    const { recovered } = SpendJournal.open({ dir });
    expect(recovered.records.map((p) => p.id)).toEqual(['gen-1', 'gen-3']);
    expect(recovered.unreadableLines).toBe(0);
  });

  test('when the torn tail cannot be cut either, the next append starts a new segment; the torn line is skipped and counted', () => {
    const dir = tmp();
    const writer = full(17, 2);
    const { journal } = SpendJournal.open({ dir, fsync: 'none', writer });
    journal.record(plan('gen-1'));
    writer.arm();
    expect(() => journal.record(plan('gen-2'))).toThrow(/ENOSPC/);
    journal.record(plan('gen-3'));
    expect(journal.stats).toMatchObject({ writeFailures: 1, tornTailsCut: 0, tornTailsLeft: 1 });
    expect(segments(dir)).toHaveLength(2);
    journal.abandon();
    const { recovered } = SpendJournal.open({ dir });
    expect(recovered.records.map((p) => p.id)).toEqual(['gen-1', 'gen-3']);
    expect(recovered.unreadableLines).toBe(1);
  });

  test('acks whose write failed are written with the next one', () => {
    const dir = tmp();
    const writer = full(5);
    const { journal } = SpendJournal.open({ dir, fsync: 'none', writer, batchMs: 1000 });
    journal.record(plan('gen-1'));
    journal.record(plan('gen-2'));
    journal.done('gen-1');
    writer.arm();
    expect(() => journal.record(plan('gen-3'))).toThrow(/ENOSPC/); // carried the ack of gen-1
    journal.record(plan('gen-4'));
    journal.abandon();
    expect(SpendJournal.open({ dir }).recovered.records.map((p) => p.id)).toEqual(['gen-2', 'gen-4']);
  });
});

describe('SpendJournal: lines of the wrong shape', () => {
  test('null, a hold or record missing fields, and other shapes are skipped and counted with their file and line; the rest loads', () => {
    const dir = tmp();
    const { journal } = SpendJournal.open({ dir, fsync: 'none' });
    journal.record(plan('gen-a'));
    journal.hold(hold('gen-h'));
    journal.abandon();
    const file = join(dir, segments(dir)[0]!);
    const bad = [
      'null',
      '{"h":{"id":"gen-x"}}',
      '{"r":{"id":"gen-y","increments":[{"key":"k","by":"1","expiresAt":null}],"chargedMicros":1}}',
      '[1]',
      '{"a":[null]}',
      '{"r":{"id":"gen-z","increments":[],"chargedMicros":0,"keep":"p:{b}:jids:x:1"}}',
      `{"r":${'['.repeat(100)}}`,
    ];
    appendFileSync(file, `${bad.join('\n')}\n`);
    const { journal: next, recovered } = SpendJournal.open({ dir });
    expect(recovered.records.map((p) => p.id)).toEqual(['gen-a']);
    expect(recovered.holds.map((h) => h.id)).toEqual(['gen-h']);
    expect(recovered.unreadableLines).toBe(bad.length);
    expect(recovered.skipped.map((s) => [s.file, s.line])).toEqual(bad.map((_, i) => [file, 3 + i]));
    expect(recovered.skipped[0]!.reason).toBe('not a JSON object');
    expect(recovered.skipped[1]!.reason).toMatch(/hold gen-x: the amount/);
    next.close();
  });
});
