// Writes every artifact generated from src/schema/resources.ts, and the chart's copy of the one catalog. Unit tests
// fail when these are stale.
import { copyFileSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CATALOG_PATH, CHART_CATALOG_PATH } from '../src/cli/catalog.ts';
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
// Helm reads only files inside the chart: it ships a byte copy of config/catalog/catalog.json (test/unit/cli/catalog.test.ts).
mkdirSync(dirname(join(root, CHART_CATALOG_PATH)), { recursive: true });
copyFileSync(join(root, CATALOG_PATH), join(root, CHART_CATALOG_PATH));
console.log(`wrote ${CHART_CATALOG_PATH}`);
