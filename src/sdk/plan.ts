// Hands the domain planner its input: the request's API key finds the account, workspace and (via the planner)
// guardrails in the loaded config.

import type { CompiledAccount } from '../domain/compiled.ts';
import type { ModelCatalog, RoutePlan, RouteRequest } from '../domain/index.ts';
import { planRoute } from '../domain/planner.ts';
import type { RoutingConfig } from './load.ts';

export interface GatewayRequest extends Omit<RouteRequest, 'workspaceId'> {
  /** Defaults to the API key's workspace, then the account's default workspace. */
  workspaceId?: string;
}

export type PlanOutcome =
  | { ok: true; account: CompiledAccount; workspaceId: string; plan: RoutePlan }
  | { ok: false; reason: 'unknown-api-key' | 'api-key-contested' | 'api-key-expired' | 'no-workspace' };

export function planFor(
  config: RoutingConfig,
  request: GatewayRequest,
  catalog: ModelCatalog,
  now: Date = new Date(),
): PlanOutcome {
  const found = config.apiKey(request.apiKeyHash);
  if (!found)
    return { ok: false, reason: config.apiKeyContested(request.apiKeyHash) ? 'api-key-contested' : 'unknown-api-key' };
  const { account, key } = found;
  // The compiler only writes live keys; expiry after the compile is checked here, per request.
  if (key.expiresAt !== null && !(Date.parse(key.expiresAt) > now.getTime()))
    return { ok: false, reason: 'api-key-expired' };
  const workspaceId = request.workspaceId ?? key.workspaceId ?? account.workspaces.find((w) => w.isDefault)?.id;
  if (workspaceId === undefined) return { ok: false, reason: 'no-workspace' };
  const plan = planRoute(account, catalog, { ...request, workspaceId });
  return { ok: true, account, workspaceId, plan };
}
