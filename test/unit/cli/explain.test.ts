// `byok-operator explain` reads mounted routing config the way a gateway pod does and names, for every
// credential and shared endpoint left out, the rule that removed it.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { credentialsFromManifests, explain, hasSharedKey } from '../../../src/cli/explain.ts';
import { shardAccounts } from '../../../src/compiler/shard.ts';
import { kubeletWrite } from '../../../src/contract/atomic-dir.ts';
import { canonicalJson } from '../../../src/contract/canonical-json.ts';
import { INDEX_KEY } from '../../../src/contract/routing.ts';
import { NO_EGRESS_EXCEPTIONS } from '../../../src/domain/egress.ts';
import { AttemptPayloads } from '../../../src/gateway/payloads.ts';
import { account, cred, defaultEndpoints, K1, MODEL } from '../../support/fixtures/domain.ts';

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

  test('lists attempts in order and explains every exclusion', async () => {
    const { output: out, exitCode } = await explain({
      configDir,
      catalogFile,
      request: JSON.stringify({ model: MODEL, apiKeyHash: K1, userId: 'u1' }),
      json: false,
    });
    expect(exitCode).toBe(0);
    const lines = out.split('\n');
    expect(lines[0]).toBe(`catalog: ${catalogFile}`);
    const attempts = lines.slice(lines.indexOf('attempts, in order:') + 1, lines.indexOf('left out:') - 1);
    expect(attempts[0]).toContain('credential openai-main (openai, sk-...main) via openai [prioritized]');
    expect(attempts.at(-1)).toContain('credential mistral-late (mistral, sk-...abcd) via mistral [fallback]');
    expect(attempts.some((a) => a.includes('shared anthropic'))).toBe(true);
    expect(out).toContain('credential anthropic-off (anthropic, sk-...abcd): disabled: the credential is disabled');
    expect(out).toMatch(/shared openai: required: a credential of this provider has is_required=true/);
    // Plain names and one pointer to the rules page, never a rule number or identifier (docs/guide/routing-rules.md).
    expect(out).toContain(
      '(the routing rules in plain words: https://github.com/byok-operator/byok-operator/blob/main/docs/guide/routing-rules.md)',
    );
    expect(out).not.toMatch(/\b(rule|spec|issue)s?[\s-]+#?\d/i);
  });

  test('--json gives the machine-readable plan; an unknown key gives no plan and exit 1', async () => {
    const plan = JSON.parse(
      (await explain({ configDir, catalogFile, request: JSON.stringify({ model: MODEL, apiKeyHash: K1 }), json: true }))
        .output,
    ) as { catalog: string; ok: boolean; plan: { attempts: unknown[] } };
    expect(plan.ok).toBe(true);
    expect(plan.catalog).toBe(catalogFile);
    expect(plan.plan.attempts.length).toBeGreaterThan(2);
    // --json keeps the stable identifiers scripts and other gateways compare against.
    expect(JSON.stringify(plan)).toContain('"rule":"rule-5-is-required"');
    expect(
      await explain({
        configDir,
        catalogFile,
        request: JSON.stringify({ model: MODEL, apiKeyHash: 'f'.repeat(64) }),
        json: false,
      }),
    ).toEqual({ output: `catalog: ${catalogFile}\nno plan: unknown-api-key\n`, exitCode: 1 });
  });

  test('exit 1 when no attempt remains', async () => {
    // Only endpoints of a provider with no credential and shared capacity excluded by provider.only.
    const result = await explain({
      configDir,
      catalogFile,
      request: JSON.stringify({ model: MODEL, apiKeyHash: K1, providerOnly: ['groq'] }),
      json: false,
    });
    expect(result.output).toContain('(none: the request would fail)');
    expect(result.exitCode).toBe(1);
  });

  test('--shared-keys-dir: a shared attempt for a provider without a usable shared key is marked "will fail: no shared key", as the gateway answers it', async () => {
    const shared = mkdtempSync(join(tmpdir(), 'byok-shared-keys-'));
    writeFileSync(join(shared, 'anthropic'), 'sk-ant-shared-0123456789\n');
    const request = JSON.stringify({ model: MODEL, apiKeyHash: K1, userId: 'u1' });
    const { output, exitCode } = await explain({ configDir, catalogFile, request, json: false, sharedKeysDir: shared });
    expect(exitCode).toBe(0);
    const attempts = output.split('\n').filter((l) => /^ {2}\d+\. /.test(l));
    expect(attempts.find((a) => a.includes('shared anthropic'))).not.toContain('will fail');
    const others = attempts.filter((a) => a.includes('. shared ') && !a.includes('shared anthropic'));
    expect(others.length).toBeGreaterThan(0);
    for (const a of others) expect(a).toMatch(/\(will fail: no shared key\)$/);
    for (const a of attempts.filter((x) => x.includes('. credential '))) expect(a).not.toContain('will fail');
    // --json says the same per attempt.
    const plan = JSON.parse(
      (await explain({ configDir, catalogFile, request, json: true, sharedKeysDir: shared })).output,
    ) as { willFail: { attempt: number; reason: string }[] };
    expect(plan.willFail.length).toBe(others.length);
    expect(plan.willFail.every((w) => w.reason === 'no shared key')).toBe(true);
    // Without the flag explain cannot know: it says what decides, and promises nothing.
    expect((await explain({ configDir, catalogFile, request, json: false })).output).toContain(
      '--shared-keys-dir checks them',
    );
  });

  test("hasSharedKey says what the gateway's own shared-key lookup says (missing, unparseable, valid, a slug with a slash)", () => {
    const dir = mkdtempSync(join(tmpdir(), 'byok-shared-keys-'));
    writeFileSync(join(dir, 'openai'), 'sk-shared-0123456789\n');
    writeFileSync(join(dir, 'amazon-bedrock'), '{"accessKeyId": 5}');
    writeFileSync(join(dir, 'google-vertex'), 'not a service account');
    // shared() reads only the directory: the routing watcher is never touched.
    const gateway = new AttemptPayloads({
      routing: undefined as never,
      egress: NO_EGRESS_EXCEPTIONS,
      sharedKeysDir: dir,
    });
    const gatewayHas = (p: Parameters<typeof hasSharedKey>[1]) => {
      try {
        gateway.shared(p);
        return true;
      } catch {
        return false;
      }
    };
    for (const provider of ['openai', 'anthropic', 'amazon-bedrock', 'google-vertex'] as const)
      expect([provider, hasSharedKey(dir, provider)]).toEqual([provider, gatewayHas(provider)]);
    expect(hasSharedKey(dir, 'openai')).toBe(true);
    expect(hasSharedKey(dir, 'anthropic')).toBe(false);
  });

  test('--shared-keys-dir: when only shared attempts remain and none has a key, exit 1 (the gateway would answer 502)', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'byok-shared-keys-'));
    const request = JSON.stringify({ model: MODEL, apiKeyHash: K1, providerOnly: ['together'] });
    const plain = await explain({ configDir, catalogFile, request, json: false });
    expect(plain.exitCode).toBe(0);
    const checked = await explain({ configDir, catalogFile, request, json: false, sharedKeysDir: empty });
    expect(checked.output).toContain('shared together (will fail: no shared key)');
    expect(checked.output).toContain('(every attempt will fail: the gateway would answer 502)');
    expect(checked.exitCode).toBe(1);
  });

  test('credentials missing from the config are listed with the reason, from manifests', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'byok-explain-manifests-'));
    const ns = account([]).namespace;
    writeFileSync(
      join(dir, 'creds.yaml'),
      [
        `apiVersion: byok.gateway.dev/v1alpha1\nkind: BYOKCredential\nmetadata: {name: openai-main, namespace: ${ns}}\nspec: {provider: openai, secretRef: {name: s}}`,
        `apiVersion: byok.gateway.dev/v1alpha1\nkind: BYOKCredential\nmetadata: {name: typo, namespace: ${ns}}\nspec: {provider: opnai, secretRef: {name: s}}`,
        `apiVersion: byok.gateway.dev/v1alpha1\nkind: BYOKCredential\nmetadata: {name: pending, namespace: ${ns}}\nspec: {provider: groq, secretRef: {name: s}}`,
        `apiVersion: byok.gateway.dev/v1alpha1\nkind: BYOKCredential\nmetadata: {name: broken, namespace: ${ns}}\nspec: {provider: groq, secretRef: {name: s}}\nstatus: {conditions: [{type: Ready, status: "False", reason: SecretNotFound, message: "Secret s not found"}]}`,
        `apiVersion: byok.gateway.dev/v1alpha1\nkind: BYOKCredential\nmetadata: {name: elsewhere, namespace: other}\nspec: {provider: groq, secretRef: {name: s}}`,
      ].join('\n---\n'),
    );
    const { output } = await explain({
      configDir,
      catalogFile,
      request: JSON.stringify({ model: MODEL, apiKeyHash: K1 }),
      json: false,
      credentials: credentialsFromManifests(dir),
    });
    const section = output.slice(output.indexOf('not in the routing config'));
    expect(section).toContain(`not in the routing config (manifests in ${dir}):`);
    expect(section).toContain('credential broken (groq): Ready=False SecretNotFound: Secret s not found');
    expect(section).toMatch(/credential pending \(groq\): valid manifest, not compiled/);
    expect(section).toMatch(
      /credential typo \(opnai\): invalid manifest: spec.provider: unsupported value "opnai"; did you mean "openai"\?/,
    );
    expect(section).not.toContain('openai-main');
    expect(section).not.toContain('elsewhere');
  });
});
