// CPU a process has used, from /proc/<pid>/stat (Linux; the clock tick is 100 Hz there). Read by the benches that
// put a process's CPU beside its work and by the suite's per-file cost probe (file-cost.ts). Throws when the process
// is gone or /proc is absent.
import { readFileSync } from 'node:fs';

const TICKS_PER_SECOND = 100;

export interface ProcessCpu {
  /** utime + stime: the process itself, all its threads. */
  self: number;
  /** cutime + cstime: its children that it waited for, and what they waited for in turn. */
  children: number;
}

export function processCpuSeconds(pid: number | 'self'): ProcessCpu {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The fields after the command name, which may hold spaces or ')': utime stime cutime cstime are 11-14 here.
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return {
    self: (Number(f[11]) + Number(f[12])) / TICKS_PER_SECOND,
    children: (Number(f[13]) + Number(f[14])) / TICKS_PER_SECOND,
  };
}

/**
 * Seconds the hypervisor gave one cpu's time to other guests so far (the `steal` column of /proc/stat): on a shared
 * host, time the process pinned there waited without running. NaN where /proc/stat has no such cpu.
 */
export function cpuStealSeconds(cpu: string): number {
  const line = readFileSync('/proc/stat', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`cpu${cpu} `));
  return line ? Number(line.trim().split(/\s+/)[8]) / TICKS_PER_SECOND : Number.NaN;
}
