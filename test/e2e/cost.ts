// What delivery costs: the kube-apiserver's requests, read from its audit log (one JSON line per request stage,
// metadata only), and the operator process's CPU time and memory, read from /proc on the node.
import { closeSync, openSync, readdirSync, readFileSync, readSync, statSync } from 'node:fs';

interface AuditEvent {
  auditID: string;
  verb: string;
  user: { username: string };
  objectRef?: { resource?: string };
}

export interface RequestCount {
  total: number;
  byUser: Record<string, number>;
}

export class AuditLog {
  private readonly path: string;

  constructor(path: string) {
    this.path = path;
  }

  /** Where the log ends now: count from here later. */
  mark(): number {
    try {
      return statSync(this.path).size;
    } catch {
      return 0;
    }
  }

  private events(from = 0, to = this.mark()): AuditEvent[] {
    if (to <= from) return [];
    const buf = Buffer.alloc(to - from);
    const fd = openSync(this.path, 'r');
    try {
      readSync(fd, buf, 0, buf.length, from);
    } finally {
      closeSync(fd);
    }
    return buf
      .toString('utf8')
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as AuditEvent);
  }

  /** Distinct requests between two marks, by user. */
  requests(from: number, to: number): RequestCount {
    const seen = new Map<string, string>();
    for (const e of this.events(from, to)) seen.set(e.auditID, e.user.username);
    const byUser: Record<string, number> = {};
    for (const user of seen.values()) byUser[user] = (byUser[user] ?? 0) + 1;
    return { total: seen.size, byUser: Object.fromEntries(Object.entries(byUser).sort((a, b) => b[1] - a[1])) };
  }

  /** Distinct requests (and watches among them) made as `username`, over the whole log. */
  by(username: string): { requests: number; watches: number } {
    const requests = new Set<string>();
    const watches = new Set<string>();
    for (const e of this.events()) {
      if (e.user.username !== username) continue;
      requests.add(e.auditID);
      if (e.verb === 'watch') watches.add(e.auditID);
    }
    return { requests: requests.size, watches: watches.size };
  }
}

const CLOCK_TICKS = 100;

/** CPU seconds and resident memory of the node's processes whose command line holds every one of `args`. */
export function processCost(args: string[]): { pids: number[]; cpuSeconds: number; rssMiB: number } {
  const pids: number[] = [];
  let ticks = 0;
  let rssKiB = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (!args.every((a) => argv.includes(a))) continue;
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
      rssKiB += Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${entry}/status`, 'utf8'))?.[1] ?? 0);
      pids.push(Number(entry));
    } catch {
      // The process ended while being read.
    }
  }
  return { pids, cpuSeconds: ticks / CLOCK_TICKS, rssMiB: Math.round(rssKiB / 102.4) / 10 };
}
