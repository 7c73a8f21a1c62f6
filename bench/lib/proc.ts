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
