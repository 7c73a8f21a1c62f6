// The chart as a dependency of an umbrella chart: Helm passes `global` to every subchart, so the subchart's
// values.schema.json must accept it, with the parent's values empty or setting globals.
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, test } from '@jest/globals';
import { parse } from 'yaml';
import { CHART_DIR, helm, helmTemplate } from '../../support/helm.ts';

const version = (parse(readFileSync(join(CHART_DIR, 'Chart.yaml'), 'utf8')) as { version: string }).version;

describe('chart as a subchart', () => {
  const parent = join(mkdtempSync(join(tmpdir(), 'umbrella-')), 'platform');
  beforeAll(async () => {
    mkdirSync(parent);
    writeFileSync(
      join(parent, 'Chart.yaml'),
      [
        'apiVersion: v2',
        'name: platform',
        'version: 1.0.0',
        'dependencies:',
        `  - name: byok-operator`,
        `    version: ${version}`,
        `    repository: file://${CHART_DIR}`,
        '',
      ].join('\n'),
    );
    writeFileSync(join(parent, 'values.yaml'), '{}\n');
    await helm(['dependency', 'build', parent]);
  });

  const template = (...set: string[]) => helmTemplate({ release: 'plat', chart: parent, namespace: 'platform', set });

  test('renders with empty parent values', async () => {
    const out = await template();
    expect(out).toMatch(/kind: Deployment\n[\s\S]*name: plat-byok-operator/);
  });

  test("renders with parent globals and subchart values, and still validates the subchart's values", async () => {
    const out = await template('global.imageRegistry=registry.example', 'byok-operator.api.replicas=3');
    expect(out).toMatch(/replicas: 3/);
    await expect(template('byok-operator.api.replicas=many')).rejects.toThrow(/replicas/);
  });
});
