// Envoy AI Gateway (aigateway.envoyproxy.io/v1beta1 on Envoy Gateway): per account an AIGatewayRoute whose rules
// match (x-byok-account, x-ai-eg-model) and list the plan's attempts as backendRefs with ascending priority, a
// BackendTrafficPolicy that retries once per priority, and per credential an AIServiceBackend per upstream host and
// a BackendSecurityPolicy reading its derived Secret. Backends (one per upstream host) and the shared tier's
// backends and policies are the platform's, written once.

import type { AccountAttempts } from './attempt-order.ts';
import { credentialSecret, objectName, partsDigest, sharedSecretName, tenantName } from './names.ts';
import type { DerivedSecret, ExportOptions, ResolvedAttempt, TargetObject, UpstreamTarget } from './types.ts';

export const ENVOY_LIMITS = { rulesPerRoute: 15, backendRefsPerRule: 128, targetRefsPerPolicy: 16 } as const;
export const ACCOUNT_HEADER = 'x-byok-account';
const MODEL_HEADER = 'x-ai-eg-model';
const AIGW = 'aigateway.envoyproxy.io/v1beta1';
const EG = 'gateway.envoyproxy.io/v1alpha1';
/** What our gateway fails over on (rule 3): rate limits, refused keys, upstream errors. */
export const FAILOVER_STATUSES = [401, 403, 408, 429, 500, 502, 503, 504];
const MANAGED = { 'app.kubernetes.io/managed-by': 'byok-operator' };
/**
 * On every object all accounts share: the full digest of the parts its name is derived from. The controller takes
 * over an existing object of that name only when it carries the same identity.
 */
export const IDENTITY_ANNOTATION = 'byok.gateway.dev/identity';

/** The name of a shared object and its identity annotation, from the parts that decide its content. */
export function sharedName(...parts: string[]): { name: string; annotations: Record<string, string> } {
  return { name: tenantName(...parts), annotations: { [IDENTITY_ANNOTATION]: partsDigest(parts) } };
}

export interface EnvoyBuild {
  perAccount: Map<string, TargetObject[]>;
  shared: TargetObject[];
  secrets: DerivedSecret[];
  limits: string[];
}

/** An AIServiceBackend written for an owner: one per (upstream host, schema). */
export interface PlacedBackend {
  key: string;
  name: string;
  target: UpstreamTarget;
}

interface Owner {
  /** `ns/name` of the credential (with the Azure entry), or `shared:<provider>`. */
  source: string;
  secretName: string;
  /** `ns/name` of the credential; absent for the shared tier. */
  credential?: string;
  /** The Azure entry the owner is, when the credential has several. */
  part?: string;
  /** Prefix of its object names. */
  prefix: string[];
  labels: Record<string, string>;
}

export function meta(
  name: string,
  options: ExportOptions,
  labels: Record<string, string>,
  annotations?: Record<string, string>,
): TargetObject['metadata'] {
  return {
    name,
    namespace: options.namespace,
    labels: { ...MANAGED, ...labels },
    ...(annotations ? { annotations } : {}),
  };
}

export function envoySchema(target: UpstreamTarget, model: string): Record<string, string> {
  switch (target.api) {
    case 'openai':
    case 'azure-resource':
      return { name: 'OpenAI', prefix: target.basePath };
    case 'anthropic':
      return { name: 'Anthropic', prefix: target.basePath };
    case 'azure-deployment':
      return target.azure?.apiVersion
        ? { name: 'AzureOpenAI', version: target.azure.apiVersion }
        : { name: 'AzureOpenAI' };
    case 'bedrock':
      return { name: 'AWSBedrock' };
    case 'vertex':
      return { name: model.startsWith('anthropic/') ? 'GCPAnthropic' : 'GCPVertexAI' };
  }
}

/** The BackendSecurityPolicy body for one auth kind, and the keys its Secret must hold. */
export function envoyAuth(
  target: UpstreamTarget,
  secretName: string,
): { spec: Record<string, unknown>; keys: string[] } {
  const secretRef = { name: secretName };
  switch (target.auth) {
    case 'api-key':
    case 'bedrock-api-key':
      return { spec: { type: 'APIKey', apiKey: { secretRef } }, keys: ['apiKey'] };
    case 'azure-api-key':
      return { spec: { type: 'AzureAPIKey', azureAPIKey: { secretRef } }, keys: ['apiKey'] };
    case 'anthropic-api-key':
      return { spec: { type: 'AnthropicAPIKey', anthropicAPIKey: { secretRef } }, keys: ['apiKey'] };
    case 'aws-iam':
      return {
        spec: { type: 'AWSCredentials', awsCredentials: { region: target.region, credentialsFile: { secretRef } } },
        keys: ['credentials'],
      };
    case 'gcp-service-account':
      return {
        spec: {
          type: 'GCPCredentials',
          gcpCredentials: { projectName: target.projectId, region: target.region, credentialsFile: { secretRef } },
        },
        keys: ['service_account.json'],
      };
  }
}

/** Envoy Gateway Backends, one per upstream host (TLS with the system CAs), written once into `into`. */
export function hostBackends(options: ExportOptions, into: TargetObject[]): (host: string) => string {
  const hosts = new Map<string, string>();
  return (host) => {
    let name = hosts.get(host);
    if (name === undefined) {
      // Hosts come from tenants' payloads (an Azure endpoint_url): the name is the digest of the host, so no host
      // names another host's Backend (dots, dashes and underscores read alike once slugged).
      const shared = sharedName('byok-host', host);
      name = shared.name;
      hosts.set(host, name);
      into.push({
        apiVersion: EG,
        kind: 'Backend',
        metadata: meta(name, options, {}, shared.annotations),
        spec: {
          endpoints: [{ fqdn: { hostname: host, port: 443 } }],
          tls: { wellKnownCACertificates: 'System', sni: host },
        },
      });
    }
    return name;
  };
}

/** Builds the Envoy AI Gateway objects of every account plan; the shared ones once. */
export function buildEnvoy(plans: readonly AccountAttempts[], options: ExportOptions): EnvoyBuild {
  const build: EnvoyBuild = { perAccount: new Map(), shared: [], secrets: [], limits: [] };
  const sharedBackends = new Map<string, PlacedBackend[]>();
  const backendName = hostBackends(options, build.shared);
  for (const plan of plans) {
    const ns = plan.account.namespace;
    const objects: TargetObject[] = [];
    const credBackends = new Map<string, PlacedBackend[]>();
    const owners = new Map<string, Owner>();
    const aiBackend = (attempt: ResolvedAttempt, model: string): string => {
      const owner = ownerOf(attempt, plan, options);
      owners.set(owner.source, owner);
      const schema = envoySchema(attempt.target, model);
      const key = `${attempt.target.host}|${JSON.stringify(schema)}`;
      const pool = attempt.credentialId === null ? sharedBackends : credBackends;
      const list = pool.get(owner.source) ?? [];
      pool.set(owner.source, list);
      const found = list.find((b) => b.key === key);
      if (found) return found.name;
      const shared = attempt.credentialId === null ? sharedName(...owner.prefix, key) : undefined;
      const name = shared ? shared.name : tenantName(...owner.prefix, key);
      list.push({ key, name, target: attempt.target });
      const object: TargetObject = {
        apiVersion: AIGW,
        kind: 'AIServiceBackend',
        metadata: meta(name, options, owner.labels, {
          'byok.gateway.dev/source': owner.source,
          ...shared?.annotations,
        }),
        spec: {
          schema,
          backendRef: { name: backendName(attempt.target.host), kind: 'Backend', group: 'gateway.envoyproxy.io' },
        },
      };
      (attempt.credentialId === null ? build.shared : objects).push(object);
      return name;
    };
    const rules = plan.models.map((m) => {
      let attempts = m.attempts;
      if (attempts.length > ENVOY_LIMITS.backendRefsPerRule) {
        build.limits.push(
          `${ns} ${m.model}: ${attempts.length} attempts, cut to the first ${ENVOY_LIMITS.backendRefsPerRule} (backendRefs per rule)`,
        );
        attempts = attempts.slice(0, ENVOY_LIMITS.backendRefsPerRule);
      }
      return {
        name: objectName(m.model),
        matches: [
          {
            headers: [
              { type: 'Exact', name: ACCOUNT_HEADER, value: ns },
              { type: 'Exact', name: MODEL_HEADER, value: m.model },
            ],
          },
        ],
        backendRefs: attempts.map((a, priority) => ({
          name: aiBackend(a, m.model),
          priority,
          modelNameOverride: a.target.model,
        })),
      };
    });
    objects.push(...routes(ns, rules, options, build.limits));
    for (const [source, list] of credBackends) objects.push(...policies(owners.get(source)!, list, options, build));
    build.perAccount.set(ns, objects);
  }
  for (const [source, list] of sharedBackends) build.shared.push(...sharedPolicies(source, list, options, build));
  return build;
}

function ownerOf(attempt: ResolvedAttempt, plan: AccountAttempts, options: ExportOptions): Owner {
  const ns = plan.account.namespace;
  if (attempt.credentialId === null) {
    return {
      source: `shared:${attempt.provider}`,
      secretName: sharedSecretName(options.target, attempt.provider),
      prefix: ['byok-shared', attempt.provider],
      labels: {},
    };
  }
  const cred = plan.account.credentials.find((c) => c.id === attempt.credentialId)!;
  const part = attempt.target.credentialPart;
  const secret = credentialSecret(options.target, ns, cred.name, part);
  return {
    source: secret.source,
    secretName: secret.name,
    credential: secret.credential,
    ...(part ? { part } : {}),
    prefix: [ns, cred.name, ...(part ? [part] : [])],
    labels: { 'byok.gateway.dev/account': ns },
  };
}

/** AIGatewayRoutes of one account, 15 rules each, with a BackendTrafficPolicy per route for the failover. */
export function routes(
  ns: string,
  rules: { name: string; backendRefs: unknown[] }[],
  options: ExportOptions,
  limits: string[],
  labels: Record<string, string> = { 'byok.gateway.dev/account': ns },
): TargetObject[] {
  const out: TargetObject[] = [];
  const chunks = Math.max(1, Math.ceil(rules.length / ENVOY_LIMITS.rulesPerRoute));
  if (chunks > 1)
    limits.push(
      `${ns}: ${rules.length} model rules split over ${chunks} AIGatewayRoutes (${ENVOY_LIMITS.rulesPerRoute} rules per route)`,
    );
  for (let i = 0; i < chunks; i++) {
    const chunk = rules.slice(i * ENVOY_LIMITS.rulesPerRoute, (i + 1) * ENVOY_LIMITS.rulesPerRoute);
    const name = tenantName('byok', ns, ...(i > 0 ? [String(i + 1)] : []));
    const parentRef = {
      group: 'gateway.networking.k8s.io',
      kind: 'Gateway',
      name: options.gateway.name,
      ...(options.gateway.namespace ? { namespace: options.gateway.namespace } : {}),
    };
    out.push({
      apiVersion: AIGW,
      kind: 'AIGatewayRoute',
      metadata: meta(name, options, labels),
      spec: { parentRefs: [parentRef], rules: chunk },
    });
    const most = Math.max(1, ...chunk.map((r) => r.backendRefs.length));
    out.push({
      apiVersion: EG,
      kind: 'BackendTrafficPolicy',
      metadata: meta(name, options, labels),
      spec: {
        // Envoy AI Gateway writes an HTTPRoute named after the AIGatewayRoute: the retry attaches there.
        targetRefs: [{ group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name }],
        retry: {
          numRetries: Math.max(1, most - 1),
          numAttemptsPerPriority: 1,
          retryOn: { triggers: ['connect-failure', 'retriable-status-codes'], httpStatusCodes: FAILOVER_STATUSES },
        },
      },
    });
  }
  return out;
}

function chunked<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** `nameOf(i)`: the name of the policy's i-th chunk of 16 targets. */
function securityPolicies(
  nameOf: (i: number) => string,
  backends: PlacedBackend[],
  secretName: string,
  options: ExportOptions,
  labels: Record<string, string>,
  source: string,
): { objects: TargetObject[]; keys: string[] } {
  const { spec, keys } = envoyAuth(backends[0]!.target, secretName);
  const objects = chunked(backends, ENVOY_LIMITS.targetRefsPerPolicy).map((chunk, i) => ({
    apiVersion: AIGW,
    kind: 'BackendSecurityPolicy',
    metadata: meta(nameOf(i), options, labels, { 'byok.gateway.dev/source': source }),
    spec: {
      ...spec,
      targetRefs: chunk.map((b) => ({ group: 'aigateway.envoyproxy.io', kind: 'AIServiceBackend', name: b.name })),
    },
  }));
  return { objects, keys };
}

function policies(owner: Owner, list: PlacedBackend[], options: ExportOptions, build: EnvoyBuild): TargetObject[] {
  const { objects, keys } = securityPolicies(
    (i) => tenantName(...owner.prefix, ...(i > 0 ? [`#${i + 1}`] : [])),
    list,
    owner.secretName,
    options,
    owner.labels,
    owner.source,
  );
  build.secrets.push({
    name: owner.secretName,
    keys,
    source: owner.source,
    ...(owner.credential ? { credential: owner.credential } : {}),
    ...(owner.part ? { part: owner.part } : {}),
  });
  return objects;
}

export function sharedPolicies(
  source: string,
  list: PlacedBackend[],
  options: ExportOptions,
  build: EnvoyBuild,
): TargetObject[] {
  const provider = source.slice('shared:'.length);
  const secretName = sharedSecretName(options.target, provider);
  const base = objectName('byok-shared', provider);
  const { objects, keys } = securityPolicies(
    (i) => (i === 0 ? base : objectName(base, String(i + 1))),
    list,
    secretName,
    options,
    {},
    source,
  );
  for (const o of objects)
    o.metadata.annotations = { ...o.metadata.annotations, [IDENTITY_ANNOTATION]: partsDigest([source]) };
  build.secrets.push({ name: secretName, keys, source });
  return objects;
}
