import { describe, expect, it } from '@jest/globals';
import { DEFAULT_SECRET_KEY, secretRefKey } from '../../../src/domain/secret-ref.ts';
import { byokCredential } from '../../../src/schema/resources.ts';

describe('secretRefKey', () => {
  it('gives the named key, else the default one', () => {
    expect(secretRefKey({ key: 'payload.json' })).toBe('payload.json');
    expect(secretRefKey({})).toBe('key');
    expect(secretRefKey({ key: undefined })).toBe(DEFAULT_SECRET_KEY);
  });

  it('defaults to the key the CRD schema defaults to, so the apiserver and the operator read the same entry', () => {
    expect(byokCredential.spec.properties?.secretRef?.properties?.key?.default).toBe(DEFAULT_SECRET_KEY);
  });
});
