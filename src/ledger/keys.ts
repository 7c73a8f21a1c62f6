// Counter keys of the ledger (documented in docs/ledger.md). Every key of one account carries the account id as a
// Redis Cluster hash tag ({...}), so one request's counters live in one slot and one script can touch them all.
import type { BudgetWindow } from './windows.ts';

export const DEFAULT_KEY_PREFIX = 'byok:ledger:';
/** How long a counter outlives its window: covers replica clock skew and replays of records buffered in an outage. */
export const DEFAULT_EXPIRY_MARGIN_MS = 7 * 86_400_000;

export type BudgetScopeKind = 'guardrail' | 'workspace';
/** nonbyok: gateway charges of shared-capacity requests; byok: what BYOK requests would have been charged. */
export type BudgetPart = 'nonbyok' | 'byok';
/** Per calendar month of an account: BYOK list cost (the allowance meter), BYOK fees, shared-capacity charges. */
export type AccountMeter = 'byok_list' | 'fee' | 'charged';

const SCOPE_TAG: Record<BudgetScopeKind, string> = { guardrail: 'gr', workspace: 'ws' };

export interface KeySpace {
  readonly prefix: string;
  budget(accountId: string, scope: BudgetScopeKind, scopeId: string, window: BudgetWindow, part: BudgetPart): string;
  account(accountId: string, month: BudgetWindow, meter: AccountMeter): string;
  /**
   * Which Redis process (run_id) an account's counters were last checked against its durable copy in: admission
   * requires it to name the running one, so a restart (data lost or not) fails closed until the rebuild (ledger.md).
   */
  validated(accountId: string): string;
  /** The set of in-flight reservations held against one budget window. */
  hold(accountId: string, scope: BudgetScopeKind, scopeId: string, window: BudgetWindow): string;
  /** Requests one budget window refused (402): counted by the gateways (ledger/refusals.ts), read by the operator. */
  refused(accountId: string, scope: BudgetScopeKind, scopeId: string, window: BudgetWindow): string;
  /** Of those, the requests refused before the limit was reached (each needed more than was left). */
  refusedOver(accountId: string, scope: BudgetScopeKind, scopeId: string, window: BudgetWindow): string;
  /** What an API key's requests cost in a calendar month at list price (its name: both secrets of a rotation). */
  keySpend(accountId: string, keyName: string, month: BudgetWindow): string;
  /** One of an API key's rate-limit sets (its name: both secrets of a rotation count together). */
  rate(accountId: string, keyName: string, set: 'rpm' | 'tpm' | 'tpmsum' | 'inflight'): string;
  /** Expiry of a counter of this window. */
  expiresAt(window: BudgetWindow): number | null;
}

export function keySpace(opts: { prefix?: string; expiryMarginMs?: number } = {}): KeySpace {
  const prefix = opts.prefix ?? DEFAULT_KEY_PREFIX;
  const margin = opts.expiryMarginMs ?? DEFAULT_EXPIRY_MARGIN_MS;
  return {
    prefix,
    budget: (accountId, scope, scopeId, window, part) =>
      `${prefix}{${accountId}}:${SCOPE_TAG[scope]}:${scopeId}:${window.id}:${part}`,
    validated: (accountId) => `${prefix}{${accountId}}:validated`,
    hold: (accountId, scope, scopeId, window) =>
      `${prefix}{${accountId}}:${SCOPE_TAG[scope]}:${scopeId}:${window.id}:holds`,
    refused: (accountId, scope, scopeId, window) =>
      `${prefix}{${accountId}}:${SCOPE_TAG[scope]}:${scopeId}:${window.id}:refused`,
    refusedOver: (accountId, scope, scopeId, window) =>
      `${prefix}{${accountId}}:${SCOPE_TAG[scope]}:${scopeId}:${window.id}:refused_over`,
    account: (accountId, month, meter) => {
      if (month.interval !== 'monthly') throw new RangeError('account meters are kept per calendar month');
      return `${prefix}{${accountId}}:acct:${month.id}:${meter}`;
    },
    keySpend: (accountId, keyName, month) => {
      if (month.interval !== 'monthly') throw new RangeError('key spend is kept per calendar month');
      return `${prefix}{${accountId}}:key:${keyName}:${month.id}:spend`;
    },
    rate: (accountId, keyName, set) => `${prefix}{${accountId}}:key:${keyName}:${set}`,
    expiresAt: (window) => (window.endsAt === null ? null : window.endsAt + margin),
  };
}

/**
 * How long the id of a record or reservation is remembered (docs/ledger.md, "Exactly once"): longer than any replay
 * can arrive after its first application (the replay backoff, 5 s; the reservation TTL, 15 min). Ids live in sets per
 * period of this length and each set lapses at the end of the next period, so an id is kept between one and two.
 */
export const ID_RETENTION_MS = 20 * 60_000;

/**
 * How long a journaled record's landed mark outlives its last write when its journal never deletes it (the pod and
 * its journal gone for good): past a month and the counters' margin, when the record's own counters have lapsed too.
 * A journal deletes its marks with each segment it deletes, so they normally live for seconds.
 */
export const KEPT_ID_TTL_MS = 40 * 86_400_000;

/** The account part of a key: everything up to its `{<accountId>}` hash tag ('' without one). */
export function idNamespace(key: string): string {
  const open = key.indexOf('{');
  if (open < 0) return '';
  const close = key.indexOf('}', open + 1);
  return close > open + 1 ? key.slice(0, close + 1) : '';
}

/** Where the ids of an account's writes are remembered (Redis): the current period's set, the previous one, and when the current one lapses. */
export interface IdSets {
  current: string;
  previous: string;
  expiresAt: number;
}

/**
 * The id sets of the account a key belongs to, `<prefix>{<accountId>}:ids:<period>`: under the account's hash tag,
 * so ids of two accounts never meet and one script reaches them with the counters (one Redis Cluster slot).
 */
export function idSets(anyKeyOfAccount: string, now: number, retentionMs = ID_RETENTION_MS): IdSets {
  const ns = idNamespace(anyKeyOfAccount);
  const period = Math.floor(now / retentionMs);
  return { current: `${ns}:ids:${period}`, previous: `${ns}:ids:${period - 1}`, expiresAt: (period + 2) * retentionMs };
}
