// `byok-operator explain`: why a request would try which credentials and shared endpoints, in which order,
// read from mounted routing config exactly as a gateway pod would.
import { readFileSync } from 'node:fs';
import { createCatalog, type CatalogModelInput } from '../domain/index.ts';
import { parseCatalog } from '../gateway/catalog.ts';
import { loadRoutingConfig, planFor, type GatewayRequest } from '../sdk/index.ts';

export interface ExplainInput {
  configDir: string;
  catalogFile: string;
  /** Inline JSON or a path to a JSON file. */
  request: string;
  json: boolean;
}

function readJson(valueOrPath: string): unknown {
  return JSON.parse(valueOrPath.trimStart().startsWith('{') ? valueOrPath : readFileSync(valueOrPath, 'utf8'));
}

export function explain(input: ExplainInput): string {
  const config = loadRoutingConfig(input.configDir);
  const rawCatalog = readJson(input.catalogFile);
  // The domain's bare array of models, or the gateway's catalog file (docs/gateway.md).
  const catalog = Array.isArray(rawCatalog) ? createCatalog(rawCatalog as CatalogModelInput[]) : parseCatalog(JSON.stringify(rawCatalog)).catalog;
  const request = { userId: null, baseAddress: 'global', isVideoGeneration: false, ...(readJson(input.request) as object) } as GatewayRequest;
  const outcome = planFor(config, request, catalog);
  if (input.json) return `${JSON.stringify(outcome, null, 2)}\n`;
  if (!outcome.ok) return `no plan: ${outcome.reason}\n`;
  const label = (id: string) => {
    const c = outcome.account.credentials.find((x) => x.id === id);
    return c ? `${c.name} (${c.provider}, ${c.label})` : id;
  };
  const lines = [`account ${outcome.account.namespace}, workspace ${outcome.workspaceId}, model ${request.model}`, '', 'attempts, in order:'];
  outcome.plan.attempts.forEach((a, i) => {
    lines.push(a.kind === 'credential' ? `  ${i + 1}. credential ${label(a.credentialId)} via ${a.endpoint.id} [${a.section}]` : `  ${i + 1}. shared ${a.endpoint.id}`);
  });
  if (outcome.plan.attempts.length === 0) lines.push('  (none)');
  lines.push('', 'left out:');
  for (const e of outcome.plan.excluded) {
    const what = e.subject.kind === 'credential' ? `credential ${label(e.subject.credentialId)}` : `shared ${e.subject.endpointId}`;
    lines.push(`  - ${what}: ${e.rule}: ${e.reason}`);
  }
  if (outcome.plan.error) lines.push('', `error: ${outcome.plan.error.code}: ${outcome.plan.error.message}`);
  return `${lines.join('\n')}\n`;
}
