// The route planner (spec 1.1 rules 1-11): given one account's compiled state, the catalog of shared endpoints and a
// request, the ordered attempts plus, for every credential and shared endpoint left out, the rule that removed it.
//
// Hot path: per-request state lives in module-level scratch arrays (planRoute is synchronous, so there is no
// interleaving), and every attempt / exclusion object is frozen and cached on the prepared account or the catalog,
// so a plan allocates its two result arrays and little else.
import {
  applicableGuardrails,
  type PreparedAccount,
  type PreparedCredential,
  type PreparedGuardrail,
  type PreparedProviderGroup,
  prepareAccount,
} from './account.ts';
import type { CatalogEndpoint, CatalogModel, ModelCatalog, RouteRequest } from './catalog.ts';
import type { CompiledAccount } from './compiled.ts';
import { ROUTE_ERRORS, type RouteErrorCode } from './errors.ts';
import { PROVIDER_SLUGS, type ProviderSlug } from './providers.ts';

/** Every reason a credential or shared endpoint can be left out, with its stable explanation. */
export const RULES = {
  'credential-disabled': 'the credential is disabled',
  'workspace-scope': 'the credential is scoped to another workspace',
  'rule-11-api-key-filter': "the request's API key is not in the credential's allowed_api_key_hashes",
  'rule-11-member-filter': "the requesting member is not in the credential's allowed_user_ids",
  'rule-11-model-filter': "the model is not in the credential's allowed_models",
  'no-endpoint-for-model': "the credential's provider has no endpoint for this model in the catalog",
  'provider-only': "the request's provider.only does not list this provider or endpoint",
  'rule-9-out-of-region': 'the endpoint is not in the region of the regional gateway address',
  'rule-10-provider-policy': "a guardrail's allowed or ignored providers exclude this provider",
  'rule-10-data-collection':
    'data collection is denied (request, account privacy settings or guardrail) and this endpoint may collect data',
  'rule-10-zdr':
    'zero data retention is required (request, account privacy settings or guardrail) and this endpoint does not provide it',
  'rule-10-zdr-video': "the credential's declared_zdr does not apply to video generation, and the endpoint is not ZDR",
  'rule-9-regional-not-targeted':
    'region-pinned endpoint on the global API, not targeted explicitly by provider.order or provider.only',
  'rule-9-regional-fallback': 'fallback credentials never unlock region-pinned endpoints on the global API',
  'rule-6-byok-only':
    'a credential of this provider has is_byok_only=true: shared endpoints are removed for every model',
  'rule-5-is-required':
    'a credential of this provider has is_required=true for this model: shared endpoints are removed',
} as const;

export type RuleId = keyof typeof RULES;

const RULE_IDS = Object.keys(RULES) as RuleId[];
const code = (id: RuleId): number => RULE_IDS.indexOf(id) + 1;

const C_DISABLED = code('credential-disabled');
const C_WORKSPACE = code('workspace-scope');
const C_API_KEY = code('rule-11-api-key-filter');
const C_MEMBER = code('rule-11-member-filter');
const C_MODEL = code('rule-11-model-filter');
const C_NO_ENDPOINT = code('no-endpoint-for-model');
const C_ONLY = code('provider-only');
const C_OUT_OF_REGION = code('rule-9-out-of-region');
const C_PROVIDER_POLICY = code('rule-10-provider-policy');
const C_DATA_COLLECTION = code('rule-10-data-collection');
const C_ZDR = code('rule-10-zdr');
const C_ZDR_VIDEO = code('rule-10-zdr-video');
const C_NOT_TARGETED = code('rule-9-regional-not-targeted');
const C_FALLBACK_REGIONAL = code('rule-9-regional-fallback');
const C_BYOK_ONLY = code('rule-6-byok-only');
const C_REQUIRED = code('rule-5-is-required');

export type Section = 'prioritized' | 'fallback';

export interface CredentialAttempt {
  readonly kind: 'credential';
  readonly credentialId: string;
  readonly provider: ProviderSlug;
  /** The catalog endpoint this credential's pinned copy calls. */
  readonly endpoint: CatalogEndpoint;
  readonly section: Section;
}

export interface SharedAttempt {
  readonly kind: 'shared';
  readonly provider: ProviderSlug;
  readonly endpoint: CatalogEndpoint;
}

export type Attempt = CredentialAttempt | SharedAttempt;

export type ExclusionSubject =
  | { readonly kind: 'credential'; readonly credentialId: string }
  | { readonly kind: 'shared'; readonly provider: ProviderSlug; readonly endpointId: string };

export interface Exclusion {
  readonly subject: ExclusionSubject;
  readonly rule: RuleId;
  readonly reason: string;
}

export interface RoutePlan {
  /** In order: prioritized credentials, shared endpoints, fallback credentials. */
  attempts: Attempt[];
  /** Every credential of the account and every catalog endpoint of the model that is not attempted, with why. */
  excluded: Exclusion[];
  /** Set when there is nothing to attempt. */
  error?: { code: RouteErrorCode; message: string };
}

// Provider flags collected from the credentials that apply to the request.
const F_BYOK_ONLY = 1;
const F_REQUIRED = 2;
const NO_RANK = 0x7fffffff;

// Per-call scratch and request state. A const object (not module-level `let`s) so V8 needs no TDZ checks.
interface Scratch {
  provFlags: Uint8Array;
  provRank: Int32Array;
  epStatus: Uint8Array;
  epZdr: Uint8Array;
  epGate: Uint8Array;
  epRank: Int32Array;
  seq: Int32Array;
  chosen: Int32Array;
  groupSel: Int32Array;
  // Request fields copied once: request objects arrive in many shapes, and reading them in the credential loop
  // would be megamorphic.
  workspaceId: string;
  apiKeyHash: string;
  userId: string | null;
  modelSlug: string;
  video: boolean;
}

const S: Scratch = {
  provFlags: new Uint8Array(PROVIDER_SLUGS.length),
  provRank: new Int32Array(PROVIDER_SLUGS.length),
  epStatus: new Uint8Array(64),
  epZdr: new Uint8Array(64),
  epGate: new Uint8Array(64),
  epRank: new Int32Array(64),
  seq: new Int32Array(64),
  chosen: new Int32Array(256),
  groupSel: new Int32Array(128),
  workspaceId: '',
  apiKeyHash: '',
  userId: null,
  modelSlug: '',
  video: false,
};

const EMPTY: readonly never[] = [];

/**
 * Plans the attempts for one request. Accepts a CompiledAccount (prepared once and cached per object) or the result
 * of prepareAccount. Pure and deterministic: the same inputs give an equal plan.
 */
export function planRoute(
  account: CompiledAccount | PreparedAccount,
  catalog: ModelCatalog,
  request: RouteRequest,
): RoutePlan {
  const acc = prepareAccount(account);
  const model = catalog.models.get(request.model) ?? null;
  const n = model === null ? 0 : model.endpoints.length;
  if (S.epStatus.length < n) growEndpointScratch(n);
  if (S.chosen.length < acc.credentials.length) S.chosen = new Int32Array(acc.credentials.length * 2);
  if (S.groupSel.length < acc.groups.length) S.groupSel = new Int32Array(acc.groups.length * 2);
  const { provFlags, provRank, epStatus, epZdr, epGate, epRank, groupSel } = S;
  S.workspaceId = request.workspaceId;
  S.apiKeyHash = request.apiKeyHash;
  S.userId = request.userId;
  S.modelSlug = request.model;
  S.video = request.isVideoGeneration === true;

  const order = request.providerOrder != null && request.providerOrder.length > 0 ? request.providerOrder : null;
  const only = request.providerOnly != null && request.providerOnly.length > 0 ? request.providerOnly : null;
  const regionalBase = request.baseAddress === 'global' ? null : request.baseAddress.region;
  const guards = applicableGuardrails(acc, request);
  const g1 = guards.apiKey;
  const g2 = guards.member;
  const privacy = acc.account.privacy;
  const requireZdr =
    request.requireZdr === true ||
    privacy.alwaysZdr ||
    (g1 !== null && g1.source.dataPolicy.requireZdr) ||
    (g2 !== null && g2.source.dataPolicy.requireZdr);
  const denyDc =
    request.denyDataCollection === true ||
    privacy.denyDataCollection ||
    (g1 !== null && g1.source.dataPolicy.denyDataCollection) ||
    (g2 !== null && g2.source.dataPolicy.denyDataCollection);

  provFlags.fill(0);
  provRank.fill(NO_RANK);

  // 1. Endpoint eligibility that does not depend on a credential (rules 9/10 and provider.only).
  const endpoints: readonly CatalogEndpoint[] = model === null ? EMPTY : model.endpoints;
  if (model !== null) {
    const providerIdx = model.index.providerIdx;
    const b1 = g1 === null ? null : guardrailVerdicts(g1, model);
    const b2 = g2 === null ? null : guardrailVerdicts(g2, model);
    for (let i = 0; i < n; i++) {
      const e = endpoints[i] as CatalogEndpoint;
      let st = 0;
      if (only !== null && !lists(only, e)) st = C_ONLY;
      else if (regionalBase !== null && e.region !== regionalBase) st = C_OUT_OF_REGION;
      else if ((b1 !== null && b1[i] === 1) || (b2 !== null && b2[i] === 1)) st = C_PROVIDER_POLICY;
      else if (denyDc && e.dataCollection) st = C_DATA_COLLECTION;
      epStatus[i] = st;
      epZdr[i] = requireZdr && !e.zdr ? 1 : 0;
      epGate[i] = regionalBase === null && e.region !== null && !targeted(order, only, e) ? 1 : 0;
      const rank = order === null ? i : rankIn(order, e) * 65536 + i;
      epRank[i] = rank;
      const p = providerIdx[i] as number;
      if (rank < (provRank[p] as number)) provRank[p] = rank;
    }
  }

  // 2. Credentials (rules 1, 4, 5, 6, 9, 10, 11, scope, disabled): pick each one's endpoint, collect provider flags.
  const excluded: Exclusion[] = [];
  const groups = acc.groups;
  let selected = 0;
  for (let gi = 0; gi < groups.length; gi++) {
    const grp = groups[gi] as PreparedProviderGroup;
    // Both sections are decided (every credential gets its verdict or exclusion) before the group is ranked.
    const anyPrioritized = evalCredentials(grp.prioritized, model, excluded);
    const anyFallback = evalCredentials(grp.fallback, model, excluded);
    if (anyPrioritized || anyFallback) {
      // Insertion by provider rank (rule 8: requested order, else the catalog's), stable on the slug order.
      const rank = provRank[grp.providerIdx] as number;
      let pos = selected++;
      while (
        pos > 0 &&
        (provRank[(groups[groupSel[pos - 1] as number] as PreparedProviderGroup).providerIdx] as number) > rank
      ) {
        groupSel[pos] = groupSel[pos - 1] as number;
        pos--;
      }
      groupSel[pos] = gi;
    }
  }

  // 3. Attempts: prioritized credentials, shared endpoints, fallback credentials (rule 2).
  const attempts: Attempt[] = [];
  pushCredentialAttempts(attempts, groups, selected, model, 'prioritized');

  let policyRemoved = 0;
  if (model !== null) {
    const providerIdx = model.index.providerIdx;
    const seq = order !== null ? sortByRank(n) : null;
    for (let x = 0; x < n; x++) {
      const j = seq === null ? x : (seq[x] as number);
      let st = epStatus[j] as number;
      if (st === 0 && epZdr[j] === 1) st = C_ZDR;
      if (st === 0 && epGate[j] === 1) st = C_NOT_TARGETED;
      if (st === 0) {
        const f = provFlags[providerIdx[j] as number] as number;
        if ((f & F_BYOK_ONLY) !== 0) st = C_BYOK_ONLY;
        else if ((f & F_REQUIRED) !== 0) st = C_REQUIRED;
      }
      if (st === 0) {
        attempts.push(sharedAttempt(model, j));
      } else {
        if (st === C_PROVIDER_POLICY || st === C_DATA_COLLECTION || st === C_ZDR) policyRemoved++;
        excluded.push(sharedExclusion(model, j, st));
      }
    }
  }

  pushCredentialAttempts(attempts, groups, selected, model, 'fallback');

  const plan: RoutePlan = { attempts, excluded };
  if (attempts.length === 0) {
    const errorCode: RouteErrorCode =
      n === 0 ? 'model_not_in_catalog' : policyRemoved > 0 ? 'no_compliant_endpoint' : 'no_available_endpoint';
    plan.error = { code: errorCode, message: ROUTE_ERRORS[errorCode] };
  }
  return plan;
}

/** Decides every credential of one section; returns whether any of them will be attempted. */
function evalCredentials(
  list: readonly PreparedCredential[],
  model: CatalogModel | null,
  excluded: Exclusion[],
): boolean {
  let any = false;
  for (let k = 0; k < list.length; k++) if (evalCredential(list[k] as PreparedCredential, model, excluded)) any = true;
  return any;
}

/** Appends one section's attempted credentials (chosen by evalCredential), provider group by group in rank order. */
function pushCredentialAttempts(
  attempts: Attempt[],
  groups: readonly PreparedProviderGroup[],
  selected: number,
  model: CatalogModel | null,
  section: Section,
): void {
  const { chosen, groupSel } = S;
  for (let s = 0; s < selected; s++) {
    const group = groups[groupSel[s] as number] as PreparedProviderGroup;
    const list = section === 'prioritized' ? group.prioritized : group.fallback;
    for (let k = 0; k < list.length; k++) {
      const c = list[k] as PreparedCredential;
      const j = chosen[c.pos] as number;
      if (j >= 0) attempts.push(credentialAttempt(c, model as CatalogModel, j, section));
    }
  }
}

/** Decides one credential; records its endpoint in `chosen` (or -1) and returns whether it will be attempted. */
function evalCredential(c: PreparedCredential, model: CatalogModel | null, excluded: Exclusion[]): boolean {
  const rq = S;
  const chosen = S.chosen;
  chosen[c.pos] = -1;
  let st = 0;
  if (c.disabled) st = C_DISABLED;
  else if (c.workspaceId !== null && c.workspaceId !== rq.workspaceId) st = C_WORKSPACE;
  else if (c.hashes !== null && !c.hashes.has(rq.apiKeyHash)) st = C_API_KEY;
  else if (c.users !== null && (rq.userId === null || !c.users.has(rq.userId))) st = C_MEMBER;
  if (st !== 0) {
    excluded.push(credentialExclusion(c, st));
    return false;
  }
  const p = c.providerIdx;
  const provFlags = S.provFlags;
  // Rule 6 ignores the model filter; rule 5 applies only to the credential's models.
  if (c.isByokOnly) provFlags[p] = (provFlags[p] as number) | F_BYOK_ONLY;
  if (c.models !== null && !c.models.has(rq.modelSlug)) {
    excluded.push(credentialExclusion(c, C_MODEL));
    return false;
  }
  if (c.isRequired) provFlags[p] = (provFlags[p] as number) | F_REQUIRED;
  const list = model === null ? undefined : model.index.byProvider[p];
  if (list === undefined) {
    excluded.push(credentialExclusion(c, C_NO_ENDPOINT));
    return false;
  }
  const { epStatus, epZdr, epGate, epRank } = S;
  const hasStandard = (model as CatalogModel).index.hasStandard[p] === 1;
  let best = -1;
  let bestRank = NO_RANK;
  let fail = 0;
  for (let k = 0; k < list.length; k++) {
    const j = list[k] as number;
    let est = epStatus[j] as number;
    // Rule 10 exception: a declared-ZDR credential carries a ZDR policy, except for video generation.
    if (est === 0 && epZdr[j] === 1) est = c.declaredZdr ? (rq.video ? C_ZDR_VIDEO : 0) : C_ZDR;
    // Rule 9: untargeted regional endpoints on the global API only for a prioritized credential without a standard one.
    // (With a standard endpoint present, that one is examined first and explains any exclusion.)
    if (est === 0 && epGate[j] === 1) est = c.isFallback ? C_FALLBACK_REGIONAL : hasStandard ? C_NOT_TARGETED : 0;
    if (est !== 0) {
      if (fail === 0) fail = est;
      continue;
    }
    const r = epRank[j] as number;
    if (r < bestRank) {
      best = j;
      bestRank = r;
    }
  }
  if (best < 0) {
    excluded.push(credentialExclusion(c, fail));
    return false;
  }
  chosen[c.pos] = best;
  return true;
}

function lists(entries: readonly string[], e: CatalogEndpoint): boolean {
  for (let i = 0; i < entries.length; i++) {
    const x = entries[i];
    if (x === e.id || x === e.provider) return true;
  }
  return false;
}

/** A region-pinned endpoint is targeted only by its own id, not by the bare provider slug. */
function targeted(order: readonly string[] | null, only: readonly string[] | null, e: CatalogEndpoint): boolean {
  return (order !== null && order.includes(e.id)) || (only !== null && only.includes(e.id));
}

// Ranks are packed as position * 65536 + catalog index in an Int32, so positions are capped (no real order is that long).
const MAX_ORDER_RANK = 0x7ffe;

function rankIn(order: readonly string[], e: CatalogEndpoint): number {
  const len = Math.min(order.length, MAX_ORDER_RANK);
  for (let i = 0; i < len; i++) {
    const x = order[i];
    if (x === e.id || x === e.provider) return i;
  }
  return len;
}

/** The guardrail's allowed/ignored-provider verdict per endpoint of the model, cached on the prepared guardrail. */
function guardrailVerdicts(g: PreparedGuardrail, m: CatalogModel): Uint8Array {
  if (g.blockedFor === m.index) return g.blocked;
  const eps = m.endpoints;
  const out = new Uint8Array(eps.length);
  for (let i = 0; i < eps.length; i++) out[i] = blocks(g, eps[i] as CatalogEndpoint) ? 1 : 0;
  g.blockedFor = m.index;
  g.blocked = out;
  return out;
}

function blocks(g: PreparedGuardrail, e: CatalogEndpoint): boolean {
  if (g.allowed !== null && !g.allowed.has(e.provider) && !g.allowed.has(e.id)) return true;
  return g.ignored.size > 0 && (g.ignored.has(e.provider) || g.ignored.has(e.id));
}

function sortByRank(n: number): Int32Array {
  const { seq, epRank } = S;
  for (let i = 0; i < n; i++) {
    const r = epRank[i] as number;
    let pos = i;
    while (pos > 0 && (epRank[seq[pos - 1] as number] as number) > r) {
      seq[pos] = seq[pos - 1] as number;
      pos--;
    }
    seq[pos] = i;
  }
  return seq;
}

function growEndpointScratch(n: number): void {
  const size = n * 2;
  S.epStatus = new Uint8Array(size);
  S.epZdr = new Uint8Array(size);
  S.epGate = new Uint8Array(size);
  S.epRank = new Int32Array(size);
  S.seq = new Int32Array(size);
}

function credentialAttempt(c: PreparedCredential, m: CatalogModel, j: number, section: Section): CredentialAttempt {
  if (c.attemptsFor !== m.index) {
    c.attemptsFor = m.index;
    c.attempts = [];
  }
  const hit = c.attempts[j] as CredentialAttempt | undefined;
  if (hit !== undefined) return hit;
  const e = m.endpoints[j] as CatalogEndpoint;
  const a: CredentialAttempt = Object.freeze({
    kind: 'credential',
    credentialId: c.id,
    provider: c.provider,
    endpoint: e,
    section,
  });
  c.attempts[j] = a;
  return a;
}

function credentialExclusion(c: PreparedCredential, st: number): Exclusion {
  const hit = c.exclusions[st] as Exclusion | undefined;
  if (hit !== undefined) return hit;
  const rule = RULE_IDS[st - 1] as RuleId;
  const x: Exclusion = Object.freeze({ subject: c.subject, rule, reason: RULES[rule] });
  c.exclusions[st] = x;
  return x;
}

function sharedAttempt(m: CatalogModel, j: number): SharedAttempt {
  const hit = m.index.sharedAttempts[j] as SharedAttempt | undefined;
  if (hit !== undefined) return hit;
  const e = m.endpoints[j] as CatalogEndpoint;
  const a: SharedAttempt = Object.freeze({ kind: 'shared', provider: e.provider, endpoint: e });
  m.index.sharedAttempts[j] = a;
  return a;
}

function sharedExclusion(m: CatalogModel, j: number, st: number): Exclusion {
  const slots = m.index.exclusions[j] as unknown[];
  const hit = slots[st] as Exclusion | undefined;
  if (hit !== undefined) return hit;
  const e = m.endpoints[j] as CatalogEndpoint;
  const rule = RULE_IDS[st - 1] as RuleId;
  const x: Exclusion = Object.freeze({
    subject: Object.freeze({ kind: 'shared' as const, provider: e.provider, endpointId: e.id }),
    rule,
    reason: RULES[rule],
  });
  slots[st] = x;
  return x;
}
