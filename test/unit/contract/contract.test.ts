// The published gateway contract (docs/contract) cannot drift from the code: the committed files equal what the
// code generates now, the vectors replay from their JSON alone (as a Go or Python gateway would), and the
// schemas accept what the compiler and sealer really produce and refuse what they never produce.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { contractFiles } from '../../../scripts/contract-files.ts';
import { type BundleEnvelope, openEnvelope } from '../../../src/contract/envelope.ts';
import { CONTRACT_SCHEMAS } from '../../../src/contract/schemas.ts';
import {
  type CatalogModelInput,
  type CompiledAccount,
  createCatalog,
  planRoute,
  type RouteRequest,
} from '../../../src/domain/index.ts';
import { cases } from '../../support/fixtures/planner-scenarios.ts';

const root = join(import.meta.dirname, '..', '..', '..');
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (
  ajv: Ajv2020,
) => Ajv2020;
const read = (path: string) => JSON.parse(readFileSync(join(root, 'docs', 'contract', path), 'utf8')) as unknown;

function validators() {
  const ajv = addFormats(new Ajv2020({ allErrors: true, strict: false }));
  return {
    index: ajv.compile(CONTRACT_SCHEMAS['routing-index.schema.json']),
    shard: ajv.compile(CONTRACT_SCHEMAS['shard.schema.json']),
    envelope: ajv.compile(CONTRACT_SCHEMAS['bundle-envelope.schema.json']),
  };
}

describe('gateway contract (docs/contract)', () => {
  const files = contractFiles();

  test('committed schemas and vectors are what the code generates (run `npm run generate:contract`)', () => {
    for (const [path, content] of files)
      expect({ path, content: readFileSync(join(root, path), 'utf8') }).toEqual({ path, content });
  });

  test('plan vectors replay from their JSON: account + catalog + request -> the expected plan', () => {
    const vectors = read('vectors/plans.json') as {
      name: string;
      account: CompiledAccount;
      catalog: CatalogModelInput[];
      request: RouteRequest;
      expected: unknown;
    }[];
    expect(vectors.map((v) => v.name)).toEqual(cases.map((c) => c.name));
    for (const v of vectors) {
      const plan = planRoute(v.account, createCatalog(v.catalog), v.request);
      expect({ name: v.name, plan: JSON.parse(JSON.stringify(plan)) as unknown }).toEqual({
        name: v.name,
        plan: v.expected,
      });
    }
    // Exclusions are in the vectors, with their rule ids.
    expect(vectors.some((v) => (v.expected as { excluded: unknown[] }).excluded.length > 0)).toBe(true);
  });

  test('envelope vectors open with their keys to the plaintexts, and a tampered one does not', () => {
    const { keys, vectors } = read('vectors/envelopes.json') as {
      keys: Record<string, string>;
      vectors: { ns: string; id: string; plaintext: string; envelope: BundleEnvelope }[];
    };
    const ring = new Map(Object.entries(keys).map(([kid, b64]) => [kid, Buffer.from(b64, 'base64')]));
    for (const v of vectors)
      expect(openEnvelope(ring, v.envelope, { namespace: v.ns, credentialId: v.id })).toBe(v.plaintext);
    const v = vectors[0]!;
    const ct = Buffer.from(v.envelope.ct, 'base64');
    ct[0] = (ct[0] ?? 0) ^ 1;
    expect(() =>
      openEnvelope(ring, { ...v.envelope, ct: ct.toString('base64') }, { namespace: v.ns, credentialId: v.id }),
    ).toThrow();
    expect(() => openEnvelope(ring, v.envelope, { namespace: 'other', credentialId: v.id })).toThrow();
  });

  test('the schemas accept what the code writes', () => {
    const { index, shard, envelope } = validators();
    expect(index(read('vectors/routing-index.json'))).toBe(true);
    for (const doc of read('vectors/shards.json') as unknown[])
      expect([shard(doc), shard.errors]).toEqual([true, null]);
    for (const v of read('vectors/plans.json') as { account: unknown }[])
      expect([shard({ bucket: 0, accounts: [v.account] }), shard.errors]).toEqual([true, null]);
    for (const v of (read('vectors/envelopes.json') as { vectors: { envelope: unknown }[] }).vectors)
      expect(envelope(v.envelope)).toBe(true);
  });

  test('the schemas refuse what the code never writes', () => {
    const { index, shard, envelope } = validators();
    const goodIndex = read('vectors/routing-index.json') as Record<string, unknown>;
    expect(index({ ...goodIndex, format: 'byok-routing/v2' })).toBe(false);
    expect(index({ ...goodIndex, extra: 1 })).toBe(false);
    const [doc] = read('vectors/shards.json') as { bucket: number; accounts: Record<string, unknown>[] }[];
    const acct = doc!.accounts[0]!;
    expect(shard({ ...doc, accounts: [{ ...acct, plan: 'free' }] })).toBe(false);
    const { credentials: _dropped, ...withoutCredentials } = acct;
    expect(shard({ ...doc, accounts: [withoutCredentials] })).toBe(false);
    const env = (read('vectors/envelopes.json') as { vectors: { envelope: Record<string, unknown> }[] }).vectors[0]!
      .envelope;
    expect(envelope({ ...env, alg: 'A128GCM' })).toBe(false);
    const { kid: _kid, ...noKid } = env;
    expect(envelope(noKid)).toBe(false);
  });
});
