// Writes docs/contract/ (schemas and test vectors) from the code; see scripts/contract-files.ts.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { contractFiles } from './contract-files.ts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
for (const [relative, content] of contractFiles()) {
  mkdirSync(dirname(join(root, relative)), { recursive: true });
  writeFileSync(join(root, relative), content);
  console.log(`wrote ${relative}`);
}
