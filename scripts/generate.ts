// Writes every artifact generated from src/schema/resources.ts. A unit test fails when these are stale.
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generatedFiles } from '../src/schema/generated-files.ts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const files = await generatedFiles();
for (const dir of ['crds', 'charts/byok-operator/crds']) {
  mkdirSync(join(root, dir), { recursive: true });
  for (const stale of readdirSync(join(root, dir)).filter((f) => f.endsWith('.yaml'))) {
    if (!files.has(`${dir}/${stale}`)) rmSync(join(root, dir, stale));
  }
}
for (const [relative, content] of files) {
  mkdirSync(dirname(join(root, relative)), { recursive: true });
  writeFileSync(join(root, relative), content);
  console.log(`wrote ${relative}`);
}
