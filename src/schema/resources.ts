// The one source of truth for the five custom resources: CRD YAML, TS types, ajv validators and the
// REST OpenAPI document are all generated from these definitions.
import { PROVIDER_SLUGS } from '../domain/providers.ts';
import { routingRule } from '../domain/routing-rules.ts';
import { arr, bool, int, num, obj, type SchemaNode, str } from './json-schema.ts';

export const GROUP = 'byok.gateway.dev';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;

export interface PrinterColumn {
  name: string;
  type: 'string' | 'integer' | 'number' | 'boolean' | 'date';
  jsonPath: string;
  description: string;
  priority?: number;
}

export interface ResourceDefinition {
  kind: 'BYOKCredential' | 'Workspace' | 'Guardrail' | 'GatewayAPIKey' | 'Account';
  plural: string;
  singular: string;
  shortNames: string[];
  categories: string[];
  description: string;
  spec: SchemaNode;
  status: SchemaNode;
  printerColumns: PrinterColumn[];
}

const HASH_PATTERN = '^[0-9a-f]{64}$';
const MAX_FILTER_ENTRIES = 100;
const DNS_LABEL = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$';
const DNS_SUBDOMAIN = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$';
/**
 * Free text (names, ids, filter entries): no C0/C1 controls, DEL, U+2028/2029, U+FFFD (left by invalid UTF-8) or
 * the BMP noncharacters (U+FDD0-FDEF, U+FFFE/U+FFFF). Written so that both Go RE2 (the apiserver) and JS (ajv)
 * read it the same: \xNN escapes for ASCII bounds, the other bounds literally. The same rule as textIssue in
 * src/domain/text.ts (which also refuses astral noncharacters). A positive class, not a negated one: the apiserver
 * re-serialises CRD schemas into its merged OpenAPI (Go JSON leaves U+FFFE/U+FFFF raw) and converts that document
 * through a YAML reader for protobuf clients such as kubectl's validation; one raw noncharacter there makes
 * /openapi/v2 answer 503 for the whole cluster. So every literal bound here is a character YAML accepts.
 */
const SAFE_TEXT = '^[\\x20-\\x7E\\xA0-\u2027\u202A-\uFDCF\uFDF0-\uFFFC\u{10000}-\u{10FFFF}]*$';
const text = (description: string, extra: Partial<SchemaNode> = {}) =>
  str(`${description} No control characters, Unicode line separators or noncharacters.`, {
    pattern: SAFE_TEXT,
    ...extra,
  });
const objectName = (description: string) => str(description, { minLength: 1, maxLength: 253, pattern: DNS_SUBDOMAIN });
const usd = (description: string) => num(`${description} In US dollars.`, { minimum: 0 });

export const condition: SchemaNode = obj(
  'Condition is one aspect of the current state of this resource (metav1.Condition).',
  {
    type: str('Type of the condition, in CamelCase (Ready, SecretResolved, PayloadValid, FiltersValid, ...).', {
      maxLength: 316,
      pattern:
        '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$',
    }),
    status: str('Status of the condition: True, False or Unknown.', { enum: ['True', 'False', 'Unknown'] }),
    observedGeneration: int('The .metadata.generation the condition was set from.', { minimum: 0 }),
    lastTransitionTime: str('When the condition last changed from one status to another.', { format: 'date-time' }),
    reason: str('Programmatic identifier of the reason for the last transition, in CamelCase.', {
      minLength: 1,
      maxLength: 1024,
      pattern: '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$',
    }),
    message: str('Human-readable details about the transition. Never contains key material.', { maxLength: 32768 }),
  },
  { required: ['type', 'status', 'lastTransitionTime', 'reason', 'message'] },
);

const commonStatus = (description: string, extra: Record<string, SchemaNode> = {}): SchemaNode =>
  obj(description, {
    id: str('Stable public UUID: a UUIDv5 of namespace/name, so it survives delete-and-recreate and cluster restore.', {
      format: 'uuid',
    }),
    observedGeneration: int('The .metadata.generation the operator last reconciled.', { minimum: 0 }),
    conditions: arr('Current state, as metav1.Conditions. Ready summarises the others.', condition, {
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['type'],
      maxItems: 16,
    }),
    ...extra,
  });

// Written by the operator's leader from the gateway pods' status reports (docs/operator.md, "Upstream health and
// delivery") under its own field manager (byok-operator-health).
const DELIVERY_TEXT = {
  credential: {
    what: "How many gateway pods have loaded this credential's current version (its sealed envelope: payload and bundle key). Rewritten when the version or the loaded count changes; once delivered, a change in the pod count alone is shown on Account.status.delivery. The Delivered condition says when every pod has it.",
    version: "The current version: a digest of the credential's sealed envelope.",
  },
  account: {
    what: 'How many gateway pods have loaded the current version of every credential of this account. The Delivered condition says when every pod has.',
    version: 'The current version: a digest of the versions of every credential of the account.',
  },
  apiKey: {
    what: "How many gateway pods serve this key's current routing entry (hash, disabled, expiry, workspace, guardrail, owner) and can admit its requests under the account's budgets. The Delivered condition says when every pod does: the first call with a new key then works on each of them.",
    version:
      "The current version: a digest of the key's compiled routing entry (or of its absence, for a key that is not live).",
  },
} as const;
const deliveryStatus = (what: keyof typeof DELIVERY_TEXT): SchemaNode =>
  obj(DELIVERY_TEXT[what].what, {
    loaded: int('Gateway pods that have loaded the current version.', { minimum: 0 }),
    total: int('Gateway pods reporting (ready endpoints of the gateway Service).', { minimum: 0 }),
    configVersion: str(DELIVERY_TEXT[what].version, { maxLength: 64 }),
  });

const readyColumns: PrinterColumn[] = [
  {
    name: 'Ready',
    type: 'string',
    jsonPath: '.status.conditions[?(@.type=="Ready")].status',
    description: 'Whether the resource is valid and compiled into routing config.',
  },
  {
    name: 'Reason',
    type: 'string',
    jsonPath: '.status.conditions[?(@.type=="Ready")].reason',
    description: 'Why Ready has its status.',
  },
];
const ageColumn: PrinterColumn = {
  name: 'Age',
  type: 'date',
  jsonPath: '.metadata.creationTimestamp',
  description: 'Time since creation.',
};

const filter = (description: string, items: SchemaNode, extra: Partial<SchemaNode> = {}): SchemaNode =>
  arr(`${description} Absent means no restriction. At most ${MAX_FILTER_ENTRIES} entries.`, items, {
    maxItems: MAX_FILTER_ENTRIES,
    'x-kubernetes-list-type': 'set',
    ...extra,
  });

export const byokCredential: ResourceDefinition = {
  kind: 'BYOKCredential',
  plural: 'byokcredentials',
  singular: 'byokcredential',
  shortNames: ['byok', 'byokcred'],
  categories: ['byok-all'],
  description:
    'BYOKCredential registers an upstream-provider credential (bring your own key) for the account that owns this namespace. ' +
    'The key material stays in the referenced Secret; status shows only a masked label.',
  spec: obj(
    'Desired state of the credential.',
    {
      provider: str('Upstream provider slug (one of the 109 BYOK provider slugs). Immutable.', {
        enum: PROVIDER_SLUGS,
        'x-kubernetes-validations': [{ rule: 'self == oldSelf', message: 'provider is immutable' }],
      }),
      secretRef: obj(
        'The Secret in this namespace that holds the provider payload (a plain API key, or JSON for azure, amazon-bedrock and google-vertex).',
        {
          name: objectName('Name of the Secret in the same namespace.'),
          key: str('Key within the Secret data that holds the payload.', {
            default: 'key',
            minLength: 1,
            maxLength: 253,
            pattern: '^[-._a-zA-Z0-9]+$',
          }),
        },
        { required: ['name'] },
      ),
      workspace: str(
        'Name of the Workspace this credential is scoped to. Absent means global: usable in every workspace of the account (not the default workspace); `kubectl get byok` shows GLOBAL. Differs from the REST API, where a create without workspace_id lands in the default workspace and the X-Byok-Workspace-Defaulted response header names it (docs/api.md, "Workspaces"). Immutable.',
        {
          minLength: 1,
          maxLength: 253,
          pattern: DNS_SUBDOMAIN,
        },
      ),
      displayName: text('Optional human-readable name (the REST field name).', { maxLength: 256 }),
      disabled: bool('A disabled credential is never used for routing.', { default: false }),
      isFallback: bool(
        `Fallback section: tried only after the shared endpoints (${routingRule('sections')}). Cannot be combined with isByokOnly.`,
        { default: false },
      ),
      isRequired: bool(
        `Never use shared capacity for the models this credential applies to (${routingRule('required')}).`,
        { default: false },
      ),
      isByokOnly: bool(
        `Never use shared capacity on this provider for any model (${routingRule('byok-only')}). Only valid on non-fallback credentials; takes precedence over isRequired.`,
        { default: false },
      ),
      declaredZdr: bool(
        `The provider agreement declares zero data retention, so the credential passes a ZDR policy, except for video generation (${routingRule('data-policies')}).`,
      ),
      allowedModels: filter(
        'Model filter: model slugs of the form <vendor>/<model>.',
        text('A model slug <vendor>/<model>.', { minLength: 1, maxLength: 256 }),
      ),
      allowedApiKeyHashes: filter(
        'API-key filter: SHA-256 hashes (64 lowercase hex) of live GatewayAPIKeys of this account. At least one entry when present.',
        str('SHA-256 of a gateway API key: 64 lowercase hexadecimal characters.', {
          pattern: HASH_PATTERN,
          minLength: 64,
          maxLength: 64,
        }),
        { minItems: 1 },
      ),
      allowedUserIds: filter(
        'Member filter: user ids of workspace members.',
        text('A user id.', { minLength: 1, maxLength: 256 }),
      ),
      sortOrder: int(
        'Position within the provider and section; tried in ascending order. Absent means after the existing credentials (status.sortOrder shows the effective value).',
        {
          minimum: 0,
          maximum: 1_000_000,
        },
      ),
    },
    {
      required: ['provider', 'secretRef'],
      'x-kubernetes-validations': [
        { rule: '!(self.isFallback && self.isByokOnly)', message: 'isByokOnly cannot be combined with isFallback' },
        {
          rule: 'has(self.workspace) == has(oldSelf.workspace) && (!has(self.workspace) || self.workspace == oldSelf.workspace)',
          message: 'workspace is immutable',
        },
      ],
    },
  ),
  status: commonStatus('Observed state of the credential, written only by the operator.', {
    label: str('Masked snippet of the key (first and last few characters). Never the key itself.'),
    createdAt: str('ISO 8601 creation time (the REST created_at).', { format: 'date-time' }),
    sortOrder: int('Effective position within the provider.'),
    workspaceId: str('Public id of the workspace, or absent for a global credential.'),
    workspaceScope: str(
      'spec.workspace, or GLOBAL when absent: the credential is usable in every workspace of the account (what the Workspace column shows).',
    ),
    secretResourceVersion: str('resourceVersion of the Secret the label and bundle were computed from.'),
    lastUsedTime: str(
      "Last time a gateway pod used this credential upstream (any outcome), from the gateways' status reports; rewritten only when it moved by the configured resolution (default 1 min). Absent: not used since the operator started watching.",
      { format: 'date-time' },
    ),
    delivery: deliveryStatus('credential'),
  }),
  printerColumns: [
    { name: 'Provider', type: 'string', jsonPath: '.spec.provider', description: 'Upstream provider.' },
    { name: 'Label', type: 'string', jsonPath: '.status.label', description: 'Masked key.' },
    {
      name: 'Workspace',
      type: 'string',
      jsonPath: '.status.workspaceScope',
      description: 'Workspace scope: the workspace name, or GLOBAL (usable in every workspace).',
    },
    {
      name: 'Fallback',
      type: 'boolean',
      jsonPath: '.spec.isFallback',
      description:
        'true: the fallback section, tried after shared capacity; false: prioritized (kubectl get byokkeys uses the same word).',
    },
    { name: 'Order', type: 'integer', jsonPath: '.status.sortOrder', description: 'Effective sort order.' },
    {
      name: 'Upstream',
      type: 'string',
      jsonPath: '.status.conditions[?(@.type=="UpstreamHealthy")].reason',
      description: 'UpstreamHealthy reason: Serving, Unauthorized, RateLimited, UpstreamErrors or Unused.',
    },
    {
      name: 'Last Used',
      type: 'date',
      jsonPath: '.status.lastUsedTime',
      description:
        'Time since a gateway last used the credential; up to about a minute stale, since status.lastUsedTime is rewritten only when it moved by the resolution (default 1 min).',
    },
    {
      name: 'Delivered',
      type: 'string',
      jsonPath: '.status.conditions[?(@.type=="Delivered")].status',
      description: 'Every gateway pod has loaded the current version.',
      priority: 1,
    },
    {
      name: 'Disabled',
      type: 'boolean',
      jsonPath: '.spec.disabled',
      description: 'Disabled credentials are never used.',
      priority: 1,
    },
    { name: 'ID', type: 'string', jsonPath: '.status.id', description: 'Public id.', priority: 1 },
    ...readyColumns,
    ageColumn,
  ],
};

const budgetInterval = str('Reset interval: daily, weekly, monthly, or lifetime (never resets).', {
  enum: ['daily', 'weekly', 'monthly', 'lifetime'],
});

// Spend, written by the operator's leader from the Redis ledger (docs/ledger.md) under its own field manager
// (byok-operator-spend), so the reconcilers' status writes never drop it.
const spendWindow = obj(
  'Spend in the current window of one budget interval. Windows are UTC: a day, the ISO week from Monday, the calendar month, or lifetime.',
  {
    interval: budgetInterval,
    window: str(
      'The current window: d2026-11-23 (a day), w2026-11-23 (the ISO week starting that Monday), m2026-11 (a month) or life.',
      { maxLength: 16 },
    ),
    limitUsd: usd('Limit of this interval; absent when the interval has no limit.'),
    nonByokUsd: usd(
      'Shared-capacity spend in this window: what the gateway charged for non-BYOK requests. Always counted against the limit.',
    ),
    byokUsd: usd(
      'BYOK spend in this window: what the BYOK requests would have cost at list price (the provider bills the tenant directly). Counted against the limit only when includeByokInBudgets is true; shown either way.',
    ),
    countedUsd: usd('What counts against the limit: nonByokUsd, plus byokUsd when includeByokInBudgets is true.'),
    blocked: bool('The counted total has reached the limit: new requests are refused until the window turns over.'),
    resetsAt: str(
      'When this window ends and its counting starts again from 0 (UTC, RFC 3339). Absent for lifetime, which never resets.',
      { format: 'date-time' },
    ),
    refusedRequests: int(
      'Requests this budget refused with 402 in this window, as the gateways counted them in the spend ledger. Absent: none. Each increase raises a Warning Event on this object (one series per window and reason, at most one write per minute): BudgetExceeded once the limit is reached, RequestOverBudget for requests that would need more than is left.',
      { minimum: 0 },
    ),
    overBudgetRequests: int(
      'Of refusedRequests, those refused before the limit was reached: each would have needed more than the window had left (RequestOverBudget Events). Absent: none.',
      { minimum: 0 },
    ),
  },
  { required: ['interval', 'window', 'nonByokUsd', 'byokUsd', 'countedUsd', 'blocked'] },
);
const spendUpdatedAt = str('When the operator last saw these figures change in the ledger.', { format: 'date-time' });

export const workspace: ResourceDefinition = {
  kind: 'Workspace',
  plural: 'workspaces',
  singular: 'workspace',
  shortNames: ['byokws'],
  categories: ['byok-all'],
  description:
    'Workspace groups members, budgets and a default guardrail inside an account. One Workspace per namespace may be the default.',
  spec: obj('Desired state of the workspace.', {
    displayName: text('Human-readable name.', { maxLength: 256 }),
    default: bool(
      "This is the account's default workspace (what GET /byok lists without workspace_id). At most one per namespace.",
      { default: false },
    ),
    budgets: obj('Workspace budget limits per interval. An absent interval has no limit.', {
      daily: usd('Daily limit.'),
      weekly: usd('Weekly limit.'),
      monthly: usd('Monthly limit.'),
      lifetime: usd('Lifetime limit.'),
    }),
    includeByokInBudgets: bool(
      `Count what the gateway would have charged for BYOK requests toward every workspace budget interval at once (${routingRule('budgets')}).`,
      { default: false },
    ),
    defaultGuardrail: str('Name of the Guardrail applied to members without one of their own.', {
      maxLength: 253,
      pattern: DNS_SUBDOMAIN,
    }),
    members: arr(
      'Workspace members.',
      obj(
        'A member of the workspace.',
        {
          userId: text('The user id.', { minLength: 1, maxLength: 256 }),
          guardrail: str("Name of the Guardrail for this member; absent uses the workspace's default guardrail.", {
            maxLength: 253,
            pattern: DNS_SUBDOMAIN,
          }),
        },
        { required: ['userId'] },
      ),
      { 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['userId'], maxItems: 10000 },
    ),
  }),
  status: commonStatus('Observed state of the workspace, written only by the operator.', {
    spend: obj(
      'Spend against the workspace budget in every interval, from the spend ledger (present when the operator reads a shared ledger).',
      {
        includeByokInBudgets: bool('Whether BYOK requests count toward every interval of this budget.'),
        blocked: bool('Some interval has reached its limit: new requests of this workspace are refused.'),
        windows: arr('One entry per interval (daily, weekly, monthly, lifetime).', spendWindow, {
          'x-kubernetes-list-type': 'map',
          'x-kubernetes-list-map-keys': ['interval'],
          maxItems: 4,
        }),
        updatedAt: spendUpdatedAt,
      },
    ),
  }),
  printerColumns: [
    { name: 'Default', type: 'boolean', jsonPath: '.spec.default', description: 'Default workspace of the account.' },
    {
      name: 'Display Name',
      type: 'string',
      jsonPath: '.spec.displayName',
      description: 'Human-readable name.',
      priority: 1,
    },
    // The id the REST API (workspace_id) and `explain` print: without it a UUID there names nothing in kubectl.
    {
      name: 'ID',
      type: 'string',
      jsonPath: '.status.id',
      description: 'Public id: the workspace_id of the REST API and of explain.',
      priority: 1,
    },
    // Counted and BYOK side by side: with BYOK excluded from the budgets a BYOK-only workspace counts 0 while it spends.
    {
      name: 'Counted Today USD',
      type: 'number',
      jsonPath: '.status.spend.windows[?(@.interval=="daily")].countedUsd',
      description:
        'Spend today (UTC) that counts against the budgets: shared-capacity charges, plus the BYOK list cost when BYOK Counted is true.',
    },
    {
      name: 'BYOK Today USD',
      type: 'number',
      jsonPath: '.status.spend.windows[?(@.interval=="daily")].byokUsd',
      description:
        'BYOK list cost today (UTC), shown whether or not it counts; included in Counted Today USD only when BYOK Counted is true.',
    },
    {
      name: 'Daily Limit',
      type: 'number',
      jsonPath: '.spec.budgets.daily',
      description: 'Daily budget limit, compared with Counted Today USD.',
    },
    {
      name: 'Counted Month USD',
      type: 'number',
      jsonPath: '.status.spend.windows[?(@.interval=="monthly")].countedUsd',
      description:
        'Spend this calendar month (UTC) that counts against the budgets: shared-capacity charges, plus the BYOK list cost when BYOK Counted is true.',
    },
    {
      name: 'BYOK Month USD',
      type: 'number',
      jsonPath: '.status.spend.windows[?(@.interval=="monthly")].byokUsd',
      description: 'BYOK list cost this calendar month (UTC), shown whether or not it counts.',
      priority: 1,
    },
    {
      name: 'Monthly Limit',
      type: 'number',
      jsonPath: '.spec.budgets.monthly',
      description: 'Monthly budget limit, compared with Counted Month USD.',
    },
    {
      name: 'BYOK Counted',
      type: 'boolean',
      jsonPath: '.status.spend.includeByokInBudgets',
      description:
        'true: BYOK list cost counts toward the budgets (spec.includeByokInBudgets); false: only shared-capacity charges count.',
    },
    {
      name: 'Blocked',
      type: 'boolean',
      jsonPath: '.status.spend.blocked',
      description: 'Some budget interval has reached its limit.',
    },
    ...readyColumns,
    ageColumn,
  ],
};

export const guardrail: ResourceDefinition = {
  kind: 'Guardrail',
  plural: 'guardrails',
  singular: 'guardrail',
  shortNames: ['byokgr'],
  categories: ['byok-all'],
  description: 'Guardrail sets a budget and a data policy for the API keys and members that use it.',
  spec: obj('Desired state of the guardrail.', {
    displayName: text('Human-readable name.', { maxLength: 256 }),
    budget: obj(
      'Spending limit. Absent means no budget (then includeByokInBudgets has no effect).',
      {
        limitUsd: usd('Budget limit.'),
        resetInterval: budgetInterval,
        includeByokInBudgets: bool(
          `Count what the gateway would have charged for BYOK requests toward this budget (${routingRule('budgets')}).`,
          { default: false },
        ),
      },
      { required: ['limitUsd'] },
    ),
    dataPolicy: obj(`Data policy applied before credential endpoints are created (${routingRule('data-policies')}).`, {
      requireZdr: bool('Only zero-data-retention endpoints (or credentials with declaredZdr) may serve.', {
        default: false,
      }),
      denyDataCollection: bool('Exclude endpoints whose provider may collect data.', { default: false }),
      allowedProviders: arr(
        'Only these providers may serve. Absent means all.',
        str('Provider slug.', { enum: PROVIDER_SLUGS }),
        { 'x-kubernetes-list-type': 'set', maxItems: 200 },
      ),
      ignoredProviders: arr('These providers never serve.', str('Provider slug.', { enum: PROVIDER_SLUGS }), {
        'x-kubernetes-list-type': 'set',
        maxItems: 200,
      }),
    }),
  }),
  status: commonStatus('Observed state of the guardrail, written only by the operator.', {
    spend: obj(
      'Spend in the current window of the budget (monthly when the guardrail has no budget), from the spend ledger (present when the operator reads a shared ledger). Summed over every API key and member the guardrail governs.',
      {
        window: spendWindow,
        includeByokInBudgets: bool('Whether BYOK requests count toward this budget.'),
        blocked: bool('The budget has reached its limit: new requests under this guardrail are refused.'),
        updatedAt: spendUpdatedAt,
      },
    ),
  }),
  printerColumns: [
    {
      name: 'Counted USD',
      type: 'number',
      jsonPath: '.status.spend.window.countedUsd',
      description:
        'Spend in the current budget window that counts against the limit: shared-capacity charges, plus the BYOK list cost when BYOK Counted is true.',
    },
    {
      name: 'BYOK USD',
      type: 'number',
      jsonPath: '.status.spend.window.byokUsd',
      description: 'BYOK list cost in the current budget window, shown whether or not it counts.',
    },
    {
      name: 'Limit USD',
      type: 'number',
      jsonPath: '.spec.budget.limitUsd',
      description: 'Budget limit, compared with Counted USD.',
    },
    { name: 'Interval', type: 'string', jsonPath: '.spec.budget.resetInterval', description: 'Budget reset interval.' },
    {
      name: 'BYOK Counted',
      type: 'boolean',
      jsonPath: '.status.spend.includeByokInBudgets',
      description:
        'true: BYOK list cost counts toward the budget (spec.budget.includeByokInBudgets); false: only shared-capacity charges count.',
    },
    {
      name: 'Blocked',
      type: 'boolean',
      jsonPath: '.status.spend.blocked',
      description: 'The budget has reached its limit.',
    },
    ...readyColumns,
    ageColumn,
  ],
};

export const gatewayApiKey: ResourceDefinition = {
  kind: 'GatewayAPIKey',
  plural: 'gatewayapikeys',
  singular: 'gatewayapikey',
  shortNames: ['gwkey'],
  categories: ['byok-all'],
  description:
    'GatewayAPIKey records the SHA-256 hash of a gateway API key (never the key). Live means not disabled and not expired.',
  spec: obj(
    'Desired state of the API key record.',
    {
      hash: str(
        'SHA-256 of the API key: 64 lowercase hexadecimal characters. Changes only by a rotation (`byok-operator gateway-key rotate`). A hash belongs to one account: when GatewayAPIKeys in several namespaces (or several in one) name it, the key that named it first (status.hashClaims, then creationTimestamp, then uid) holds it and the others are Ready=False Conflicting and never routed.',
        {
          pattern: HASH_PATTERN,
          minLength: 64,
          maxLength: 64,
        },
      ),
      previousHash: str(
        'SHA-256 of the secret this key had before its last rotation (`byok-operator gateway-key rotate`), still accepted until previousHashExpiresAt, then refused. Written together with hash: hash may change only to move its old value here. The key keeps holding this hash (copies of it elsewhere stay Conflicting) until the next rotation replaces it; it cannot be removed.',
        {
          pattern: HASH_PATTERN,
          minLength: 64,
          maxLength: 64,
        },
      ),
      previousHashExpiresAt: str(
        'End of the rotation overlap (RFC 3339): until then the previous secret works as the current one (same workspace, guardrail, models and limits, counted against the same limits); from then on it is refused with 401. Required with previousHash.',
        { format: 'date-time' },
      ),
      displayName: text('Human-readable name.', { maxLength: 256 }),
      disabled: bool('A disabled key is not live: credential filters that name it stop resolving.', { default: false }),
      expiresAt: str('When the key stops being live (RFC 3339). Absent means never.', { format: 'date-time' }),
      workspace: str('Name of the Workspace the key belongs to. Absent means the default workspace.', {
        maxLength: 253,
        pattern: DNS_SUBDOMAIN,
      }),
      guardrail: str('Name of the Guardrail that applies to requests made with this key.', {
        maxLength: 253,
        pattern: DNS_SUBDOMAIN,
      }),
      owner: str(
        'User id of the member who owns the key. The gateway uses it as the requesting member for credential member filters (allowedUserIds) and member guardrails. Absent means the key is not tied to a member.',
        { minLength: 1, maxLength: 256 },
      ),
      models: arr(
        `Only these models may be requested with this key (model slugs as in the request, e.g. openai/gpt-4o). A request for any other is refused with 403, and the error names the allowed models. Absent means every model the account can route. At most ${MAX_FILTER_ENTRIES} entries.`,
        text('A model slug.', { minLength: 1, maxLength: 256 }),
        { minItems: 1, maxItems: MAX_FILTER_ENTRIES, 'x-kubernetes-list-type': 'set' },
      ),
      limits: obj(
        'Rate limits of this key, counted across every gateway replica through the spend ledger (both secrets of a rotation count as one key). A request over a limit is refused with 429 and Retry-After. An absent limit means none.',
        {
          requestsPerMinute: int(
            'Most requests admitted in any 60-second span (a sliding window over admission times).',
            { minimum: 1, maximum: 1000000 },
          ),
          tokensPerMinute: int(
            "Most tokens admitted in any 60-second span. Each request counts the most it can use when admitted (its prompt estimate plus max_tokens, or the model's longest answer without max_tokens) and is corrected to what it used when it finishes; a request that alone needs more is refused.",
            { minimum: 1, maximum: 1000000000 },
          ),
          maxInFlight: int('Most requests of this key being answered at once, across every gateway replica.', {
            minimum: 1,
            maximum: 100000,
          }),
        },
      ),
    },
    {
      required: ['hash'],
      'x-kubernetes-validations': [
        {
          rule: 'self.hash == oldSelf.hash || (has(self.previousHash) && self.previousHash == oldSelf.hash)',
          message: 'hash may change only by a rotation: the old hash moves to previousHash in the same update',
          fieldPath: '.hash',
        },
        {
          // An older key that could name any hash as its previous one would hold it by age and take that key's traffic.
          rule: '!has(self.previousHash) || (has(oldSelf.previousHash) && self.previousHash == oldSelf.previousHash) || self.previousHash == oldSelf.hash',
          message: 'previousHash may only be set to the hash this key had: it is written by a rotation, never chosen',
          fieldPath: '.previousHash',
        },
        {
          // Without it a key could not tell "never rotated" (its hash held since creation) from "rotated, then
          // cleared": the key-hash election reads that (claimedSince in src/compiler/elect.ts).
          rule: '!has(oldSelf.previousHash) || has(self.previousHash)',
          message: 'previousHash cannot be removed: the next rotation replaces it',
          fieldPath: '.previousHash',
        },
        {
          rule: 'has(self.previousHash) == has(self.previousHashExpiresAt)',
          message: 'previousHash and previousHashExpiresAt go together',
        },
        {
          rule: '!has(self.previousHash) || self.previousHash != self.hash',
          message: 'previousHash must differ from hash',
          fieldPath: '.previousHash',
        },
      ],
    },
  ),
  status: commonStatus('Observed state of the API key record, written only by the operator.', {
    live: bool('Not disabled and not expired at the last reconcile.'),
    hashClaims: arr(
      'Since when this key has named each of its hashes (spec.hash and, after a rotation, spec.previousHash), as the operator first saw it. When keys name one hash, the one that named it first holds it; a tenant cannot write status, so a rotation onto a hash another key holds never claims it earlier.',
      obj(
        'A hash and since when this key names it.',
        {
          hash: str('SHA-256 of a secret of this key (spec.hash or spec.previousHash).', {
            pattern: HASH_PATTERN,
            minLength: 64,
            maxLength: 64,
          }),
          since: str(
            'When this key began to name the hash: its creation for a hash it was created with (a key without previousHash was never rotated), otherwise the last write to the key before the operator saw the hash (RFC 3339, milliseconds).',
            { format: 'date-time' },
          ),
        },
        { required: ['hash', 'since'] },
      ),
      { maxItems: 2, 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['hash'] },
    ),
    delivery: deliveryStatus('apiKey'),
    spend: obj(
      'What the requests made with this key cost this calendar month (UTC) at list price, BYOK and shared capacity together, both secrets of a rotation included; from the spend ledger (present when the operator reads a shared ledger).',
      {
        month: str('The calendar month, e.g. 2026-11.', { maxLength: 7 }),
        spentUsd: usd('Month-to-date list cost of the requests made with this key.'),
        updatedAt: spendUpdatedAt,
      },
    ),
  }),
  printerColumns: [
    { name: 'Live', type: 'boolean', jsonPath: '.status.live', description: 'Not disabled and not expired.' },
    // A `date` column prints the time since the value (so a past expiry reads like an age and a future one as
    // <invalid>); the RFC 3339 text reads right either way and Live says whether it has passed.
    {
      name: 'Expires At',
      type: 'string',
      jsonPath: '.spec.expiresAt',
      description: 'Expiry time (RFC 3339); empty means never. Live shows whether it has passed.',
    },
    {
      name: 'Spend MTD USD',
      type: 'number',
      jsonPath: '.status.spend.spentUsd',
      description: 'Month-to-date list cost of the requests made with this key (status.spend).',
    },
    {
      name: 'RPM',
      type: 'integer',
      jsonPath: '.spec.limits.requestsPerMinute',
      description: 'Requests-per-minute limit; empty means none.',
      priority: 1,
    },
    {
      name: 'TPM',
      type: 'integer',
      jsonPath: '.spec.limits.tokensPerMinute',
      description: 'Tokens-per-minute limit; empty means none.',
      priority: 1,
    },
    {
      name: 'In Flight',
      type: 'integer',
      jsonPath: '.spec.limits.maxInFlight',
      description: 'Limit on requests in flight; empty means none.',
      priority: 1,
    },
    {
      name: 'Previous Until',
      type: 'string',
      jsonPath: '.spec.previousHashExpiresAt',
      description: 'End of the rotation overlap: until then the previous secret still works.',
      priority: 1,
    },
    {
      name: 'Delivered',
      type: 'string',
      jsonPath: '.status.conditions[?(@.type=="Delivered")].status',
      description: "Every gateway pod serves the key's current routing entry and can admit its requests.",
      priority: 1,
    },
    ...readyColumns,
    ageColumn,
  ],
};

export const account: ResourceDefinition = {
  kind: 'Account',
  plural: 'accounts',
  singular: 'account',
  shortNames: ['byokacct'],
  categories: ['byok-all'],
  description: 'Account marks a namespace as one account of the gateway. Exactly one per namespace.',
  spec: obj('Desired state of the account.', {
    displayName: text('Human-readable name.', { maxLength: 256 }),
    plan: str('Billing plan: pay-as-you-go (25,000 USD monthly BYOK free allowance) or enterprise (200,000 USD).', {
      enum: ['pay-as-you-go', 'enterprise'],
      default: 'pay-as-you-go',
    }),
    privacy: obj(
      `Account privacy settings, applied before credential endpoints are created (${routingRule('data-policies')}).`,
      {
        denyDataCollection: bool('Exclude endpoints whose provider may collect data.', { default: false }),
        alwaysZdr: bool('Only zero-data-retention endpoints may serve.', { default: false }),
      },
    ),
    limits: obj('Per-account limits. An absent limit takes the operator/API default.', {
      maxCredentials: int(
        'Most BYOKCredentials this account may hold (REST and Git together). Beyond it the REST API answers 403 and the operator marks the newest credentials Ready=False (reason QuotaExceeded) and does not compile them; the oldest win. Default: the operator/API default (1000).',
        { minimum: 0, maximum: 100000 },
      ),
    }),
  }),
  status: commonStatus('Observed state of the account, written only by the operator.', {
    spend: obj(
      'This calendar month (UTC) of the account, from the spend ledger (present when the operator reads a shared ledger).',
      {
        month: str('The calendar month, e.g. 2026-11.', { maxLength: 7 }),
        byokListCostUsd: usd(
          'Month-to-date list-price cost of BYOK requests (what the free allowance is measured in).',
        ),
        byokFeesUsd: usd('BYOK fees charged this month: 5% of the BYOK list cost above the free allowance.'),
        sharedChargesUsd: usd('Charges of shared-capacity (non-BYOK) requests this month.'),
        freeAllowanceUsd: usd("The plan's monthly free allowance."),
        freeAllowanceRemainingUsd: usd('Free allowance left this month.'),
        updatedAt: spendUpdatedAt,
      },
    ),
    delivery: deliveryStatus('account'),
  }),
  printerColumns: [
    { name: 'Plan', type: 'string', jsonPath: '.spec.plan', description: 'Billing plan.' },
    {
      name: 'BYOK MTD USD',
      type: 'number',
      jsonPath: '.status.spend.byokListCostUsd',
      description: 'Month-to-date BYOK list cost.',
    },
    { name: 'Fees USD', type: 'number', jsonPath: '.status.spend.byokFeesUsd', description: 'BYOK fees this month.' },
    {
      name: 'Allowance Left USD',
      type: 'number',
      jsonPath: '.status.spend.freeAllowanceRemainingUsd',
      description: 'Free allowance remaining this month.',
    },
    {
      name: 'Delivered',
      type: 'string',
      jsonPath: '.status.conditions[?(@.type=="Delivered")].status',
      description: 'Every gateway pod has loaded the current version of every credential of the account.',
      priority: 1,
    },
    ...readyColumns,
    ageColumn,
  ],
};

export const RESOURCES: readonly ResourceDefinition[] = [byokCredential, workspace, guardrail, gatewayApiKey, account];
export { DNS_LABEL, HASH_PATTERN, MAX_FILTER_ENTRIES, SAFE_TEXT };
