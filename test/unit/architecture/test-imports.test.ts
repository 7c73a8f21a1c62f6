// One test kit: a test file imports only the code under test (src/, and the scripts in scripts/ and hack/ that
// their own tests exercise), the shared harness in test/support/, and files of its own folder (or below it). What
// two folders share lives in test/support/, which itself imports only src/ and test/support/. A helper that one
// folder grew and another starts to need moves into test/support/ rather than being imported across folders.
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { moduleFilesUnder, moduleReferences } from '../../support/module-imports.ts';

const root = resolve(import.meta.dirname, '..', '..', '..');
const tests = join(root, 'test');
const support = join(tests, 'support');

/**
 * Cross-folder imports not converted yet, as "importing file -> imported file" (repo-relative). It only shrinks:
 * an entry whose import is gone fails the test. Empty: every test follows the rule.
 */
const NOT_YET_CONVERTED: readonly string[] = [];

const inside = (file: string, dir: string) => file.startsWith(dir + sep);

/** The relative imports of these files (absolute paths with their source) that leave the rule, as "importing file -> imported file". */
function crossFolderImports(files: readonly { file: string; source: string }[]): string[] {
  const out: string[] = [];
  for (const { file, source } of files) {
    const own = dirname(file);
    const isSupport = inside(file, support);
    for (const ref of moduleReferences(source, file)) {
      if (!ref.spec.startsWith('.')) continue;
      const target = resolve(own, ref.spec);
      const codeUnderTest =
        inside(target, join(root, 'src')) ||
        (!isSupport && (inside(target, join(root, 'scripts')) || inside(target, join(root, 'hack'))));
      if (codeUnderTest || inside(target, support) || (!isSupport && inside(target, own))) continue;
      out.push(`${relative(root, file)} -> ${relative(root, target)}`);
    }
  }
  return out.sort();
}

describe('test imports', () => {
  const files = moduleFilesUnder(tests);
  const found = crossFolderImports(files.map((file) => ({ file, source: readFileSync(file, 'utf8') })));

  test('every test and support file is read, at any depth', () => {
    expect(files).toContain(join(support, 'fixtures', 'compiler.ts'));
    expect(files).toContain(join(tests, 'unit', 'operator', 'compile', 'accounts.test.ts'));
    expect(files.length).toBeGreaterThan(200);
  });

  test('a test imports only src/, test/support/ and its own folder; test/support/ only src/ and itself', () => {
    expect(found.filter((i) => !NOT_YET_CONVERTED.includes(i))).toEqual([]);
  });

  test('the list of imports not converted yet only shrinks', () => {
    expect(NOT_YET_CONVERTED.filter((i) => !found.includes(i))).toEqual([]);
  });

  test('what the rule refuses and what it lets through', () => {
    const at = (path: string, source: string) => ({ file: join(root, path), source });
    expect(
      crossFolderImports([
        at(
          'test/integration/gateway/a.test.ts',
          "import { until } from '../operator/helpers.ts';\nimport { x } from './own.ts';\nimport { y } from './deeper/y.ts';",
        ),
        at(
          'test/integration/gateway/b.test.ts',
          "import { until } from '../../support/until.ts';\nimport { run } from '../../../src/cli/main.ts';\nimport { c } from '../../../scripts/check-commits.ts';\nimport pino from 'pino';",
        ),
        at(
          'test/support/c.ts',
          "import type { T } from '../integration/api/d.ts';\nimport { e } from '../../scripts/e.ts';\nimport { f } from './f.ts';",
        ),
        at('test/unit/g.test.ts', "const m = await import('../integration/h.ts');"),
      ]),
    ).toEqual([
      'test/integration/gateway/a.test.ts -> test/integration/operator/helpers.ts',
      'test/support/c.ts -> scripts/e.ts',
      'test/support/c.ts -> test/integration/api/d.ts',
      'test/unit/g.test.ts -> test/integration/h.ts',
    ]);
  });
});
