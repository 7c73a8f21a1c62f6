// One catalog truth: `byok-operator explain` with its default catalog and a real gateway serving what
// `npm run dev` serves (the same file, upstream URLs moved to loopback) plan the same attempts, in the same order,
// for every request of a table (models, provider.order / only / data_collection / zdr, byok-only, is_required,
// fallback, regional endpoints, a member filter, a request with no attempt left). Every upstream answers 503, so the gateway tries, and reports
// in provider_responses (error body and GET /api/v1/generation), every attempt of its plan.
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { pino } from 'pino';
import { sealAccount, shardBundles } from '../../../src/bundle/bundle.ts';
import { defaultCatalogFile, withLoopbackUpstreams } from '../../../src/cli/catalog.ts';
import { compileAccount } from '../../../src/compiler/compile.ts';
import { shardAccounts } from '../../../src/compiler/shard.ts';
import { kubeletWrite } from '../../../src/contract/atomic-dir.ts';
import { canonicalJson } from '../../../src/contract/canonical-json.ts';
import { INDEX_KEY } from '../../../src/contract/routing.ts';
import { publicId } from '../../../src/domain/ids.ts';
import { type RunningGateway, sharedKeyFileName, startGateway } from '../../../src/gateway/index.ts';
import type { BYOKCredentialSpec } from '../../../src/schema/generated/types.ts';
import { asDefault, credential, gatewayKey, withMetadata, withSpec, workspace } from '../../support/builders.ts';

const run = promisify(execFile);
const main = join(import.meta.dirname, '..', '..', '..', 'src', 'cli', 'main.ts');
const NS = 'agreement';
const API_KEY = 'sk-gw-agreement-0123456789abcdef';
const HASH = createHash('sha256').update(API_KEY).digest('hex');

/** name → [spec, payload]: every rule the table exercises. */
const CREDENTIALS: Record<string, [Omit<BYOKCredentialSpec, 'secretRef'>, string]> = {
  'openai-a': [{ provider: 'openai', sortOrder: 0 }, 'sk-openai-a-000000000000'],
  'openai-b': [{ provider: 'openai', sortOrder: 1 }, 'sk-openai-b-000000000000'],
  'openai-fb': [{ provider: 'openai', isFallback: true }, 'sk-openai-fb-00000000000'],
  'anthropic-req': [
    { provider: 'anthropic', isRequired: true, allowedModels: ['anthropic/claude-sonnet-4.5'] },
    'sk-ant-required-0000000000',
  ],
  'bedrock-fb': [{ provider: 'amazon-bedrock', isFallback: true }, 'bedrock-api-key-fallback-0000'],
  'groq-only': [{ provider: 'groq', isByokOnly: true }, 'gsk_byok_only_00000000000000'],
  // Usable only by member user-1, who owns the API key: explain takes the key's owner as the member, like the gateway.
  'mistral-member': [{ provider: 'mistral', allowedUserIds: ['user-1'] }, 'mistral-member-key-0000000000'],
};
const credId = (name: string) => publicId('BYOKCredential', NS, name);
const nameOf = new Map(Object.keys(CREDENTIALS).map((n) => [credId(n), n]));

/** The gateway request body's routing part, and the same preferences in explain's (the planner's) words. */
interface Case {
  what: string;
  model: string;
  provider?: { order?: string[]; only?: string[]; data_collection?: 'allow' | 'deny'; zdr?: boolean };
}
const CASES: Case[] = [
  {
    what: 'prioritized credentials by sort order, shared in catalog order, fallback last; the regional endpoint skipped',
    model: 'openai/gpt-5',
  },
  {
    what: 'provider.order reorders shared endpoints only; credentials stay first (rule 8)',
    model: 'openai/gpt-5',
    provider: { order: ['azure', 'openai'] },
  },
  {
    what: 'provider.only removes the other providers, credentials included',
    model: 'openai/gpt-5',
    provider: { only: ['azure'] },
  },
  {
    what: 'provider.order naming the regional endpoint unlocks it (rule 9)',
    model: 'openai/gpt-4o',
    provider: { order: ['openai/eu', 'openai'] },
  },
  { what: 'is_required removes shared anthropic for its model (rule 5)', model: 'anthropic/claude-sonnet-4.5' },
  {
    what: 'outside the allowlist, shared anthropic serves before the fallback Bedrock key',
    model: 'anthropic/claude-sonnet-4',
  },
  {
    what: 'byok-only groq: its credential first whatever the order, no shared groq (rules 6 and 8)',
    model: 'meta-llama/llama-3.3-70b-instruct',
    provider: { order: ['together', 'groq', 'fireworks'] },
  },
  {
    what: 'data_collection deny drops together (rule 10)',
    model: 'meta-llama/llama-3.3-70b-instruct',
    provider: { data_collection: 'deny' },
  },
  {
    what: 'zdr drops every endpoint without zero data retention (rule 10)',
    model: 'anthropic/claude-sonnet-4',
    provider: { zdr: true },
  },
  { what: "a member filter matches the API key's owner (rule 11)", model: 'mistralai/mistral-large' },
  { what: 'nothing left: both sides plan no attempt', model: 'mistralai/mistral-large', provider: { only: ['groq'] } },
];

const explainRequest = (c: Case) => ({
  model: c.model,
  apiKeyHash: HASH,
  ...(c.provider?.order ? { providerOrder: c.provider.order } : {}),
  ...(c.provider?.only ? { providerOnly: c.provider.only } : {}),
  ...(c.provider?.zdr !== undefined ? { requireZdr: c.provider.zdr } : {}),
  ...(c.provider?.data_collection ? { denyDataCollection: c.provider.data_collection === 'deny' } : {}),
});

/** One attempt as both sides can name it: provider, endpoint, and the credential's name or "shared". */
const label = (provider: string, endpointId: string, credential: string) =>
  `${provider} ${endpointId} ${credential === 'shared' ? 'shared' : (nameOf.get(credential) ?? credential)}`;

describe('explain and the gateway agree on the attempt order over the one catalog', () => {
  const root = mkdtempSync(join(tmpdir(), 'byok-agreement-'));
  const dirs = {
    config: join(root, 'routing'),
    bundles: join(root, 'bundles'),
    key: join(root, 'key'),
    shared: join(root, 'shared'),
  };
  let upstream: Server;
  const hits: string[] = [];
  let gw: RunningGateway;

  beforeAll(async () => {
    // Every upstream call fails over to the next attempt.
    upstream = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        hits.push(`${req.method} ${req.url}`);
        res
          .writeHead(503, { 'content-type': 'application/json' })
          .end('{"error":{"message":"unavailable (test upstream)"}}');
      });
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;

    // The routing config, compiled and sealed as the operator would (no cluster needed for the planner's input).
    const now = new Date();
    const meta = (name: string) => ({
      name,
      namespace: NS,
      creationTimestamp: now.toISOString() as unknown as Date,
      uid: name,
      generation: 1,
    });
    const account = compileAccount({
      namespace: NS,
      workspaces: [workspace('main', withMetadata(meta('main')), asDefault())],
      guardrails: [],
      apiKeys: [gatewayKey('key', HASH, withMetadata(meta('key')), withSpec({ owner: 'user-1' }))],
      credentials: Object.entries(CREDENTIALS).map(([name, [spec, payload]], i) => ({
        resource: credential(name, withMetadata(meta(name)), withSpec({ ...spec, secretRef: { name: `${name}-key` } })),
        verdict: {
          valid: true,
          label: `${payload.slice(0, 3)}...${payload.slice(-4)}`,
          sortOrder: spec.sortOrder ?? i,
          payload,
        },
      })),
      now,
    });
    expect(account.credentials).toHaveLength(Object.keys(CREDENTIALS).length);
    const set = shardAccounts([account]);
    const files: Record<string, string | Buffer> = { [INDEX_KEY]: canonicalJson(set.index) };
    for (const s of set.shards) files[s.key] = s.data;
    kubeletWrite(dirs.config, files);
    const keyring = { active: 'k1', keys: new Map([['k1', randomBytes(32)]]) };
    const sealed = sealAccount(
      keyring,
      NS,
      Object.entries(CREDENTIALS).map(([name, [, payload]]) => ({ id: credId(name), payload })),
    );
    const bundles: Record<string, string> = {};
    for (const o of shardBundles([sealed]).objects) Object.assign(bundles, o.entries());
    kubeletWrite(dirs.bundles, bundles);
    kubeletWrite(dirs.key, { active: keyring.active, ...Object.fromEntries(keyring.keys) });
    mkdirSync(dirs.shared, { recursive: true });
    for (const p of ['openai', 'anthropic', 'together', 'fireworks', 'groq', 'mistral'])
      writeFileSync(join(dirs.shared, sharedKeyFileName(p)), `sk-shared-${p}-000000000000\n`);
    writeFileSync(join(dirs.shared, sharedKeyFileName('amazon-bedrock')), 'bedrock-shared-api-key-0000\n');

    // What `npm run dev` serves: the one catalog, upstreams on loopback.
    writeFileSync(join(root, 'catalog.json'), withLoopbackUpstreams(readFileSync(defaultCatalogFile(), 'utf8'), base));
    gw = await startGateway({
      configDir: dirs.config,
      bundleDir: dirs.bundles,
      keyDir: dirs.key,
      catalogFile: join(root, 'catalog.json'),
      sharedKeysDir: dirs.shared,
      host: '127.0.0.1',
      port: 0,
      attemptTimeoutMs: 3000,
      logger: pino({ level: 'silent' }),
    });
  }, 30_000);

  afterAll(async () => {
    await gw?.close();
    await new Promise<void>((r) => upstream?.close(() => r()));
    rmSync(root, { recursive: true, force: true });
  });

  /** explain, the CLI with its default catalog: the attempts of its --json plan. */
  const explained = async (c: Case) => {
    const args = [
      main,
      'explain',
      '--config-dir',
      dirs.config,
      '--request',
      JSON.stringify(explainRequest(c)),
      '--json',
    ];
    const out = await run(process.execPath, args, { encoding: 'utf8' }).then(
      (r) => r.stdout,
      (e: { stdout: string }) => e.stdout,
    );
    const doc = JSON.parse(out) as {
      catalog: string;
      ok: boolean;
      plan: { attempts: { kind: string; provider: string; endpoint: { id: string }; credentialId?: string }[] };
    };
    expect(doc.catalog).toBe(defaultCatalogFile());
    expect(doc.ok).toBe(true);
    return doc.plan.attempts.map((a) =>
      label(a.provider, a.endpoint.id, a.kind === 'credential' ? (a.credentialId ?? '?') : 'shared'),
    );
  };

  /** The gateway: what it tried, from the error body, checked against GET /api/v1/generation. */
  const tried = async (c: Case) => {
    const res = await fetch(`${gw.url}/api/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: c.model,
        messages: [{ role: 'user', content: 'hi' }],
        ...(c.provider ? { provider: c.provider } : {}),
      }),
    });
    const body = (await res.json()) as {
      error: {
        code: number;
        metadata: {
          generation_id?: string;
          provider_responses?: { provider: string; endpoint_id: string; credential: string; status: number | null }[];
        } | null;
      };
    };
    expect(res.status).not.toBe(200);
    const responses = body.error.metadata?.provider_responses;
    if (responses === undefined) return { status: res.status, order: [] as string[] };
    const generation = await fetch(`${gw.url}/api/v1/generation?id=${body.error.metadata?.generation_id}`, {
      headers: { authorization: `Bearer ${API_KEY}` },
    });
    expect(((await generation.json()) as { data: { provider_responses: unknown } }).data.provider_responses).toEqual(
      responses,
    );
    return { status: res.status, order: responses.map((r) => label(r.provider, r.endpoint_id, r.credential)) };
  };

  const plans = new Map<Case, string[]>();

  test.each(CASES.map((c) => [c.what, c] as const))(
    '%s',
    async (_what, c) => {
      const [plan, gateway] = await Promise.all([explained(c), tried(c)]);
      plans.set(c, plan);
      expect(gateway.order).toEqual(plan);
      if (plan.length === 0) expect(gateway.status).toBe(404);
    },
    30_000,
  );

  test('the table covers what it claims: several shapes of plan, both sections, regional and no-attempt cases', () => {
    const all = CASES.map((c) => plans.get(c) ?? ['(not run)']);
    expect(all.filter((p) => p.length === 0)).toHaveLength(1);
    expect(all[0]).toEqual([
      'openai openai openai-a',
      'openai openai openai-b',
      'openai openai shared',
      'azure azure shared',
      'openai openai openai-fb',
    ]);
    expect(all[3]?.some((a) => a.startsWith('openai openai/eu '))).toBe(true);
    expect(all[4]?.[0]).toBe('anthropic anthropic anthropic-req');
    expect(all[4]?.some((a) => a === 'anthropic anthropic shared')).toBe(false);
    expect(all[6]?.[0]).toBe('groq groq groq-only');
    expect(all[6]?.some((a) => a === 'groq groq shared')).toBe(false);
    expect(all[9]).toEqual(['mistral mistral mistral-member', 'mistral mistral shared']);
    expect(new Set(all.map((p) => p.join('|'))).size).toBe(CASES.length);
    // The upstream saw the attempts that reached it (credentials and shared keys alike).
    expect(hits.length).toBeGreaterThan(CASES.length);
  });
});
