// /proc/<pid>/status fields in MB, read by the benchmark (the operator's peak RSS) and by the operator child's
// diag sampler (its own RSS split). Linux only: NaN elsewhere.
import { readFileSync } from 'node:fs';

export function procStatusMB(pid: number | 'self', field: 'VmHWM' | 'VmRSS' | 'RssAnon' | 'RssFile'): number {
  try {
    const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

/**
 * Milliseconds the hypervisor gave one cpu's time to other guests (the `steal` column of /proc/stat), so far. A
 * shared host's steal on the measured core is time the system under test waited without running; NaN elsewhere.
 */
export function cpuStealMs(cpu: string): number {
  try {
    const line = readFileSync('/proc/stat', 'utf8')
      .split('\n')
      .find((l) => l.startsWith(`cpu${cpu} `));
    const steal = line ? Number(line.trim().split(/\s+/)[8]) : NaN;
    return (steal * 1000) / 100;
  } catch {
    return NaN;
  }
}
