// Runs the benchmarks one after another (they share 2 cores, so never in parallel) and prints one JSON
// object keyed by benchmark. `npm run bench -- planner api` runs a subset; extra flags after `--` go to each.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

const ALL = [
  'planner',
  'layout',
  'api',
  'operator',
  'ledger',
  'ledger-ids',
  'aggregated',
  'gateway',
  'gateway-gc',
  'stream-framing',
  'peers',
  'health',
  'delivery-stream',
] as const;
type Name = (typeof ALL)[number];

const args = process.argv.slice(2);
const split = args.indexOf('--');
const names = (split === -1 ? args : args.slice(0, split)).filter((a): a is Name =>
  (ALL as readonly string[]).includes(a),
);
const passThrough = split === -1 ? [] : args.slice(split + 1);
const selected: readonly Name[] = names.length > 0 ? names : ALL;

const results: Record<string, unknown> = {};
let failed = false;
for (const name of selected) {
  process.stderr.write(`[bench] ${name}...\n`);
  const run = spawnSync(process.execPath, [join(import.meta.dirname, `${name}.ts`), ...passThrough], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
    maxBuffer: 64 * 1024 * 1024,
  });
  const lastJsonLine = run.stdout
    .trim()
    .split('\n')
    .reverse()
    .find((l) => l.trimStart().startsWith('{'));
  const json = run.stdout.trim().startsWith('{') ? run.stdout.trim() : lastJsonLine;
  try {
    results[name] = json ? (JSON.parse(json) as unknown) : { error: `no JSON output (exit ${run.status})` };
  } catch {
    results[name] = { error: `unparseable output (exit ${run.status})` };
  }
  if (run.status !== 0) failed = true;
}
process.stdout.write(
  `${JSON.stringify({ node: process.version, when: new Date().toISOString(), results }, null, 2)}\n`,
);
process.exitCode = failed ? 1 : 0;
