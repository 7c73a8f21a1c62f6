// Generated artifacts must match what `npm run generate` produces from src/schema/resources.ts.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { generatedFiles } from '../../../src/schema/generated-files.ts';
import type { SchemaNode } from '../../../src/schema/json-schema.ts';
import { RESOURCES } from '../../../src/schema/resources.ts';

const root = join(import.meta.dirname, '..', '..', '..');

describe('generated files', () => {
  test('are up to date (run `npm run generate` after changing src/schema)', async () => {
    const files = await generatedFiles();
    for (const [relative, content] of files) {
      expect({ file: relative, content: readFileSync(join(root, relative), 'utf8') }).toEqual({
        file: relative,
        content,
      });
    }
    for (const dir of ['crds', 'charts/byok-operator/crds']) {
      const committed = readdirSync(join(root, dir)).map((f) => `${dir}/${f}`);
      expect(committed.sort()).toEqual([...files.keys()].filter((f) => f.startsWith(`${dir}/`)).sort());
    }
  });

  test('every schema node has a description for kubectl explain', () => {
    const missing: string[] = [];
    const walk = (node: SchemaNode, path: string) => {
      if (!node.description?.trim()) missing.push(path);
      for (const [key, child] of Object.entries(node.properties ?? {})) walk(child, `${path}.${key}`);
      if (node.items) walk(node.items, `${path}[]`);
    };
    for (const r of RESOURCES) {
      walk(r.spec, `${r.kind}.spec`);
      walk(r.status, `${r.kind}.status`);
    }
    expect(missing).toEqual([]);
  });
});
