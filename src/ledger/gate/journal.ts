// The spend journal: every record and every reservation is appended to a local file before the
// response completes (a synchronous write: the kernel has it even if the process is killed the next instant), and
// marked done once the ledger has it. A restarted gateway reads what is not done: records are replayed (idempotent
// by generation id), reservations of requests it never finished are released.
//
// One process per directory: a lock file (journal-lock.ts) is taken before anything is read, and a second opener is
// refused, naming the holder. Lines are checked for their shape when read back (journal-lines.ts): a bad one is
// skipped and counted with its file and line, never a crash at every start.
//
// Files: segments `spend-<n>.jsonl`, one JSON object a line: {"r": SpendRecord}, {"h": Reservation}, {"a": [ids]}.
// A segment is deleted when it is no longer written and every entry in it is done, so the journal holds about one
// segment plus whatever waits for the ledger. Acks are buffered for a few ms (a lost ack only replays a record that
// counts nothing again). fsync policy (docs/ledger.md, "Durability of records"): a write survives the process's death
// without fsync; fsync adds survival of the node's kernel (power loss, panic) at a cost measured in bench/journal.ts.
//
// A write that fails or is cut short (ENOSPC, EIO) never leaves a torn line for the next one to be glued to: the
// segment is cut back to its last complete line, or, when that fails too, the next append starts a new segment.

import { randomUUID } from 'node:crypto';
import {
  closeSync,
  fdatasync,
  fdatasyncSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  unlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import type { Reservation } from '../../contract/spend-gate.ts';
import { idNamespace } from '../keys.ts';
import { parseJournalLine } from './journal-lines.ts';
import { JournalLock, type LockOptions } from './journal-lock.ts';
import type { SpendRecord } from './spend-record.ts';

/** none: no fsync (survives kill -9, not a kernel crash); batch: one fdatasync per interval, off the request path; record: fdatasync before each write returns. */
export type FsyncPolicy = 'none' | 'batch' | 'record';

/**
 * The journal's writes to its segment: the narrow part of the file system a full or failing disk shows itself in.
 * The real one is node:fs; the fault generator's cuts writes short and fails them (test/unit/ledger/journal.properties.test.ts).
 */
export interface JournalWriter {
  /** write(2): how many bytes went, or throws (ENOSPC, EIO). */
  write(fd: number, buf: Buffer, offset: number, length: number): number;
  /** ftruncate(2). */
  truncate(fd: number, length: number): void;
}

export const nodeWriter: JournalWriter = {
  write: (fd, buf, offset, length) => writeSync(fd, buf, offset, length),
  truncate: (fd, length) => ftruncateSync(fd, length),
};

export interface JournalOptions {
  dir: string;
  /** Default 'batch'. */
  fsync?: FsyncPolicy;
  /** Interval of the batched fsync and of the ack flush, ms; default 10. */
  batchMs?: number;
  /** Size past which a new segment is started; default 4 MiB. */
  segmentBytes?: number;
  /** The directory's lock (journal-lock.ts). */
  lock?: LockOptions;
  writer?: JournalWriter;
  /**
   * A deleted segment's landed marks (SpendRecord.keep) may go: every record in it is done. Called with the keys its
   * records named; the spend gate asks the ledger to forget them.
   */
  onSegmentDropped?: (keeps: readonly string[]) => void;
  /** The lock file was removed or replaced while this process held it. */
  onLockLost?: () => void;
}

/** A line that could not be used: where it is and why. */
export interface SkippedLine {
  file: string;
  line: number;
  reason: string;
}

/** What a previous process left undone. */
export interface RecoveredEntries {
  /** Records never confirmed by the ledger, in the order they were written. */
  records: SpendRecord[];
  /** Reservations of requests neither recorded nor released (the process died mid-request). */
  holds: Reservation[];
  /** Lines that could not be read (a write cut by the kill, a line of the wrong shape): skipped. */
  unreadableLines: number;
  /** The first few of them, with their file and line number. */
  skipped: SkippedLine[];
  /** The lock this process took over from a dead one, when it did. */
  tookOverLock: string | null;
}

const SEGMENT = /^spend-(\d+)\.jsonl$/;
const segmentName = (n: number) => `spend-${String(n).padStart(10, '0')}.jsonl`;
const ID_FILE = 'journal.id';
/** Skipped lines named one by one in RecoveredEntries (all are counted). */
const SKIPPED_NAMED = 20;

interface Entry {
  kind: 'r' | 'h';
  segment: number;
  value: SpendRecord | Reservation;
}

/** The journal's own id, kept in its directory: names the landed marks of its segments in the ledger. */
function journalId(dir: string): string {
  const path = join(dir, ID_FILE);
  try {
    const id = readFileSync(path, 'utf8').trim();
    if (/^[A-Za-z0-9-]{8,64}$/.test(id)) return id;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const id = randomUUID();
  writeFileSync(path, `${id}\n`, { mode: 0o600 });
  return id;
}

export class SpendJournal {
  readonly dir: string;
  readonly fsync: FsyncPolicy;
  readonly id: string;
  private readonly batchMs: number;
  private readonly segmentBytes: number;
  private readonly writer: JournalWriter;
  private readonly lock: JournalLock;
  private readonly onSegmentDropped: ((keeps: readonly string[]) => void) | undefined;
  /** Not yet done, by id: a request may have a hold and a record, in two segments. */
  private readonly open = new Map<string, Entry[]>();
  /** Open entries per segment. */
  private readonly perSegment = new Map<number, number>();
  /** Landed-mark keys named by each segment's records. */
  private readonly keeps = new Map<number, Set<string>>();
  private segment: number;
  private fd: number;
  /** Bytes of complete lines in the current segment: where a failed write is cut back to. */
  private bytes = 0;
  /** A failed write left bytes past `bytes` that could not be cut: the next append needs a clean segment first. */
  private torn = false;
  private acks: string[] = [];
  private ackTimer: NodeJS.Timeout | undefined;
  private syncTimer: NodeJS.Timeout | undefined;
  private syncing = false;
  private dirty = false;
  private closed = false;
  /** While reading the segments back: none is deleted before all are read (an ack mid-segment must not drop it). */
  private loading = false;
  /** Appends and fsyncs since open (bench/journal.ts); failed writes and torn tails cut back (or left behind a new segment). */
  readonly stats = { appends: 0, bytes: 0, fsyncs: 0, writeFailures: 0, tornTailsCut: 0, tornTailsLeft: 0 };

  private constructor(opts: JournalOptions, lock: JournalLock, lastSegment: number) {
    this.dir = opts.dir;
    this.fsync = opts.fsync ?? 'batch';
    this.batchMs = opts.batchMs ?? 10;
    this.segmentBytes = opts.segmentBytes ?? 4 * 1024 * 1024;
    this.writer = opts.writer ?? nodeWriter;
    this.onSegmentDropped = opts.onSegmentDropped;
    this.lock = lock;
    this.id = journalId(opts.dir);
    this.segment = lastSegment + 1;
    this.fd = openSync(join(this.dir, segmentName(this.segment)), 'a', 0o600);
  }

  /**
   * Opens the journal in `dir` (created if needed) and reads what a previous process left undone. Throws
   * JournalLockedError when another live process holds the directory.
   */
  static open(opts: JournalOptions): { journal: SpendJournal; recovered: RecoveredEntries } {
    mkdirSync(opts.dir, { recursive: true, mode: 0o700 });
    const lock = JournalLock.acquire(opts.dir, {
      ...opts.lock,
      ...(opts.onLockLost ? { onLost: opts.onLockLost } : {}),
    });
    try {
      const segments = readdirSync(opts.dir)
        .map((f) => Number(SEGMENT.exec(f)?.[1] ?? NaN))
        .filter(Number.isInteger)
        .sort((a, b) => a - b);
      const journal = new SpendJournal(opts, lock, segments.at(-1) ?? 0);
      const recovered = journal.load(segments);
      const t = lock.tookOver;
      recovered.tookOverLock = t
        ? `${t.holder ? `pid ${t.holder.pid} on ${t.holder.host}, instance ${t.holder.instance}` : 'an unreadable lock'}: ${t.why}`
        : null;
      return { journal, recovered };
    } catch (err) {
      lock.release();
      throw err;
    }
  }

  private load(segments: readonly number[]): RecoveredEntries {
    const out: RecoveredEntries = { records: [], holds: [], unreadableLines: 0, skipped: [], tookOverLock: null };
    this.loading = true;
    for (const n of segments) {
      this.perSegment.set(n, 0);
      const file = join(this.dir, segmentName(n));
      const bytes = readFileSync(file);
      let line = 0;
      for (let start = 0; start < bytes.length; ) {
        let end = bytes.indexOf(0x0a, start);
        if (end < 0) end = bytes.length;
        line++;
        if (end > start) {
          const parsed = parseJournalLine(bytes, start, end);
          if ('error' in parsed) {
            out.unreadableLines++;
            if (out.skipped.length < SKIPPED_NAMED) out.skipped.push({ file, line, reason: parsed.error });
          } else if (parsed.kind === 'r') this.track(parsed.plan.id, { kind: 'r', segment: n, value: parsed.plan });
          else if (parsed.kind === 'h') this.track(parsed.hold.id, { kind: 'h', segment: n, value: parsed.hold });
          else for (const id of parsed.ids) this.forget(id);
        }
        start = end + 1;
      }
    }
    for (const entries of this.open.values()) {
      const record = entries.find((e) => e.kind === 'r');
      if (record) out.records.push(record.value as SpendRecord);
      else out.holds.push(entries[0]!.value as Reservation);
    }
    // Records replay in the order they were written (Map order is first insertion: a hold written before its record
    // puts the record at the hold's place, still before every later request's record).
    this.loading = false;
    for (const n of segments) this.dropIfDone(n);
    return out;
  }

  /** Appends a finished request's record; returns once the kernel has it (and the disk, with fsync 'record'). */
  record(plan: SpendRecord): void {
    this.ready();
    const ns = idNamespace(plan.increments[0]?.key ?? plan.settle?.holdKeys[0] ?? '');
    const segment = this.segment;
    if (ns !== '') plan.keep = `${ns}:jids:${this.id}:${segment}`;
    try {
      this.append(plan.id, { kind: 'r', segment, value: plan }, `{"r":${JSON.stringify(plan)}}\n`);
    } catch (err) {
      // Not on disk: nothing will replay it, so the ledger needs no mark of it. (On disk, and only the new segment
      // failed to open: the mark stays, as the line names it.)
      if (!this.open.get(plan.id)?.some((e) => e.value === plan)) delete plan.keep;
      throw err;
    }
  }

  /** Appends a reservation made at admission. */
  hold(reservation: Reservation): void {
    this.ready();
    this.append(
      reservation.id,
      { kind: 'h', segment: this.segment, value: reservation },
      `{"h":${JSON.stringify(reservation)}}\n`,
    );
  }

  /** The request's record landed, or its reservation was released: nothing of it is replayed. */
  done(id: string): void {
    if (this.closed || !this.open.has(id)) return;
    this.forget(id);
    this.acks.push(id);
    this.ackTimer ??= setTimeout(() => this.flushAcks(), this.batchMs).unref();
  }

  /** Entries not done yet. */
  size(): number {
    return this.open.size;
  }

  /** Records not done yet, in the order they were written (what waits for the ledger, in memory or not). */
  *pendingRecords(): Iterable<SpendRecord> {
    for (const entries of this.open.values()) for (const e of entries) if (e.kind === 'r') yield e.value as SpendRecord;
  }

  close(): void {
    if (this.closed) return;
    this.flushAcks();
    clearTimeout(this.syncTimer);
    clearTimeout(this.ackTimer);
    if (this.fsync !== 'none' && this.dirty) fdatasyncSync(this.fd);
    this.closed = true;
    closeSync(this.fd);
    this.dropIfDone(this.segment, true);
    this.lock.release();
  }

  /** As if the process were killed now (tests and the fault generator): no ack is written, the lock is left behind. */
  abandon(): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.syncTimer);
    clearTimeout(this.ackTimer);
    closeSync(this.fd);
    this.lock.abandon();
  }

  private track(id: string, entry: Entry): void {
    const entries = this.open.get(id);
    if (entries) entries.push(entry);
    else this.open.set(id, [entry]);
    this.perSegment.set(entry.segment, (this.perSegment.get(entry.segment) ?? 0) + 1);
    if (entry.kind === 'r') {
      const keep = (entry.value as SpendRecord).keep;
      if (keep !== undefined) {
        let set = this.keeps.get(entry.segment);
        if (!set) this.keeps.set(entry.segment, (set = new Set()));
        set.add(keep);
      }
    }
  }

  private forget(id: string): void {
    const entries = this.open.get(id);
    if (!entries) return;
    this.open.delete(id);
    for (const e of entries) {
      this.perSegment.set(e.segment, (this.perSegment.get(e.segment) ?? 1) - 1);
      this.dropIfDone(e.segment);
    }
  }

  /** Deletes a segment no longer written whose entries are all done; then its landed marks may go. */
  private dropIfDone(n: number, evenCurrent = false): void {
    if (this.loading || (n === this.segment && !evenCurrent) || (this.perSegment.get(n) ?? 0) > 0) return;
    this.perSegment.delete(n);
    try {
      unlinkSync(join(this.dir, segmentName(n)));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    const keeps = this.keeps.get(n);
    this.keeps.delete(n);
    // After the unlink: nothing of this segment can be replayed any more, so its marks are no longer needed.
    if (keeps && keeps.size > 0) this.onSegmentDropped?.([...keeps]);
  }

  /** Before an append picks its segment: open, and no torn tail in the way. */
  private ready(): void {
    if (this.closed) throw new Error('the spend journal is closed');
    if (this.torn) this.recoverFromTear();
  }

  private append(id: string, entry: Entry, line: string): void {
    // Buffered acks ride along with the next append: one write.
    const acks = this.acks;
    const text = acks.length > 0 ? `${this.takeAcks()}${line}` : line;
    try {
      this.write(text);
    } catch (err) {
      // The acks go again with the next write (an ack lost only replays a record that counts nothing again).
      this.acks = acks.concat(this.acks);
      throw err;
    }
    this.track(id, entry);
    this.stats.appends++;
    if (this.fsync === 'record') this.syncNow();
    else if (this.fsync === 'batch') this.scheduleSync();
    // A new segment that cannot be opened (the disk full, the directory gone) is reported as a failed write: the
    // record is on disk, in the current segment, and the next append tries again.
    if (this.bytes >= this.segmentBytes) this.rotate();
  }

  /** Writes whole lines or nothing: bytes of a failed or short write are cut back (or left behind a new segment). */
  private write(text: string): void {
    const buf = Buffer.from(text);
    let off = 0;
    try {
      while (off < buf.length) off += this.writer.write(this.fd, buf, off, buf.length - off);
    } catch (err) {
      this.stats.writeFailures++;
      // Even when no call reported bytes written: a failed write(2) on some file systems leaves some behind.
      this.cutTail();
      throw err;
    }
    this.bytes += buf.length;
    this.stats.bytes += buf.length;
    this.dirty = true;
  }

  /** A write stopped part way: the segment ends mid-line. Cut it back to its last newline. */
  private cutTail(): void {
    try {
      this.writer.truncate(this.fd, this.bytes);
      this.stats.tornTailsCut++;
    } catch {
      this.torn = true;
    }
  }

  /** Before the next append after a tail that could not be cut: cut it now, or start a new segment (throws if neither works). */
  private recoverFromTear(): void {
    try {
      this.writer.truncate(this.fd, this.bytes);
      this.stats.tornTailsCut++;
      this.torn = false;
      return;
    } catch {
      // still cannot cut: a new segment, the torn line left at the old one's end (skipped and counted when read)
    }
    this.rotate();
    this.stats.tornTailsLeft++;
    this.torn = false;
  }

  private takeAcks(): string {
    const line = `{"a":${JSON.stringify(this.acks)}}\n`;
    this.acks = [];
    clearTimeout(this.ackTimer);
    this.ackTimer = undefined;
    return line;
  }

  /** Writes the buffered acks; a failure keeps them for the next write (never thrown out of a timer). */
  private flushAcks(): void {
    if (this.closed || this.acks.length === 0) return;
    const acks = this.acks;
    try {
      if (this.torn) this.recoverFromTear();
      this.write(this.takeAcks());
    } catch {
      this.acks = acks.concat(this.acks);
      return;
    }
    if (this.fsync === 'batch') this.scheduleSync();
  }

  private syncNow(): void {
    fdatasyncSync(this.fd);
    this.stats.fsyncs++;
    this.dirty = false;
  }

  /** One fdatasync per interval on the thread pool: the event loop never waits for the disk. */
  private scheduleSync(): void {
    if (this.syncTimer !== undefined || this.syncing) return;
    this.syncTimer = setTimeout(() => {
      this.syncTimer = undefined;
      if (this.closed || !this.dirty) return;
      this.dirty = false;
      this.syncing = true;
      const fd = this.fd;
      fdatasync(fd, () => {
        this.syncing = false;
        this.stats.fsyncs++;
        if (this.dirty) this.scheduleSync();
      });
    }, this.batchMs);
    this.syncTimer.unref();
  }

  private rotate(): void {
    const next = openSync(join(this.dir, segmentName(this.segment + 1)), 'a', 0o600);
    if (this.fsync !== 'none') {
      try {
        fdatasyncSync(this.fd);
      } catch {
        // what it holds is in the page cache: it survives the process, as with fsync none
      }
    }
    const old = this.segment;
    // An fdatasync in flight on the old descriptor finishes first: closing it is deferred to the next tick of the pool.
    const oldFd = this.fd;
    this.segment += 1;
    this.fd = next;
    this.bytes = 0;
    this.perSegment.set(this.segment, this.perSegment.get(this.segment) ?? 0);
    if (this.syncing) setTimeout(() => closeSync(oldFd), 1000).unref();
    else closeSync(oldFd);
    this.dropIfDone(old);
  }
}
