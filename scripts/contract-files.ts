// The gateway contract other languages build against, generated from the code: JSON Schemas of the routing
// index, shard document and bundle envelope (src/contract/schemas.ts), and test vectors computed by the
// real planner and sealer from the planner's own scenario table. `npm run generate:contract` writes them to
// docs/contract/; test/unit/contract/contract.test.ts fails when they differ from what the code produces.
import { createHash } from 'node:crypto';
import { shardAccounts } from '../src/compiler/shard.ts';
import { canonicalJson } from '../src/contract/canonical-json.ts';
import { sealPayload } from '../src/contract/envelope.ts';
import { CONTRACT_SCHEMAS } from '../src/contract/schemas.ts';
import { createCatalog, planRoute } from '../src/domain/index.ts';
import { account, defaultEndpoints, MODEL, OTHER_MODEL, req } from '../test/support/fixtures/domain.ts';
import { cases } from '../test/support/fixtures/planner-scenarios.ts';

export const CONTRACT_DIR = 'docs/contract';

const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

/** Plans: compiled account + catalog + request -> attempts in order and every exclusion (spec 1.1). */
export function planVectors() {
  return cases.map((c) => {
    const endpoints = c.endpoints ?? defaultEndpoints();
    const catalog = [
      { model: MODEL, endpoints },
      { model: OTHER_MODEL, endpoints },
    ];
    const compiled = account(c.creds, c.account);
    const request = req(c.request);
    const plan = planRoute(compiled, createCatalog(catalog), request);
    return { name: c.name, account: compiled, catalog, request, expected: JSON.parse(JSON.stringify(plan)) as unknown };
  });
}

const vectorKey = (label: string) => createHash('sha256').update(`byok contract test vector key ${label}`).digest();

/** Envelopes: data key + namespace + credential id + payload -> the sealed envelope (sealing is deterministic). */
export function envelopeVectors() {
  const keys = { 'k2026-01': vectorKey('1'), 'k2026-02': vectorKey('2') };
  const inputs = [
    {
      kid: 'k2026-01',
      ns: 'acme',
      id: '6f1c2f6e-8a4b-5c3d-9e2f-1a2b3c4d5e6f',
      payload: 'sk-proj-test-vector-not-a-real-key-0001',
    },
    {
      kid: 'k2026-01',
      ns: 'acme',
      id: '0d7e5a3b-1c2d-5e4f-8a9b-0c1d2e3f4a5b',
      payload:
        '{"accessKeyId":"AKIATESTVECTOR000001","secretAccessKey":"test/vector/secret/not/real","region":"us-east-1"}',
    },
    { kid: 'k2026-02', ns: 'team-b', id: '6f1c2f6e-8a4b-5c3d-9e2f-1a2b3c4d5e6f', payload: 'clé-ünïcødé-€-test' },
  ] as const;
  return {
    keys: Object.fromEntries(Object.entries(keys).map(([kid, key]) => [kid, key.toString('base64')])),
    aad: 'UTF-8 of "byok-bundle/v1\\n" + ns + "\\n" + id',
    vectors: inputs.map((v) => ({
      kid: v.kid,
      ns: v.ns,
      id: v.id,
      plaintext: v.payload,
      envelope: sealPayload({ active: v.kid, keys: new Map(Object.entries(keys)) }, v.ns, v.id, v.payload),
    })),
  };
}

/** An index and its shard documents for the scenario accounts, as the compiler writes them. */
export function routingExample() {
  const accounts = cases
    .slice(0, 6)
    .map((c, i) => ({ ...account(c.creds, c.account), namespace: `account-${i}`, accountId: `account-${i}` }));
  const set = shardAccounts(accounts, { gzipAboveBytes: Number.MAX_SAFE_INTEGER });
  return { index: set.index, shards: set.shards.map((s) => JSON.parse(s.data.toString('utf8')) as unknown) };
}

export function contractFiles(): Map<string, string> {
  const files = new Map<string, string>();
  for (const [name, schema] of Object.entries(CONTRACT_SCHEMAS)) files.set(`${CONTRACT_DIR}/${name}`, json(schema));
  files.set(`${CONTRACT_DIR}/vectors/plans.json`, json(planVectors()));
  files.set(`${CONTRACT_DIR}/vectors/envelopes.json`, json(envelopeVectors()));
  const example = routingExample();
  files.set(`${CONTRACT_DIR}/vectors/routing-index.json`, `${canonicalJson(example.index)}\n`);
  files.set(`${CONTRACT_DIR}/vectors/shards.json`, json(example.shards));
  return files;
}
