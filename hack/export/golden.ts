// The golden outputs of docs/export.md: every fenced block right after a marker
//   <!-- export: <arguments>; stdout|stderr -->
// holds what `byok-operator export <arguments>` prints on that stream. A unit test (test/unit/export/docs.test.ts)
// fails when a block differs from the command's output; this script rewrites the blocks:
//   node scripts/bootstrap.mjs -- node hack/export/golden.ts
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runExport, type ExportRun } from '../../src/cli/export.ts';

export const repo = join(import.meta.dirname, '..', '..');
export const DOC = join(repo, 'docs', 'export.md');

const MARKER = /<!-- export: (.+?); (stdout|stderr) -->\n```(\w*)\n[\s\S]*?```/g;

/** The document with every golden block replaced by the command's current output. */
export async function refreshGolden(doc: string, run: (args: string[]) => Promise<ExportRun> = (args) => runExport(args, repo)): Promise<string> {
  const cache = new Map<string, ExportRun>();
  for (const [, argLine] of doc.matchAll(MARKER)) {
    if (cache.has(argLine!)) continue;
    const result = await run(argLine!.split(/\s+/));
    if (result.code !== 0) throw new Error(`export ${argLine} exited ${result.code}: ${result.stderr}`);
    cache.set(argLine!, result);
  }
  return doc.replace(MARKER, (_whole, argLine: string, stream: 'stdout' | 'stderr', lang: string) => {
    const result = cache.get(argLine)!;
    const text = result[stream].endsWith('\n') ? result[stream] : `${result[stream]}\n`;
    return `<!-- export: ${argLine}; ${stream} -->\n\`\`\`${lang}\n${text}\`\`\``;
  });
}

if (import.meta.main) {
  writeFileSync(DOC, await refreshGolden(readFileSync(DOC, 'utf8')));
  process.stdout.write(`refreshed the golden blocks of ${DOC}\n`);
}
