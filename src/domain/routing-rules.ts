// The routing rules by name, for text people read. Users cannot look up "rule 6" (the spec is not theirs to read):
// descriptions, CLI output, Events and conditions say a rule's plain name and point at docs/guide/routing-rules.md.
// The planner's RuleIds (`rule-11-model-filter`, ...) stay as they are: they are machine identifiers in explain
// --json, the gateway's error metadata and the contract vectors, which other implementations compare against.
import type { RuleId } from './planner.ts';

/** Where the twelve rules are written down in plain words (the published copy of docs/guide/routing-rules.md). */
export const ROUTING_RULES_URL = 'https://github.com/byok-operator/byok-operator/blob/main/docs/guide/routing-rules.md';

/** The page's anchor for one rule, by its short name: `routingRule('byok-only')`. */
export const ROUTING_RULE_ANCHORS = {
  sections: '1-sections',
  'attempt-order': '2-attempt-order',
  failover: '3-failover',
  'one-endpoint-per-credential': '4-one-endpoint-per-credential',
  required: '5-required',
  'byok-only': '6-byok-only',
  'shared-capacity-allowed': '7-shared-capacity-allowed-the-default',
  'own-keys-first': '8-own-keys-first',
  'regional-endpoints': '9-regional-endpoints',
  'data-policies': '10-data-policies',
  filters: '11-filters',
  budgets: '12-budgets',
} as const;

export type RoutingRuleName = keyof typeof ROUTING_RULE_ANCHORS;

/** A pointer for a description: `the "byok-only" routing rule: <url>#6-byok-only`. */
export function routingRule(name: RoutingRuleName): string {
  return `the "${name}" routing rule: ${ROUTING_RULES_URL}#${ROUTING_RULE_ANCHORS[name]}`;
}

/** What `explain` prints for each exclusion instead of its machine identifier (the table in routing-rules.md). */
export const RULE_NAMES: Readonly<Record<RuleId, string>> = {
  'credential-disabled': 'disabled',
  'workspace-scope': 'workspace scope',
  'rule-11-api-key-filter': 'API-key filter',
  'rule-11-member-filter': 'member filter',
  'rule-11-model-filter': 'model filter',
  'no-endpoint-for-model': 'no endpoint for the model',
  'provider-only': 'provider.only',
  'rule-9-out-of-region': 'out of region',
  'rule-10-provider-policy': 'provider policy',
  'rule-10-data-collection': 'data collection',
  'rule-10-zdr': 'zero data retention',
  'rule-10-zdr-video': 'zero data retention, video',
  'rule-9-regional-not-targeted': 'regional, not targeted',
  'rule-9-regional-fallback': 'regional, fallback credential',
  'rule-6-byok-only': 'BYOK only',
  'rule-5-is-required': 'required',
};
