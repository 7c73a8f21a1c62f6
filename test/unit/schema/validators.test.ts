import { describe, expect, test } from '@jest/globals';
import { validateManifest } from '../../../src/schema/validators.ts';

const credential = (spec: Record<string, unknown>) => ({
  apiVersion: 'byok.gateway.dev/v1alpha1',
  kind: 'BYOKCredential',
  metadata: { name: 'c' },
  spec: { provider: 'openai', secretRef: { name: 's' }, ...spec },
});

describe('offline manifest validation', () => {
  test('accepts a valid credential', () => {
    expect(validateManifest(credential({ allowedApiKeyHashes: ['0'.repeat(64)] }))?.problems).toEqual([]);
  });

  test.each([
    [{ isFallback: true, isByokOnly: true }, 'spec', 'isByokOnly cannot be combined with isFallback'],
    [{ allowedApiKeyHashes: [] }, 'spec.allowedApiKeyHashes', 'must NOT have fewer than 1 items'],
    [{ allowedApiKeyHashes: ['ABC'] }, 'spec.allowedApiKeyHashes[0]', 'must'],
    [
      { allowedModels: Array.from({ length: 101 }, (_, i) => `v/${i}`) },
      'spec.allowedModels',
      'must NOT have more than 100 items',
    ],
    [{ provider: 'nope' }, 'spec.provider', 'unsupported value'],
    [{ surprise: true }, 'spec', 'unknown field "surprise"'],
  ])('rejects %j', (spec, path, message) => {
    const problems = validateManifest(credential(spec))?.problems ?? [];
    expect(problems.some((p) => p.path === path && p.message.includes(message))).toBe(true);
  });

  test('ignores objects of other groups and rejects unknown kinds of ours', () => {
    expect(validateManifest({ apiVersion: 'v1', kind: 'Secret' })).toBeNull();
    expect(
      validateManifest({ apiVersion: 'byok.gateway.dev/v1alpha1', kind: 'Nope', metadata: { name: 'x' }, spec: {} })
        ?.problems[0]?.message,
    ).toContain('unknown kind');
  });
});
