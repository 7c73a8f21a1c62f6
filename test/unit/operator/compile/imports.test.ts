// the compile pipeline and the health writer are parts assembled by one module each, with no import
// cycle among them (pipeline.ts used to re-export pipeline-impl.ts, which imported pipeline.ts). the
// health writer is one folder, gather → pure evaluation → write.

import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { moduleReferences } from '../../../support/module-imports.ts';

const root = resolve(import.meta.dirname, '../../../..');
const operator = join(root, 'src/operator');
const files = [
  ...readdirSync(join(operator, 'compile'))
    .filter((f) => f.endsWith('.ts'))
    .map((f) => join(operator, 'compile', f)),
  ...readdirSync(join(operator, 'health'))
    .filter((f) => f.endsWith('.ts'))
    .map((f) => join(operator, 'health', f)),
];

/** The modules a file names, read with the architecture test's parser (either quote style, dynamic imports too). */
const specsOf = (file: string): string[] => moduleReferences(readFileSync(file, 'utf8'), file).map((r) => r.spec);

/** Relative imports and re-exports (type-only ones too: they are a cycle for a reader all the same). */
function importsOf(file: string): string[] {
  return specsOf(file)
    .filter((spec) => spec.startsWith('.'))
    .map((spec) => resolve(dirname(file), spec))
    .filter((f) => files.includes(f));
}

describe('compile pipeline and health writer parts', () => {
  test('no import cycle', () => {
    const graph = new Map(files.map((f) => [f, importsOf(f)]));
    const state = new Map<string, 'open' | 'done'>();
    const cycles: string[] = [];
    const visit = (f: string, path: string[]) => {
      if (state.get(f) === 'done') return;
      if (state.get(f) === 'open') {
        cycles.push([...path.slice(path.indexOf(f)), f].map((p) => relative(root, p)).join(' → '));
        return;
      }
      state.set(f, 'open');
      for (const g of graph.get(f) ?? []) visit(g, [...path, f]);
      state.set(f, 'done');
    };
    for (const f of files) visit(f, []);
    expect(cycles).toEqual([]);
  });

  test('the parts exist and pipeline.ts assembles them', () => {
    const names = files.map((f) => relative(operator, f));
    for (const part of [
      'compile/scheduler.ts',
      'compile/keyring.ts',
      'compile/quarantine.ts',
      'compile/routing-writer.ts',
      'compile/pipeline.ts',
      'health/gather.ts',
      'health/evaluate.ts',
      'health/memory.ts',
      'health/status-writes.ts',
      'health/health-status-writer.ts',
    ])
      expect(names).toContain(part);
    expect(names).not.toContain('compile/pipeline-impl.ts');
    const assembled = importsOf(join(operator, 'compile/pipeline.ts')).map((f) => relative(operator, f));
    expect(assembled).toEqual(
      expect.arrayContaining([
        'compile/scheduler.ts',
        'compile/keyring.ts',
        'compile/quarantine.ts',
        'compile/routing-writer.ts',
      ]),
    );
    expect(importsOf(join(operator, 'health/health-status-writer.ts')).map((f) => relative(operator, f))).toEqual(
      expect.arrayContaining(['health/gather.ts', 'health/evaluate.ts', 'health/memory.ts', 'health/status-writes.ts']),
    );
    expect(readdirSync(operator).filter((f) => f.startsWith('health'))).toEqual(['health']);
  });

  test('the health evaluation is pure: no I/O, no Kubernetes, no clock of its own', () => {
    // What evaluate.ts and memory.ts may load: each other, the condition vocabulary and bookkeeping, the status
    // ownership map, and types (the gateway's report, the pipeline's delivery versions).
    const allowed = [
      'operator/health/evaluate.ts',
      'operator/conditions.ts',
      'operator/status/ownership.ts',
      'operator/compile/types.ts',
      'schema/conditions.ts',
      'contract/gateway-status.ts',
      'node:crypto',
    ];
    for (const part of ['health/evaluate.ts', 'health/memory.ts']) {
      const file = join(operator, part);
      const text = readFileSync(file, 'utf8');
      const loaded = specsOf(file).map((spec) =>
        spec.startsWith('.') ? relative(join(root, 'src'), resolve(dirname(file), spec)) : spec,
      );
      expect(loaded.length).toBeGreaterThan(0);
      expect(loaded.filter((f) => !allowed.includes(f))).toEqual([]);
      expect(text).not.toMatch(/\b(fetch|Date\.now|setTimeout|setInterval)\(/);
    }
  });
});
