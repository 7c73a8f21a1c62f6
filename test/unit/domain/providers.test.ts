// PROVIDER_SLUGS stays in step with the shared list of 109 slugs (spec 2.3), when that file is available.

import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from '@jest/globals';
import { isProviderSlug, PROVIDER_SLUGS } from '../../../src/domain/index.ts';

const SHARED = fileURLToPath(new URL('../../../../shared/data/byok-provider-slugs.txt', import.meta.url));

describe('provider slugs', () => {
  test('109 unique lowercase slugs, at most one slash each', () => {
    expect(PROVIDER_SLUGS).toHaveLength(109);
    expect(new Set(PROVIDER_SLUGS).size).toBe(109);
    for (const s of PROVIDER_SLUGS) expect(s).toMatch(/^[a-z0-9-]+(\/[a-z0-9-]+)?$/);
    expect(isProviderSlug('amazon-bedrock/claude-on-aws')).toBe(true);
    expect(isProviderSlug('Amazon-Bedrock')).toBe(false);
    expect(isProviderSlug(5)).toBe(false);
  });

  (existsSync(SHARED) ? test : test.skip)('equal the shared slug list (../shared/data/byok-provider-slugs.txt)', () => {
    const shared = readFileSync(SHARED, 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'));
    expect([...PROVIDER_SLUGS].sort()).toEqual([...shared].sort());
  });
});
