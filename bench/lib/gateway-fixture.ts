// A gateway's mounted files for benchmarks: one account with one gateway API key and one BYOK OpenAI credential
// (so every request decrypts a credential, plans, authenticates upstream and meters), compiled, sharded and sealed
// by the real compiler and bundle code and written in kubelet's atomic-writer layout; plus a catalog whose one
// endpoint points at the given upstream. With `budget`, the workspace has a monthly budget that counts BYOK spend,
// so every request is admitted against the ledger (a reservation, then its settlement) as a budgeted account's is.
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { sealAccount, shardBundles } from '../../src/bundle/bundle.ts';
import { compileAccount } from '../../src/compiler/compile.ts';
import { shardAccounts } from '../../src/compiler/shard.ts';
import { kubeletWrite } from '../../src/contract/atomic-dir.ts';
import { canonicalJson } from '../../src/contract/canonical-json.ts';
import { INDEX_KEY } from '../../src/contract/routing.ts';
import { API_VERSION } from '../../src/schema/resources.ts';

export const BENCH_API_KEY = 'sk-gw-bench-0123456789abcdef0123456789abcdef';
export const BENCH_MODEL = 'openai/gpt-4o';
/**
 * Far above what a run spends: a request without max_tokens reserves its longest answer (the usage ceiling, ~100 USD
 * at the catalog price below) until it settles at ~0.0001 USD.
 */
export const BENCH_MONTHLY_BUDGET_USD = 10_000_000;

export interface GatewayFixture {
  root: string;
  configDir: string;
  bundleDir: string;
  keyDir: string;
  catalogFile: string;
  /** The compiled account's id (what the ledger keys its counters by). */
  accountId: string;
}

export function writeGatewayFixture(upstreamUrl: string, opts: { budget?: boolean } = {}): GatewayFixture {
  const root = mkdtempSync(join(os.tmpdir(), 'byok-bench-gateway-'));
  const ns = 'bench';
  const now = new Date();
  const meta = (name: string) => ({
    name,
    namespace: ns,
    creationTimestamp: now.toISOString(),
    uid: name,
    generation: 1,
  });
  const payload = 'sk-bench-upstream-key-0123456789';
  const account = compileAccount({
    namespace: ns,
    workspaces: [
      {
        apiVersion: API_VERSION,
        kind: 'Workspace',
        metadata: meta('main'),
        spec: {
          default: true,
          ...(opts.budget ? { budgets: { monthly: BENCH_MONTHLY_BUDGET_USD }, includeByokInBudgets: true } : {}),
        },
      },
    ],
    guardrails: [],
    apiKeys: [
      {
        apiVersion: API_VERSION,
        kind: 'GatewayAPIKey',
        metadata: meta('k'),
        spec: { hash: createHash('sha256').update(BENCH_API_KEY).digest('hex') },
      },
    ],
    credentials: [
      {
        resource: {
          apiVersion: API_VERSION,
          kind: 'BYOKCredential',
          metadata: meta('openai'),
          spec: { provider: 'openai', secretRef: { name: 'openai-key' } },
        },
        verdict: { valid: true, label: 'sk-...bench', sortOrder: 0, payload },
      },
    ],
    now,
  } as unknown as Parameters<typeof compileAccount>[0]);
  const set = shardAccounts([account]);
  const files: Record<string, Buffer | string> = { [INDEX_KEY]: canonicalJson(set.index) };
  for (const s of set.shards) files[s.key] = s.data;
  const configDir = join(root, 'routing');
  const bundleDir = join(root, 'bundles');
  const keyDir = join(root, 'key');
  kubeletWrite(configDir, files);
  const keyring = { active: 'k1', keys: new Map([['k1', randomBytes(32)]]) };
  const sealed = sealAccount(
    keyring,
    ns,
    account.credentials.map((c) => ({ id: c.id, payload })),
  );
  const bundles: Record<string, string> = {};
  for (const o of shardBundles([sealed]).objects) Object.assign(bundles, o.entries());
  kubeletWrite(bundleDir, bundles);
  kubeletWrite(keyDir, { active: keyring.active, ...Object.fromEntries(keyring.keys) });
  const pricing = { kind: 'per-token', promptUsdPerMillionTokens: '2.5', completionUsdPerMillionTokens: '10' };
  const catalogFile = join(root, 'catalog.json');
  writeFileSync(
    catalogFile,
    JSON.stringify({
      format: 'byok-gateway-catalog/v1',
      models: [
        {
          model: BENCH_MODEL,
          endpoints: [
            { id: 'openai', provider: 'openai', pricing, upstream: { baseUrl: `${upstreamUrl}/v1`, model: 'gpt-4o' } },
          ],
        },
      ],
    }),
  );
  return { root, configDir, bundleDir, keyDir, catalogFile, accountId: account.accountId };
}
