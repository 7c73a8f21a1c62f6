// agentgateway (agentgateway.dev/v1alpha1): per (account, model) an AgentgatewayBackend whose ai.groups are the
// plan's attempts in order, one priority group each, every provider with its own auth policy reading a derived
// Secret; per account an HTTPRoute whose rules match (x-byok-account, x-byok-model) and point at those backends.

import type { AccountAttempts } from './attempt-order.ts';
import { ACCOUNT_HEADER, FAILOVER_STATUSES } from './envoy.ts';
import { credentialSecret, objectName, sharedSecretName, tenantName } from './names.ts';
import type { DerivedSecret, ExportOptions, ResolvedAttempt, TargetObject, UpstreamTarget } from './types.ts';

export const AGENTGATEWAY_LIMITS = { groupsPerBackend: 8, providersPerGroup: 16, rulesPerRoute: 16 } as const;
export const MODEL_HEADER = 'x-byok-model';
const MANAGED = { 'app.kubernetes.io/managed-by': 'byok-operator' };

export interface AgentgatewayBuild {
  perAccount: Map<string, TargetObject[]>;
  secrets: DerivedSecret[];
  limits: string[];
}

/** The provider block of one attempt (`openai`, `azureopenai`, `bedrock`, ...), with host and path where needed. */
export function agentgatewayProvider(target: UpstreamTarget): Record<string, unknown> {
  const at = (suffix: string) => ({ host: target.host, port: 443, path: `${target.basePath}${suffix}`, tls: true });
  switch (target.api) {
    case 'openai':
      return { openai: { model: target.model }, ...at('/chat/completions') };
    case 'anthropic':
      return { anthropic: { model: target.model }, ...at('/messages') };
    case 'azure-resource':
      return { azureopenai: { endpoint: target.host } };
    case 'azure-deployment':
      return {
        azureopenai: {
          endpoint: target.host,
          deploymentName: target.model,
          ...(target.azure?.apiVersion ? { apiVersion: target.azure.apiVersion } : {}),
        },
      };
    case 'bedrock':
      return { bedrock: { model: target.model, region: target.region } };
    case 'vertex':
      return { vertexai: { model: target.model, projectId: target.projectId, region: target.region } };
  }
}

/** The auth policy of one attempt and the keys its Secret must hold. */
export function agentgatewayAuth(
  target: UpstreamTarget,
  secretName: string,
): { auth: Record<string, unknown>; keys: string[] } {
  switch (target.auth) {
    case 'api-key':
    case 'bedrock-api-key':
      return { auth: { secretRef: { name: secretName, key: 'apiKey' } }, keys: ['apiKey'] };
    case 'azure-api-key':
      return {
        auth: { secretRef: { name: secretName, key: 'apiKey' }, location: { header: { name: 'api-key' } } },
        keys: ['apiKey'],
      };
    case 'anthropic-api-key':
      return {
        auth: { secretRef: { name: secretName, key: 'apiKey' }, location: { header: { name: 'x-api-key' } } },
        keys: ['apiKey'],
      };
    case 'aws-iam':
      return { auth: { aws: { secretRef: { name: secretName } } }, keys: ['accessKey', 'secretKey'] };
    case 'gcp-service-account':
      return {
        auth: { gcp: { secretRef: { name: secretName, key: 'credentials.json' } } },
        keys: ['credentials.json'],
      };
  }
}

function providerEntry(
  attempt: ResolvedAttempt,
  plan: AccountAttempts,
  options: ExportOptions,
  secrets: Map<string, DerivedSecret>,
): Record<string, unknown> {
  const ns = plan.account.namespace;
  const cred =
    attempt.credentialId === null ? undefined : plan.account.credentials.find((c) => c.id === attempt.credentialId);
  const owned = cred ? credentialSecret(options.target, ns, cred.name, attempt.target.credentialPart) : undefined;
  const secretName = owned ? owned.name : sharedSecretName(options.target, attempt.provider);
  const { auth, keys } = agentgatewayAuth(attempt.target, secretName);
  if (!secrets.has(secretName))
    secrets.set(
      secretName,
      owned ? { keys, ...owned } : { name: secretName, keys, source: `shared:${attempt.provider}` },
    );
  const { tls, ...provider } = agentgatewayProvider(attempt.target);
  const policies: Record<string, unknown> = { auth };
  // A provider with its own host needs TLS turned on by a policy; the typed clouds know theirs.
  if (tls === true) policies['tls'] = { sni: attempt.target.host };
  // Prefixed by kind, so a credential named like a shared entry never shares its name within a group; credential
  // names that read alike (`a.b`, `a-b`) stay apart by the digest.
  return {
    name: cred
      ? tenantName('cred', cred.name, ...(attempt.target.credentialPart ? [attempt.target.credentialPart] : []))
      : objectName('shared', attempt.provider),
    ...provider,
    policies,
  };
}

/** One priority group per attempt; past the 8th group the rest share the last one (their order is lost there). */
function groupsOf(
  attempts: readonly ResolvedAttempt[],
  toProvider: (a: ResolvedAttempt) => Record<string, unknown>,
  limits: string[],
  where: string,
): { providers: Record<string, unknown>[] }[] {
  const { groupsPerBackend, providersPerGroup } = AGENTGATEWAY_LIMITS;
  const head = attempts.slice(0, groupsPerBackend - 1).map((a) => ({ providers: [toProvider(a)] }));
  const tail = attempts.slice(groupsPerBackend - 1);
  if (tail.length > 1)
    limits.push(
      `${where}: ${attempts.length} attempts; the last ${Math.min(tail.length, providersPerGroup)} share priority group ${groupsPerBackend} (order among them approximated)`,
    );
  if (tail.length > providersPerGroup)
    limits.push(
      `${where}: ${tail.length - providersPerGroup} attempt(s) past ${groupsPerBackend - 1 + providersPerGroup} cut (providers per group)`,
    );
  const last = tail.slice(0, providersPerGroup);
  // Provider names must be unique within a group: the same credential can reach a model once only, but names are cut.
  const seen = new Set<string>();
  const merged = last
    .map(toProvider)
    .filter((p) => (seen.has(String(p['name'])) ? false : (seen.add(String(p['name'])), true)));
  return merged.length > 0 ? [...head, { providers: merged }] : head;
}

export function buildAgentgateway(plans: readonly AccountAttempts[], options: ExportOptions): AgentgatewayBuild {
  const build: AgentgatewayBuild = { perAccount: new Map(), secrets: [], limits: [] };
  const secrets = new Map<string, DerivedSecret>();
  for (const plan of plans) {
    const ns = plan.account.namespace;
    const labels = { ...MANAGED, 'byok.gateway.dev/account': ns };
    const objects: TargetObject[] = [];
    const rules: Record<string, unknown>[] = [];
    const mostAttempts = Math.max(
      1,
      ...plan.models.map((m) => Math.min(m.attempts.length, AGENTGATEWAY_LIMITS.groupsPerBackend)),
    );
    for (const m of plan.models) {
      const name = tenantName(ns, m.model);
      // A model with no attempt left still gets its rule, with no backend: the request fails instead of reaching shared capacity.
      const groups = groupsOf(
        m.attempts,
        (a) => providerEntry(a, plan, options, secrets),
        build.limits,
        `${ns} ${m.model}`,
      );
      if (groups.length > 0) {
        objects.push({
          apiVersion: 'agentgateway.dev/v1alpha1',
          kind: 'AgentgatewayBackend',
          metadata: { name, namespace: options.namespace, labels, annotations: { 'byok.gateway.dev/model': m.model } },
          spec: { ai: { groups } },
        });
      }
      rules.push({
        matches: [
          {
            headers: [
              { type: 'Exact', name: ACCOUNT_HEADER, value: ns },
              { type: 'Exact', name: MODEL_HEADER, value: m.model },
            ],
          },
        ],
        ...(groups.length > 0
          ? { backendRefs: [{ group: 'agentgateway.dev', kind: 'AgentgatewayBackend', name }] }
          : {}),
      });
    }
    const chunks = Math.max(1, Math.ceil(rules.length / AGENTGATEWAY_LIMITS.rulesPerRoute));
    if (chunks > 1)
      build.limits.push(
        `${ns}: ${rules.length} model rules split over ${chunks} HTTPRoutes (${AGENTGATEWAY_LIMITS.rulesPerRoute} rules per route)`,
      );
    const parentRef = {
      group: 'gateway.networking.k8s.io',
      kind: 'Gateway',
      name: options.gateway.name,
      ...(options.gateway.namespace ? { namespace: options.gateway.namespace } : {}),
    };
    for (let i = 0; i < chunks; i++) {
      const chunk = rules.slice(i * AGENTGATEWAY_LIMITS.rulesPerRoute, (i + 1) * AGENTGATEWAY_LIMITS.rulesPerRoute);
      const name = tenantName('byok', ns, ...(i > 0 ? [String(i + 1)] : []));
      objects.push({
        apiVersion: 'gateway.networking.k8s.io/v1',
        kind: 'HTTPRoute',
        metadata: { name, namespace: options.namespace, labels },
        spec: { parentRefs: [parentRef], rules: chunk },
      });
      // Rule 3 inside a request: retry on the statuses our gateway fails over on; each retry picks a provider again.
      objects.push({
        apiVersion: 'agentgateway.dev/v1alpha1',
        kind: 'AgentgatewayPolicy',
        metadata: { name, namespace: options.namespace, labels },
        spec: {
          targetRefs: [{ group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name }],
          traffic: { retry: { attempts: Math.max(1, mostAttempts - 1), codes: FAILOVER_STATUSES } },
        },
      });
    }
    build.perAccount.set(ns, objects);
  }
  build.secrets = [...secrets.values()];
  return build;
}
