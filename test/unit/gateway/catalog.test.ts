import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { CatalogError, parseCatalog } from '../../../src/gateway/catalog.ts';
import { sharedKeyFileName } from '../../../src/gateway/upstream.ts';

const repo = join(import.meta.dirname, '..', '..', '..');
const endpoint = {
  id: 'openai',
  provider: 'openai',
  pricing: { kind: 'per-token', promptUsdPerMillionTokens: '2.5', completionUsdPerMillionTokens: 10 },
  upstream: { baseUrl: 'https://api.openai.com/v1/' },
};
const doc = (models: unknown) => JSON.stringify({ format: 'byok-gateway-catalog/v1', models });

describe('gateway catalog', () => {
  test('the one catalog under config/ parses', () => {
    const c = parseCatalog(readFileSync(join(repo, 'config', 'catalog', 'catalog.json'), 'utf8'));
    expect(c.models.length).toBeGreaterThan(3);
  });

  test('defaults: upstream model = slug, trailing slash dropped, azure templates, standard region, no zdr', () => {
    const c = parseCatalog(doc([{ model: 'openai/gpt-4o', endpoints: [endpoint] }]));
    expect(c.upstream('openai/gpt-4o', 'openai')).toEqual({
      api: 'openai-chat',
      baseUrl: 'https://api.openai.com/v1',
      model: 'openai/gpt-4o',
      regionalBaseUrls: {},
      defaultRegion: 'us-east-1',
      azureOpenAiUrl: 'https://{resource_name}.openai.azure.com/openai/v1',
      azureFoundryUrl: 'https://{resource_name}.services.ai.azure.com/openai/v1',
    });
    expect(c.endpoint('openai/gpt-4o', 'openai')).toMatchObject({ region: null, zdr: false, dataCollection: false });
    expect(c.catalog.models.get('openai/gpt-4o')?.endpoints).toHaveLength(1);
  });

  test('bad catalogs are rejected with a specific message', () => {
    const bad = (text: string) => {
      try {
        parseCatalog(text);
      } catch (err) {
        expect(err).toBeInstanceOf(CatalogError);
        return (err as Error).message;
      }
      throw new Error('accepted');
    };
    expect(bad('{')).toBe('catalog is not valid JSON');
    expect(bad(JSON.stringify({ format: 'other', models: [] }))).toContain('/format');
    expect(bad(doc([{ model: 'x/y', endpoints: [{ ...endpoint, provider: 'nope' }] }]))).toContain('unknown provider');
    expect(bad(doc([{ model: 'x/y', endpoints: [endpoint, endpoint] }]))).toContain('twice');
    expect(bad(doc([{ model: 'x/y', endpoints: [{ ...endpoint, upstream: { baseUrl: 'ftp://x' } }] }]))).toContain(
      '/upstream/baseUrl',
    );
  });
  test('prices are converted to micros once, at load: a price that is not a non-negative decimal refuses the catalog', () => {
    const bad = (pricing: unknown) => () =>
      parseCatalog(doc([{ model: 'x/y', endpoints: [{ ...endpoint, pricing }] }]));
    expect(bad({ kind: 'per-request', usdPerRequest: '1,5' })).toThrow(new CatalogError('not a decimal USD amount'));
    expect(bad({ kind: 'per-token', promptUsdPerMillionTokens: '-1', completionUsdPerMillionTokens: 1 })).toThrow(
      new CatalogError('catalog price must be a non-negative amount'),
    );
    const ok = parseCatalog(
      doc([
        {
          model: 'x/y',
          endpoints: [
            {
              ...endpoint,
              pricing: { kind: 'per-token', promptUsdPerMillionTokens: '2.5', completionUsdPerMillionTokens: 10 },
            },
          ],
        },
      ]),
    );
    expect(ok.endpoint('x/y', endpoint.id)?.price).toEqual({
      kind: 'per-token',
      promptMicrosPerMillionTokens: 2_500_000,
      completionMicrosPerMillionTokens: 10_000_000,
    });
  });
});

test('shared key file names encode the slash of sub-variant slugs', () => {
  expect(sharedKeyFileName('openai')).toBe('openai');
  expect(sharedKeyFileName('amazon-bedrock/claude-on-aws')).toBe('amazon-bedrock__claude-on-aws');
});
