// The SpendGate (src/contract/spend-gate.ts) over a Ledger: admit reads the current windows of a request's budgets
// and asks decideBudget; record charges the BYOK fee against the account's month-to-date BYOK list cost and adds
// the request to every window of its guardrails and workspace. Outage behaviour (docs/ledger.md):
// - admit fails closed by default: a request under at least one budget limit is refused with
//   LedgerUnavailableError (the gateway answers 503) rather than risk spend past a limit; a request under no
//   budget limit never reads the ledger and is unaffected. `admitWhenUnavailable: 'open'` admits instead.
// - record never drops silently: a failed write is queued in order and replayed with backoff; its promise settles
//   when the replay lands (with the fee computed then, from the true month-to-date). The queue is bounded: past
//   maxPendingRecords the oldest record is dropped, counted in byok_ledger_records_dropped_total, and rejected.
// - every write carries the request's generation id, so a write that timed out but ran, and its replays, count once;
//   a reservation that failed as unavailable is released (docs/ledger.md, "Exactly once").
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Logger } from 'pino';
import { byokCharge } from '../domain/billing.ts';
import { budgetContributionMicros, budgetScopes, decideBudget, type BudgetCheck } from '../domain/budgets.ts';
import type { BudgetedGuardrail, BudgetedWorkspace } from '../domain/account.ts';
import type { CompiledAccount } from '../domain/index.ts';
import type { BudgetInterval } from '../domain/model.ts';
import { assertNonNegativeMicros, type Micros } from '../domain/money.ts';
import type { AdmitDecision, AdmitRequest, FinishedRequest, RecordedSpend, Reservation, SpendGate } from '../contract/spend-gate.ts';
import { keySpace, type KeySpace } from './keys.ts';
import { LedgerResetError, LedgerUnavailableError, type CounterIncrement, type HoldCheck, type Ledger } from './ledger.ts';
import { readWindows, type ScopeRef } from './spend-view.ts';
import { INTERVALS, windowsAt, type DayWindows } from './windows.ts';

export interface SpendGateOptions {
  keys?: KeySpace;
  /** What admit does when the ledger cannot be read; default 'closed'. */
  admitWhenUnavailable?: 'closed' | 'open';
  /** Records kept for replay during an outage; default 10000. */
  maxPendingRecords?: number;
  /** How long a reservation holds budget room when nothing settles it (a gateway that crashed); default 15 min. */
  reservationTtlMs?: number;
  /** Replay backoff bounds in ms; default 100 to 5000. */
  retryMinMs?: number;
  retryMaxMs?: number;
  registry?: Registry;
  logger?: Logger;
}

/** How long a reservation holds budget room when nothing settles it (a gateway that crashed mid-request). */
export const RESERVATION_TTL_MS = 15 * 60_000;

/** Releases tried for a reservation whose caller gave up (backoff from retryMinMs to retryMaxMs between them). */
const ABANDON_TRIES = 8;

export interface LedgerSpendGate extends SpendGate {
  /** Records waiting for the ledger to come back. */
  pendingRecords(): number;
  /** Resolves when no record is waiting (or rejects after timeoutMs). */
  drain(timeoutMs?: number): Promise<void>;
}

/** One budget window's ledger keys for one scope. */
interface WindowKeys {
  nonbyok: string;
  byok: string;
  /** [nonbyok, byok]: what a budget that includes BYOK counts. */
  both: readonly string[];
  hold: string;
  expiresAt: number | null;
}

type ScopeKeys = { windows: DayWindows; accountId: string } & Record<BudgetInterval, WindowKeys>;

interface AccountKeys {
  windows: DayWindows;
  validated: string;
  byokList: string;
  fee: string;
  charged: string;
  expiresAt: number | null;
}

interface Pending {
  req: FinishedRequest;
  resolve(spend: RecordedSpend): void;
  reject(err: Error): void;
}

interface GateMetrics {
  unavailable: Counter<'op'>;
  admittedOpen: Counter;
  dropped: Counter;
  pending: Gauge;
  resetRefusals: Counter;
}

function createMetrics(registry: Registry | undefined): GateMetrics {
  const registers = registry ? [registry] : [];
  return {
    unavailable: new Counter({ name: 'byok_ledger_unavailable_total', help: 'Ledger operations that failed because the ledger was unreachable.', labelNames: ['op'], registers }),
    admittedOpen: new Counter({ name: 'byok_ledger_admitted_unchecked_total', help: 'Requests admitted without a budget check while the ledger was unreachable (fail open).', registers }),
    dropped: new Counter({ name: 'byok_ledger_records_dropped_total', help: 'Finished requests whose spend was never recorded (replay queue full or gate closed).', registers }),
    pending: new Gauge({ name: 'byok_ledger_pending_records', help: 'Finished requests waiting for the ledger to come back.', registers }),
    resetRefusals: new Counter({ name: 'byok_ledger_reset_refusals_total', help: 'Budgeted requests refused (503) because the ledger restarted and the operator has not rebuilt it from status yet.', registers }),
  };
}

function budgetRefs(guardrails: readonly BudgetedGuardrail[], workspace: BudgetedWorkspace | null): ScopeRef[] {
  const refs: ScopeRef[] = [];
  for (const g of guardrails) if (g.budget !== null) refs.push({ scope: 'guardrail', id: g.id, intervals: [g.budget.resetInterval] });
  if (workspace !== null && workspace.budgets.length > 0) {
    refs.push({ scope: 'workspace', id: workspace.id, intervals: [...new Set<BudgetInterval>(workspace.budgets.map((b) => b.interval))] });
  }
  return refs;
}

const heldKeys = (checks: readonly HoldCheck[]) => checks.filter((c) => c.amount > 0).map((c) => c.holdKey);

/**
 * Drops a reservation its caller gave up on, retrying while the ledger is unreachable (a few tries: a reservation
 * that never reached the ledger lands nowhere). Off the request path: the caller's 503 does not wait for it.
 */
function abandon(ledger: Ledger, reservation: Reservation, retry: { minMs: number; maxMs: number }, stopped: () => boolean, log: Logger | undefined): void {
  if (reservation.holdKeys.length === 0) return;
  let delay = retry.minMs;
  let tries = 0;
  const attempt = (): void => {
    ledger.release(reservation.id, reservation.amountMicros, reservation.holdKeys).catch((err: unknown) => {
      if (err instanceof LedgerUnavailableError && !stopped() && ++tries < ABANDON_TRIES) {
        setTimeout(attempt, delay).unref();
        delay = Math.min(delay * 2, retry.maxMs);
        return;
      }
      log?.warn({ generation_id: reservation.id, err: err instanceof Error ? err.message : String(err) }, 'abandoned reservation not released: it lapses at its expiry');
    });
  };
  attempt();
}

export function createSpendGate(ledger: Ledger, opts: SpendGateOptions = {}): LedgerSpendGate {
  const keys = opts.keys ?? keySpace();
  const failOpen = opts.admitWhenUnavailable === 'open';
  const maxPending = opts.maxPendingRecords ?? 10_000;
  const retryMin = opts.retryMinMs ?? 100;
  const retryMax = opts.retryMaxMs ?? 5000;
  const metrics = createMetrics(opts.registry);
  const log = opts.logger?.child({ component: 'ledger' });
  const queue: Pending[] = [];
  let retryTimer: NodeJS.Timeout | undefined;
  let retryDelay = retryMin;
  let replaying = false;
  let closed = false;
  const drainWaiters = new Set<() => void>();

  // The ledger keys of a budget scope (a guardrail or workspace of a loaded routing config) in today's windows, built
  // once per scope and day instead of per request: the same string objects every time, so the counters' lookups hash
  // nothing new (bench/ledger.ts). Keyed by the scope object: a config reload brings new objects and new keys.
  const scopeKeyCache = new WeakMap<object, ScopeKeys>();
  const accountKeyCache = new WeakMap<object, AccountKeys>();

  function scopeKeys(accountId: string, scope: 'guardrail' | 'workspace', owner: { id: string }, windows: DayWindows): ScopeKeys {
    const hit = scopeKeyCache.get(owner);
    if (hit?.windows === windows && hit.accountId === accountId) return hit;
    const keysOf = (interval: BudgetInterval): WindowKeys => {
      const w = windows[interval];
      const nonbyok = keys.budget(accountId, scope, owner.id, w, 'nonbyok');
      const byok = keys.budget(accountId, scope, owner.id, w, 'byok');
      return { nonbyok, byok, both: [nonbyok, byok], hold: keys.hold(accountId, scope, owner.id, w), expiresAt: keys.expiresAt(w) };
    };
    const built: ScopeKeys = { windows, accountId, daily: keysOf('daily'), weekly: keysOf('weekly'), monthly: keysOf('monthly'), lifetime: keysOf('lifetime') };
    scopeKeyCache.set(owner, built);
    return built;
  }

  function accountKeys(account: CompiledAccount, windows: DayWindows): AccountKeys {
    const hit = accountKeyCache.get(account);
    if (hit?.windows === windows) return hit;
    const month = windows.monthly;
    const built: AccountKeys = {
      windows,
      validated: keys.validated(account.accountId),
      byokList: keys.account(account.accountId, month, 'byok_list'),
      fee: keys.account(account.accountId, month, 'fee'),
      charged: keys.account(account.accountId, month, 'charged'),
      expiresAt: keys.expiresAt(month),
    };
    accountKeyCache.set(account, built);
    return built;
  }

  /** Every budget with a limit, as the ledger checks it: counted keys, hold set, limit, and this request's hold. */
  function holdChecks(req: AdmitRequest, maximum: NonNullable<AdmitRequest['maximum']>): { checks: HoldCheck[]; meta: Omit<BudgetCheck, 'countedMicros' | 'blocked'>[] } {
    const { guardrails, workspace } = budgetScopes(req.account, req.who);
    const checks: HoldCheck[] = [];
    const meta: Omit<BudgetCheck, 'countedMicros' | 'blocked'>[] = [];
    const windows = windowsAt(req.at);
    const add = (scope: 'guardrail' | 'workspace', owner: { id: string; name: string }, interval: BudgetInterval, limitMicros: Micros, includesByok: boolean) => {
      assertNonNegativeMicros(limitMicros, 'budget limit');
      const k = scopeKeys(req.account.accountId, scope, owner, windows)[interval];
      // A BYOK-only request cannot count where BYOK is excluded: checked (a reached budget still blocks), not held.
      const amount = maximum.byokOnly && !includesByok ? 0 : maximum.costMicros;
      checks.push({ countedKeys: includesByok ? k.both : [k.nonbyok], holdKey: k.hold, limitMicros, amount });
      meta.push({ scope, id: owner.id, name: owner.name, interval, limitMicros, includesByok });
    };
    for (const g of guardrails) if (g.budget !== null) add('guardrail', g, g.budget.resetInterval, g.budget.limitMicros, g.budget.includeByokInBudgets);
    if (workspace !== null) for (const b of workspace.budgets) add('workspace', workspace, b.interval, b.limitMicros, workspace.includeByokInBudgets);
    return { checks, meta };
  }

  /** The outage rule at admission: closed (rethrow) by default, open when configured; anything else is rethrown. */
  function unreachableAtAdmission(err: unknown): AdmitDecision {
    if (!(err instanceof LedgerUnavailableError)) throw err;
    metrics.unavailable.inc({ op: 'admit' });
    if (!failOpen) throw err;
    metrics.admittedOpen.inc();
    return { allowed: true, reservation: null };
  }

  async function reserve(req: AdmitRequest, maximum: NonNullable<AdmitRequest['maximum']>): Promise<AdmitDecision> {
    const { checks, meta } = holdChecks(req, maximum);
    if (checks.length === 0) return { allowed: true, reservation: null };
    let result: Awaited<ReturnType<Ledger['reserve']>>;
    try {
      result = await ledger.reserve({ id: maximum.id, checks, ttlMs: opts.reservationTtlMs ?? RESERVATION_TTL_MS, ...(ledger.backend === 'redis' ? { validatedKey: accountKeys(req.account, windowsAt(req.at)).validated } : {}) });
    } catch (err) {
      // A restarted ledger may have lost spend: closed whatever admitWhenUnavailable says, until the rebuild.
      if (err instanceof LedgerResetError) {
        metrics.resetRefusals.inc();
        throw err;
      }
      // Timed out: the script may still run when the ledger answers again. Nothing is served under this id (503, or
      // admitted unchecked when open), so give it up now: its hold is dropped, or never made if it lands later.
      if (err instanceof LedgerUnavailableError) abandon(ledger, { id: maximum.id, amountMicros: maximum.costMicros, holdKeys: heldKeys(checks) }, { minMs: retryMin, maxMs: retryMax }, () => closed, log);
      return unreachableAtAdmission(err);
    }
    if (result.ok) return { allowed: true, reservation: { id: maximum.id, amountMicros: maximum.costMicros, holdKeys: heldKeys(checks) } };
    const m = meta[result.index]!;
    return {
      allowed: false,
      blockedBy: { ...m, countedMicros: result.countedMicros, blocked: result.countedMicros >= m.limitMicros },
      heldMicros: result.heldMicros,
      requestMicros: checks[result.index]!.amount,
    };
  }

  async function admit(ctx: AdmitRequest): Promise<AdmitDecision> {
    if (ctx.maximum) return reserve(ctx, ctx.maximum);
    const { guardrails, workspace } = budgetScopes(ctx.account, ctx.who);
    const refs = budgetRefs(guardrails, workspace);
    if (refs.length === 0) return { allowed: true, reservation: null };
    let spend: Awaited<ReturnType<typeof readWindows>>;
    try {
      spend = await readWindows(ledger, keys, ctx.account.accountId, refs, ctx.at);
    } catch (err) {
      return unreachableAtAdmission(err);
    }
    const zero = { nonByokMicros: 0, byokMicros: 0 };
    const decision = decideBudget({
      guardrails: guardrails.map((g) => {
        const interval = g.budget?.resetInterval ?? 'lifetime';
        return { guardrail: g, spend: spend.get(`guardrail/${g.id}`)?.[interval] ?? zero };
      }),
      workspace:
        workspace === null
          ? null
          : {
              workspace,
              spend: Object.fromEntries(
                workspace.budgets.map((b) => [b.interval, spend.get(`workspace/${workspace.id}`)?.[b.interval] ?? zero]),
              ),
            },
    });
    return decision.blockedBy === null ? { allowed: true, reservation: null } : { allowed: false, blockedBy: decision.blockedBy, heldMicros: 0, requestMicros: 0 };
  }

  // Every window of every budget scope of the request gets both parts, whatever the scope's limits and flag are
  // today: decideBudget applies include_byok_in_budgets at read time, and a limit added or an interval changed
  // mid-window sees the spend already made in that window.
  function budgetIncrements(req: FinishedRequest, windows: DayWindows, nonByok: Micros, byok: Micros): CounterIncrement[] {
    const { guardrails, workspace } = budgetScopes(req.account, req.who);
    const out: CounterIncrement[] = [];
    const add = (k: ScopeKeys) => {
      for (const interval of INTERVALS) {
        const w = k[interval];
        if (nonByok > 0) out.push({ key: w.nonbyok, by: nonByok, expiresAt: w.expiresAt });
        if (byok > 0) out.push({ key: w.byok, by: byok, expiresAt: w.expiresAt });
      }
    };
    for (const g of guardrails) add(scopeKeys(req.account.accountId, 'guardrail', g, windows));
    if (workspace !== null) add(scopeKeys(req.account.accountId, 'workspace', workspace, windows));
    return out;
  }

  async function apply(req: FinishedRequest): Promise<RecordedSpend> {
    const cost = req.listCostMicros;
    const isByok = req.byokCredentialId !== null;
    // The part that counts against every budget, and the part that counts only where BYOK is included.
    const always = budgetContributionMicros({ isByok, chargedMicros: cost, wouldHaveChargedMicros: cost, includeByokInBudgets: false });
    const withFlag = budgetContributionMicros({ isByok, chargedMicros: cost, wouldHaveChargedMicros: cost, includeByokInBudgets: true }) - always;
    const windows = windowsAt(req.at);
    const acct = accountKeys(req.account, windows);
    const increments = budgetIncrements(req, windows, always, withFlag);
    // The request's reservation is dropped by the same write that counts its real cost.
    const settle = req.reservation && req.reservation.holdKeys.length > 0 ? { id: req.reservation.id, amount: req.reservation.amountMicros, holdKeys: req.reservation.holdKeys } : undefined;
    // Each write carries the request's generation id: a replay of one that timed out but ran counts nothing again.
    if (!isByok) {
      increments.push({ key: acct.charged, by: cost, expiresAt: acct.expiresAt });
      await ledger.add(increments, settle, req.generationId);
      return { feeMicros: 0, chargedMicros: cost, freeListCostMicros: 0 };
    }
    // The month's BYOK list cost is incremented first, atomically with the budget windows; the total it returns
    // minus this request is exactly the month-to-date before it, even with many replicas writing at once.
    // A replayed add returns the month-to-date its first application saw, so the fee is the same whenever it lands.
    const totals = await ledger.add([{ key: acct.byokList, by: cost, expiresAt: acct.expiresAt }, ...increments], settle, req.generationId);
    const before = (totals[0] ?? cost) - cost;
    const charge = byokCharge({ plan: req.account.plan, monthToDateListCostMicros: before, requestListCostMicros: cost });
    if (charge.feeMicros > 0) {
      // A failure here must not replay the list cost above: retry only the fee.
      await addWithRetry([{ key: acct.fee, by: charge.feeMicros, expiresAt: acct.expiresAt }], `${req.generationId}:fee`);
    }
    return { feeMicros: charge.feeMicros, chargedMicros: 0, freeListCostMicros: charge.freeListCostMicros };
  }

  async function addWithRetry(increments: CounterIncrement[], id: string): Promise<void> {
    let delay = retryMin;
    for (;;) {
      try {
        await ledger.add(increments, undefined, id);
        return;
      } catch (err) {
        if (!(err instanceof LedgerUnavailableError)) throw err;
        if (closed) {
          // Not a LedgerUnavailableError: the request's list cost is recorded, so it must not be queued again.
          metrics.dropped.inc();
          throw new Error('spend gate closed before the BYOK fee was recorded', { cause: err });
        }
        metrics.unavailable.inc({ op: 'record' });
        await new Promise((r) => setTimeout(r, delay).unref());
        delay = Math.min(delay * 2, retryMax);
      }
    }
  }

  function settleDrain() {
    metrics.pending.set(queue.length);
    if (queue.length === 0) for (const w of drainWaiters) w();
  }

  function scheduleReplay() {
    if (retryTimer !== undefined || closed) return;
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      void replay();
    }, retryDelay);
    retryTimer.unref();
    retryDelay = Math.min(retryDelay * 2, retryMax);
  }

  async function replay(): Promise<void> {
    if (replaying) return;
    replaying = true;
    try {
      while (queue.length > 0) {
        const head = queue[0] as Pending;
        try {
          const spend = await apply(head.req);
          queue.shift();
          head.resolve(spend);
          retryDelay = retryMin;
        } catch (err) {
          if (err instanceof LedgerUnavailableError && !closed) {
            metrics.unavailable.inc({ op: 'record' });
            scheduleReplay();
            return;
          }
          queue.shift();
          metrics.dropped.inc();
          head.reject(err instanceof Error ? err : new Error(String(err)));
        }
      }
    } finally {
      replaying = false;
      settleDrain();
    }
  }

  function enqueue(req: FinishedRequest): Promise<RecordedSpend> {
    return new Promise<RecordedSpend>((resolve, reject) => {
      queue.push({ req, resolve, reject });
      while (queue.length > maxPending) {
        const oldest = queue.shift() as Pending;
        metrics.dropped.inc();
        log?.error({ generation_id: oldest.req.generationId }, 'ledger replay queue full: spend of the oldest waiting request dropped');
        oldest.reject(new LedgerUnavailableError('ledger unavailable and the replay queue is full: spend not recorded'));
      }
      metrics.pending.set(queue.length);
    });
  }

  async function record(req: FinishedRequest): Promise<RecordedSpend> {
    assertNonNegativeMicros(req.listCostMicros, 'list cost');
    if (closed) throw new Error('the spend gate is closed');
    // Keep order: while anything waits for replay, later records wait behind it (month-to-date stays exact).
    if (queue.length > 0) return enqueue(req);
    try {
      return await apply(req);
    } catch (err) {
      if (!(err instanceof LedgerUnavailableError)) throw err;
      metrics.unavailable.inc({ op: 'record' });
      log?.warn({ generation_id: req.generationId }, 'ledger unavailable: spend queued for replay');
      const p = enqueue(req);
      scheduleReplay();
      return p;
    }
  }

  /** Best effort: a hold that cannot be dropped now lapses at its expiry. */
  async function release(reservation: Reservation | null | undefined): Promise<void> {
    if (!reservation || reservation.holdKeys.length === 0) return;
    try {
      await ledger.release(reservation.id, reservation.amountMicros, reservation.holdKeys);
    } catch (err) {
      log?.warn({ generation_id: reservation.id, err: err instanceof Error ? err.message : String(err) }, 'reservation release failed: it lapses at its expiry');
    }
  }

  return {
    admit,
    release,
    record: async (req: FinishedRequest) => {
      try {
        // Settles the reservation in the same write as the real cost (or in the replay that lands it).
        return await record(req);
      } catch (err) {
        // Not recorded: the hold is dropped on its own (best effort; it lapses at its expiry otherwise).
        await release(req.reservation);
        throw err;
      }
    },
    pendingRecords: () => queue.length,
    drain(timeoutMs = 30_000) {
      if (queue.length === 0) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          drainWaiters.delete(done);
          reject(new Error(`ledger replay queue still holds ${queue.length} records after ${timeoutMs} ms`));
        }, timeoutMs);
        const done = () => {
          clearTimeout(timer);
          drainWaiters.delete(done);
          resolve();
        };
        drainWaiters.add(done);
      });
    },
    async close() {
      if (closed) return;
      // One last replay attempt, then whatever still waits is lost: count it and tell its caller.
      if (queue.length > 0) {
        if (retryTimer !== undefined) clearTimeout(retryTimer);
        retryTimer = undefined;
        await replay();
      }
      closed = true;
      for (const p of queue.splice(0)) {
        metrics.dropped.inc();
        p.reject(new LedgerUnavailableError('spend gate closed before the ledger came back: spend not recorded'));
      }
      settleDrain();
      await ledger.close();
    },
  };
}
