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
import { prepareAccount } from '../../domain/account.ts';
import type { CompiledAccount } from '../../domain/compiled.ts';
import { microsToUsd, usdToMicros } from '../../domain/money.ts';
import { type Applier, createApplier } from '../../kube/apply.ts';
import { type KeySpace, keySpace } from '../../ledger/keys.ts';
import { type Ledger, LedgerUnavailableError, type RestoreEntry } from '../../ledger/ledger.ts';
import { readAccountMonth, readWindowFigures } from '../../ledger/spend-view.ts';
import { INTERVALS, windowOf } from '../../ledger/windows.ts';
import type { AccountSnapshot } from '../compile/pipeline.ts';
import { sameStatus } from '../conditions.ts';
import type { Component } from '../manager.ts';
import { type PeriodicPass, periodicPass } from '../periodic.ts';
import { STATUS_OWNERS } from '../status/ownership.ts';
import { BudgetEvents, createKubeBudgetEventSink } from './budget-events.ts';
import {
  guardrailSpend,
  observeRefusals,
  type SpendWindowStatus,
  withoutTimestamp,
  workspaceSpend,
} from './figures.ts';

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

/**
 * The spend writer, a leader component: every intervalMs, one pass over every account mirrors the ledger's figures
 * into status.spend (restoring a restarted ledger from them first), and hands refusals to the Event writer.
 */
export class SpendStatusWriter implements Component {
  readonly name: string = 'spend status';
  private readonly opts: SpendStatusOptions;
  private readonly keys: KeySpace;
  private readonly clock: () => Date;
  private readonly log: Logger;
  private readonly loop: PeriodicPass;
  /** kind/ns/name → the spend last written (without updatedAt): skips writes the informer has not caught up with. */
  private readonly lastWritten = new Map<string, unknown>();
  /** namespace → the budgets compiled from the cached objects they came from (cached objects are never modified). */
  private readonly compiledViews = new Map<string, { inputs: readonly unknown[]; compiled: CompiledAccount }>();
  private ledgerDown = false;
  /** Accounts validated for the ledger by this writer (their budgets admit requests). */
  private readonly validatedAccounts = new Set<string>();

  constructor(opts: SpendStatusOptions) {
    this.opts = opts;
    this.keys = opts.keys ?? keySpace();
    this.clock = opts.clock ?? (() => new Date());
    this.log = opts.log.child({ component: 'spend-status' });
    this.loop = periodicPass(
      () => this.syncOnce(),
      opts.intervalMs ?? 5000,
      (err) => this.log.error({ err: err instanceof Error ? err.message : String(err) }, 'spend status pass failed'),
    );
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** Asks for a pass now (e.g. a compile brought a new account, whose budgets open only once it is validated). */
  soon(): void {
    this.loop.soon();
  }

  /**
   * Whether this writer has validated the account for the ledger's running process since it started (its budgets
   * admit requests; a new account's answer 503 until then). A later ledger restart is not seen here.
   */
  validated(namespace: string): boolean {
    return this.validatedAccounts.has(namespace);
  }

  /** One pass over every account (also what the timer runs). */
  async syncOnce(): Promise<void> {
    const { log } = this;
    const at = this.clock();
    const namespaces = this.opts.source.accountNamespaces();
    const current = new Set(namespaces);
    for (const ns of this.compiledViews.keys()) if (!current.has(ns)) this.compiledViews.delete(ns);
    for (const ns of this.validatedAccounts) if (!current.has(ns)) this.validatedAccounts.delete(ns);
    for (const ns of namespaces) {
      try {
        await this.syncAccount(ns, at);
        if (this.ledgerDown) log.info('ledger reachable again; spend status resumes');
        this.ledgerDown = false;
      } catch (err) {
        if (err instanceof LedgerUnavailableError) {
          // Keep the last published figures; say so once per outage.
          if (!this.ledgerDown) log.warn({ err: err.message }, 'ledger unreachable: spend status not updated');
          this.ledgerDown = true;
          return;
        }
        log.warn(
          { namespace: ns, err: err instanceof Error ? err.message : String(err) },
          'spend status of an account failed',
        );
      }
    }
    await this.opts.events?.flush(at);
  }

  /** The account's guardrails, workspaces and plan, compiled again only when one of their objects changed. */
  private compiledBudgets(view: AccountBudgetView): CompiledAccount {
    const inputs = [view.account, ...view.workspaces, ...view.guardrails];
    const hit = this.compiledViews.get(view.namespace);
    if (hit && hit.inputs.length === inputs.length && hit.inputs.every((o, i) => o === inputs[i])) return hit.compiled;
    // No credentials and no API keys: the pipeline compiles those (and decodes payloads); spend needs neither.
    const compiled = compileAccount({ ...view, apiKeys: [], credentials: [] });
    this.compiledViews.set(view.namespace, { inputs, compiled });
    return compiled;
  }

  private readonly publish = async (
    kind: 'Account' | 'Workspace' | 'Guardrail' | 'GatewayAPIKey',
    ns: string,
    name: string,
    stored: unknown,
    spend: object,
    at: Date,
  ): Promise<void> => {
    const id = `${kind}/${ns}/${name}`;
    if (sameStatus(withoutTimestamp(stored), spend) || sameStatus(this.lastWritten.get(id), spend)) return;
    try {
      await this.opts.applier.applyStatus(kind, ns, name, { [SPEND_FIELD]: { ...spend, updatedAt: at.toISOString() } });
      this.lastWritten.set(id, spend);
    } catch (err) {
      if ((err as { status?: number }).status === 404) return;
      this.log.warn(
        { kind, namespace: ns, name, err: err instanceof Error ? err.message : String(err) },
        'spend status write failed',
      );
    }
  };

  /**
   * The rebuild after a ledger restart (docs/ledger.md, "Resets"): every current-window counter is raised to at least
   * what status.spend last mirrored, then the account is validated for the running Redis process, which reopens its
   * budgets. A no-op script call when it is already validated; spend lost is what arrived after the last mirror.
   */
  private async restore(snapshot: AccountBudgetView, compiled: CompiledAccount, at: Date): Promise<void> {
    const { keys, log } = this;
    const entries = mirroredEntries(keys, snapshot, compiled, at);
    const result = await this.opts.ledger.restore(keys.validated(compiled.accountId), entries);
    if (!this.validatedAccounts.has(snapshot.namespace)) {
      this.validatedAccounts.add(snapshot.namespace);
      this.opts.onValidated?.(snapshot.namespace);
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
      this.opts.onReset?.(snapshot.namespace, result.raisedCounters, result.largestMicros);
    } else log.info({ namespace: snapshot.namespace }, 'ledger validated for this Redis process (nothing to restore)');
  }

  private async syncAccount(ns: string, at: Date): Promise<void> {
    const { opts, keys } = this;
    const snapshot = opts.source.budgetView(ns);
    const compiled = this.compiledBudgets(snapshot);
    // First, so a restarted ledger's lower figures are never published over the durable copy.
    await this.restore(snapshot, compiled, at);
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
      const stored = (a.status as { spend?: unknown } | undefined)?.spend;
      writes.push(this.publish('Account', ns, a.metadata.name ?? '', stored, accountSpend(month), at));
    }
    // Limits in micros, converted once per compiled account (prepareAccount caches per object).
    const prepared = prepareAccount(compiled);
    const guardrailObjects = new Map(snapshot.guardrails.map((g) => [g.metadata.name ?? '', g]));
    for (const g of prepared.guardrails.values()) {
      const obj = guardrailObjects.get(g.name);
      if (!obj) continue;
      const stored = (obj.status as { spend?: { window?: unknown } } | undefined)?.spend;
      const figures = guardrailSpend(g, at, spend.get(`guardrail/${g.id}`));
      const include = figures.includeByokInBudgets;
      observeRefusals(opts.events, 'Guardrail', obj, [figures.window], [stored?.window], include, at);
      writes.push(this.publish('Guardrail', ns, g.name, stored, figures, at));
    }
    const workspaceObjects = new Map(snapshot.workspaces.map((w) => [w.metadata.name ?? '', w]));
    for (const w of prepared.workspaces.values()) {
      const obj = workspaceObjects.get(w.name);
      if (!obj) continue;
      const stored = (obj.status as { spend?: { windows?: unknown[] } } | undefined)?.spend;
      const figures = workspaceSpend(w, at, spend.get(`workspace/${w.id}`));
      const include = figures.includeByokInBudgets;
      observeRefusals(opts.events, 'Workspace', obj, figures.windows, stored?.windows ?? [], include, at);
      writes.push(this.publish('Workspace', ns, w.name, stored, figures, at));
    }
    writes.push(
      publishKeySpend({ ledger: opts.ledger, keys, publish: this.publish }, snapshot, compiled.accountId, at),
    );
    await Promise.all(writes);
  }
}

/** Account.status.spend: the month's BYOK list cost, fees, shared charges and free allowance. */
function accountSpend(month: NonNullable<Awaited<ReturnType<typeof readAccountMonth>>>): object {
  return {
    month: month.month,
    byokListCostUsd: microsToUsd(month.byokListCostMicros),
    byokFeesUsd: microsToUsd(month.feesMicros),
    sharedChargesUsd: microsToUsd(month.chargedMicros),
    freeAllowanceUsd: microsToUsd(month.freeAllowanceMicros),
    freeAllowanceRemainingUsd: microsToUsd(month.freeAllowanceRemainingMicros),
  };
}

/** What status.spend last mirrored for the current windows: the floors a ledger restart is rebuilt to. */
function mirroredEntries(
  keys: KeySpace,
  snapshot: AccountBudgetView,
  compiled: CompiledAccount,
  at: Date,
): RestoreEntry[] {
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
  return entries;
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
  // Loaded here, not at the top: the Redis client is ~480 modules that an operator without a shared ledger never
  // needs (and every process that imports the operator would load).
  const { createRedisLedger } = await import('../../ledger/redis.ts');
  const ledger = await createRedisLedger({ url: config.redisUrl });
  const events = new BudgetEvents({
    sink: createKubeBudgetEventSink(deps.kubeConfig, {
      instance: deps.instance ?? hostname(),
      canWrite: deps.canWrite,
    }),
    log: deps.log.child({ component: 'budget-events' }),
    ...(config.eventThrottleMs !== undefined ? { throttleMs: config.eventThrottleMs } : {}),
  });
  const writer = new RedisSpendStatus(ledger, {
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
  return writer;
}

/** The writer over a Redis ledger it owns: close() stops it and closes the ledger. */
class RedisSpendStatus extends SpendStatusWriter {
  private readonly ownLedger: Ledger;

  constructor(ledger: Ledger, opts: SpendStatusOptions) {
    super(opts);
    this.ownLedger = ledger;
  }

  async close(): Promise<void> {
    await this.stop();
    await this.ownLedger.close();
  }
}
