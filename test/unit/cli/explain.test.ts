// `byok-operator explain` reads mounted routing config the way a gateway pod does and names, for every
// credential and shared endpoint left out, the rule that removed it.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { explain } from '../../../src/cli/explain.ts';
import { canonicalJson, INDEX_KEY } from '../../../src/compiler/format.ts';
import { shardAccounts } from '../../../src/compiler/shard.ts';
import { account, cred, defaultEndpoints, K1, MODEL } from '../domain/fixtures.ts';
import { kubeletWrite } from '../sdk/kubelet.ts';

function mountedConfig(): string {
  const accounts = [
    account([
      cred('openai-main', 'openai', { isRequired: true, label: 'sk-...main' }),
      cred('anthropic-off', 'anthropic', { disabled: true }),
      cred('mistral-late', 'mistral', { isFallback: true }),
    ]),
  ];
  const set = shardAccounts(accounts);
  const files: Record<string, string | Buffer> = { [INDEX_KEY]: canonicalJson(set.index) };
  for (const shard of set.shards) files[shard.key] = shard.data;
  const dir = mkdtempSync(join(tmpdir(), 'byok-explain-'));
  kubeletWrite(dir, files);
  return dir;
}

describe('explain', () => {
  const configDir = mountedConfig();
  const catalogFile = join(mkdtempSync(join(tmpdir(), 'byok-catalog-')), 'catalog.json');
  writeFileSync(catalogFile, JSON.stringify([{ model: MODEL, endpoints: defaultEndpoints() }]));

  test('lists attempts in order and explains every exclusion', () => {
    const out = explain({ configDir, catalogFile, request: JSON.stringify({ model: MODEL, apiKeyHash: K1, userId: 'u1' }), json: false });
    const lines = out.split('\n');
    const attempts = lines.slice(lines.indexOf('attempts, in order:') + 1, lines.indexOf('left out:') - 1);
    expect(attempts[0]).toContain('credential openai-main (openai, sk-...main) via openai [prioritized]');
    expect(attempts.at(-1)).toContain('credential mistral-late (mistral, sk-...abcd) via mistral [fallback]');
    expect(attempts.some((a) => a.includes('shared anthropic'))).toBe(true);
    expect(out).toContain('credential anthropic-off (anthropic, sk-...abcd): credential-disabled: the credential is disabled');
    expect(out).toMatch(/shared openai: rule-5-is-required/);
  });

  test('--json gives the machine-readable plan; an unknown key gives no plan', () => {
    const plan = JSON.parse(explain({ configDir, catalogFile, request: JSON.stringify({ model: MODEL, apiKeyHash: K1 }), json: true })) as { ok: boolean; plan: { attempts: unknown[] } };
    expect(plan.ok).toBe(true);
    expect(plan.plan.attempts.length).toBeGreaterThan(2);
    expect(explain({ configDir, catalogFile, request: JSON.stringify({ model: MODEL, apiKeyHash: 'f'.repeat(64) }), json: false })).toBe('no plan: unknown-api-key\n');
  });
});
