// What each test file costs the machine, for `npm run bench:suite` (bench/suite-cost.ts): with BYOK_TEST_FILE_COST set
// to a file, jest.config.mjs loads this and every test file appends one JSON line to it. The suite is CPU-bound on 2
// cores, so a file's wall time says little; its CPU says what it takes from the others. Linux only: it reads /proc.
//
// - `selfCpuS`: the Jest worker's own CPU while the file ran (its imports included: this runs before the file loads);
// - `childrenCpuS`: processes the file started and waited for (kubectl, helm, gateways, the CLI, npm);
// - `controlPlaneCpuS`: the worker's kube-apiserver and etcd (integration files; they share it with nothing else).
import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, expect } from '@jest/globals';
import { type ProcessCpu, processCpuSeconds } from './proc-cpu.ts';

const out = process.env.BYOK_TEST_FILE_COST;

/** A process's CPU, or none once it is gone. */
function cpuOf(pid: number | 'self'): ProcessCpu {
  try {
    return processCpuSeconds(pid);
  } catch {
    return { self: 0, children: 0 };
  }
}

/** kube-apiserver and etcd of a control plane, by the pid files it keeps in its work directory. */
function controlPlaneCpu(workDir: string | undefined): number {
  if (!workDir) return 0;
  let sum = 0;
  for (const name of ['kube-apiserver', 'etcd']) {
    try {
      sum += cpuOf(Number(readFileSync(join(workDir, `${name}.pid`), 'utf8'))).self;
    } catch {
      // not running
    }
  }
  return sum;
}

interface Mark {
  at: number;
  self: number;
  children: number;
  plane: number;
}
interface Pending {
  file: string;
  /**
   * An integration file's control plane, as the file saw it (none for a unit file: not its to count). A file's end is
   * marked in the next file's context, and Jest gives each file its own copy of process.env, where a unit file's
   * (no worker-control-plane.ts) names plane 1 whatever the worker.
   */
  workDir: string | undefined;
  start: Mark;
  /** The file's line as read at its first root-level afterAll: bench/suite-cost.ts takes it when no file follows. */
  lastLine?: ReturnType<typeof costLine>;
}

const mark = (plane: string | undefined): Mark => ({
  at: Date.now(),
  ...cpuOf('self'),
  plane: controlPlaneCpu(plane),
});

function costLine(p: Pending, end: Mark) {
  const round = (n: number) => Math.round(n * 100) / 100;
  return {
    file: p.file,
    wallS: round((end.at - p.start.at) / 1000),
    selfCpuS: round(end.self - p.start.self),
    childrenCpuS: round(end.children - p.start.children),
    controlPlaneCpuS: round(end.plane - p.start.plane),
  };
}

if (out) {
  // A file ends when the next one in its worker starts: its root-level afterAll hooks run after this file's, and a
  // file's teardown (stopping servers, the GC of its module graph) is its own cost.
  const pendingPath = `${out}.pending-${process.pid}`;
  let previous: Pending | undefined;
  try {
    previous = JSON.parse(readFileSync(pendingPath, 'utf8')) as Pending;
  } catch {
    // the worker's first file
  }
  if (previous) appendFileSync(out, `${JSON.stringify(costLine(previous, mark(previous.workDir)))}\n`);
  const file = expect.getState().testPath ?? '';
  const workDir = file.includes('/test/integration/') ? process.env.BYOK_TEST_WORKDIR : undefined;
  const pending: Pending = {
    file,
    workDir,
    start: mark(workDir),
  };
  writeFileSync(pendingPath, JSON.stringify(pending));
  afterAll(() =>
    writeFileSync(pendingPath, JSON.stringify({ ...pending, lastLine: costLine(pending, mark(workDir)) })),
  );
}
