// The chart as a dependency of an umbrella chart: Helm passes `global` to every subchart, so the subchart's
// values.schema.json must accept it, with the parent's values empty or setting globals.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, test } from '@jest/globals';
import { parse } from 'yaml';

const run = promisify(execFile);
const helm = join(process.env.BYOK_CONTROL_PLANE_BIN ?? '', 'helm');
const chart = join(import.meta.dirname, '..', '..', '..', 'charts', 'byok-operator');
const version = (parse(readFileSync(join(chart, 'Chart.yaml'), 'utf8')) as { version: string }).version;

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
        `    repository: file://${chart}`,
        '',
      ].join('\n'),
    );
    writeFileSync(join(parent, 'values.yaml'), '{}\n');
    await run(helm, ['dependency', 'build', parent], { encoding: 'utf8' });
  });

  const template = async (...extra: string[]) =>
    (
      await run(helm, ['template', 'plat', parent, '-n', 'platform', '--kube-version', '1.34.4', ...extra], {
        encoding: 'utf8',
        maxBuffer: 64 << 20,
      })
    ).stdout;

  test('renders with empty parent values', async () => {
    const out = await template();
    expect(out).toMatch(/kind: Deployment\n[\s\S]*name: plat-byok-operator/);
  });

  test("renders with parent globals and subchart values, and still validates the subchart's values", async () => {
    const out = await template(
      '--set',
      'global.imageRegistry=registry.example',
      '--set',
      'byok-operator.api.replicas=3',
    );
    expect(out).toMatch(/replicas: 3/);
    await expect(template('--set', 'byok-operator.api.replicas=many')).rejects.toThrow(/replicas/);
  });
});
