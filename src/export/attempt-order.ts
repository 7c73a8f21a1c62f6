// One account's attempt order per model, computed by the same route planner the gateway runs, and each attempt
// resolved to the upstream host, path, model name and auth a target needs. The target has no notion of API keys,
// members or per-request options, so the plan is made for the account's default workspace with the API-key and
// member filters lifted (the report names every credential that had one).
import type { CatalogEndpoint } from '../domain/catalog.ts';
import type { CompiledAccount, CompiledCredential } from '../domain/compiled.ts';
import { payloadShapeFor } from '../domain/payloads.ts';
import { planRoute } from '../domain/planner.ts';
import type {
  CredentialFacts,
  ExportInput,
  ExportOptions,
  ExportUpstream,
  ResolvedAttempt,
  UpstreamTarget,
} from './types.ts';

export interface ModelAttempts {
  model: string;
  attempts: ResolvedAttempt[];
  /**
   * Attempts the planner kept but the export could not place (no facts, no shared project, a host the target or the
   * egress policy refuses...), with why; `host` when the host was the reason.
   */
  unplaced: { credentialId: string | null; provider: string; reason: string; host?: string }[];
}

export interface AccountAttempts {
  account: CompiledAccount;
  /** The default workspace's public id, or '' when the account has none (then only global credentials count). */
  workspaceId: string;
  models: ModelAttempts[];
}

/** The account as the target sees it: API-key and member filters lifted (they cannot be expressed). */
function withoutRequestFilters(account: CompiledAccount): CompiledAccount {
  return {
    ...account,
    credentials: account.credentials.map((c) => ({ ...c, allowedApiKeyHashes: null, allowedUserIds: null })),
  };
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
    const touched = credentials.some(
      (c) =>
        (c.isByokOnly || c.allowedModels === null || c.allowedModels.includes(model)) &&
        entry.endpoints.some((e) => e.provider === c.provider),
    );
    if (touched) out.push(model);
  }
  return out.sort();
}

export function accountAttempts(account: CompiledAccount, input: ExportInput, options: ExportOptions): AccountAttempts {
  const workspaceId = account.workspaces.find((w) => w.isDefault)?.id ?? '';
  const lifted = withoutRequestFilters(account);
  const models = modelsOf(account, workspaceId, input).map((model): ModelAttempts => {
    const plan = planRoute(lifted, input.catalog, {
      model,
      apiKeyHash: '',
      userId: null,
      workspaceId,
      baseAddress: 'global',
      isVideoGeneration: false,
    });
    const attempts: ResolvedAttempt[] = [];
    const unplaced: ModelAttempts['unplaced'] = [];
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
      if ('refused' in resolved) {
        unplaced.push({ credentialId, provider: a.provider, reason: resolved.refused, host: resolved.host });
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

/** A host the export will not write, and why (the report and the Exported condition say it). */
export interface HostRefusal {
  host: string;
  refused: string;
}

const DNS_LABEL = '[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?';
const RFC1123_HOST = new RegExp(`^${DNS_LABEL}(\\.${DNS_LABEL})*$`);

/**
 * Why a host cannot be written into the targets' objects, or null: the rule of Envoy Gateway's `Backend` (fqdn
 * hostname and `tls.sni`: RFC 1123, at most 253 characters), with labels of at most 63 characters as DNS has them.
 * agentgateway's host fields are looser; one rule keeps both targets' objects alike.
 */
export function hostProblem(host: string): string | null {
  if (host.length > 253 || !RFC1123_HOST.test(host))
    return `the upstream host ${host} is not an RFC 1123 host name (lower-case letters, digits, dashes and dots; labels of 1-63 characters), which the target's Backend and SNI fields require`;
  return null;
}

function urlParts(url: string): { host: string; basePath: string; query: URLSearchParams } | HostRefusal | string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return `the upstream URL is not a URL`;
  }
  if (parsed.protocol !== 'https:')
    return `the upstream ${parsed.host} is not https (the targets' backends here use TLS)`;
  // The exported backends are written for port 443: another port is left out and reported, never silently changed.
  if (parsed.port !== '' && parsed.port !== '443')
    return `the upstream ${parsed.host} uses port ${parsed.port}; the export writes port 443 only`;
  // `api.example.com.` is `api.example.com` to a resolver: one spelling, so one Backend and a valid SNI.
  const host = parsed.hostname.toLowerCase().replace(/\.+$/, '');
  const problem = hostProblem(host);
  if (problem !== null) return { host, refused: problem };
  return {
    host,
    basePath: parsed.pathname.replace(/\/chat\/completions$/, '').replace(/\/+$/, ''),
    query: parsed.searchParams,
  };
}

/** The host part of a catalog URL template with `{resource_name}` as one DNS label (`<label>.openai.azure.com`). */
function templateHost(template: string): RegExp | null {
  const host = /^https:\/\/([^/:?#]+)/.exec(template)?.[1];
  if (host === undefined || !host.includes('{resource_name}')) return null;
  const escaped = host
    .toLowerCase()
    .split('{resource_name}')
    .map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  return new RegExp(`^${escaped.join(DNS_LABEL)}$`);
}

/**
 * Why a host from a tenant's URL (an Azure deployment's endpoint_url) is not exported, or null. Our gateway checks
 * every address such a name resolves to at connect time (loopback, private, link-local, metadata: src/gateway/
 * egress.ts); neither target can, so the name would reach the target's own resolver unchecked. A host of the form
 * the catalog's own Azure templates give (one label under the provider's domain, as a resource config writes it) is
 * the provider's DNS, not the tenant's; any other is exported only when the platform allows it.
 */
function tenantHostProblem(
  host: string,
  upstream: ExportUpstream,
  options: ExportOptions,
): { allowed: boolean; problem: string | null } {
  if ([upstream.azureOpenAiUrl, upstream.azureFoundryUrl].some((t) => templateHost(t)?.test(host)))
    return { allowed: false, problem: null };
  if (options.allowTenantHosts) return { allowed: true, problem: null };
  const problem = `the deployment host ${host} is the tenant's own name: our gateway refuses it at connect time when it resolves to a loopback, private, link-local or metadata address, the target cannot, so it is not exported (a platform that accepts this exports with --allow-tenant-hosts, or runs the operator with --export-allow-tenant-hosts)`;
  return { allowed: false, problem };
}

/** Vertex's model names carry the vendor (`google/gemini-2.5-pro`); the targets want the bare name. */
const bareModel = (model: string): string => model.slice(model.indexOf('/') + 1);

/**
 * Where and how one attempt is sent. `facts` null is the shared tier: the platform's key, the catalog's default
 * upstream. A string is the reason it cannot be placed.
 */
export function resolveTarget(
  endpoint: CatalogEndpoint,
  model: string,
  upstream: ExportUpstream,
  facts: CredentialFacts | null,
  options: ExportOptions,
): UpstreamTarget | HostRefusal | string {
  const provider = endpoint.provider;
  const shape = payloadShapeFor(provider);
  if (shape === 'azure') return azureTarget(model, upstream, facts, options);
  if (shape === 'bedrock') {
    const region = facts?.kind === 'bedrock-iam' ? facts.region : upstream.defaultRegion;
    const parts = urlParts(fill(upstream.baseUrl, { region }));
    if (typeof parts === 'string' || 'refused' in parts) return parts;
    return {
      host: parts.host,
      basePath: parts.basePath,
      model: upstream.model,
      api: 'bedrock',
      auth: facts?.kind === 'bedrock-key' ? 'bedrock-api-key' : 'aws-iam',
      region,
    };
  }
  if (shape === 'vertex') {
    const projectId = facts?.kind === 'vertex' ? facts.projectId : options.sharedVertexProject;
    if (projectId === undefined)
      return 'the shared google-vertex tier needs the platform project (--shared-vertex-project)';
    const region = facts?.kind === 'vertex' ? facts.region : 'global';
    const location = { project: projectId, location: region, location_prefix: region === 'global' ? '' : `${region}-` };
    const parts = urlParts(fill(upstream.baseUrl, location));
    if (typeof parts === 'string' || 'refused' in parts) return parts;
    return {
      host: parts.host,
      basePath: parts.basePath,
      model: bareModel(upstream.model),
      api: 'vertex',
      auth: 'gcp-service-account',
      region,
      projectId,
    };
  }
  const base =
    facts?.kind === 'api-key-region' ? (upstream.regionalBaseUrls[facts.region] ?? upstream.baseUrl) : upstream.baseUrl;
  const parts = urlParts(base);
  if (typeof parts === 'string' || 'refused' in parts) return parts;
  const anthropic = provider === 'anthropic' || provider === 'anthropic/2';
  return {
    host: parts.host,
    basePath: parts.basePath,
    model: upstream.model,
    api: anthropic ? 'anthropic' : 'openai',
    auth: anthropic ? 'anthropic-api-key' : 'api-key',
  };
}

function azureTarget(
  model: string,
  upstream: ExportUpstream,
  facts: CredentialFacts | null,
  options: ExportOptions,
): UpstreamTarget | HostRefusal | string {
  if (facts === null) {
    const parts = urlParts(upstream.baseUrl);
    if (typeof parts === 'string' || 'refused' in parts) return parts;
    return {
      host: parts.host,
      basePath: parts.basePath,
      model: upstream.model,
      api: 'azure-resource',
      auth: 'azure-api-key',
      azure: {},
    };
  }
  if (facts.kind !== 'azure') return `an azure credential with a ${facts.kind} payload`;
  // The entry the gateway would pick (domain azureDeploymentFor): a deployment for the model wins over resources.
  const entry =
    facts.entries.find((e) => e.type === 'deployment' && e.modelSlug === model) ??
    facts.entries.find((e) => e.type === 'resource');
  if (entry === undefined) return `no Azure entry serves ${model} (no deployment for it and no resource config)`;
  // Each entry carries its own api_key: each gets its own derived Secret.
  if (entry.type === 'deployment') {
    const parts = urlParts(entry.endpointUrl);
    if (typeof parts === 'string' || 'refused' in parts) return parts;
    const tenantHost = tenantHostProblem(parts.host, upstream, options);
    if (tenantHost.problem !== null) return { host: parts.host, refused: tenantHost.problem };
    const apiVersion = parts.query.get('api-version') ?? undefined;
    return {
      host: parts.host,
      basePath: parts.basePath,
      model: entry.modelId,
      api: 'azure-deployment',
      auth: 'azure-api-key',
      azure: apiVersion ? { apiVersion } : {},
      credentialPart: `deployment ${entry.modelSlug}`,
      ...(tenantHost.allowed ? { tenantHost: true } : {}),
    };
  }
  const template = entry.resourceType === 'ai_foundry' ? upstream.azureFoundryUrl : upstream.azureOpenAiUrl;
  const parts = urlParts(fill(template, { resource_name: entry.resourceName }));
  if (typeof parts === 'string' || 'refused' in parts) return parts;
  return {
    host: parts.host,
    basePath: parts.basePath,
    model: upstream.model,
    api: 'azure-resource',
    auth: 'azure-api-key',
    azure: { resourceName: entry.resourceName, resourceType: entry.resourceType },
    credentialPart: `resource ${entry.resourceName}`,
  };
}
