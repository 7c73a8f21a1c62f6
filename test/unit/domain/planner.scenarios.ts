// The route planner's scenario table (spec 1.1): one or more cases per rule and per interaction listed in issue 3,
// each with the exact attempt order and the exact explanation. Used by planner.scenarios.test.ts and published as
// test vectors for gateway implementations in other languages (scripts/contract.ts -> docs/contract/vectors).
import {
  type CatalogEndpoint,
  type CompiledAccount,
  type CompiledCredential,
  type RouteErrorCode,
  type RouteRequest,
} from '../../../src/domain/index.ts';
import {
  K1,
  K2,
  MODEL,
  OTHER_MODEL,
  WS1,
  WS2,
  cred,
  guardrail,
  workspace,
} from './fixtures.ts';

export interface Case {
  name: string;
  creds: CompiledCredential[];
  account?: Partial<CompiledAccount>;
  request?: Partial<RouteRequest>;
  endpoints?: CatalogEndpoint[];
  attempts: string[];
  excluded: string[];
  error?: RouteErrorCode;
}

const SHARED_ALL = ['S:openai', 'S:anthropic', 'S:together', 'S:mistral'];
const REGIONAL = ['azure/eu rule-9-regional-not-targeted', 'openai/eu rule-9-regional-not-targeted'];
const onlyExcept = (...kept: string[]): string[] =>
  ['openai', 'openai/eu', 'anthropic', 'together', 'azure/eu', 'mistral'].filter((e) => !kept.includes(e)).map((e) => `${e} provider-only`);

export const cases: Case[] = [
  // Rules 1 and 2: sections and sort order.
  {
    name: 'rule 1/2: prioritized by ascending sort_order, then shared endpoints, then fallbacks by ascending sort_order',
    creds: [
      cred('a2', 'openai', { sortOrder: 2 }),
      cred('a1', 'openai', { sortOrder: 1 }),
      cred('f2', 'openai', { isFallback: true, sortOrder: 2 }),
      cred('f1', 'openai', { isFallback: true, sortOrder: 1 }),
    ],
    attempts: ['P:a1@openai', 'P:a2@openai', ...SHARED_ALL, 'F:f1@openai', 'F:f2@openai'],
    excluded: REGIONAL,
  },
  {
    name: 'rule 2: across providers, each section follows the provider order of the catalog (sort_order is per provider)',
    creds: [
      cred('fa', 'anthropic', { isFallback: true, sortOrder: 0 }),
      cred('fo', 'openai', { isFallback: true, sortOrder: 3 }),
      cred('pm', 'mistral', { sortOrder: 9 }),
      cred('po', 'openai', { sortOrder: 0 }),
    ],
    attempts: ['P:po@openai', 'P:pm@mistral', ...SHARED_ALL, 'F:fo@openai', 'F:fa@anthropic'],
    excluded: REGIONAL,
  },
  // Rules 3 and 7: default flags.
  {
    name: 'rule 3/7: with both flags false the credential is tried first, then shared capacity including its provider',
    creds: [cred('c', 'anthropic')],
    attempts: ['P:c@anthropic', ...SHARED_ALL],
    excluded: REGIONAL,
  },
  {
    name: 'rule 7: shared capacity serves models outside the allowlist of a default credential',
    creds: [cred('c', 'anthropic', { allowedModels: [OTHER_MODEL] })],
    attempts: SHARED_ALL,
    excluded: ['c rule-11-model-filter', ...REGIONAL],
  },
  // Rule 4.
  {
    name: 'rule 4: several credentials for one provider each produce their own pinned endpoint copy',
    creds: [cred('k2', 'anthropic', { sortOrder: 1 }), cred('k1', 'anthropic', { sortOrder: 0 })],
    attempts: ['P:k1@anthropic', 'P:k2@anthropic', ...SHARED_ALL],
    excluded: REGIONAL,
  },
  // Rule 5.
  {
    name: "rule 5: is_required removes the provider's shared endpoints for the credential's models",
    creds: [cred('r', 'anthropic', { isRequired: true, allowedModels: [MODEL] })],
    attempts: ['P:r@anthropic', 'S:openai', 'S:together', 'S:mistral'],
    excluded: ['anthropic rule-5-is-required', ...REGIONAL],
  },
  {
    name: 'rule 5: a null allowlist means every model',
    creds: [cred('r', 'anthropic', { isRequired: true })],
    request: { model: OTHER_MODEL },
    attempts: ['P:r@anthropic', 'S:openai', 'S:together', 'S:mistral'],
    excluded: ['anthropic rule-5-is-required', ...REGIONAL],
  },
  {
    name: 'rule 5: models outside the allowlist still fall back to shared capacity on that provider',
    creds: [cred('r', 'anthropic', { isRequired: true, allowedModels: [OTHER_MODEL] })],
    attempts: SHARED_ALL,
    excluded: ['r rule-11-model-filter', ...REGIONAL],
  },
  {
    name: 'rule 5: is_required on a fallback credential leaves only the credential for that provider, after shared',
    creds: [cred('f', 'anthropic', { isRequired: true, isFallback: true })],
    attempts: ['S:openai', 'S:together', 'S:mistral', 'F:f@anthropic'],
    excluded: ['anthropic rule-5-is-required', ...REGIONAL],
  },
  // Rule 6.
  {
    name: 'rule 6: is_byok_only removes shared endpoints for every model, including models outside allowed_models',
    creds: [cred('b', 'anthropic', { isByokOnly: true, allowedModels: [OTHER_MODEL] })],
    attempts: ['S:openai', 'S:together', 'S:mistral'],
    excluded: ['anthropic rule-6-byok-only', 'b rule-11-model-filter', ...REGIONAL],
  },
  {
    name: "rule 6: after the owner's credentials fail the provider is skipped; other providers still serve",
    creds: [cred('b', 'anthropic', { isByokOnly: true })],
    attempts: ['P:b@anthropic', 'S:openai', 'S:together', 'S:mistral'],
    excluded: ['anthropic rule-6-byok-only', ...REGIONAL],
  },
  {
    name: 'rule 6: is_byok_only takes precedence over is_required',
    creds: [cred('b', 'anthropic', { isByokOnly: true, isRequired: true })],
    attempts: ['P:b@anthropic', 'S:openai', 'S:together', 'S:mistral'],
    excluded: ['anthropic rule-6-byok-only', ...REGIONAL],
  },
  {
    name: 'rule 6: provider.only stops other providers from serving',
    creds: [cred('b', 'anthropic', { isByokOnly: true })],
    request: { providerOnly: ['anthropic'] },
    attempts: ['P:b@anthropic'],
    excluded: ['anthropic rule-6-byok-only', ...onlyExcept('anthropic')],
  },
  {
    name: 'rule 6: provider.only with the byok-only credential not serving the model leaves nothing',
    creds: [cred('b', 'anthropic', { isByokOnly: true, allowedModels: [OTHER_MODEL] })],
    request: { providerOnly: ['anthropic'] },
    attempts: [],
    excluded: ['anthropic rule-6-byok-only', 'b rule-11-model-filter', ...onlyExcept('anthropic')],
    error: 'no_available_endpoint',
  },
  // Rule 8.
  {
    name: 'rule 8: credential endpoints first regardless of provider.order; shared endpoints follow in the requested order',
    creds: [cred('c', 'openai')],
    request: { providerOrder: ['mistral', 'anthropic', 'openai'] },
    attempts: ['P:c@openai', 'S:mistral', 'S:anthropic', 'S:openai', 'S:together'],
    excluded: REGIONAL,
  },
  {
    name: 'rule 8: a partial set of credentials goes first even when listed later; credentials follow the requested order',
    creds: [cred('co', 'openai'), cred('cm', 'mistral')],
    request: { providerOrder: ['anthropic', 'mistral', 'openai'] },
    attempts: ['P:cm@mistral', 'P:co@openai', 'S:anthropic', 'S:mistral', 'S:openai', 'S:together'],
    excluded: REGIONAL,
  },
  // Rule 9.
  {
    name: 'rule 9: region-pinned endpoints are skipped on the global API',
    creds: [],
    attempts: SHARED_ALL,
    excluded: REGIONAL,
  },
  {
    name: 'rule 9: a region-pinned endpoint targeted with provider.order is used (the bare provider slug does not target it)',
    creds: [],
    request: { providerOrder: ['openai/eu', 'azure'] },
    attempts: ['S:openai/eu', 'S:openai', 'S:anthropic', 'S:together', 'S:mistral'],
    excluded: ['azure/eu rule-9-regional-not-targeted'],
  },
  {
    name: 'rule 9: a region-pinned endpoint targeted with provider.only is used',
    creds: [],
    request: { providerOnly: ['openai/eu', 'anthropic'] },
    attempts: ['S:openai/eu', 'S:anthropic'],
    excluded: onlyExcept('openai/eu', 'anthropic'),
  },
  {
    name: 'rule 9: a prioritized credential may use a regional endpoint when its provider has no standard one',
    creds: [cred('c', 'azure')],
    attempts: ['P:c@azure/eu', ...SHARED_ALL],
    excluded: REGIONAL,
  },
  {
    name: 'rule 9: when standard and regional endpoints exist the credential is routed to the standard one',
    creds: [cred('c', 'openai')],
    attempts: ['P:c@openai', ...SHARED_ALL],
    excluded: REGIONAL,
  },
  {
    name: 'rule 9: fallback credentials never unlock regional endpoints',
    creds: [cred('f', 'azure', { isFallback: true })],
    attempts: SHARED_ALL,
    excluded: ['f rule-9-regional-fallback', ...REGIONAL],
  },
  {
    name: 'rule 9: an explicitly targeted regional endpoint serves fallback credentials too',
    creds: [cred('f', 'azure', { isFallback: true })],
    request: { providerOrder: ['azure/eu'] },
    attempts: ['S:azure/eu', ...SHARED_ALL, 'F:f@azure/eu'],
    excluded: ['openai/eu rule-9-regional-not-targeted'],
  },
  {
    name: 'rule 9: regional base addresses route to in-region endpoints for every section and are otherwise unaffected',
    creds: [cred('c', 'openai'), cred('f', 'azure', { isFallback: true })],
    request: { baseAddress: { region: 'eu' } },
    attempts: ['P:c@openai/eu', 'S:openai/eu', 'S:azure/eu', 'F:f@azure/eu'],
    excluded: ['anthropic rule-9-out-of-region', 'mistral rule-9-out-of-region', 'openai rule-9-out-of-region', 'together rule-9-out-of-region'],
  },
  // Rule 10.
  {
    name: 'rule 10: a guardrail requiring ZDR removes endpoints before credential endpoints are created',
    creds: [cred('a', 'anthropic')],
    account: {
      guardrails: [guardrail('g-zdr', { requireZdr: true })],
      apiKeys: [{ hash: K1, workspaceId: WS1, guardrailId: 'g-zdr', expiresAt: null }],
    },
    attempts: ['S:openai', 'S:mistral'],
    excluded: ['a rule-10-zdr', 'anthropic rule-10-zdr', 'together rule-10-zdr', ...REGIONAL],
  },
  {
    name: 'rule 10: a credential with declared_zdr carries a ZDR policy and passes a ZDR guardrail',
    creds: [cred('a', 'anthropic', { declaredZdr: true })],
    account: {
      guardrails: [guardrail('g-zdr', { requireZdr: true })],
      apiKeys: [{ hash: K1, workspaceId: WS1, guardrailId: 'g-zdr', expiresAt: null }],
    },
    attempts: ['P:a@anthropic', 'S:openai', 'S:mistral'],
    excluded: ['anthropic rule-10-zdr', 'together rule-10-zdr', ...REGIONAL],
  },
  {
    name: 'rule 10: the declared_zdr exception does not apply to video generation',
    creds: [cred('a', 'anthropic', { declaredZdr: true })],
    account: {
      guardrails: [guardrail('g-zdr', { requireZdr: true })],
      apiKeys: [{ hash: K1, workspaceId: WS1, guardrailId: 'g-zdr', expiresAt: null }],
    },
    request: { isVideoGeneration: true },
    attempts: ['S:openai', 'S:mistral'],
    excluded: ['a rule-10-zdr-video', 'anthropic rule-10-zdr', 'together rule-10-zdr', ...REGIONAL],
  },
  {
    name: 'rule 10: the request fails when nothing compliant remains, even with a valid credential',
    creds: [cred('t', 'together')],
    account: { privacy: { denyDataCollection: true, alwaysZdr: false } },
    request: { providerOnly: ['together'] },
    attempts: [],
    excluded: ['t rule-10-data-collection', 'together rule-10-data-collection', ...onlyExcept('together')],
    error: 'no_compliant_endpoint',
  },
  {
    name: 'rule 10: account privacy always-ZDR applies to shared endpoints and credentials alike',
    creds: [cred('a', 'anthropic')],
    account: { privacy: { denyDataCollection: false, alwaysZdr: true } },
    attempts: ['S:openai', 'S:mistral'],
    excluded: ['a rule-10-zdr', 'anthropic rule-10-zdr', 'together rule-10-zdr', ...REGIONAL],
  },
  {
    name: 'rule 10: request provider.zdr',
    creds: [],
    request: { requireZdr: true },
    attempts: ['S:openai', 'S:mistral'],
    excluded: ['anthropic rule-10-zdr', 'together rule-10-zdr', ...REGIONAL],
  },
  {
    name: 'rule 10: request data_collection=deny removes endpoints that collect data, credential or not',
    creds: [cred('t', 'together')],
    request: { denyDataCollection: true },
    attempts: ['S:openai', 'S:anthropic', 'S:mistral'],
    excluded: ['t rule-10-data-collection', 'together rule-10-data-collection', ...REGIONAL],
  },
  {
    name: "rule 10: the workspace default guardrail's allowed providers",
    creds: [cred('m', 'mistral')],
    account: {
      guardrails: [guardrail('g-def', { allowedProviders: ['openai', 'anthropic'] })],
      workspaces: [workspace(WS1, { defaultGuardrailId: 'g-def' }), workspace(WS2)],
    },
    attempts: ['S:openai', 'S:anthropic'],
    excluded: [
      'azure/eu rule-10-provider-policy',
      'm rule-10-provider-policy',
      'mistral rule-10-provider-policy',
      'openai/eu rule-9-regional-not-targeted',
      'together rule-10-provider-policy',
    ],
  },
  {
    name: "rule 10: the API key guardrail's ignored providers",
    creds: [cred('a', 'anthropic')],
    account: {
      guardrails: [guardrail('g-k', { ignoredProviders: ['anthropic'] })],
      apiKeys: [{ hash: K1, workspaceId: WS1, guardrailId: 'g-k', expiresAt: null }],
    },
    attempts: ['S:openai', 'S:together', 'S:mistral'],
    excluded: ['a rule-10-provider-policy', 'anthropic rule-10-provider-policy', ...REGIONAL],
  },
  {
    name: 'guardrail precedence: a member guardrail replaces the workspace default; the API key guardrail adds to it',
    creds: [],
    account: {
      guardrails: [
        guardrail('g-def', { ignoredProviders: ['mistral'] }),
        guardrail('g-u2', { ignoredProviders: ['together'] }),
        guardrail('g-k2', { ignoredProviders: ['openai'] }),
      ],
      workspaces: [
        workspace(WS1, { defaultGuardrailId: 'g-def', members: [{ userId: 'u1', guardrailId: null }, { userId: 'u2', guardrailId: 'g-u2' }] }),
      ],
      apiKeys: [
        { hash: K1, workspaceId: WS1, guardrailId: null, expiresAt: null },
        { hash: K2, workspaceId: WS1, guardrailId: 'g-k2', expiresAt: null },
      ],
    },
    request: { apiKeyHash: K2, userId: 'u2' },
    attempts: ['S:anthropic', 'S:mistral'],
    excluded: [
      'azure/eu rule-9-regional-not-targeted',
      'openai rule-10-provider-policy',
      'openai/eu rule-10-provider-policy',
      'together rule-10-provider-policy',
    ],
  },
  // Rule 11.
  {
    name: 'rule 11: model filter',
    creds: [cred('c', 'anthropic', { allowedModels: [OTHER_MODEL] }), cred('d', 'openai', { allowedModels: [MODEL, OTHER_MODEL] })],
    attempts: ['P:d@openai', ...SHARED_ALL],
    excluded: ['c rule-11-model-filter', ...REGIONAL],
  },
  {
    name: 'rule 11: API key filter',
    creds: [cred('c', 'anthropic', { allowedApiKeyHashes: [K2] }), cred('d', 'openai', { allowedApiKeyHashes: [K1, K2] })],
    attempts: ['P:d@openai', ...SHARED_ALL],
    excluded: ['c rule-11-api-key-filter', ...REGIONAL],
  },
  {
    name: 'rule 11: member filter (a request without a member does not match a member filter)',
    creds: [cred('c', 'anthropic', { allowedUserIds: ['u2'] }), cred('d', 'openai', { allowedUserIds: ['u1'] })],
    request: { userId: null },
    attempts: SHARED_ALL,
    excluded: ['c rule-11-member-filter', 'd rule-11-member-filter', ...REGIONAL],
  },
  {
    name: 'rule 11: all active filters must match',
    creds: [cred('c', 'anthropic', { allowedUserIds: ['u2'], allowedApiKeyHashes: [K2], allowedModels: [MODEL] })],
    request: { apiKeyHash: K2, userId: 'u2' },
    attempts: ['P:c@anthropic', ...SHARED_ALL],
    excluded: REGIONAL,
  },
  {
    name: 'rule 11: no filters means available to every model, API key and member',
    creds: [cred('c', 'anthropic')],
    request: { apiKeyHash: K2, userId: 'u2', model: OTHER_MODEL },
    attempts: ['P:c@anthropic', ...SHARED_ALL],
    excluded: REGIONAL,
  },
  {
    name: 'rule 11: filters are evaluated before routing: a filtered-out is_required credential removes no shared capacity',
    creds: [cred('r', 'anthropic', { isRequired: true, allowedApiKeyHashes: [K2] })],
    attempts: SHARED_ALL,
    excluded: ['r rule-11-api-key-filter', ...REGIONAL],
  },
  // Disabled and workspace scope.
  {
    name: 'disabled credentials are never used',
    creds: [cred('d', 'anthropic', { disabled: true }), cred('e', 'anthropic', { sortOrder: 1 })],
    attempts: ['P:e@anthropic', ...SHARED_ALL],
    excluded: ['d credential-disabled', ...REGIONAL],
  },
  {
    name: 'a disabled is_byok_only credential has no effect on shared capacity',
    creds: [cred('d', 'anthropic', { disabled: true, isByokOnly: true })],
    attempts: SHARED_ALL,
    excluded: ['d credential-disabled', ...REGIONAL],
  },
  {
    name: 'workspace-scoped credentials are used only in their workspace; global ones in every workspace',
    creds: [cred('w1', 'anthropic', { workspaceId: WS1 }), cred('w2', 'anthropic', { workspaceId: WS2 }), cred('g', 'openai')],
    attempts: ['P:g@openai', 'P:w1@anthropic', ...SHARED_ALL],
    excluded: ['w2 workspace-scope', ...REGIONAL],
  },
  {
    name: 'global credentials serve another workspace too',
    creds: [cred('w1', 'anthropic', { workspaceId: WS1 }), cred('g', 'openai')],
    request: { workspaceId: WS2 },
    attempts: ['P:g@openai', ...SHARED_ALL],
    excluded: ['w1 workspace-scope', ...REGIONAL],
  },
  // Catalog and request restrictions.
  {
    name: 'a credential whose provider has no endpoint for the model is explained',
    creds: [cred('q', 'groq')],
    attempts: SHARED_ALL,
    excluded: ['q no-endpoint-for-model', ...REGIONAL],
  },
  {
    name: 'provider.only also restricts credentials',
    creds: [cred('c', 'anthropic'), cred('o', 'openai')],
    request: { providerOnly: ['openai'] },
    attempts: ['P:o@openai', 'S:openai'],
    excluded: ['c provider-only', 'openai/eu rule-9-regional-not-targeted', ...onlyExcept('openai', 'openai/eu')],
  },
  {
    name: 'a model missing from the catalog fails with every credential explained',
    creds: [cred('c', 'anthropic')],
    request: { model: 'acme/unknown' },
    attempts: [],
    excluded: ['c no-endpoint-for-model'],
    error: 'model_not_in_catalog',
  },
];

