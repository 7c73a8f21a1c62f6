// LAST USED (kubectl get byok) moves in steps of the health writer's resolution, so it can be up to about a
// minute behind; the column's description says so (kubectl explain / the CRD), rather than leaving readers to wonder.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { byokCredential } from '../../../src/schema/resources.ts';

const repoRoot = join(import.meta.dirname, '..', '..', '..');

describe('the Last Used printer column', () => {
  test('says it can be up to a minute stale, and why', () => {
    const column = byokCredential.printerColumns!.find((c) => c.name === 'Last Used')!;
    expect(column.jsonPath).toBe('.status.lastUsedTime');
    expect(column.description).toMatch(/up to about a minute stale/);
    expect(column.description).toMatch(/resolution \(default 1 min\)/);
    // The default it names is the health writer's.
    expect(readFileSync(join(repoRoot, 'src', 'operator', 'health', 'health-status-writer.ts'), 'utf8')).toContain(
      'config.lastUsedResolutionMs ?? 60_000',
    );
  });

  test('the generated CRD carries the same description', () => {
    const crd = readFileSync(join(repoRoot, 'crds', 'byokcredentials.byok.gateway.dev.yaml'), 'utf8');
    expect(crd).toContain('up to about a minute stale');
  });
});
