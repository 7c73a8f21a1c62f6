// The spend journal (issue 37 §2): every record and every reservation is appended to a local file before the
// response completes (a synchronous write: the kernel has it even if the process is killed the next instant), and
// marked done once the ledger has it. A restarted gateway reads what is not done: records are replayed (idempotent
// by generation id), reservations of requests it never finished are released. One process per directory (the
// chart's emptyDir; a pod's containers restart over it).
//
// Files: segments `spend-<n>.jsonl`, one JSON object a line: {"r": RecordPlan}, {"h": Reservation}, {"a": [ids]}.
// A segment is deleted when it is no longer written and every entry in it is done, so the journal holds about one
// segment plus whatever waits for the ledger. Acks are buffered for a few ms (a lost ack only replays a record that
// counts nothing again). fsync policy (docs/ledger.md, "Durability of records"): a write survives the process's death
// without fsync; fsync adds survival of the node's kernel (power loss, panic) at a cost measured in bench/journal.ts.
import { closeSync, fdatasync, fdatasyncSync, mkdirSync, openSync, readdirSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import type { Reservation } from '../../contract/spend-gate.ts';
import type { RecordPlan } from './record-plan.ts';

/** none: no fsync (survives kill -9, not a kernel crash); batch: one fdatasync per interval, off the request path; record: fdatasync before each write returns. */
export type FsyncPolicy = 'none' | 'batch' | 'record';

export interface JournalOptions {
  dir: string;
  /** Default 'batch'. */
  fsync?: FsyncPolicy;
  /** Interval of the batched fsync and of the ack flush, ms; default 10. */
  batchMs?: number;
  /** Size past which a new segment is started; default 4 MiB. */
  segmentBytes?: number;
}

/** What a previous process left undone. */
export interface RecoveredEntries {
  /** Records never confirmed by the ledger, in the order they were written. */
  records: RecordPlan[];
  /** Reservations of requests neither recorded nor released (the process died mid-request). */
  holds: Reservation[];
  /** Lines that could not be read (a write cut by the kill): skipped. */
  unreadableLines: number;
}

const SEGMENT = /^spend-(\d+)\.jsonl$/;
const segmentName = (n: number) => `spend-${String(n).padStart(10, '0')}.jsonl`;

interface Entry {
  kind: 'r' | 'h';
  segment: number;
  value: RecordPlan | Reservation;
}

export class SpendJournal {
  readonly dir: string;
  readonly fsync: FsyncPolicy;
  private readonly batchMs: number;
  private readonly segmentBytes: number;
  /** Not yet done, by id: a request may have a hold and a record, in two segments. */
  private readonly open = new Map<string, Entry[]>();
  /** Open entries per segment. */
  private readonly perSegment = new Map<number, number>();
  private segment: number;
  private fd: number;
  private bytes = 0;
  private acks: string[] = [];
  private ackTimer: NodeJS.Timeout | undefined;
  private syncTimer: NodeJS.Timeout | undefined;
  private syncing = false;
  private dirty = false;
  private closed = false;
  /** Appends and fsyncs since open (bench/journal.ts). */
  readonly stats = { appends: 0, bytes: 0, fsyncs: 0 };

  private constructor(opts: JournalOptions, lastSegment: number) {
    this.dir = opts.dir;
    this.fsync = opts.fsync ?? 'batch';
    this.batchMs = opts.batchMs ?? 10;
    this.segmentBytes = opts.segmentBytes ?? 4 * 1024 * 1024;
    this.segment = lastSegment + 1;
    this.fd = openSync(join(this.dir, segmentName(this.segment)), 'a', 0o600);
  }

  /** Opens the journal in `dir` (created if needed) and reads what a previous process left undone. */
  static open(opts: JournalOptions): { journal: SpendJournal; recovered: RecoveredEntries } {
    mkdirSync(opts.dir, { recursive: true, mode: 0o700 });
    const segments = readdirSync(opts.dir).map((f) => Number(SEGMENT.exec(f)?.[1] ?? NaN)).filter(Number.isInteger).sort((a, b) => a - b);
    const journal = new SpendJournal(opts, segments.at(-1) ?? 0);
    const recovered = journal.load(segments);
    return { journal, recovered };
  }

  private load(segments: readonly number[]): RecoveredEntries {
    let unreadableLines = 0;
    for (const n of segments) {
      this.perSegment.set(n, 0);
      for (const line of readFileSync(join(this.dir, segmentName(n)), 'utf8').split('\n')) {
        if (line === '') continue;
        let parsed: { r?: RecordPlan; h?: Reservation; a?: string[] };
        try {
          parsed = JSON.parse(line) as typeof parsed;
        } catch {
          unreadableLines++;
          continue;
        }
        if (parsed.r) this.track(parsed.r.id, { kind: 'r', segment: n, value: parsed.r });
        else if (parsed.h) this.track(parsed.h.id, { kind: 'h', segment: n, value: parsed.h });
        else if (Array.isArray(parsed.a)) for (const id of parsed.a) this.forget(id);
      }
    }
    const records: RecordPlan[] = [];
    const holds: Reservation[] = [];
    for (const entries of this.open.values()) {
      const record = entries.find((e) => e.kind === 'r');
      if (record) records.push(record.value as RecordPlan);
      else holds.push(entries[0]!.value as Reservation);
    }
    // Records replay in the order they were written (Map order is first insertion: a hold written before its record
    // puts the record at the hold's place, still before every later request's record).
    for (const n of segments) this.dropIfDone(n);
    return { records, holds, unreadableLines };
  }

  /** Appends a finished request's record; returns once the kernel has it (and the disk, with fsync 'record'). */
  record(plan: RecordPlan): void {
    this.append(plan.id, { kind: 'r', segment: this.segment, value: plan }, `{"r":${JSON.stringify(plan)}}\n`);
  }

  /** Appends a reservation made at admission. */
  hold(reservation: Reservation): void {
    this.append(reservation.id, { kind: 'h', segment: this.segment, value: reservation }, `{"h":${JSON.stringify(reservation)}}\n`);
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

  close(): void {
    if (this.closed) return;
    this.flushAcks();
    clearTimeout(this.syncTimer);
    if (this.fsync !== 'none' && this.dirty) fdatasyncSync(this.fd);
    this.closed = true;
    closeSync(this.fd);
    this.dropIfDone(this.segment, true);
  }

  private track(id: string, entry: Entry): void {
    const entries = this.open.get(id);
    if (entries) entries.push(entry);
    else this.open.set(id, [entry]);
    this.perSegment.set(entry.segment, (this.perSegment.get(entry.segment) ?? 0) + 1);
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

  /** Deletes a segment no longer written whose entries are all done. */
  private dropIfDone(n: number, evenCurrent = false): void {
    if ((n === this.segment && !evenCurrent) || (this.perSegment.get(n) ?? 0) > 0) return;
    this.perSegment.delete(n);
    try {
      unlinkSync(join(this.dir, segmentName(n)));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }

  private append(id: string, entry: Entry, line: string): void {
    if (this.closed) throw new Error('the spend journal is closed');
    // Buffered acks ride along with the next append: one write.
    const text = this.acks.length > 0 ? `${this.takeAcks()}${line}` : line;
    this.write(text);
    this.track(id, entry);
    this.stats.appends++;
    if (this.fsync === 'record') this.syncNow();
    else if (this.fsync === 'batch') this.scheduleSync();
    if (this.bytes >= this.segmentBytes) this.rotate();
  }

  private write(text: string): void {
    const buf = Buffer.from(text);
    let off = 0;
    while (off < buf.length) off += writeSync(this.fd, buf, off);
    this.bytes += buf.length;
    this.stats.bytes += buf.length;
    this.dirty = true;
  }

  private takeAcks(): string {
    const line = `{"a":${JSON.stringify(this.acks)}}\n`;
    this.acks = [];
    clearTimeout(this.ackTimer);
    this.ackTimer = undefined;
    return line;
  }

  private flushAcks(): void {
    if (this.closed || this.acks.length === 0) return;
    this.write(this.takeAcks());
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
    if (this.fsync !== 'none') fdatasyncSync(this.fd);
    const old = this.segment;
    // An fdatasync in flight on the old descriptor finishes first: closing it is deferred to the next tick of the pool.
    const oldFd = this.fd;
    this.segment += 1;
    this.fd = openSync(join(this.dir, segmentName(this.segment)), 'a', 0o600);
    this.bytes = 0;
    this.perSegment.set(this.segment, this.perSegment.get(this.segment) ?? 0);
    if (this.syncing) setTimeout(() => closeSync(oldFd), 1000).unref();
    else closeSync(oldFd);
    this.dropIfDone(old);
  }
}
