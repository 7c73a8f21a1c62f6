// `byok-operator explain`: why a request would try which credentials and shared endpoints, in which order,
// read from mounted routing config exactly as a gateway pod would. A credential the compiler left out entirely
// (not Ready) never reaches the planner, so explain also lists the account's credentials missing from the
// config with their Ready condition, read from the cluster (--cluster) or from manifests (--manifests).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  type Attempt,
  type CatalogModelInput,
  createCatalog,
  modelSlugHint,
  type ProviderSlug,
  validatePayload,
} from '../domain/index.ts';
import { ROUTING_RULES_URL, RULE_NAMES } from '../domain/routing-rules.ts';
import { parseCatalog } from '../gateway/catalog.ts';
import { sharedKeyFileName } from '../gateway/upstream.ts';
import { kubeClient } from '../kube/client.ts';
import type { KubeAccess } from '../kube/kubeconfig.ts';
import { GROUP, VERSION } from '../schema/resources.ts';
import { validateManifest } from '../schema/validators.ts';
import { type GatewayRequest, loadRoutingConfig, planFor } from '../sdk/index.ts';
import { loadManifests } from './manifests.ts';

/** A BYOKCredential as read from the cluster or a manifest: only what explain needs. */
export interface CredentialSource {
  metadata?: { name?: string; namespace?: string };
  spec?: { provider?: string };
  status?: { conditions?: { type: string; status: string; reason?: string; message?: string }[] };
}

export interface ExplainInput {
  configDir: string;
  /** The catalog planned with; printed as the first line (`catalog: <path>`) and in --json as `catalog`. */
  catalogFile: string;
  /** Inline JSON or a path to a JSON file. */
  request: string;
  json: boolean;
  /** The gateway's --shared-keys-dir: shared attempts for a provider without a usable key there will fail. */
  sharedKeysDir?: string;
  /** The account's BYOKCredentials, to say why those missing from the config are missing. */
  credentials?: (namespace: string) => Promise<{ source: string; items: CredentialSource[] }>;
}

export interface ExplainResult {
  output: string;
  /** 0 when the plan has at least one attempt; 1 when no attempt remains or there is no plan. */
  exitCode: number;
}

function readJson(valueOrPath: string): unknown {
  return JSON.parse(valueOrPath.trimStart().startsWith('{') ? valueOrPath : readFileSync(valueOrPath, 'utf8'));
}

interface Missing {
  name: string;
  provider: string;
  why: string;
}

function whyMissing(c: CredentialSource, fromManifest: boolean): string {
  const ready = c.status?.conditions?.find((x) => x.type === 'Ready');
  if (ready) return `Ready=${ready.status} ${ready.reason ?? ''}${ready.message ? `: ${ready.message}` : ''}`.trim();
  if (fromManifest) {
    const verdict = validateManifest({ apiVersion: 'byok.gateway.dev/v1alpha1', kind: 'BYOKCredential', ...c });
    if (verdict && verdict.problems.length > 0)
      return `invalid manifest: ${verdict.problems.map((p) => `${p.path}: ${p.message}`).join('; ')}`;
    return 'valid manifest, not compiled: not applied yet, or not Ready in the cluster (its Secret, payload or filters); run with --cluster to see its Ready condition';
  }
  return 'not reconciled yet (no Ready condition)';
}

/** Credentials of the account that the compiled config does not contain, with the reason. */
async function missingCredentials(
  input: ExplainInput,
  namespace: string,
  compiled: ReadonlySet<string>,
): Promise<{ source: string; missing: Missing[] } | undefined> {
  if (!input.credentials) return undefined;
  const { source, items } = await input.credentials(namespace);
  const fromManifest = source.startsWith('manifests');
  const missing = items
    .filter(
      (c) => (c.metadata?.namespace ?? namespace) === namespace && c.metadata?.name && !compiled.has(c.metadata.name),
    )
    .map((c) => ({ name: c.metadata!.name!, provider: c.spec?.provider ?? '?', why: whyMissing(c, fromManifest) }))
    .sort((a, b) => a.name.localeCompare(b.name));
  return { source, missing };
}

/**
 * Whether the gateway would find a shared key for the provider: the same file and the same payload check as the
 * gateway's AttemptPayloads.shared (src/gateway/payloads.ts), so explain and the gateway agree on a 502.
 */
export function hasSharedKey(sharedKeysDir: string, provider: ProviderSlug): boolean {
  let text: string;
  try {
    text = readFileSync(join(sharedKeysDir, sharedKeyFileName(provider)), 'utf8');
  } catch {
    return false;
  }
  return validatePayload(provider, text).ok;
}

/** Attempt index -> why it will fail at the gateway although the plan keeps it (only shared attempts, for now). */
function failingAttempts(attempts: readonly Attempt[], sharedKeysDir: string | undefined): Map<number, string> {
  const out = new Map<number, string>();
  if (sharedKeysDir === undefined) return out;
  const held = new Map<string, boolean>();
  attempts.forEach((a, i) => {
    if (a.kind === 'credential') return;
    if (!held.has(a.provider)) held.set(a.provider, hasSharedKey(sharedKeysDir, a.provider));
    if (!held.get(a.provider)) out.set(i, 'no shared key');
  });
  return out;
}

export async function explain(input: ExplainInput): Promise<ExplainResult> {
  const config = loadRoutingConfig(input.configDir);
  const rawCatalog = readJson(input.catalogFile);
  // The domain's bare array of models, or the gateway's catalog file (docs/gateway.md).
  const catalog = Array.isArray(rawCatalog)
    ? createCatalog(rawCatalog as CatalogModelInput[])
    : parseCatalog(JSON.stringify(rawCatalog)).catalog;
  const given = readJson(input.request) as Partial<GatewayRequest>;
  // The requesting member is the key's owner unless the request names one: what the gateway does (docs/gateway.md).
  const owner = typeof given.apiKeyHash === 'string' ? (config.apiKey(given.apiKeyHash)?.key.owner ?? null) : null;
  const request = { userId: owner, baseAddress: 'global', isVideoGeneration: false, ...given } as GatewayRequest;
  const outcome = planFor(config, request, catalog);
  const missing = outcome.ok
    ? await missingCredentials(
        input,
        outcome.account.namespace,
        new Set(outcome.account.credentials.map((c) => c.name)),
      )
    : undefined;
  const failing = outcome.ok ? failingAttempts(outcome.plan.attempts, input.sharedKeysDir) : new Map<number, string>();
  // Exit 1 also when every attempt the plan keeps would fail at the gateway (it would answer 502).
  const exitCode = outcome.ok && outcome.plan.attempts.length > failing.size ? 0 : 1;
  if (input.json) {
    const willFail = [...failing].map(([i, reason]) => ({ attempt: i + 1, reason }));
    return {
      output: `${JSON.stringify({ catalog: input.catalogFile, ...outcome, ...(input.sharedKeysDir !== undefined ? { willFail } : {}), ...(missing ? { notCompiled: missing.missing } : {}) }, null, 2)}\n`,
      exitCode,
    };
  }
  const catalogLine = `catalog: ${input.catalogFile}`;
  if (!outcome.ok) return { output: `${catalogLine}\nno plan: ${outcome.reason}\n`, exitCode };
  const label = (id: string) => {
    const c = outcome.account.credentials.find((x) => x.id === id);
    return c ? `${c.name} (${c.provider}, ${c.label})` : id;
  };
  const lines = [
    catalogLine,
    `account ${outcome.account.namespace}, workspace ${outcome.workspaceId}, model ${request.model}`,
    '',
    'attempts, in order:',
  ];
  outcome.plan.attempts.forEach((a, i) => {
    const fails = failing.has(i) ? ` (will fail: ${failing.get(i)!})` : '';
    lines.push(
      a.kind === 'credential'
        ? `  ${i + 1}. credential ${label(a.credentialId)} via ${a.endpoint.id} [${a.section}]`
        : `  ${i + 1}. shared ${a.endpoint.id}${fails}`,
    );
  });
  if (outcome.plan.attempts.length === 0) lines.push('  (none: the request would fail)');
  else if (failing.size === outcome.plan.attempts.length)
    lines.push('  (every attempt will fail: the gateway would answer 502)');

  lines.push('', 'left out:');
  for (const e of outcome.plan.excluded) {
    const what =
      e.subject.kind === 'credential'
        ? `credential ${label(e.subject.credentialId)}`
        : `shared ${e.subject.endpointId}`;
    // The rule's plain name, not its identifier (`rule-11-model-filter`): --json keeps the identifier for scripts.
    lines.push(`  - ${what}: ${RULE_NAMES[e.rule]}: ${e.reason}`);
  }
  if (outcome.plan.excluded.length > 0) lines.push(`  (the routing rules in plain words: ${ROUTING_RULES_URL})`);
  if (missing) {
    lines.push('', `not in the routing config (${missing.source}):`);
    for (const m of missing.missing) lines.push(`  - credential ${m.name} (${m.provider}): ${m.why}`);
    if (missing.missing.length === 0) lines.push('  (none)');
  }
  if (outcome.plan.error) {
    // The gateway's hint for the same refusal (`gpt-5` → `openai/gpt-5`), from the same function.
    const hint =
      outcome.plan.error.code === 'model_not_in_catalog'
        ? modelSlugHint(request.model, [...catalog.models.keys()])
        : '';
    lines.push('', `error: ${outcome.plan.error.code}: ${outcome.plan.error.message}${hint}`);
  }
  if (input.sharedKeysDir === undefined && outcome.plan.attempts.some((a) => a.kind === 'shared')) {
    lines.push(
      '',
      "note: a shared attempt needs the gateway's own key for its provider (else it fails with 502): --shared-keys-dir checks them",
    );
  }
  return { output: `${lines.join('\n')}\n`, exitCode };
}

/** The account's BYOKCredentials from manifests on disk (for --manifests). */
export function credentialsFromManifests(
  path: string,
): (namespace: string) => Promise<{ source: string; items: CredentialSource[] }> {
  return async () => ({
    source: `manifests in ${path}`,
    items: loadManifests(path)
      .manifests.map((m) => m.object as CredentialSource & { kind?: unknown })
      .filter((o) => o && o.kind === 'BYOKCredential'),
  });
}

/** The account's BYOKCredentials with the status the operator wrote (for --cluster). */
export function credentialsFromCluster(
  kubeConfig: KubeAccess,
): (namespace: string) => Promise<{ source: string; items: CredentialSource[] }> {
  const client = kubeClient(kubeConfig);
  return async (namespace) => ({
    source: `cluster, namespace ${namespace}`,
    items: (
      await client.request<{ items: CredentialSource[] }>(
        'GET',
        `/apis/${GROUP}/${VERSION}/namespaces/${encodeURIComponent(namespace)}/byokcredentials`,
      )
    ).items,
  });
}
