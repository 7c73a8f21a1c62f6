// Where the test suite's time goes: runs the unit and integration projects as `npm test` does (three workers, three
// control planes) with test/support/file-cost.ts on, and prints one JSON object: the run's wall time and the CPU of
// every process it started, split by where it ran, and the files that cost the most CPU. On 2 cores the suite is
// CPU-bound, so a file's CPU, not its wall time, is what it takes from the others.
//
//   npm run bench:suite                      the whole suite
//   npm run bench:suite -- test/unit/export  a subset (arguments go to Jest, before its project selection)
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { processCpuSeconds } from '../test/support/proc-cpu.ts';

interface FileCost {
  file: string;
  wallS: number;
  selfCpuS: number;
  childrenCpuS: number;
  controlPlaneCpuS: number;
}

const repo = join(import.meta.dirname, '..');
const dir = mkdtempSync(join(tmpdir(), 'byok-suite-cost-'));
const out = join(dir, 'files.jsonl');

/** CPU seconds of this process's waited-for descendants (the Jest run, its workers and what they started). */
const childrenCpuS = () => processCpuSeconds('self').children;

const startedAt = Date.now();
const cpuBefore = childrenCpuS();
const run = spawnSync(
  'npm',
  [
    'run',
    'jest',
    '--',
    ...process.argv.slice(2),
    '--selectProjects',
    'unit',
    'integration',
    '--maxWorkers=3',
    '--silent',
  ],
  {
    cwd: repo,
    env: { ...process.env, BYOK_TEST_CONTROL_PLANES: '3', BYOK_TEST_FILE_COST: out },
    stdio: ['ignore', 'ignore', 'inherit'],
  },
);
const wallS = (Date.now() - startedAt) / 1000;
const cpuS = childrenCpuS() - cpuBefore;

// Absent when no worker ran a second file (a small subset): then every line is a pending one.
const lines: FileCost[] = (existsSync(out) ? readFileSync(out, 'utf8') : '')
  .trim()
  .split('\n')
  .filter(Boolean)
  .map((l) => JSON.parse(l) as FileCost);
// The last file of each worker was not closed by a later one: its end is what it read at its own afterAll.
for (const name of readdirSync(dir).filter((n) => n.startsWith('files.jsonl.pending-'))) {
  const { lastLine } = JSON.parse(readFileSync(join(dir, name), 'utf8')) as { lastLine?: FileCost };
  if (lastLine) lines.push(lastLine);
}
rmSync(dir, { recursive: true, force: true });

const round = (n: number) => Math.round(n * 10) / 10;
const sum = (xs: readonly FileCost[], f: (x: FileCost) => number) => round(xs.reduce((a, x) => a + f(x), 0));
const cpuOf = (x: FileCost) => x.selfCpuS + x.childrenCpuS + x.controlPlaneCpuS;
const project = (name: string) => lines.filter((x) => relative(repo, x.file).startsWith(`test/${name}/`));
const unit = project('unit');
const integration = project('integration');
const inFiles = sum(lines, cpuOf);

process.stdout.write(
  `${JSON.stringify(
    {
      exitCode: run.status,
      wallS: round(wallS),
      cpuS: round(cpuS),
      cores: round(cpuS / wallS),
      files: lines.length,
      unit: {
        files: unit.length,
        workerCpuS: sum(unit, (x) => x.selfCpuS),
        startedCpuS: sum(unit, (x) => x.childrenCpuS),
      },
      integration: {
        files: integration.length,
        workerCpuS: sum(integration, (x) => x.selfCpuS),
        startedCpuS: sum(integration, (x) => x.childrenCpuS),
        controlPlaneCpuS: sum(integration, (x) => x.controlPlaneCpuS),
      },
      // Jest's own process, the workers between files, idle control planes, global setup and teardown.
      outsideFilesCpuS: round(cpuS - inFiles),
      costliest: [...lines]
        .sort((a, b) => cpuOf(b) - cpuOf(a))
        .slice(0, 25)
        .map((x) => ({
          file: relative(repo, x.file),
          cpuS: round(cpuOf(x)),
          workerCpuS: round(x.selfCpuS),
          startedCpuS: round(x.childrenCpuS),
          controlPlaneCpuS: round(x.controlPlaneCpuS),
          wallS: round(x.wallS),
        })),
    },
    null,
    2,
  )}\n`,
);
process.exitCode = run.status ?? 1;
