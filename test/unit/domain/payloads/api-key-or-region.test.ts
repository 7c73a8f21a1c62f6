// The api-key-or-region shape: a plain key, or {api_key, region} that picks the endpoint's regional base URL.
import { describe, expect, test } from '@jest/globals';
import { apiKeyOrRegionShape } from '../../../../src/domain/payloads/api-key-or-region.ts';
import { SPEC, validateWith } from './spec.ts';

const REGIONAL = { kind: 'api-key-region', apiKey: 'sk-r', region: 'eu' } as const;

describe('api-key-or-region shape', () => {
  test('takes a plain key or {api_key, region}; errors name the field and the rule', () => {
    expect(validateWith(apiKeyOrRegionShape, 'sk-1').payload).toEqual({ kind: 'api-key', apiKey: 'sk-1' });
    expect(validateWith(apiKeyOrRegionShape, '{"api_key":"sk-r","region":"eu"}').payload).toEqual(REGIONAL);
    expect(validateWith(apiKeyOrRegionShape, '{"api_key":"sk r","region":"EU"}').errors).toEqual([
      { field: 'api_key', message: 'must not contain whitespace' },
      { field: 'region', message: 'must be a region identifier (lower-case letters, digits, hyphens)' },
    ]);
    expect(validateWith(apiKeyOrRegionShape, '[1]').errors).toEqual([
      { field: '', message: 'must be a plain API key or an object {api_key, region}' },
    ]);
  });
  test('its label masks api_key', () => {
    expect(apiKeyOrRegionShape.labelField({ api_key: 'sk-r', region: 'eu' })).toBe('sk-r');
    expect(apiKeyOrRegionShape.labelField({ region: 'eu' })).toBeNull();
  });
  test('a region picks the regional base URL; a region the endpoint lacks is a setup problem', () => {
    expect(apiKeyOrRegionShape.upstream(REGIONAL, SPEC, 'acme/chat')).toEqual({
      url: { chat: 'https://eu.api.example.test/v1' },
      model: 'upstream-model',
      auth: { kind: 'header', name: 'authorization', value: 'Bearer sk-r' },
    });
    expect(apiKeyOrRegionShape.upstream({ ...REGIONAL, region: 'ap' }, SPEC, 'acme/chat')).toEqual({
      problem: 'the catalog has no base URL for region ap of this endpoint',
    });
    expect(apiKeyOrRegionShape.upstream({ kind: 'api-key', apiKey: 'sk-1' }, SPEC, 'acme/chat')).toMatchObject({
      url: { chat: SPEC.baseUrl },
    });
  });
  test('exports the region as a fact and the key as the Secret material', () => {
    expect(apiKeyOrRegionShape.facts(REGIONAL)).toEqual({ kind: 'api-key-region', region: 'eu' });
    expect(apiKeyOrRegionShape.facts({ kind: 'api-key', apiKey: 'sk-1' })).toEqual({ kind: 'api-key' });
    expect(apiKeyOrRegionShape.secret(REGIONAL)).toEqual({ kind: 'api-key', apiKey: 'sk-r' });
  });
});
