// Figures for docs/export.md: object counts per account in both modes, and the time of the export command on
// folders of 1k and 10k credentials, run as users run it (a child process: node src/cli/main.ts export ...).
//   node scripts/bootstrap.mjs -- node hack/export/measure.ts
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { scaleFolder } from '../../test/support/fixtures/export.ts';

const repo = join(import.meta.dirname, '..', '..');
const main = join(repo, 'src', 'cli', 'main.ts');

function run(args: string[]): { ms: number; objects: number } {
  const started = process.hrtime.bigint();
  // The report (stderr) is read and dropped: its size is part of the cost.
  const out = execFileSync(process.execPath, [main, 'export', ...args], { encoding: 'utf8', maxBuffer: 1 << 30, stdio: ['ignore', 'pipe', 'pipe'] });
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  const objects = out.split('\n').filter((l) => l.startsWith('kind: ')).length;
  return { ms: Math.round(ms), objects };
}

const results: Record<string, unknown> = {};
// One account, 3 credentials (mistral, groq, mistral) over 2 models (mistral-large, llama-3.3-70b).
for (const accounts of [1, 100]) {
  const folder = scaleFolder(accounts, 3, ['mistral', 'groq']);
  for (const [label, args] of [
    ['envoy-ai-gateway static', ['--target', 'envoy-ai-gateway']],
    ['agentgateway static', ['--target', 'agentgateway']],
    ['envoy-ai-gateway per-request', ['--target', 'envoy-ai-gateway', '--per-request']],
  ] as const) {
    results[`${accounts} account(s) x 3 credentials over 2 models, ${label}: objects`] = run([...args, folder]).objects;
  }
}
// Time for 1k and 10k credentials (3 per account over openai, anthropic, groq).
for (const credentials of [1_000, 10_000]) {
  const folder = scaleFolder(Math.ceil(credentials / 3), 3);
  for (const [label, args] of [
    ['envoy-ai-gateway static', ['--target', 'envoy-ai-gateway']],
    ['agentgateway static', ['--target', 'agentgateway']],
    ['envoy-ai-gateway per-request', ['--target', 'envoy-ai-gateway', '--per-request']],
  ] as const) {
    const r = run([...args, folder]);
    results[`${credentials} credentials, ${label}`] = { ms: r.ms, objects: r.objects };
  }
}
process.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
