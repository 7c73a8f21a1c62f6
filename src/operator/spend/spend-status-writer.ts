// Publishes spend from the shared (Redis) ledger into CR status on the leader: Account.status.spend (the month:
// BYOK list cost, fees, allowance left), Workspace.status.spend (every interval) and Guardrail.status.spend (its
// budget window). At most every intervalMs, and an object is written only when its figures changed.
//
// Field ownership: these writes use their own field manager (SPEND_FIELD_MANAGER) and apply only status.spend.
// The reconcilers apply the rest of status under FIELD_MANAGER; with Server-Side Apply a manager only ever removes
// fields it owns, so neither side drops the other's fields. The reconcilers compare their desired status with the
// stored one without status.spend (ownedStatus), so spend updates do not make them rewrite status. Who owns which
// field: status/ownership.ts.
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import { compileAccount } from '../../compiler/index.ts';
import { type PreparedGuardrail, type PreparedWorkspace, prepareAccount } from '../../domain/account.ts';
import { decideBudget } from '../../domain/budgets.ts';
import type { BudgetInterval, CompiledAccount } from '../../domain/compiled.ts';
import { type Micros, microsToUsd, usdToMicros } from '../../domain/money.ts';
import { type Applier, createApplier } from '../../kube/apply.ts';
import { type KeySpace, keySpace } from '../../ledger/keys.ts';
import { type Ledger, LedgerUnavailableError, type RestoreEntry } from '../../ledger/ledger.ts';
import { createRedisLedger } from '../../ledger/redis.ts';
import { readAccountMonth, readWindowFigures, type WindowFigures } from '../../ledger/spend-view.ts';
import { INTERVALS, windowOf } from '../../ledger/windows.ts';
import type { AccountSnapshot } from '../compile/pipeline.ts';
import { sameStatus } from '../conditions.ts';
import { periodicPass } from '../periodic.ts';
import { STATUS_OWNERS } from '../status/ownership.ts';
import { BudgetEvents, type BudgetRefusals, createKubeBudgetEventSink } from './budget-events.ts';

export const SPEND_FIELD_MANAGER = STATUS_OWNERS.spend.fieldManager;
const [SPEND_FIELD] = STATUS_OWNERS.spend.fields;

/** The reconcilers' part of a status: status/ownership.ts (re-exported for callers that still import it from here). */
export { ownedStatus } from '../status/ownership.ts';

/** An account's state without its credentials: what the spend writer reads (no key material, nothing to decode). */
export type AccountBudgetView = Omit<AccountSnapshot, 'credentials'>;

/** Where the spend writer reads accounts: from the operator's caches (createAccountStateSource), never by I/O. */
export interface SpendStateSource {
  accountNamespaces(): string[];
  budgetView(namespace: string): AccountBudgetView;
}

export interface SpendStatusOptions {
  source: SpendStateSource;
  ledger: Ledger;
  /** Fenced by leadership, with SPEND_FIELD_MANAGER. */
  applier: Applier;
  log: Logger;
  keys?: KeySpace;
  /** Default 5000 ms. */
  intervalMs?: number;
  clock?: () => Date;
  /** Told when a rebuild restored lost spend into an account's counters (how many, and the largest raise in micros). */
  onReset?: (namespace: string, raisedCounters: number, largestMicros: number) => void;
  /** Turns the refusals each pass reads into BudgetExceeded Events; absent: refusals are only mirrored in status. */
  events?: BudgetEvents;
  /** Told the first time an account is validated (its budgets open): GatewayAPIKey Delivered waits for it. */
  onValidated?: (namespace: string) => void;
}

export interface SpendStatusWriter {
  start(): void;
  stop(): Promise<void>;
  /** One pass over every account (also what the timer runs). */
  syncOnce(): Promise<void>;
  /** Asks for a pass now (e.g. a compile brought a new account, whose budgets open only once it is validated). */
  soon(): void;
  /**
   * Whether this writer has validated the account for the ledger's running process since it started (its budgets
   * admit requests; a new account's answer 503 until then). A later ledger restart is not seen here.
   */
  validated(namespace: string): boolean;
}

interface SpendWindowStatus {
  interval: BudgetInterval;
  window: string;
  limitUsd?: number;
  nonByokUsd: number;
  byokUsd: number;
  countedUsd: number;
  blocked: boolean;
  /** RFC 3339; absent for lifetime. */
  resetsAt?: string;
  /** Requests this budget refused (402) in the window; absent when none. */
  refusedRequests?: number;
  /** Of those, the ones refused before the limit was reached; absent when none. */
  overBudgetRequests?: number;
}

const ZERO: WindowFigures = { nonByokMicros: 0, byokMicros: 0, refused: 0, refusedOver: 0 };

/** A budget limit as configured (what status shows) and in micros (what decides), converted once per compile. */
interface Limit {
  usd: number;
  micros: Micros;
}

function windowStatus(
  interval: BudgetInterval,
  at: Date,
  spend: WindowFigures,
  limit: Limit | undefined,
  includeByok: boolean,
): SpendWindowStatus {
  const counted = spend.nonByokMicros + (includeByok ? spend.byokMicros : 0);
  // decideBudget is the one definition of "blocked" (counted total has reached the limit).
  const blocked =
    limit !== undefined &&
    decideBudget({
      guardrails: [],
      workspace: {
        workspace: {
          id: '',
          name: '',
          budgets: [{ interval, limitMicros: limit.micros }],
          includeByokInBudgets: includeByok,
        },
        spend: { [interval]: spend },
      },
    }).blockedBy !== null;
  const window = windowOf(interval, at);
  return {
    interval,
    window: window.id,
    ...(window.endsAt !== null ? { resetsAt: new Date(window.endsAt).toISOString() } : {}),
    ...(limit !== undefined ? { limitUsd: limit.usd } : {}),
    nonByokUsd: microsToUsd(spend.nonByokMicros),
    byokUsd: microsToUsd(spend.byokMicros),
    countedUsd: microsToUsd(counted),
    blocked,
    ...(spend.refused > 0 ? { refusedRequests: spend.refused } : {}),
    ...(spend.refusedOver > 0 ? { overBudgetRequests: Math.min(spend.refusedOver, spend.refused) } : {}),
  };
}

function guardrailSpend(
  g: PreparedGuardrail,
  at: Date,
  spend: Partial<Record<BudgetInterval, WindowFigures>> | undefined,
): { window: SpendWindowStatus; includeByokInBudgets: boolean; blocked: boolean } {
  const interval = g.budget?.resetInterval ?? 'monthly';
  const include = g.budget?.includeByokInBudgets ?? false;
  const limit =
    g.budget !== null && g.source.budget !== null
      ? { usd: g.source.budget.limitUsd, micros: g.budget.limitMicros }
      : undefined;
  const window = windowStatus(interval, at, spend?.[interval] ?? ZERO, limit, include);
  return { window, includeByokInBudgets: include, blocked: window.blocked };
}

function workspaceSpend(
  ws: PreparedWorkspace,
  at: Date,
  spend: Partial<Record<BudgetInterval, WindowFigures>> | undefined,
): { includeByokInBudgets: boolean; blocked: boolean; windows: SpendWindowStatus[] } {
  const limits = new Map(
    ws.budgets.map((b, i) => [b.interval, { usd: ws.source.budgets[i]!.limitUsd, micros: b.limitMicros }]),
  );
  const windows = INTERVALS.map((i) => windowStatus(i, at, spend?.[i] ?? ZERO, limits.get(i), ws.includeByokInBudgets));
  return { includeByokInBudgets: ws.includeByokInBudgets, blocked: windows.some((w) => w.blocked), windows };
}

type BudgetObject = { metadata: { uid?: string; name?: string; namespace?: string }; status?: unknown };

/**
 * Hands the refusal counter of each limited window to the Event writer (operator/spend/budget-events.ts), with what
 * status.spend last mirrored for the same window: the base a new leader counts from.
 */
function observeRefusals(
  events: BudgetEvents | undefined,
  kind: BudgetRefusals['regarding']['kind'],
  obj: BudgetObject,
  windows: readonly SpendWindowStatus[],
  stored: readonly unknown[],
  includesByok: boolean,
  at: Date,
): void {
  const uid = obj.metadata.uid;
  if (!events || !uid) return;
  for (const w of windows) {
    if (w.limitUsd === undefined) continue;
    const before = stored.find(
      (s): s is Partial<SpendWindowStatus> =>
        typeof s === 'object' &&
        s !== null &&
        (s as SpendWindowStatus).interval === w.interval &&
        (s as SpendWindowStatus).window === w.window,
    );
    const base = {
      regarding: { kind, namespace: obj.metadata.namespace ?? '', name: obj.metadata.name ?? '', uid },
      interval: w.interval,
      window: { id: w.window, endsAt: windowOf(w.interval, at).endsAt },
      limitUsd: w.limitUsd,
      includesByok,
    };
    // Two series per window: the limit reached (all refusals but the over-budget ones), and requests too large for what was left.
    const over = w.overBudgetRequests ?? 0;
    const overBefore = before === undefined ? undefined : (before.overBudgetRequests ?? 0);
    events.observe(
      {
        ...base,
        reason: 'reached',
        refused: (w.refusedRequests ?? 0) - over,
        mirrored: before === undefined ? undefined : (before.refusedRequests ?? 0) - (overBefore ?? 0),
      },
      at,
    );
    events.observe({ ...base, reason: 'over', refused: over, mirrored: overBefore }, at);
  }
}

const withoutTimestamp = (spend: unknown): unknown => {
  if (spend === null || typeof spend !== 'object') return spend;
  const { updatedAt: _updatedAt, ...rest } = spend as Record<string, unknown>;
  return rest;
};

/**
 * GatewayAPIKey.status.spend: each key's month at list price (both secrets of a rotation count under its name).
 * Written for a key that has spent this month, or to set a stored figure of an earlier month back to 0.
 */
async function publishKeySpend(
  deps: {
    ledger: Ledger;
    keys: KeySpace;
    publish: (
      kind: 'GatewayAPIKey',
      ns: string,
      name: string,
      stored: unknown,
      spend: object,
      at: Date,
    ) => Promise<void>;
  },
  snapshot: AccountBudgetView,
  accountId: string,
  at: Date,
): Promise<void> {
  if (snapshot.apiKeys.length === 0) return;
  const month = windowOf('monthly', at);
  const totals = await deps.ledger.read(
    snapshot.apiKeys.map((k) => deps.keys.keySpend(accountId, k.metadata.name ?? '', month)),
  );
  await Promise.all(
    snapshot.apiKeys.map((k, i) => {
      const stored = (k.status as { spend?: unknown } | undefined)?.spend;
      const micros = totals[i] ?? 0;
      if (micros === 0 && stored === undefined) return undefined;
      return deps.publish(
        'GatewayAPIKey',
        snapshot.namespace,
        k.metadata.name ?? '',
        stored,
        { month: month.id.slice(1), spentUsd: microsToUsd(micros) },
        at,
      );
    }),
  );
}

export function createSpendStatusWriter(opts: SpendStatusOptions): SpendStatusWriter {
  const keys = opts.keys ?? keySpace();
  const clock = opts.clock ?? (() => new Date());
  const intervalMs = opts.intervalMs ?? 5000;
  const log = opts.log.child({ component: 'spend-status' });
  /** kind/ns/name → the spend last written (without updatedAt): skips writes the informer has not caught up with. */
  const lastWritten = new Map<string, unknown>();
  /** namespace → the budgets compiled from the cached objects they came from (cached objects are never modified). */
  const compiledViews = new Map<string, { inputs: readonly unknown[]; compiled: CompiledAccount }>();
  let ledgerDown = false;
  /** Accounts validated for the ledger by this writer (their budgets admit requests). */
  const validated = new Set<string>();

  /** The account's guardrails, workspaces and plan, compiled again only when one of their objects changed. */
  function compiledBudgets(view: AccountBudgetView): CompiledAccount {
    const inputs = [view.account, ...view.workspaces, ...view.guardrails];
    const hit = compiledViews.get(view.namespace);
    if (hit && hit.inputs.length === inputs.length && hit.inputs.every((o, i) => o === inputs[i])) return hit.compiled;
    // No credentials and no API keys: the pipeline compiles those (and decodes payloads); spend needs neither.
    const compiled = compileAccount({ ...view, apiKeys: [], credentials: [] });
    compiledViews.set(view.namespace, { inputs, compiled });
    return compiled;
  }

  async function publish(
    kind: 'Account' | 'Workspace' | 'Guardrail' | 'GatewayAPIKey',
    ns: string,
    name: string,
    stored: unknown,
    spend: object,
    at: Date,
  ): Promise<void> {
    const id = `${kind}/${ns}/${name}`;
    if (sameStatus(withoutTimestamp(stored), spend) || sameStatus(lastWritten.get(id), spend)) return;
    try {
      await opts.applier.applyStatus(kind, ns, name, { [SPEND_FIELD]: { ...spend, updatedAt: at.toISOString() } });
      lastWritten.set(id, spend);
    } catch (err) {
      if ((err as { status?: number }).status === 404) return;
      log.warn(
        { kind, namespace: ns, name, err: err instanceof Error ? err.message : String(err) },
        'spend status write failed',
      );
    }
  }

  /**
   * The rebuild after a ledger restart (docs/ledger.md, "Resets"): every current-window counter is raised to at least
   * what status.spend last mirrored, then the account is validated for the running Redis process, which reopens its
   * budgets. A no-op script call when it is already validated; spend lost is what arrived after the last mirror.
   */
  async function restore(snapshot: AccountBudgetView, compiled: CompiledAccount, at: Date): Promise<void> {
    const entries: RestoreEntry[] = [];
    const add = (key: string, usd: unknown, window: ReturnType<typeof windowOf>) => {
      if (typeof usd === 'number' && Number.isFinite(usd) && usd > 0)
        entries.push({ key, floorMicros: usdToMicros(usd), expiresAt: keys.expiresAt(window) });
    };
    const mirrored = (w: unknown, scope: 'guardrail' | 'workspace', id: string) => {
      const s = w as Partial<SpendWindowStatus> | undefined;
      if (!s?.interval || !INTERVALS.includes(s.interval)) return;
      const window = windowOf(s.interval, at);
      if (s.window !== window.id) return; // an earlier window: not read for admission any more
      add(keys.budget(compiled.accountId, scope, id, window, 'nonbyok'), s.nonByokUsd, window);
      add(keys.budget(compiled.accountId, scope, id, window, 'byok'), s.byokUsd, window);
    };
    const byName = <T extends { metadata: { name?: string }; status?: unknown }>(list: T[]) =>
      new Map(list.map((o) => [o.metadata.name ?? '', o]));
    const guardrailObjects = byName(snapshot.guardrails);
    for (const g of compiled.guardrails)
      mirrored(
        (guardrailObjects.get(g.name)?.status as { spend?: { window?: unknown } } | undefined)?.spend?.window,
        'guardrail',
        g.id,
      );
    const workspaceObjects = byName(snapshot.workspaces);
    for (const w of compiled.workspaces)
      for (const win of (workspaceObjects.get(w.name)?.status as { spend?: { windows?: unknown[] } } | undefined)?.spend
        ?.windows ?? [])
        mirrored(win, 'workspace', w.id);
    const month = windowOf('monthly', at);
    for (const k of snapshot.apiKeys) {
      const s = (k.status as { spend?: { month?: string; spentUsd?: unknown } } | undefined)?.spend;
      if (s && `m${s.month}` === month.id)
        add(keys.keySpend(compiled.accountId, k.metadata.name ?? '', month), s.spentUsd, month);
    }
    const acct = (
      snapshot.account?.status as
        | { spend?: { month?: string; byokListCostUsd?: unknown; byokFeesUsd?: unknown; sharedChargesUsd?: unknown } }
        | undefined
    )?.spend;
    if (acct && `m${acct.month}` === month.id) {
      add(keys.account(compiled.accountId, month, 'byok_list'), acct.byokListCostUsd, month);
      add(keys.account(compiled.accountId, month, 'fee'), acct.byokFeesUsd, month);
      add(keys.account(compiled.accountId, month, 'charged'), acct.sharedChargesUsd, month);
    }
    const result = await opts.ledger.restore(keys.validated(compiled.accountId), entries);
    if (!validated.has(snapshot.namespace)) {
      validated.add(snapshot.namespace);
      opts.onValidated?.(snapshot.namespace);
    }
    if (result.alreadyValid) return;
    if (result.raisedCounters > 0) {
      log.warn(
        {
          namespace: snapshot.namespace,
          counters: result.raisedCounters,
          largest_usd: microsToUsd(result.largestMicros),
        },
        'ledger reset: counters rebuilt from status.spend; spend since the last mirror is lost',
      );
      opts.onReset?.(snapshot.namespace, result.raisedCounters, result.largestMicros);
    } else log.info({ namespace: snapshot.namespace }, 'ledger validated for this Redis process (nothing to restore)');
  }

  async function syncAccount(ns: string, at: Date): Promise<void> {
    const snapshot = opts.source.budgetView(ns);
    const compiled = compiledBudgets(snapshot);
    // First, so a restarted ledger's lower figures are never published over the durable copy.
    await restore(snapshot, compiled, at);
    const scopes = [
      ...compiled.guardrails.map((g) => ({
        scope: 'guardrail' as const,
        id: g.id,
        intervals: [g.budget?.resetInterval ?? 'monthly'],
      })),
      ...compiled.workspaces.map((w) => ({ scope: 'workspace' as const, id: w.id, intervals: INTERVALS })),
    ];
    const [spend, month] = await Promise.all([
      readWindowFigures(opts.ledger, keys, compiled.accountId, scopes, at),
      snapshot.account
        ? readAccountMonth(opts.ledger, keys, compiled.accountId, compiled.plan, at)
        : Promise.resolve(null),
    ]);
    const writes: Promise<void>[] = [];
    if (snapshot.account && month) {
      const a = snapshot.account;
      writes.push(
        publish(
          'Account',
          ns,
          a.metadata.name ?? '',
          (a.status as { spend?: unknown } | undefined)?.spend,
          {
            month: month.month,
            byokListCostUsd: microsToUsd(month.byokListCostMicros),
            byokFeesUsd: microsToUsd(month.feesMicros),
            sharedChargesUsd: microsToUsd(month.chargedMicros),
            freeAllowanceUsd: microsToUsd(month.freeAllowanceMicros),
            freeAllowanceRemainingUsd: microsToUsd(month.freeAllowanceRemainingMicros),
          },
          at,
        ),
      );
    }
    // Limits in micros, converted once per compiled account (prepareAccount caches per object).
    const prepared = prepareAccount(compiled);
    const guardrailObjects = new Map(snapshot.guardrails.map((g) => [g.metadata.name ?? '', g]));
    for (const g of prepared.guardrails.values()) {
      const obj = guardrailObjects.get(g.name);
      if (!obj) continue;
      const stored = (obj.status as { spend?: { window?: unknown } } | undefined)?.spend;
      const figures = guardrailSpend(g, at, spend.get(`guardrail/${g.id}`));
      observeRefusals(
        opts.events,
        'Guardrail',
        obj,
        [figures.window],
        [stored?.window],
        figures.includeByokInBudgets,
        at,
      );
      writes.push(publish('Guardrail', ns, g.name, stored, figures, at));
    }
    const workspaceObjects = new Map(snapshot.workspaces.map((w) => [w.metadata.name ?? '', w]));
    for (const w of prepared.workspaces.values()) {
      const obj = workspaceObjects.get(w.name);
      if (!obj) continue;
      const stored = (obj.status as { spend?: { windows?: unknown[] } } | undefined)?.spend;
      const figures = workspaceSpend(w, at, spend.get(`workspace/${w.id}`));
      observeRefusals(
        opts.events,
        'Workspace',
        obj,
        figures.windows,
        stored?.windows ?? [],
        figures.includeByokInBudgets,
        at,
      );
      writes.push(publish('Workspace', ns, w.name, stored, figures, at));
    }
    writes.push(publishKeySpend({ ledger: opts.ledger, keys, publish }, snapshot, compiled.accountId, at));
    await Promise.all(writes);
  }

  async function syncOnce(): Promise<void> {
    const at = clock();
    const namespaces = opts.source.accountNamespaces();
    const current = new Set(namespaces);
    for (const ns of compiledViews.keys()) if (!current.has(ns)) compiledViews.delete(ns);
    for (const ns of validated) if (!current.has(ns)) validated.delete(ns);
    for (const ns of namespaces) {
      try {
        await syncAccount(ns, at);
        if (ledgerDown) log.info('ledger reachable again; spend status resumes');
        ledgerDown = false;
      } catch (err) {
        if (err instanceof LedgerUnavailableError) {
          // Keep the last published figures; say so once per outage.
          if (!ledgerDown) log.warn({ err: err.message }, 'ledger unreachable: spend status not updated');
          ledgerDown = true;
          return;
        }
        log.warn(
          { namespace: ns, err: err instanceof Error ? err.message : String(err) },
          'spend status of an account failed',
        );
      }
    }
    await opts.events?.flush(at);
  }

  return {
    syncOnce,
    validated: (ns) => validated.has(ns),
    ...periodicPass(syncOnce, intervalMs, (err) =>
      log.error({ err: err instanceof Error ? err.message : String(err) }, 'spend status pass failed'),
    ),
  };
}

export interface SpendStatusConfig {
  /** The gateways' shared ledger, e.g. redis://ledger:6379/0. */
  redisUrl: string;
  keyPrefix?: string;
  intervalMs?: number;
  /** At most one BudgetExceeded Event write per object per this many ms; default 60000. */
  eventThrottleMs?: number;
}

/** The writer over a Redis ledger, with its own fenced applier; run.ts starts it on leading and stops it after. */
export async function createRedisSpendStatus(
  config: SpendStatusConfig,
  deps: {
    kubeConfig: Parameters<typeof createApplier>[0];
    canWrite: () => boolean;
    source: SpendStateSource;
    log: Logger;
    onReset?: SpendStatusOptions['onReset'];
    onValidated?: SpendStatusOptions['onValidated'];
    /** reportingInstance of the BudgetExceeded Events (the operator's identity); default the host name. */
    instance?: string;
  },
): Promise<SpendStatusWriter & { close(): Promise<void> }> {
  const ledger = await createRedisLedger({ url: config.redisUrl });
  const events = new BudgetEvents({
    sink: createKubeBudgetEventSink(deps.kubeConfig, {
      instance: deps.instance ?? hostname(),
      canWrite: deps.canWrite,
    }),
    log: deps.log.child({ component: 'budget-events' }),
    ...(config.eventThrottleMs !== undefined ? { throttleMs: config.eventThrottleMs } : {}),
  });
  const writer = createSpendStatusWriter({
    source: deps.source,
    ledger,
    applier: createApplier(deps.kubeConfig, { fieldManager: SPEND_FIELD_MANAGER, canWrite: deps.canWrite }),
    log: deps.log,
    ...(deps.onReset ? { onReset: deps.onReset } : {}),
    ...(deps.onValidated ? { onValidated: deps.onValidated } : {}),
    events,
    keys: keySpace(config.keyPrefix !== undefined ? { prefix: config.keyPrefix } : {}),
    ...(config.intervalMs !== undefined ? { intervalMs: config.intervalMs } : {}),
  });
  return {
    ...writer,
    async close() {
      await writer.stop();
      await ledger.close();
    },
  };
}
