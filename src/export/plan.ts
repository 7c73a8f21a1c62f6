// One account's attempt order per model, computed by the same route planner the gateway runs, and each attempt
// resolved to the upstream host, path, model name and auth a target needs. The target has no notion of API keys,
// members or per-request options, so the plan is made for the account's default workspace with the API-key and
// member filters lifted (the report names every credential that had one).
import type { CatalogEndpoint } from '../domain/catalog.ts';
import type { CompiledAccount, CompiledCredential } from '../domain/model.ts';
import { payloadShapeFor } from '../domain/payloads.ts';
import { planRoute } from '../domain/planner.ts';
import type { CredentialFacts, ExportInput, ExportOptions, ExportUpstream, ResolvedAttempt, UpstreamTarget } from './types.ts';

export interface ModelPlan {
  model: string;
  attempts: ResolvedAttempt[];
  /** Attempts the planner kept but the export could not place (no facts, no shared project...), with why. */
  unplaced: { credentialId: string | null; provider: string; reason: string }[];
}

export interface AccountPlan {
  account: CompiledAccount;
  /** The default workspace's public id, or '' when the account has none (then only global credentials count). */
  workspaceId: string;
  models: ModelPlan[];
}

/** The account as the target sees it: API-key and member filters lifted (they cannot be expressed). */
function withoutRequestFilters(account: CompiledAccount): CompiledAccount {
  return { ...account, credentials: account.credentials.map((c) => ({ ...c, allowedApiKeyHashes: null, allowedUserIds: null })) };
}

/** A credential counts for the export when it is enabled and global or scoped to the default workspace. */
export function inExportScope(c: CompiledCredential, workspaceId: string): boolean {
  return !c.disabled && (c.workspaceId === null || c.workspaceId === workspaceId);
}

/**
 * The models whose plan differs from the platform's: a credential in scope applies to them (its provider serves the
 * model and its allowed_models admit it), or is_byok_only removes its provider's shared endpoints from them.
 */
function modelsOf(account: CompiledAccount, workspaceId: string, input: ExportInput): string[] {
  const credentials = account.credentials.filter((c) => inExportScope(c, workspaceId));
  const out: string[] = [];
  for (const [model, entry] of input.catalog.models) {
    const touched = credentials.some((c) => (c.isByokOnly || c.allowedModels === null || c.allowedModels.includes(model)) && entry.endpoints.some((e) => e.provider === c.provider));
    if (touched) out.push(model);
  }
  return out.sort();
}

export function planAccount(account: CompiledAccount, input: ExportInput, options: ExportOptions): AccountPlan {
  const workspaceId = account.workspaces.find((w) => w.isDefault)?.id ?? '';
  const lifted = withoutRequestFilters(account);
  const models = modelsOf(account, workspaceId, input).map((model): ModelPlan => {
    const plan = planRoute(lifted, input.catalog, { model, apiKeyHash: '', userId: null, workspaceId, baseAddress: 'global', isVideoGeneration: false });
    const attempts: ResolvedAttempt[] = [];
    const unplaced: ModelPlan['unplaced'] = [];
    for (const a of plan.attempts) {
      const credentialId = a.kind === 'credential' ? a.credentialId : null;
      const facts = credentialId === null ? null : input.facts.get(credentialId);
      const upstream = input.upstream(model, a.endpoint.id);
      const resolved =
        facts === undefined
          ? 'the payload was not available offline (its Secret is not among the files)'
          : upstream === undefined
            ? `the catalog has no upstream for endpoint ${a.endpoint.id}`
            : resolveTarget(a.endpoint, model, upstream, facts, options);
      if (typeof resolved === 'string') {
        unplaced.push({ credentialId, provider: a.provider, reason: resolved });
        continue;
      }
      const section = a.kind === 'credential' ? a.section : 'shared';
      attempts.push({ credentialId, provider: a.provider, endpoint: a.endpoint, section, target: resolved });
    }
    return { model, attempts, unplaced };
  });
  return { account, workspaceId, models };
}

function fill(template: string, values: Record<string, string>): string {
  return template.replace(/\{([a-z_]+)\}/g, (whole, key: string) => values[key] ?? whole);
}

function urlParts(url: string): { host: string; basePath: string; query: URLSearchParams } | string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return `the upstream URL ${url} is not a URL`;
  }
  if (parsed.protocol !== 'https:') return `the upstream ${parsed.host} is not https (the targets' backends here use TLS)`;
  // The exported backends are written for port 443: another port is left out and reported, never silently changed.
  if (parsed.port !== '' && parsed.port !== '443') return `the upstream ${parsed.host} uses port ${parsed.port}; the export writes port 443 only`;
  return { host: parsed.hostname.toLowerCase(), basePath: parsed.pathname.replace(/\/chat\/completions$/, '').replace(/\/+$/, ''), query: parsed.searchParams };
}

/** Vertex's model names carry the vendor (`google/gemini-2.5-pro`); the targets want the bare name. */
const bareModel = (model: string): string => model.slice(model.indexOf('/') + 1);

/**
 * Where and how one attempt is sent. `facts` null is the shared tier: the platform's key, the catalog's default
 * upstream. A string is the reason it cannot be placed.
 */
export function resolveTarget(endpoint: CatalogEndpoint, model: string, upstream: ExportUpstream, facts: CredentialFacts | null, options: ExportOptions): UpstreamTarget | string {
  const provider = endpoint.provider;
  const shape = payloadShapeFor(provider);
  if (shape === 'azure') return azureTarget(model, upstream, facts);
  if (shape === 'bedrock') {
    const region = facts?.kind === 'bedrock-iam' ? facts.region : upstream.defaultRegion;
    const parts = urlParts(fill(upstream.baseUrl, { region }));
    if (typeof parts === 'string') return parts;
    return { host: parts.host, basePath: parts.basePath, model: upstream.model, api: 'bedrock', auth: facts?.kind === 'bedrock-key' ? 'bedrock-api-key' : 'aws-iam', region };
  }
  if (shape === 'vertex') {
    const projectId = facts?.kind === 'vertex' ? facts.projectId : options.sharedVertexProject;
    if (projectId === undefined) return 'the shared google-vertex tier needs the platform project (--shared-vertex-project)';
    const region = facts?.kind === 'vertex' ? facts.region : 'global';
    const location = { project: projectId, location: region, location_prefix: region === 'global' ? '' : `${region}-` };
    const parts = urlParts(fill(upstream.baseUrl, location));
    if (typeof parts === 'string') return parts;
    return { host: parts.host, basePath: parts.basePath, model: bareModel(upstream.model), api: 'vertex', auth: 'gcp-service-account', region, projectId };
  }
  const base = facts?.kind === 'api-key-region' ? (upstream.regionalBaseUrls[facts.region] ?? upstream.baseUrl) : upstream.baseUrl;
  const parts = urlParts(base);
  if (typeof parts === 'string') return parts;
  const anthropic = provider === 'anthropic' || provider === 'anthropic/2';
  return { host: parts.host, basePath: parts.basePath, model: upstream.model, api: anthropic ? 'anthropic' : 'openai', auth: anthropic ? 'anthropic-api-key' : 'api-key' };
}

function azureTarget(model: string, upstream: ExportUpstream, facts: CredentialFacts | null): UpstreamTarget | string {
  if (facts === null) {
    const parts = urlParts(upstream.baseUrl);
    if (typeof parts === 'string') return parts;
    return { host: parts.host, basePath: parts.basePath, model: upstream.model, api: 'azure-resource', auth: 'azure-api-key', azure: {} };
  }
  if (facts.kind !== 'azure') return `an azure credential with a ${facts.kind} payload`;
  // The entry the gateway would pick (domain azureDeploymentFor): a deployment for the model wins over resources.
  const entry = facts.entries.find((e) => e.type === 'deployment' && e.modelSlug === model) ?? facts.entries.find((e) => e.type === 'resource');
  if (entry === undefined) return `no Azure entry serves ${model} (no deployment for it and no resource config)`;
  // Each entry carries its own api_key: each gets its own derived Secret.
  if (entry.type === 'deployment') {
    const parts = urlParts(entry.endpointUrl);
    if (typeof parts === 'string') return parts;
    const apiVersion = parts.query.get('api-version') ?? undefined;
    return { host: parts.host, basePath: parts.basePath, model: entry.modelId, api: 'azure-deployment', auth: 'azure-api-key', azure: apiVersion ? { apiVersion } : {}, credentialPart: `deployment ${entry.modelSlug}` };
  }
  const template = entry.resourceType === 'ai_foundry' ? upstream.azureFoundryUrl : upstream.azureOpenAiUrl;
  const parts = urlParts(fill(template, { resource_name: entry.resourceName }));
  if (typeof parts === 'string') return parts;
  return { host: parts.host, basePath: parts.basePath, model: upstream.model, api: 'azure-resource', auth: 'azure-api-key', azure: { resourceName: entry.resourceName, resourceType: entry.resourceType }, credentialPart: `resource ${entry.resourceName}` };
}
