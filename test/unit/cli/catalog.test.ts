// One catalog truth: config/catalog/catalog.json is what explain reads by default, what a bare gateway
// serves, what the chart ships (a byte copy), and what the dev stack's gateway serves with only its upstream URLs
// moved to loopback, so every setting plans the same attempts.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import {
  CATALOG_PATH,
  CHART_CATALOG_PATH,
  defaultCatalogFile,
  deriveCatalog,
  withLoopbackUpstreams,
} from '../../../src/cli/catalog.ts';
import { parseCatalog } from '../../../src/gateway/catalog.ts';

const repo = join(import.meta.dirname, '..', '..', '..');
const source = readFileSync(join(repo, CATALOG_PATH), 'utf8');

describe('the one catalog', () => {
  test('is the default file, and the chart ships a byte copy of it (npm run generate writes it)', () => {
    expect(defaultCatalogFile()).toBe(join(repo, CATALOG_PATH));
    expect(readFileSync(join(repo, CHART_CATALOG_PATH), 'utf8')).toBe(source);
  });

  test('the dev rewrite moves every upstream URL to loopback and changes nothing the planner reads', () => {
    const base = 'http://127.0.0.1:4567';
    const derived = withLoopbackUpstreams(source, base);
    const a = parseCatalog(source);
    const b = parseCatalog(derived);
    // Models, endpoint order, providers, regions, data policies, prices: identical.
    expect([...b.catalog.models.entries()]).toEqual([...a.catalog.models.entries()]);
    expect(b.models).toEqual(a.models);
    // Every URL points at the loopback base, under a segment naming the provider; paths and placeholders kept.
    const urls = [...derived.matchAll(/"(https?:\/\/[^"]+)"/g)].map((m) => m[1] as string);
    expect(urls.length).toBeGreaterThan(10);
    for (const u of urls) expect(u.startsWith(`${base}/`)).toBe(true);
    expect(b.upstream('openai/gpt-5', 'openai')).toMatchObject({
      baseUrl: `${base}/openai/v1`,
      regionalBaseUrls: { eu: `${base}/openai__eu/v1` },
    });
    expect(b.upstream('google/gemini-2.5-pro', 'google-vertex')?.baseUrl).toBe(
      `${base}/google-vertex/v1/projects/{project}/locations/{location}/endpoints/openapi`,
    );
    expect(b.upstream('openai/gpt-5', 'azure')?.azureOpenAiUrl).toBe(
      'https://{resource_name}.openai.azure.com/openai/v1',
    ); // not in the source: the gateway's default
  });

  test('deriveCatalog writes the derived file and follows the source', () => {
    const dir = mkdtempSync(join(tmpdir(), 'byok-catalog-derive-'));
    const src = join(dir, 'source.json');
    const dst = join(dir, 'derived.json');
    writeFileSync(src, source);
    const errors: Error[] = [];
    const d = deriveCatalog(src, dst, 'http://127.0.0.1:1', { onError: (e) => errors.push(e) });
    try {
      expect(readFileSync(dst, 'utf8')).toBe(withLoopbackUpstreams(source, 'http://127.0.0.1:1'));
      expect(d.sync()).toBe(false); // unchanged
      const smaller = JSON.stringify({ format: 'byok-gateway-catalog/v1', models: [JSON.parse(source).models[0]] });
      writeFileSync(src, smaller);
      expect(d.sync()).toBe(true);
      expect(parseCatalog(readFileSync(dst, 'utf8')).models.map((m) => m.model)).toEqual(['openai/gpt-5']);
      writeFileSync(src, '{ not json');
      expect(d.sync()).toBe(false);
      expect(errors).toHaveLength(1);
      expect(parseCatalog(readFileSync(dst, 'utf8')).models.map((m) => m.model)).toEqual(['openai/gpt-5']); // last good kept
    } finally {
      d.stop();
    }
  });
});
