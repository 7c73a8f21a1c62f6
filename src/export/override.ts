// The per-request mode for Envoy AI Gateway (`--per-request`): objects per provider slot and per plan shape instead
// of per account. A plan shape is an account's attempt sequence for a model with the credentials taken out:
// `prioritized openai #0, prioritized openai #1, shared openai, fallback anthropic #0`. Accounts with the same shape
// share one rule; the credential of each BYOK slot arrives per request in dynamic metadata written by an ext_authz
// service (credentialOverride.fromDynamicMetadata), which also sets x-byok-plan to the shape's id. Every BYOK slot has
// fallbackToConfigured: false, so a slot without a credential never falls back to a configured key: shared capacity
// is used only where the shape lists a shared backend (is_byok_only and is_required shape the shape).

import type { AccountAttempts, ModelAttempts } from './attempt-order.ts';
import {
  ENVOY_LIMITS,
  type EnvoyBuild,
  envoyAuth,
  envoySchema,
  hostBackends,
  meta,
  type PlacedBackend,
  routes,
  sharedName,
  sharedPolicies,
} from './envoy.ts';
import { digestLabel, tenantName } from './names.ts';
import type { ExportInput, ExportOptions, ResolvedAttempt } from './types.ts';

export const PLAN_HEADER = 'x-byok-plan';
export const METADATA_NAMESPACE = 'envoy.filters.http.ext_authz';
/** The Secret a per-request slot names as its static credential: never read (fallbackToConfigured: false). */
export const UNSET_SECRET = 'byok-no-static-credential';
const AIGW = 'aigateway.envoyproxy.io/v1beta1';

/**
 * What a BYOK slot holds fixed: provider, section, upstream host and schema, and the static auth parameters (AWS
 * region, GCP project and region) that credentialOverride cannot change per request.
 */
function slotClass(a: ResolvedAttempt, model: string): string {
  const t = a.target;
  return [
    a.section,
    a.provider,
    t.host,
    JSON.stringify(envoySchema(t, model)),
    t.auth,
    t.region ?? '',
    t.projectId ?? '',
  ].join('|');
}

/** The id the ext_authz service sends in x-byok-plan: a hash of the model and its attempt sequence. */
export function planShapeId(model: string, signature: readonly string[]): string {
  // 130 bits: a shape holds tenants' hosts, and a shape id that met another's would route into its slots.
  return digestLabel(`${model}\n${signature.join('\n')}`);
}

/** The metadata key a slot's credential is written under (the ext_authz service's contract). */
export function slotMetadataKey(a: ResolvedAttempt, model: string, k: number): string {
  return `byok-${tenantName(a.section, a.provider, String(k), slotClass(a, model))}`;
}

export function buildOverride(
  plans: readonly AccountAttempts[],
  _input: ExportInput,
  options: ExportOptions,
): EnvoyBuild {
  const build: EnvoyBuild = { perAccount: new Map(), shared: [], secrets: [], limits: [] };
  const backendName = hostBackends(options, build.shared);
  const slots = new Map<string, string>();
  const sharedBackends = new Map<string, PlacedBackend[]>();
  const rules = new Map<string, { name: string; matches: unknown[]; backendRefs: unknown[] }>();

  const slotBackend = (a: ResolvedAttempt, model: string, k: number): string => {
    const key = slotMetadataKey(a, model, k);
    const found = slots.get(key);
    if (found !== undefined) return found;
    // The slot class holds the tenant's host: its digest names the slot.
    const shared = sharedName('byok-slot', a.section, a.provider, String(k), slotClass(a, model));
    const name = shared.name;
    slots.set(key, name);
    const { spec } = envoyAuth(a.target, UNSET_SECRET);
    build.shared.push(
      {
        apiVersion: AIGW,
        kind: 'AIServiceBackend',
        metadata: meta(name, options, {}, shared.annotations),
        spec: {
          schema: envoySchema(a.target, model),
          backendRef: { name: backendName(a.target.host), kind: 'Backend', group: 'gateway.envoyproxy.io' },
        },
      },
      {
        apiVersion: AIGW,
        kind: 'BackendSecurityPolicy',
        metadata: meta(name, options, {}, { 'byok.gateway.dev/metadata-key': key, ...shared.annotations }),
        spec: {
          ...spec,
          credentialOverride: {
            fromDynamicMetadata: { namespace: METADATA_NAMESPACE, key, fallbackToConfigured: false },
          },
          targetRefs: [{ group: 'aigateway.envoyproxy.io', kind: 'AIServiceBackend', name }],
        },
      },
    );
    return name;
  };
  const sharedBackend = (a: ResolvedAttempt, model: string): string => {
    const schema = envoySchema(a.target, model);
    const key = `${a.target.host}|${JSON.stringify(schema)}`;
    const source = `shared:${a.provider}`;
    const list = sharedBackends.get(source) ?? [];
    sharedBackends.set(source, list);
    const found = list.find((b) => b.key === key);
    if (found) return found.name;
    const shared = sharedName('byok-shared', a.provider, key);
    const name = shared.name;
    list.push({ key, name, target: a.target });
    build.shared.push({
      apiVersion: AIGW,
      kind: 'AIServiceBackend',
      metadata: meta(name, options, {}, { 'byok.gateway.dev/source': source, ...shared.annotations }),
      spec: {
        schema,
        backendRef: { name: backendName(a.target.host), kind: 'Backend', group: 'gateway.envoyproxy.io' },
      },
    });
    return name;
  };

  for (const plan of plans) {
    for (const m of plan.models) {
      const shape = shapeOf(m);
      if (rules.has(`${m.model}|${shape.id}`)) continue;
      const backendRefs = shape.slots.map(({ attempt, k }, priority) => ({
        name: k === null ? sharedBackend(attempt, m.model) : slotBackend(attempt, m.model, k),
        priority,
        modelNameOverride: attempt.target.model,
      }));
      rules.set(`${m.model}|${shape.id}`, {
        name: tenantName(m.model, shape.id),
        matches: [
          {
            headers: [
              { type: 'Exact', name: PLAN_HEADER, value: shape.id },
              { type: 'Exact', name: 'x-ai-eg-model', value: m.model },
            ],
          },
        ],
        backendRefs,
      });
    }
  }
  const ordered = [...rules.values()].sort((a, b) => (a.name < b.name ? -1 : 1));
  build.shared.push(...routes('per-request', ordered, options, build.limits, {}));
  for (const [source, list] of sharedBackends) build.shared.push(...sharedPolicies(source, list, options, build));
  build.secrets.unshift({
    name: UNSET_SECRET,
    keys: [],
    source: 'placeholder: per-request slots name it; fallbackToConfigured: false means it is never read',
  });
  for (const plan of plans) build.perAccount.set(plan.account.namespace, []);
  return build;
}

/**
 * A model plan's shape: its attempts (at most a rule's backendRefs) with each BYOK attempt numbered within its slot
 * class (k = null for the shared tier), and the shape's id.
 */
export function shapeOf(m: ModelAttempts): { id: string; slots: { attempt: ResolvedAttempt; k: number | null }[] } {
  const counters = new Map<string, number>();
  const signature: string[] = [];
  const slots = m.attempts.slice(0, ENVOY_LIMITS.backendRefsPerRule).map((attempt) => {
    if (attempt.credentialId === null) {
      signature.push(`shared|${attempt.provider}|${attempt.endpoint.id}|${attempt.target.model}`);
      return { attempt, k: null };
    }
    const cls = slotClass(attempt, m.model);
    const k = counters.get(cls) ?? 0;
    counters.set(cls, k + 1);
    // The model sent upstream is part of the shape: two Azure deployments of one model are two shapes.
    signature.push(`${cls}|${k}|${attempt.target.model}`);
    return { attempt, k };
  });
  return { id: planShapeId(m.model, signature), slots };
}
