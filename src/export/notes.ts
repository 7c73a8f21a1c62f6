// What the report says per account and per credential: for each of our semantics, whether the target keeps it,
// approximates it or drops it, in one line. The same facts for both targets; only their names differ.
import type { CompiledAccount, CompiledCredential } from '../domain/compiled.ts';
import { type AccountAttempts, inExportScope } from './attempt-order.ts';
import { FAILOVER_STATUSES } from './envoy.ts';
import type { ExportMode, ExportTarget, SemanticNote } from './types.ts';

const TARGET_NAME: Record<ExportTarget, string> = {
  'envoy-ai-gateway': 'Envoy AI Gateway',
  agentgateway: 'agentgateway',
};

const note = (semantic: string, treatment: SemanticNote['treatment'], detail: string): SemanticNote => ({
  semantic,
  treatment,
  detail,
});

/** Semantics no target can express, said once per account. */
export function accountNotes(plan: AccountAttempts, target: ExportTarget, mode: ExportMode): SemanticNote[] {
  const { account } = plan;
  const name = TARGET_NAME[target];
  const budgets =
    account.workspaces.some((w) => w.budgets.length > 0) || account.guardrails.some((g) => g.budget !== null);
  const nonDefault = account.workspaces.filter((w) => !w.isDefault).length;
  const notes = [
    note('fee', 'dropped', `the 5 % BYOK fee is not charged: ${name} has no per-request fee on a customer's key`),
    note(
      'allowance',
      'dropped',
      `the free monthly allowance (${account.plan === 'enterprise' ? '200,000' : '25,000'} USD list price) is not measured`,
    ),
    note(
      'reservations',
      'dropped',
      `budgets are not reserved at admission: ${name} charges after the response, in rolling windows`,
    ),
    note(
      'budgets',
      budgets ? 'dropped' : 'kept',
      budgets
        ? 'workspace and guardrail budgets (calendar intervals, include_byok_in_budgets) are not enforced'
        : 'the account sets no budget',
    ),
    note(
      'provider_responses',
      'dropped',
      "the per-attempt record of provider and status is not kept (use the target's access log)",
    ),
    note('health', 'dropped', 'credential health and Delivered are not reported on the BYOKCredential'),
    note(
      'request options',
      'dropped',
      'provider.order, provider.only, provider.zdr and data_collection of a request are not read (ordering, region targeting and data policies per request)',
    ),
    note(
      'data policies',
      'approximated',
      "the account's privacy settings and the default workspace's default guardrail were applied at export time; per-key and per-member guardrails were not",
    ),
    note(
      'account selection',
      'approximated',
      mode === 'static'
        ? 'a rule matches the header x-byok-account: a trusted filter in front (ext_authz) must set it from the gateway API key and strip a client copy'
        : 'the credentials come from dynamic metadata an ext_authz service writes per request (docs/export.md, "Per-request credentials")',
    ),
    target === 'envoy-ai-gateway'
      ? note(
          'failover',
          'kept',
          `one priority per attempt; the route's BackendTrafficPolicy retries once per priority on connect failures and ${FAILOVER_STATUSES.join(', ')}`,
        )
      : note(
          'failover',
          'approximated',
          `one priority group per attempt, and the route's AgentgatewayPolicy retries on ${FAILOVER_STATUSES.join(', ')}; a retry picks a provider again, and moves to the next group once the failing group is evicted as unhealthy`,
        ),
  ];
  if (nonDefault > 0)
    notes.push(
      note(
        'workspaces',
        'approximated',
        `exported as the default workspace sees it; ${nonDefault} other workspace(s) and their scoped credentials are left out`,
      ),
    );
  return notes;
}

/** Where a credential landed in the account's exported rules. */
function placement(c: CompiledCredential, plan: AccountAttempts): { models: number; priorities: Set<number> } {
  const priorities = new Set<number>();
  let models = 0;
  for (const m of plan.models) {
    const at = m.attempts.findIndex((a) => a.credentialId === c.id);
    if (at >= 0) {
      models++;
      priorities.add(at);
    }
  }
  return { models, priorities };
}

export function credentialNotes(c: CompiledCredential, plan: AccountAttempts, mode: ExportMode): SemanticNote[] {
  const notes: SemanticNote[] = [];
  if (c.disabled) return [note('disabled', 'kept', 'disabled: left out of every rule')];
  if (!inExportScope(c, plan.workspaceId))
    return [note('workspace', 'dropped', 'scoped to a workspace other than the default: not exported')];
  const { models, priorities } = placement(c, plan);
  const order = [...priorities].sort((a, b) => a - b).join(', ');
  notes.push(
    note(
      'order',
      models > 0 ? 'kept' : 'dropped',
      models > 0
        ? `${c.isFallback ? 'fallback' : 'prioritized'} #${c.sortOrder}: in ${models} model rule(s) at priority ${order}`
        : 'no exported model rule uses it (its models have no endpoint of its provider, or its payload was not available)',
    ),
  );
  if (c.allowedModels !== null)
    notes.push(note('allowed_models', 'kept', `only in the rules of its ${c.allowedModels.length} allowed model(s)`));
  notes.push(...hostNotes(c, plan));
  if (c.isByokOnly) {
    notes.push(
      note(
        'is_byok_only',
        'kept',
        mode === 'static'
          ? `the shared ${c.provider} tier is left out of every model rule of the account`
          : `the account's plan shapes list no shared ${c.provider} backend, and its BYOK slots have fallbackToConfigured: false (never the configured key)`,
      ),
    );
  } else if (c.isRequired) {
    notes.push(
      note('is_required', 'kept', `the shared ${c.provider} tier is left out of the rules of the models it applies to`),
    );
  }
  // Per request, the ext_authz service plans with the real key and member; the rules exist for the unfiltered shapes only.
  const filterTreatment = mode === 'static' ? 'dropped' : 'approximated';
  const filterTail =
    mode === 'static'
      ? 'may use it'
      : 'gets the unfiltered plan shape (a filtered plan whose shape has no rule finds no route)';
  if (c.allowedApiKeyHashes !== null)
    notes.push(
      note(
        'allowed_api_key_hashes',
        filterTreatment,
        `filter by API key (${c.allowedApiKeyHashes.length} hash(es)) lifted: every key of the account ${filterTail}`,
      ),
    );
  if (c.allowedUserIds !== null)
    notes.push(
      note(
        'allowed_user_ids',
        filterTreatment,
        `filter by member (${c.allowedUserIds.length} user(s)) lifted: every member of the account ${filterTail}`,
      ),
    );
  notes.push(
    note('fee', 'dropped', 'no 5 % BYOK fee on its spend'),
    note('allowance', 'dropped', 'its list-price spend does not count toward the free allowance'),
    note('reservations', 'dropped', 'no reservation at admission'),
    note('provider_responses', 'dropped', 'its attempts are not recorded per request'),
    note('health', 'dropped', 'its health and Delivered are not reported'),
  );
  return notes;
}

/**
 * The hosts of a credential the export refused (a host the target's schema or the egress policy refuses) and those
 * it wrote only because the platform allowed tenant hosts: one note per host.
 */
function hostNotes(c: CompiledCredential, plan: AccountAttempts): SemanticNote[] {
  const refused = new Map<string, string>();
  const allowed = new Set<string>();
  for (const m of plan.models) {
    for (const u of m.unplaced) if (u.credentialId === c.id && u.host !== undefined) refused.set(u.host, u.reason);
    for (const a of m.attempts) if (a.credentialId === c.id && a.target.tenantHost) allowed.add(a.target.host);
  }
  return [
    ...[...refused.values()].map((reason) => note('host', 'dropped', reason)),
    ...[...allowed].map((host) =>
      note(
        'egress',
        'approximated',
        `the tenant's host ${host} is exported because the platform allows tenant hosts: the target resolves it without our egress policy (loopback, private, link-local and metadata addresses)`,
      ),
    ),
  ];
}

/** Accounts whose credentials had API-key or member filters: the sum the report's summary line prints. */
export function liftedFilters(account: CompiledAccount): number {
  return account.credentials.filter((c) => c.allowedApiKeyHashes !== null || c.allowedUserIds !== null).length;
}
