// The export's translation: attempt order and the shared tier per flag, the targets' limits (split or cut and
// reported), determinism, no key material, and agentgateway's standalone form against its own JSON Schema.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { stringify } from 'yaml';
import { loadExportInput, renderExport, runExport } from '../../../src/cli/export.ts';
import {
  type CompiledAccount,
  type CompiledCredential,
  createCatalog,
  type ProviderSlug,
  validatePayload,
} from '../../../src/domain/index.ts';
import {
  derivedSecretData,
  derivedSecretName,
  type ExportInput,
  type ExportOptions,
  exportAccounts,
  exportStandalone,
  refuseSharedNames,
  type TargetObject,
} from '../../../src/export/index.ts';
import { accountManifests, allShapesFolder, FLAG_SETS, SHAPES, scaleFolder } from '../../support/fixtures/export.ts';
import { thirdPartyFile } from '../../support/third-party.ts';

const repo = join(import.meta.dirname, '..', '..', '..');
const CATALOG = join(repo, 'config', 'catalog', 'catalog.json');
const options = (target: ExportOptions['target'], over: Partial<ExportOptions> = {}): ExportOptions => ({
  target,
  mode: 'static',
  namespace: 'byok-export',
  gateway: { name: 'byok-gateway' },
  ...over,
});

const folder = allShapesFolder();
const { input } = loadExportInput(folder, CATALOG);

type Rule = {
  name: string;
  matches: { headers: { value: string }[] }[];
  backendRefs: { name: string; priority: number; modelNameOverride?: string }[];
};
const rulesOf = (objects: TargetObject[], account: string): Rule[] =>
  objects
    .filter((o) => o.kind === 'AIGatewayRoute' && o.metadata.labels?.['byok.gateway.dev/account'] === account)
    .flatMap((o) => o.spec['rules'] as Rule[]);
const ruleFor = (objects: TargetObject[], account: string, model: string) =>
  rulesOf(objects, account).find((r) => r.matches[0]!.headers[1]!.value === model);

describe('export: attempt order and the shared tier', () => {
  const { objects } = exportAccounts(input, options('envoy-ai-gateway'));

  test('without flags: prioritized credentials, then the shared tier, then fallback credentials, one priority each', () => {
    const refs = ruleFor(objects, 'flags-none', 'openai/gpt-5')!.backendRefs;
    const names = refs.map((r) => r.name);
    expect(refs.map((r) => r.priority)).toEqual(refs.map((_, i) => i));
    const firstShared = names.findIndex((n) => n.startsWith('byok-shared-openai'));
    const fallback = names.findIndex((n) => n.startsWith('flags-none-openai-fallback'));
    expect(names[0]).toMatch(/^flags-none-openai-plain-/);
    expect(firstShared).toBeGreaterThan(0);
    expect(fallback).toBeGreaterThan(firstShared);
    // The Azure deployment for gpt-5-mini carries its deployment name as the model sent upstream.
    const mini = ruleFor(objects, 'flags-none', 'openai/gpt-5-mini')!.backendRefs.find((r) =>
      r.name.startsWith('flags-none-azure-mixed-'),
    );
    expect(mini?.modelNameOverride).toBe('gpt5mini-prod');
  });

  test.each(['required', 'byok-only', 'both'])(
    '%s: no shared tier of a flagged provider in any rule of the account',
    (flags) => {
      for (const rule of rulesOf(objects, `flags-${flags}`)) {
        expect(
          rule.backendRefs.filter((r) =>
            /^byok-shared-(openai|anthropic|azure|groq|amazon-bedrock|google-vertex)-/.test(r.name),
          ),
        ).toEqual([]);
      }
    },
  );

  test('is_required keeps shared capacity outside allowed_models, is_byok_only removes it for every model', () => {
    const account = (flags: Partial<CompiledCredential>): ExportInput => {
      const a = input.accounts.find((x) => x.namespace === 'flags-none')!;
      const openai = a.credentials.find((c) => c.name === 'openai-plain')!;
      return {
        ...input,
        accounts: [{ ...a, credentials: [{ ...openai, allowedModels: ['openai/gpt-5'], ...flags }] }],
      };
    };
    const required = exportAccounts(account({ isRequired: true }), options('envoy-ai-gateway')).objects;
    expect(
      ruleFor(required, 'flags-none', 'openai/gpt-5')!
        .backendRefs.map((r) => r.name)
        .filter((n) => n.startsWith('byok-shared-openai')),
    ).toEqual([]);
    expect(ruleFor(required, 'flags-none', 'openai/gpt-4o')).toBeUndefined(); // the platform's own plan applies there
    const byokOnly = exportAccounts(account({ isByokOnly: true }), options('envoy-ai-gateway')).objects;
    const gpt4o = ruleFor(byokOnly, 'flags-none', 'openai/gpt-4o')!.backendRefs.map((r) => r.name);
    expect(gpt4o.filter((n) => n.startsWith('byok-shared-openai'))).toEqual([]);
    expect(gpt4o.some((n) => n.startsWith('byok-shared-azure'))).toBe(true);
  });
});

describe('export: output hygiene', () => {
  test.each(['envoy-ai-gateway', 'agentgateway'] as const)(
    '%s: no key material, the same bytes twice, derived Secrets named from namespace/name',
    (target) => {
      const first = renderExport(input, options(target), false);
      expect(`${first.stdout}${first.stderr}`).not.toMatch(/canary|PRIVATE KEY|AKIA/i);
      expect(renderExport(loadExportInput(folder, CATALOG).input, options(target), false)).toEqual(first);
      for (const s of SHAPES.filter((x) => x.provider !== 'azure'))
        expect(first.stdout).toContain(derivedSecretName(target, 'flags-none', s.name));
      // Each Azure entry has its own api_key, so its own Secret.
      expect(first.stdout).toContain(
        derivedSecretName(target, 'flags-none', 'azure-mixed', 'deployment openai/gpt-5-mini'),
      );
      expect(first.stdout).toContain(derivedSecretName(target, 'flags-none', 'azure-mixed', 'resource team-foundry'));
      expect(first.stdout).toContain(derivedSecretName(target, 'flags-none', 'azure-resource', 'resource team-west'));
      const report = exportAccounts(input, options(target)).report;
      const mixed = report.accounts
        .find((a) => a.namespace === 'flags-none')!
        .credentials.find((c) => c.name === 'azure-mixed')!;
      expect(mixed.derivedSecrets.map((d) => d.source).sort()).toEqual([
        'flags-none/azure-mixed (deployment openai/gpt-5-mini)',
        'flags-none/azure-mixed (resource team-foundry)',
      ]);
    },
  );

  test('every credential is in the report, with fee, allowance, reservations, filters, provider_responses and health', () => {
    const { report } = exportAccounts(input, options('agentgateway'));
    const credentials = report.accounts.flatMap((a) => a.credentials);
    expect(credentials).toHaveLength((SHAPES.length + 1) * Object.keys(FLAG_SETS).length);
    for (const c of credentials) {
      const semantics = c.notes.map((n) => n.semantic);
      for (const s of ['fee', 'allowance', 'reservations', 'provider_responses', 'health'])
        expect(semantics).toContain(s);
    }
    const filtered = credentials.find((c) => c.namespace === 'flags-none' && c.name === 'openai-plain')!;
    expect(filtered.notes.filter((n) => n.treatment === 'dropped').map((n) => n.semantic)).toEqual(
      expect.arrayContaining(['allowed_api_key_hashes', 'allowed_user_ids']),
    );
    expect(report.totalObjects).toBe(report.accounts.reduce((s, a) => s + a.objects, 0) + report.sharedObjects);
  });
});

describe('export: a key hash named in two accounts', () => {
  test("belongs to the older key alone: the copier's filter naming it is reported, not compiled", () => {
    const dir = mkdtempSync(join(tmpdir(), 'byok-export-copied-'));
    const [victim, copier] = [accountManifests('z-victim', 'none'), accountManifests('a-copier', 'none')];
    const key = (docs: Record<string, unknown>[]) =>
      docs.find((d) => d['kind'] === 'GatewayAPIKey') as { metadata: Record<string, unknown>; spec: { hash: string } };
    key(victim).metadata['creationTimestamp'] = '2026-01-01T00:00:00Z';
    key(copier).metadata['creationTimestamp'] = '2026-01-02T00:00:00Z';
    key(copier).spec.hash = key(victim).spec.hash;
    for (const d of copier)
      if (d['kind'] === 'BYOKCredential' && (d['spec'] as { allowedApiKeyHashes?: string[] }).allowedApiKeyHashes)
        (d['spec'] as { allowedApiKeyHashes: string[] }).allowedApiKeyHashes = [key(victim).spec.hash];
    writeFileSync(join(dir, 'accounts.yaml'), [...victim, ...copier].map((d) => stringify(d)).join('---\n'));
    const copied = loadExportInput(dir, CATALOG).input;
    expect(copied.accounts.find((a) => a.namespace === 'z-victim')!.apiKeys.map((k) => k.hash)).toEqual([
      key(victim).spec.hash,
    ]);
    expect(copied.accounts.find((a) => a.namespace === 'a-copier')!.apiKeys).toEqual([]);
    expect(
      copied.skipped.filter((s) => s.reason.includes('ApiKeyHashNotLive')).map((s) => `${s.namespace}/${s.name}`),
    ).toEqual(['a-copier/openai-plain']);
    rmSync(dir, { recursive: true, force: true });
  });
});

describe('export: names', () => {
  test.each(['envoy-ai-gateway', 'agentgateway'] as const)(
    '%s: accounts whose namespace and credential names join alike never share an object',
    (target) => {
      const a = input.accounts.find((x) => x.namespace === 'flags-none')!;
      const openai = a.credentials.find((c) => c.name === 'openai-plain')!;
      // `team-a` + `b-c` and `team-a-b` + `c` read the same once joined by dashes.
      const twin = (namespace: string, name: string): CompiledAccount => ({
        ...a,
        namespace,
        credentials: [{ ...openai, id: `${namespace}/${name}`, name }],
      });
      const accounts = [twin('team-a', 'b-c'), twin('team-a-b', 'c')];
      const facts = new Map(accounts.map((x) => [x.credentials[0]!.id, { kind: 'api-key' as const }]));
      const { objects } = exportAccounts({ ...input, accounts, facts }, options(target));
      const own = objects.filter((o) => o.metadata.labels?.['byok.gateway.dev/account'] !== undefined);
      const names = own.map((o) => `${o.kind}/${o.metadata.name}`);
      expect(new Set(names).size).toBe(names.length);
      expect(own.filter((o) => o.metadata.labels!['byok.gateway.dev/account'] === 'team-a').length).toBe(
        own.length / 2,
      );
    },
  );

  test("Envoy: hosts that slug alike get their own Backend (a tenant cannot take over another tenant's upstream)", () => {
    const a = input.accounts.find((x) => x.namespace === 'flags-none')!;
    const azure = a.credentials.find((c) => c.name === 'azure-resource')!;
    const hosts = ['team-x.openai.azure.com', 'team.x-openai.azure.com'];
    const accounts = hosts.map(
      (h, i): CompiledAccount => ({
        ...a,
        namespace: `acct-${i}`,
        credentials: [{ ...azure, id: `acct-${i}`, allowedModels: ['openai/gpt-5'] }],
      }),
    );
    const facts = new Map(
      hosts.map((h, i) => [
        `acct-${i}`,
        {
          kind: 'azure' as const,
          entries: [
            {
              type: 'deployment' as const,
              modelSlug: 'openai/gpt-5',
              endpointUrl: `https://${h}/openai/deployments/d/chat/completions?api-version=2024-10-21`,
              modelId: 'd',
            },
          ],
        },
      ]),
    );
    // The second host is outside Azure's domain: exported only when the platform allows tenant hosts.
    const { objects } = exportAccounts(
      { ...input, accounts, facts },
      options('envoy-ai-gateway', { allowTenantHosts: true }),
    );
    const backends = objects.filter(
      (o) =>
        o.kind === 'Backend' &&
        hosts.includes((o.spec['endpoints'] as { fqdn: { hostname: string } }[])[0]!.fqdn.hostname),
    );
    expect(backends).toHaveLength(2);
    expect(new Set(backends.map((b) => b.metadata.name)).size).toBe(2);
  });

  test('a name two objects would share is written for neither, in any order, and reported on each account', () => {
    const object = (name: string, account?: string, host = 'a.example.com'): TargetObject => ({
      apiVersion: 'gateway.envoyproxy.io/v1alpha1',
      kind: 'Backend',
      metadata: { name, namespace: 'x', ...(account ? { labels: { 'byok.gateway.dev/account': account } } : {}) },
      spec: { host },
    });
    for (const order of [
      ['a', 'b'],
      ['b', 'a'],
    ]) {
      const shared = [object('same'), object('kept', undefined, 'k.example.com')];
      const perAccount = new Map(
        order.map((ns) => [ns, [object('same', ns, `${ns}.example.com`), object(`own-${ns}`, ns)]]),
      );
      const { conflicts, byAccount } = refuseSharedNames(shared, perAccount);
      expect(shared.map((o) => o.metadata.name)).toEqual(['kept']);
      expect(perAccount.get('a')!.map((o) => o.metadata.name)).toEqual(['own-a']);
      expect(perAccount.get('b')!.map((o) => o.metadata.name)).toEqual(['own-b']);
      expect(conflicts).toEqual([
        'Backend same: 3 objects would share this name; none is written (a)',
        'Backend same: 3 objects would share this name; none is written (b)',
        'Backend same: 3 objects would share this name; none is written (shared)',
      ]);
      expect([...byAccount.keys()].sort()).toEqual(['a', 'b']);
    }
  });

  test('an upstream on another port than 443 is left out and reported, never rewritten to 443', () => {
    const a = input.accounts.find((x) => x.namespace === 'flags-none')!;
    const azure = a.credentials.find((c) => c.name === 'azure-resource')!;
    const accounts = [{ ...a, credentials: [{ ...azure, allowedModels: ['openai/gpt-5'] }] }];
    const facts = new Map([
      [
        azure.id,
        {
          kind: 'azure' as const,
          entries: [
            {
              type: 'deployment' as const,
              modelSlug: 'openai/gpt-5',
              endpointUrl: 'https://team.openai.azure.com:8443/openai/deployments/d/chat/completions',
              modelId: 'd',
            },
          ],
        },
      ],
    ]);
    const { objects, report } = exportAccounts({ ...input, accounts, facts }, options('envoy-ai-gateway'));
    expect(JSON.stringify(objects)).not.toContain('team.openai.azure.com');
    expect(report.accounts[0]!.notes.map((n) => n.detail)).toContainEqual(
      expect.stringContaining('uses port 8443; the export writes port 443 only'),
    );
  });
});

describe('export: target limits', () => {
  // 20 models with one openai endpoint each, and an account with 130 openai credentials.
  const models = Array.from({ length: 20 }, (_, i) => `acme/model-${String(i).padStart(2, '0')}`);
  const catalog = createCatalog(
    models.map((model) => ({
      model,
      endpoints: [
        {
          id: 'openai',
          provider: 'openai',
          region: null,
          zdr: false,
          dataCollection: false,
          pricing: { kind: 'per-request', usdPerRequest: '0.01' },
        },
      ],
    })),
  );
  const credential = (i: number): CompiledCredential => ({
    id: `cred-${i}`,
    name: `key-${String(i).padStart(3, '0')}`,
    provider: 'openai',
    workspaceId: null,
    label: '',
    displayName: null,
    disabled: false,
    isFallback: false,
    isRequired: false,
    isByokOnly: false,
    declaredZdr: null,
    allowedModels: null,
    allowedApiKeyHashes: null,
    allowedUserIds: null,
    sortOrder: i,
    createdAt: '2026-01-01T00:00:00Z',
  });
  const account: CompiledAccount = {
    namespace: 'big',
    accountId: 'big',
    plan: 'enterprise',
    privacy: { denyDataCollection: false, alwaysZdr: false },
    credentials: Array.from({ length: 130 }, (_, i) => credential(i)),
    workspaces: [],
    guardrails: [],
    apiKeys: [],
  };
  const limitsInput: ExportInput = {
    accounts: [account],
    facts: new Map(account.credentials.map((c) => [c.id, { kind: 'api-key' }])),
    skipped: [],
    catalog,
    upstream: (model) => ({
      baseUrl: 'https://api.openai.com/v1',
      model: model.slice(5),
      regionalBaseUrls: {},
      defaultRegion: 'us-east-1',
      azureOpenAiUrl: '',
      azureFoundryUrl: '',
    }),
  };

  test('Envoy AI Gateway: 15 rules per route (split), 128 backendRefs per rule (cut), 16 targets per policy; each reported', () => {
    const { objects, report } = exportAccounts(limitsInput, options('envoy-ai-gateway'));
    const routes = objects.filter((o) => o.kind === 'AIGatewayRoute');
    expect(routes.map((r) => (r.spec['rules'] as unknown[]).length)).toEqual([15, 5]);
    expect(objects.filter((o) => o.kind === 'BackendTrafficPolicy').map((o) => o.metadata.name)).toEqual(
      routes.map((r) => r.metadata.name),
    );
    for (const r of routes.flatMap((o) => o.spec['rules'] as Rule[])) expect(r.backendRefs).toHaveLength(128);
    expect(report.limits).toEqual(
      expect.arrayContaining([
        expect.stringContaining('split over 2 AIGatewayRoutes'),
        expect.stringContaining('131 attempts, cut to the first 128'),
      ]),
    );
    for (const p of objects.filter((o) => o.kind === 'BackendSecurityPolicy'))
      expect((p.spec['targetRefs'] as unknown[]).length).toBeLessThanOrEqual(16);
  });

  test('agentgateway: 8 priority groups (the tail shares the last), 16 providers per group, 16 rules per HTTPRoute; each reported', () => {
    const { objects, report } = exportAccounts(limitsInput, options('agentgateway'));
    const backends = objects.filter((o) => o.kind === 'AgentgatewayBackend');
    expect(backends).toHaveLength(20);
    const groups = (backends[0]!.spec['ai'] as { groups: { providers: { name: string }[] }[] }).groups;
    expect(groups.map((g) => g.providers.length)).toEqual([1, 1, 1, 1, 1, 1, 1, 16]);
    expect(groups[0]!.providers[0]!.name).toMatch(/^cred-key-000-[a-z2-7]{26}$/);
    expect(objects.filter((o) => o.kind === 'HTTPRoute').map((o) => (o.spec['rules'] as unknown[]).length)).toEqual([
      16, 4,
    ]);
    expect(report.limits).toEqual(
      expect.arrayContaining([
        expect.stringContaining('share priority group 8'),
        expect.stringContaining('cut (providers per group)'),
      ]),
    );
  });
});

describe('agentgateway standalone config', () => {
  const schema = JSON.parse(
    readFileSync(thirdPartyFile('agentgateway/standalone-config.schema.json'), 'utf8'),
  ) as object;
  const ajv = new Ajv2020({ allErrors: true, strict: false });
  // The schema is generated from Rust types (schemars): its numeric formats are ranges, checked as such.
  const ranges: Record<string, [number, number]> = {
    uint: [0, Number.MAX_SAFE_INTEGER],
    uint8: [0, 255],
    uint16: [0, 65_535],
    uint32: [0, 4_294_967_295],
    uint64: [0, Number.MAX_SAFE_INTEGER],
    int32: [-2_147_483_648, 2_147_483_647],
  };
  for (const [name, [min, max]] of Object.entries(ranges))
    ajv.addFormat(name, { type: 'number', validate: (n: number) => Number.isInteger(n) && n >= min && n <= max });
  ajv.addFormat('double', { type: 'number', validate: (n: number) => Number.isFinite(n) });
  // `format: const` marks a constant-only string in the generated schema; the `const` keyword beside it checks it.
  ajv.addFormat('const', true);
  ajv.addFormat('uri', { type: 'string', validate: (s: string) => URL.canParse(s) });
  const validate = ajv.compile(schema);

  test.each(Object.keys(FLAG_SETS))(
    'flags %s: validates against standalone-config.schema.json, one failover virtual model per model',
    (flags) => {
      const { config, report } = exportStandalone(input, options('agentgateway'), `flags-${flags}`);
      const ok = validate(config);
      expect(validate.errors ?? []).toEqual([]);
      expect(ok).toBe(true);
      const llm = (
        config as {
          llm: {
            models: { name: string; visibility: string }[];
            virtualModels: { name: string; routing: { failover: { targets: { model: string }[] } } }[];
          };
        }
      ).llm;
      expect(llm.virtualModels.length).toBe(report.accounts[0]!.models.length);
      const concrete = new Set(llm.models.map((m) => m.name));
      for (const v of llm.virtualModels)
        for (const t of v.routing.failover.targets) expect(concrete.has(t.model)).toBe(true);
      expect(llm.models.every((m) => m.visibility === 'internal')).toBe(true);
      expect(JSON.stringify(config)).not.toMatch(/canary/i);
    },
  );

  test('a config with an inline key is refused by the same schema check (the check is real)', () => {
    const { config } = exportStandalone(input, options('agentgateway'), 'flags-none');
    const broken = JSON.parse(JSON.stringify(config)) as { llm: { models: Record<string, unknown>[] } };
    broken.llm.models[0]!['params'] = { apiKey: { path: 'not-a-field' } };
    expect(validate(broken)).toBe(false);
  });
});

describe('per-request mode (Envoy credentialOverride)', () => {
  test('objects grow with plan shapes, not accounts: 10 and 60 accounts of one shape give the same objects', () => {
    const counts = [10, 60].map((n) => {
      const { input: scaled } = loadExportInput(scaleFolder(n, 3), CATALOG);
      const { objects, report } = exportAccounts(scaled, options('envoy-ai-gateway', { mode: 'override' }));
      expect(report.accounts.every((a) => a.objects === 0)).toBe(true);
      return objects.length;
    });
    expect(counts[0]).toBe(counts[1]);
    const staticCount = exportAccounts(loadExportInput(scaleFolder(10, 3), CATALOG).input, options('envoy-ai-gateway'))
      .objects.length;
    expect(counts[0]).toBeLessThan(staticCount);
  });

  test('every BYOK slot reads its credential from ext_authz metadata and never falls back to a configured key', () => {
    const { objects, report } = exportAccounts(input, options('envoy-ai-gateway', { mode: 'override' }));
    const slots = objects.filter((o) => o.kind === 'BackendSecurityPolicy' && o.metadata.name.startsWith('byok-slot-'));
    expect(slots.length).toBeGreaterThan(0);
    for (const p of slots) {
      expect(p.spec['credentialOverride']).toEqual({
        fromDynamicMetadata: {
          namespace: 'envoy.filters.http.ext_authz',
          key: p.metadata.annotations!['byok.gateway.dev/metadata-key'],
          fallbackToConfigured: false,
        },
      });
    }
    // Each account's report names the x-byok-plan id per model, and the rules match exactly those ids.
    const ids = new Set(
      objects
        .filter((o) => o.kind === 'AIGatewayRoute')
        .flatMap((o) => (o.spec['rules'] as Rule[]).map((r) => r.matches[0]!.headers[0]!.value)),
    );
    for (const a of report.accounts)
      for (const n of a.notes.filter((x) => x.semantic === 'plan shape'))
        expect(ids.has(n.detail.split('x-byok-plan ')[1]!)).toBe(true);
    expect(() => exportAccounts(input, options('agentgateway', { mode: 'override' }))).toThrow(/envoy-ai-gateway only/);
  });
});

describe('the command line', () => {
  test.each([
    [['--target', 'nginx', 'hack/export/example'], /invalid --target nginx/],
    [['--target', 'envoy-ai-gateway', '--standalone', 'hack/export/example'], /--standalone is an agentgateway form/],
    [
      ['--target', 'agentgateway', '--per-request', 'hack/export/example'],
      /agentgateway has no per-request credential source/,
    ],
    [['--target', 'agentgateway', '--standalone', folder], /--standalone writes one account: the folder has 4/],
    [['--target', 'agentgateway'], /needs one file or folder/],
  ])('%j is a usage error (exit 2, the page on stderr)', async (args, message) => {
    const r = await runExport(args, repo);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(message);
    expect(r.stderr).toContain('usage: byok-operator export');
  });

  test('a folder with nothing to export exits 1 and says which credentials were left out and why', async () => {
    const { mkdtempSync, writeFileSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const dir = mkdtempSync(join(tmpdir(), 'byok-export-empty-'));
    writeFileSync(
      join(dir, 'c.yaml'),
      'apiVersion: byok.gateway.dev/v1alpha1\nkind: BYOKCredential\nmetadata: {name: k, namespace: t}\nspec: {provider: openai, secretRef: {name: missing}}\n',
    );
    const r = await runExport(['--target', 'envoy-ai-gateway', dir], repo);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('t/k (openai): SecretNotFound: Secret missing is not among the files');
  });
});

describe('derived Secret content (what the export controller would write)', () => {
  const payloadOf = (name: string) => {
    const shape = SHAPES.find((s) => s.name === name)!;
    const r = validatePayload(shape.provider as ProviderSlug, shape.payload);
    if (!r.ok) throw new Error(`fixture ${name} is invalid`);
    return r.payload;
  };

  test.each(['envoy-ai-gateway', 'agentgateway'] as const)(
    '%s: every derived Secret the objects name gets exactly the keys they read',
    (target) => {
      const { report } = exportAccounts(input, options(target));
      const secrets = report.derivedSecrets.filter((s) => s.credential?.startsWith('flags-none/'));
      expect(secrets.length).toBe(SHAPES.length + 2); // azure-mixed has two entries; the fallback key is one more
      for (const s of secrets) {
        const name = s.credential!.slice('flags-none/'.length);
        if (name === 'openai-fallback') continue;
        expect(Object.keys(derivedSecretData(target, payloadOf(name), s.part)).sort()).toEqual([...s.keys].sort());
      }
    },
  );

  test('the shapes: an AWS credentials file, the Google key document without region, one Azure key per entry', () => {
    const ini = derivedSecretData('envoy-ai-gateway', payloadOf('bedrock-iam'))['credentials']!;
    expect(ini).toMatch(
      /^\[default\]\naws_access_key_id = AKIACANARY0000000008\naws_secret_access_key = canarySecretAccessKey000000000000000008\n$/,
    );
    expect(derivedSecretData('agentgateway', payloadOf('bedrock-iam'))).toEqual({
      accessKey: 'AKIACANARY0000000008',
      secretKey: 'canarySecretAccessKey000000000000000008',
    });
    const sa = JSON.parse(
      derivedSecretData('envoy-ai-gateway', payloadOf('vertex-regional'))['service_account.json']!,
    ) as Record<string, string>;
    expect(sa['project_id']).toBe('team-eu');
    expect(sa).not.toHaveProperty('region');
    expect(derivedSecretData('agentgateway', payloadOf('azure-mixed'), 'deployment openai/gpt-5-mini')).toEqual({
      apiKey: 'azcanary0000000000000000000005',
    });
    expect(derivedSecretData('agentgateway', payloadOf('azure-mixed'), 'resource team-foundry')).toEqual({
      apiKey: 'azcanary0000000000000000000006',
    });
    expect(() => derivedSecretData('agentgateway', payloadOf('azure-mixed'), 'resource nope')).toThrow(RangeError);
  });
});
