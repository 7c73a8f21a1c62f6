// One process per spend journal directory. A second gateway on the same directory would read the first one's live
// entries as a dead process's: release its in-flight holds and delete its live segment. Node has no flock, so the
// lock is a file, `journal.lock`, created whole or not at all (written to a temporary name, then link(2), which
// fails when the name exists), naming its holder: a random instance id, pid, host, boot id, pid namespace, the
// process's start time in /proc and a heartbeat (the file's mtime, touched every second through the holder's own
// descriptor).
//
// Is the holder alive? A pid alone cannot say: pids are reused, and in containers every gateway may be pid 1.
// - Same host, boot and pid namespace: /proc/<pid>/stat's start time must still match (a reused pid has another);
//   within this process, the instance must be one it still holds (a journal dropped without close, as in tests).
// - Same host, another boot: gone (a reboot ends every process).
// - Otherwise (a restarted container of the same pod: another pid namespace; another host on a shared volume): the
//   heartbeat decides. A lock whose mtime stops for `staleMs` (10 s) is stale; the opener waits that long at most,
//   and refuses as soon as it sees the heartbeat move.
// A stale lock is taken over by renaming it aside and checking that what was moved is the lock judged stale (two
// openers racing over one stale lock: the loser puts back what it moved and refuses).

import { randomUUID } from 'node:crypto';
import {
  closeSync,
  fstatSync,
  futimesSync,
  linkSync,
  openSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';

export const LOCK_FILE = 'journal.lock';

export interface LockHolder {
  instance: string;
  pid: number;
  host: string;
  bootId: string | null;
  pidNamespace: string | null;
  /** Field 22 of /proc/<pid>/stat (clock ticks since boot): tells a reused pid from the holder. */
  procStart: string | null;
  startedAt: string;
}

export interface LockOptions {
  /** A lock whose heartbeat is older than this is stale when its holder cannot be checked in /proc; default 10 s. */
  staleMs?: number;
  /** How often the holder touches the lock; default 1 s. */
  heartbeatMs?: number;
}

/** The directory's lock is held by a live process: this one must not start on it. */
export class JournalLockedError extends Error {
  readonly dir: string;
  readonly holder: LockHolder | null;
  constructor(dir: string, holder: LockHolder | null, why: string, staleMs: number) {
    const who = holder
      ? `pid ${holder.pid} on ${holder.host}, started ${holder.startedAt}, instance ${holder.instance}`
      : 'a lock file this version cannot read';
    super(
      `spend journal ${dir} is in use by another gateway (${who}; ${why}): run one gateway per --ledger-journal directory. ` +
        `Give this gateway a directory of its own; if that process is gone, remove ${join(dir, LOCK_FILE)} (a lock whose heartbeat stops for ${staleMs / 1000} s is taken over by itself)`,
    );
    this.name = 'JournalLockedError';
    this.dir = dir;
    this.holder = holder;
  }
}

/** Instances this process holds: a lock naming this pid and another instance was left by a journal never closed. */
const heldHere = new Set<string>();

const readOr = (path: string): string | null => {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return null;
  }
};
const bootId = (): string | null => readOr('/proc/sys/kernel/random/boot_id');
const pidNamespace = (): string | null => {
  try {
    return statSync('/proc/self/ns/pid').ino.toString();
  } catch {
    return null;
  }
};
/** Field 22 of /proc/<pid>/stat, or null when there is no such process (or no /proc). After the last ')': comm may hold spaces. */
function procStart(pid: number): string | null {
  const stat = readOr(`/proc/${pid}/stat`);
  if (stat === null) return null;
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
}

function parseHolder(text: string | null): LockHolder | null {
  if (text === null) return null;
  try {
    const h = JSON.parse(text) as Partial<LockHolder>;
    if (
      typeof h.instance !== 'string' ||
      !Number.isSafeInteger(h.pid) ||
      typeof h.host !== 'string' ||
      typeof h.startedAt !== 'string'
    )
      return null;
    return {
      instance: h.instance,
      pid: h.pid!,
      host: h.host,
      bootId: h.bootId ?? null,
      pidNamespace: h.pidNamespace ?? null,
      procStart: h.procStart ?? null,
      startedAt: h.startedAt,
    };
  } catch {
    return null;
  }
}

const sleep = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

type Verdict = { alive: true; why: string } | { alive: false; why: string };

/** What the holder's identity says without waiting, or null when only its heartbeat can tell. */
function judgeByIdentity(h: LockHolder, me: LockHolder): Verdict | null {
  if (h.host !== me.host) return null;
  if (h.bootId !== null && me.bootId !== null && h.bootId !== me.bootId)
    return { alive: false, why: 'its host has rebooted since' };
  if (h.pidNamespace === null || h.pidNamespace !== me.pidNamespace || h.bootId !== me.bootId) return null;
  if (h.pid === me.pid)
    return heldHere.has(h.instance)
      ? { alive: true, why: 'held by this very process' }
      : { alive: false, why: 'left by this process, which no longer holds it' };
  const start = procStart(h.pid);
  if (start === null) return { alive: false, why: `no process ${h.pid}` };
  if (h.procStart !== null && start !== h.procStart)
    return { alive: false, why: `pid ${h.pid} is another process now` };
  return { alive: true, why: `process ${h.pid} is running` };
}

export class JournalLock {
  readonly path: string;
  readonly holder: LockHolder;
  /** The lock this one replaced, when it took over a stale one (for the log). */
  readonly tookOver: { holder: LockHolder | null; why: string } | null;
  private readonly fd: number;
  private readonly ino: number;
  private readonly timer: NodeJS.Timeout;
  private released = false;

  private constructor(
    path: string,
    holder: LockHolder,
    tookOver: JournalLock['tookOver'],
    heartbeatMs: number,
    onLost: (() => void) | undefined,
  ) {
    this.path = path;
    this.holder = holder;
    this.tookOver = tookOver;
    this.fd = openSync(path, 'r');
    this.ino = fstatSync(this.fd).ino;
    heldHere.add(holder.instance);
    this.timer = setInterval(() => {
      try {
        futimesSync(this.fd, new Date(), new Date());
        if (statSync(this.path).ino !== this.ino) throw new Error('replaced');
      } catch {
        // Removed or replaced by hand: say so once; the journal goes on (the refusal at start is what guards).
        clearInterval(this.timer);
        onLost?.();
      }
    }, heartbeatMs);
    this.timer.unref();
  }

  /** Takes the lock of `dir`, or throws JournalLockedError naming the holder and the way out. */
  static acquire(dir: string, opts: LockOptions & { onLost?: () => void } = {}): JournalLock {
    const staleMs = opts.staleMs ?? 10_000;
    const path = join(dir, LOCK_FILE);
    const me: LockHolder = {
      instance: randomUUID(),
      pid: process.pid,
      host: hostname(),
      bootId: bootId(),
      pidNamespace: pidNamespace(),
      procStart: procStart(process.pid),
      startedAt: new Date().toISOString(),
    };
    let tookOver: JournalLock['tookOver'] = null;
    for (let attempt = 0; ; attempt++) {
      if (tryCreate(path, me)) return new JournalLock(path, me, tookOver, opts.heartbeatMs ?? 1000, opts.onLost);
      if (attempt >= 3) throw new JournalLockedError(dir, null, 'the lock keeps coming back', staleMs);
      const text = readOr(path);
      if (text === null) continue; // released meanwhile
      const holder = parseHolder(text);
      const verdict = (holder ? judgeByIdentity(holder, me) : null) ?? judgeByHeartbeat(path, staleMs);
      if (verdict === 'gone') continue;
      if (verdict.alive) throw new JournalLockedError(dir, holder, verdict.why, staleMs);
      if (!takeOver(path, text, me.instance))
        throw new JournalLockedError(dir, holder, 'another process took the stale lock first', staleMs);
      tookOver = { holder, why: verdict.why };
    }
  }

  /** Drops the lock (close): the directory is free for the next process. */
  release(): void {
    if (this.released) return;
    this.released = true;
    clearInterval(this.timer);
    heldHere.delete(this.holder.instance);
    try {
      // Only our own file: a lock replaced by hand is someone else's now.
      if (statSync(this.path).ino === this.ino) unlinkSync(this.path);
    } catch {
      // already gone
    }
    closeSync(this.fd);
  }

  /** As if the process were killed: the lock file stays, its heartbeat stops, this process no longer holds it. */
  abandon(): void {
    if (this.released) return;
    this.released = true;
    clearInterval(this.timer);
    heldHere.delete(this.holder.instance);
    closeSync(this.fd);
  }
}

/** Creates the lock whole, or returns false when one exists. */
function tryCreate(path: string, me: LockHolder): boolean {
  const tmp = `${path}.${me.instance}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(me)}\n`, { mode: 0o600, flag: 'wx' });
  try {
    linkSync(tmp, path);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  } finally {
    unlinkSync(tmp);
  }
}

/** Waits until the lock's heartbeat moves (alive) or is older than staleMs (stale); 'gone' when it disappears. */
function judgeByHeartbeat(path: string, staleMs: number): Verdict | 'gone' {
  let first: number;
  try {
    first = statSync(path).mtimeMs;
  } catch {
    return 'gone';
  }
  for (;;) {
    let mtime: number;
    try {
      mtime = statSync(path).mtimeMs;
    } catch {
      return 'gone';
    }
    if (mtime !== first) return { alive: true, why: 'its heartbeat is moving' };
    const age = Date.now() - mtime;
    if (age > staleMs) return { alive: false, why: `its heartbeat stopped ${Math.round(age / 1000)} s ago` };
    sleep(Math.min(200, staleMs - age + 1));
  }
}

/** Moves the stale lock aside; false when what was moved is not the lock judged stale (it is put back). */
function takeOver(path: string, judged: string, instance: string): boolean {
  const aside = `${path}.${instance}.stale`;
  try {
    renameSync(path, aside);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return true; // someone removed it: try to create again
    throw err;
  }
  const moved = readOr(aside);
  if (moved !== judged) {
    try {
      linkSync(aside, path);
    } catch {
      // a third opener created one meanwhile: it holds the directory
    }
    unlinkSync(aside);
    return false;
  }
  unlinkSync(aside);
  return true;
}
