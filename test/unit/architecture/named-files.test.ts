// Files named by a string rather than imported: the type checker follows an import when a file moves, but not a
// path in `new URL('./x.ts', import.meta.url)`, an npm script, CI's entry point, the bench runner's list or a
// comment. A bench that started its floors from a file since split up failed only when someone ran it; this finds
// every such name.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { moduleFilesUnder } from '../../support/module-imports.ts';

const root = resolve(import.meta.dirname, '..', '..', '..');
const CODE_DIRS = ['src', 'bench', 'scripts', 'test', 'hack'];

const codeFiles = () => CODE_DIRS.flatMap((dir) => moduleFilesUnder(join(root, dir)));

/** Relative targets of `new URL('<path>', import.meta.url)` in a source text. */
export function urlTargets(source: string): string[] {
  return [...source.matchAll(/new URL\(\s*(['"`])(\.{1,2}\/[^'"`$]+)\1\s*,\s*import\.meta\.url\s*\)/g)].map(
    (m) => m[2]!,
  );
}

/** Repository paths of files a text names: scripts on a command line (bench/x.ts, hack/z.sh), sources in a comment. */
export function repoPaths(text: string): string[] {
  return [
    ...text.matchAll(/(?<![\w/.-])((?:src|bench|scripts|hack|test|charts)\/[\w./-]+\.(?:ts|mjs|sh|js|tpl))\b/g),
  ].map((m) => m[1]!);
}

/** Shell scripts, CI's entry points, the Dockerfile and the chart: text that names files but is not a module. */
const otherFiles = () => [
  ...['scripts', 'hack', 'charts'].flatMap((dir) =>
    readdirSync(join(root, dir), { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile() && /\.(sh|tpl|yaml|txt|go|mod)$/.test(e.name))
      .map((e) => join(e.parentPath, e.name)),
  ),
  ...['.ci/run', '.ci/schemathesis.sh', 'Dockerfile'].map((f) => join(root, f)),
];

describe('files named by a string exist', () => {
  test('the patterns find what they should (so that an empty result below means something)', () => {
    expect(urlTargets("const p = fileURLToPath(new URL('./lib/peer-servers.ts', import.meta.url));")).toEqual([
      './lib/peer-servers.ts',
    ]);
    expect(urlTargets('new URL(`../x/${name}.ts`, import.meta.url)')).toEqual([]);
    expect(repoPaths('"bench": "node scripts/bootstrap.mjs -- node bench/run.ts", x: "bash hack/a.sh"')).toEqual([
      'scripts/bootstrap.mjs',
      'bench/run.ts',
      'hack/a.sh',
    ]);
  });

  test('every `new URL(path, import.meta.url)` names a file beside its source', () => {
    const missing: string[] = [];
    let seen = 0;
    // This file's own examples above are not names of files.
    for (const file of codeFiles().filter((f) => f !== import.meta.filename)) {
      for (const target of urlTargets(readFileSync(file, 'utf8'))) {
        const path = resolve(dirname(file), target);
        // Outside the repository (the team's shared data, which a lone clone lacks): its test says so itself.
        if (relative(root, path).startsWith('..')) continue;
        seen++;
        if (!existsSync(path)) missing.push(`${relative(root, file)} -> ${target}`);
      }
    }
    expect(seen).toBeGreaterThan(0);
    expect(missing).toEqual([]);
  });

  // A comment outlives the file it names (`delivery stream client (src/sdk/stream.ts)`); a newcomer then opens nothing.
  test('every repository file that code, comments, scripts, the Dockerfile and the chart name exists', () => {
    // This file's examples and the import rules' invented files are not names of files.
    const examples = [import.meta.filename, join(import.meta.dirname, 'test-imports.test.ts')];
    const missing: string[] = [];
    let seen = 0;
    for (const file of [...codeFiles(), ...otherFiles()].filter((f) => !examples.includes(f))) {
      const text = readFileSync(file, 'utf8');
      for (const path of repoPaths(text)) {
        seen++;
        if (!existsSync(join(root, path))) missing.push(`${relative(root, file)}: ${path}`);
      }
    }
    expect(seen).toBeGreaterThan(100); // the pattern saw the names, not nothing
    expect(missing).toEqual([]);
  });

  test("every script that package.json and CI's entry points name exists", () => {
    const missing: string[] = [];
    for (const name of ['package.json', '.ci/run', '.ci/schemathesis.sh']) {
      const text = readFileSync(join(root, name), 'utf8');
      for (const path of repoPaths(text)) if (!existsSync(join(root, path))) missing.push(`${name}: ${path}`);
    }
    expect(missing).toEqual([]);
  });

  test('every benchmark the bench runner lists is a file in bench/', () => {
    const source = readFileSync(join(root, 'bench', 'run.ts'), 'utf8');
    const list = /const ALL = \[([^\]]+)\]/.exec(source)?.[1] ?? '';
    const names = [...list.matchAll(/'([\w-]+)'/g)].map((m) => m[1]!);
    expect(names.length).toBeGreaterThan(5);
    expect(names.filter((n) => !existsSync(join(root, 'bench', `${n}.ts`)))).toEqual([]);
  });
});
