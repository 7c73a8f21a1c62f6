// Small builders for domain tests: accounts, catalogs, requests, and a compact rendering of plans.
import type {
  CatalogEndpoint,
  CatalogEndpointInput,
  CompiledAccount,
  CompiledCredential,
  CompiledGuardrail,
  CompiledWorkspace,
  ProviderSlug,
  RoutePlan,
  RouteRequest,
} from '../../../src/domain/index.ts';
import { priceMicros } from '../../../src/domain/index.ts';

export const MODEL = 'acme/chat';
export const OTHER_MODEL = 'acme/other';
export const WS1 = 'ws-1';
export const WS2 = 'ws-2';
export const hash = (n: number): string => n.toString(16).padStart(64, '0');
export const K1 = hash(1);
export const K2 = hash(2);

export function cred(id: string, provider: ProviderSlug, over: Partial<CompiledCredential> = {}): CompiledCredential {
  return {
    id,
    name: id,
    provider,
    workspaceId: null,
    label: 'sk-...abcd',
    displayName: null,
    disabled: false,
    isFallback: false,
    isRequired: false,
    isByokOnly: false,
    declaredZdr: null,
    allowedModels: null,
    allowedApiKeyHashes: null,
    allowedUserIds: null,
    sortOrder: 0,
    createdAt: '2025-01-01T00:00:00Z',
    ...over,
  };
}

export function guardrail(id: string, policy: Partial<CompiledGuardrail['dataPolicy']> = {}, budget: CompiledGuardrail['budget'] = null): CompiledGuardrail {
  return {
    id,
    name: id,
    budget,
    dataPolicy: { requireZdr: false, denyDataCollection: false, allowedProviders: null, ignoredProviders: [], ...policy },
  };
}

export function workspace(id: string, over: Partial<CompiledWorkspace> = {}): CompiledWorkspace {
  return {
    id,
    name: id,
    displayName: null,
    isDefault: id === WS1,
    budgets: [],
    includeByokInBudgets: false,
    defaultGuardrailId: null,
    members: [
      { userId: 'u1', guardrailId: null },
      { userId: 'u2', guardrailId: null },
    ],
    ...over,
  };
}

export function account(credentials: CompiledCredential[], over: Partial<CompiledAccount> = {}): CompiledAccount {
  return {
    namespace: 'acct',
    accountId: 'acct',
    plan: 'pay-as-you-go',
    privacy: { denyDataCollection: false, alwaysZdr: false },
    credentials,
    workspaces: [workspace(WS1), workspace(WS2)],
    guardrails: [],
    apiKeys: [
      { hash: K1, workspaceId: WS1, guardrailId: null, expiresAt: null },
      { hash: K2, workspaceId: WS1, guardrailId: null, expiresAt: null },
    ],
    ...over,
  };
}

export function ep(id: string, provider: ProviderSlug, over: Partial<CatalogEndpointInput> = {}): CatalogEndpoint {
  const input: CatalogEndpointInput = {
    id,
    provider,
    region: null,
    zdr: false,
    dataCollection: false,
    pricing: { kind: 'per-token', promptUsdPerMillionTokens: 1, completionUsdPerMillionTokens: 2 },
    ...over,
  };
  // As createCatalog builds it: the price in micros is derived, not enumerable (vectors serialize the input).
  return Object.defineProperty(input, 'price', { value: priceMicros(input.pricing), enumerable: false }) as CatalogEndpoint;
}

/** The default catalog for MODEL, in the gateway's default order. */
export function defaultEndpoints(): CatalogEndpoint[] {
  return [
    ep('openai', 'openai', { zdr: true }),
    ep('openai/eu', 'openai', { region: 'eu', zdr: true }),
    ep('anthropic', 'anthropic'),
    ep('together', 'together', { dataCollection: true }),
    ep('azure/eu', 'azure', { region: 'eu', zdr: true }),
    ep('mistral', 'mistral', { zdr: true }),
  ];
}

export function req(over: Partial<RouteRequest> = {}): RouteRequest {
  return { model: MODEL, apiKeyHash: K1, userId: 'u1', workspaceId: WS1, baseAddress: 'global', isVideoGeneration: false, ...over };
}

/** Attempts as `P:cred@endpoint`, `S:endpoint`, `F:cred@endpoint`. */
export function attemptsOf(plan: RoutePlan): string[] {
  return plan.attempts.map((a) =>
    a.kind === 'shared' ? `S:${a.endpoint.id}` : `${a.section === 'prioritized' ? 'P' : 'F'}:${a.credentialId}@${a.endpoint.id}`,
  );
}

/** Exclusions as `subject rule`, sorted. */
export function exclusionsOf(plan: RoutePlan): string[] {
  return plan.excluded
    .map((x) => `${x.subject.kind === 'credential' ? x.subject.credentialId : x.subject.endpointId} ${x.rule}`)
    .sort();
}

/** A syntactically valid Google service-account key document (fake key material). */
export const SA = {
  type: 'service_account',
  project_id: 'my-project-123',
  private_key_id: '0123456789abcdef0123456789abcdef01234567',
  private_key: '-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n',
  client_email: 'router@my-project-123.iam.gserviceaccount.com',
  client_id: '112233445566778899001',
  auth_uri: 'https://accounts.google.com/o/oauth2/auth',
  token_uri: 'https://oauth2.googleapis.com/token',
  auth_provider_x509_cert_url: 'https://www.googleapis.com/oauth2/v1/certs',
  client_x509_cert_url: 'https://www.googleapis.com/robot/v1/metadata/x509/router%40my-project-123.iam.gserviceaccount.com',
  universe_domain: 'googleapis.com',
};
