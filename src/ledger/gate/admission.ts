// admit(): with a maximum cost, check-and-reserve every budget with a limit in one ledger step; without, read the
// current windows and ask decideBudget. Outage rule: closed (rethrow) by default, open when configured; a restarted
// ledger (LedgerResetError) is closed either way. A reservation that timed out is given up at once (abandon).
import type { Logger } from 'pino';
import type { AdmitDecision, AdmitRequest, Reservation } from '../../contract/spend-gate.ts';
import type { BudgetedGuardrail, BudgetedWorkspace } from '../../domain/account.ts';
import { type BudgetCheck, budgetScopes, decideBudget } from '../../domain/budgets.ts';
import type { BudgetInterval } from '../../domain/compiled.ts';
import { assertNonNegativeMicros, type Micros } from '../../domain/money.ts';
import {
  type HoldCheck,
  type Ledger,
  LedgerResetError,
  LedgerUnavailableError,
  type ReserveRequest,
  type ReserveResult,
} from '../ledger.ts';
import { readWindows, type ScopeRef } from '../spend-view.ts';
import { windowsAt } from '../windows.ts';
import type { GateKeyCache } from './key-cache.ts';
import type { GateMetrics } from './metrics.ts';

type Maximum = NonNullable<AdmitRequest['maximum']>;
type CheckMeta = Omit<BudgetCheck, 'countedMicros' | 'blocked'>;

interface HeldRequest {
  request: ReserveRequest;
  reservation: Reservation;
  meta: CheckMeta[];
}

/** Releases tried for a reservation whose caller gave up (backoff from retry.minMs to retry.maxMs between them). */
export const ABANDON_TRIES = 8;

export interface AdmissionOptions {
  ledger: Ledger;
  keys: GateKeyCache;
  metrics: GateMetrics;
  failOpen: boolean;
  reservationTtlMs: number;
  retry: { minMs: number; maxMs: number };
  stopped: () => boolean;
  /** Told of every reservation made (the journal remembers it until it is settled or released). */
  held?: (reservation: Reservation) => void;
  log?: Logger | undefined;
}

function budgetRefs(guardrails: readonly BudgetedGuardrail[], workspace: BudgetedWorkspace | null): ScopeRef[] {
  const refs: ScopeRef[] = [];
  for (const g of guardrails)
    if (g.budget !== null) refs.push({ scope: 'guardrail', id: g.id, intervals: [g.budget.resetInterval] });
  if (workspace !== null && workspace.budgets.length > 0) {
    refs.push({
      scope: 'workspace',
      id: workspace.id,
      intervals: [...new Set<BudgetInterval>(workspace.budgets.map((b) => b.interval))],
    });
  }
  return refs;
}

const heldKeys = (checks: readonly HoldCheck[]) => checks.filter((c) => c.amount > 0).map((c) => c.holdKey);

/** Every budget with a limit, as the ledger checks it: counted keys, hold set, limit, and this request's hold. */
export function holdChecks(
  req: AdmitRequest,
  maximum: Maximum,
  cache: GateKeyCache,
): { checks: HoldCheck[]; meta: CheckMeta[] } {
  const { guardrails, workspace } = budgetScopes(req.account, req.who);
  const checks: HoldCheck[] = [];
  const meta: CheckMeta[] = [];
  const windows = windowsAt(req.at);
  const add = (
    scope: 'guardrail' | 'workspace',
    owner: { id: string; name: string },
    interval: BudgetInterval,
    limitMicros: Micros,
    includesByok: boolean,
  ) => {
    assertNonNegativeMicros(limitMicros, 'budget limit');
    const k = cache.scope(req.account.accountId, scope, owner, windows)[interval];
    // A BYOK-only request cannot count where BYOK is excluded: checked (a reached budget still blocks), not held.
    const amount = maximum.byokOnly && !includesByok ? 0 : maximum.costMicros;
    checks.push({ countedKeys: includesByok ? k.both : [k.nonbyok], holdKey: k.hold, limitMicros, amount });
    meta.push({ scope, id: owner.id, name: owner.name, interval, limitMicros, includesByok });
  };
  for (const g of guardrails)
    if (g.budget !== null)
      add('guardrail', g, g.budget.resetInterval, g.budget.limitMicros, g.budget.includeByokInBudgets);
  if (workspace !== null)
    for (const b of workspace.budgets)
      add('workspace', workspace, b.interval, b.limitMicros, workspace.includeByokInBudgets);
  return { checks, meta };
}

/**
 * Drops a reservation retrying while the ledger is unreachable (a few tries: a reservation that never reached the
 * ledger lands nowhere); `done` hears whether it was dropped. Off the request path: nobody waits for it.
 */
export function releaseInBackground(
  ledger: Ledger,
  reservation: Reservation,
  retry: { minMs: number; maxMs: number },
  stopped: () => boolean,
  done: (released: boolean, err?: unknown) => void,
): void {
  if (reservation.holdKeys.length === 0) return done(true);
  let delay = retry.minMs;
  let tries = 0;
  const attempt = (): void => {
    ledger.release(reservation.id, reservation.amountMicros, reservation.holdKeys).then(
      () => done(true),
      (err: unknown) => {
        if (err instanceof LedgerUnavailableError && !stopped() && ++tries < ABANDON_TRIES) {
          setTimeout(attempt, delay).unref();
          delay = Math.min(delay * 2, retry.maxMs);
          return;
        }
        done(false, err);
      },
    );
  };
  attempt();
}

export class Admission {
  private readonly opts: AdmissionOptions;

  constructor(opts: AdmissionOptions) {
    this.opts = opts;
  }

  admit(req: AdmitRequest): Promise<AdmitDecision> {
    if (!req.maximum) return this.check(req);
    if (!this.opts.ledger.reserveNow) return this.reserve(req, req.maximum);
    // In-process ledger: decided in this turn, one settled promise instead of a chain.
    try {
      return Promise.resolve(this.reserveInTurn(req, req.maximum));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** The outage rule at admission: closed (rethrow) by default, open when configured; anything else is rethrown. */
  private unreachable(err: unknown): AdmitDecision {
    if (!(err instanceof LedgerUnavailableError)) throw err;
    this.opts.metrics.unavailable.inc({ op: 'admit' });
    if (!this.opts.failOpen) throw err;
    this.opts.metrics.admittedOpen.inc();
    return { allowed: true, reservation: null };
  }

  /** What the ledger is asked to hold, and the reservation a timeout gives up; null: no budget has a limit. */
  private holdRequest(req: AdmitRequest, maximum: Maximum): HeldRequest | null {
    const { keys, ledger } = this.opts;
    const { checks, meta } = holdChecks(req, maximum, keys);
    if (checks.length === 0) return null;
    // Given up on a timeout under this amount; the release finds a hold granted less by its id.
    const reservation: Reservation = { id: maximum.id, amountMicros: maximum.costMicros, holdKeys: heldKeys(checks) };
    const floor =
      maximum.floorMicros !== undefined && maximum.floorMicros < maximum.costMicros
        ? { floor: Math.max(1, maximum.floorMicros), share: maximum.shareOfRoom ?? 1 }
        : {};
    const request: ReserveRequest = {
      id: maximum.id,
      checks,
      ttlMs: this.opts.reservationTtlMs,
      ...floor,
      ...(ledger.backend === 'redis' ? { validatedKey: keys.account(req.account, windowsAt(req.at)).validated } : {}),
    };
    return { request, reservation, meta };
  }

  private async reserve(req: AdmitRequest, maximum: Maximum): Promise<AdmitDecision> {
    const held = this.holdRequest(req, maximum);
    if (!held) return { allowed: true, reservation: null };
    let result: ReserveResult;
    try {
      result = await this.opts.ledger.reserve(held.request);
    } catch (err) {
      return this.notReserved(err, held.reservation);
    }
    return this.decided(held, result);
  }

  /** `reserve` on a ledger with reserveNow, step for step. */
  private reserveInTurn(req: AdmitRequest, maximum: Maximum): AdmitDecision {
    const held = this.holdRequest(req, maximum);
    if (!held) return { allowed: true, reservation: null };
    let result: ReserveResult;
    try {
      result = this.opts.ledger.reserveNow!(held.request);
    } catch (err) {
      return this.notReserved(err, held.reservation);
    }
    return this.decided(held, result);
  }

  /** The ledger refused to answer: the outage rule, after giving up what a timed-out script may still hold. */
  private notReserved(err: unknown, reservation: Reservation): AdmitDecision {
    const { ledger, metrics, retry, stopped, log } = this.opts;
    // A restarted ledger may have lost spend: closed whatever admitWhenUnavailable says, until the rebuild.
    if (err instanceof LedgerResetError) {
      metrics.resetRefusals.inc();
      throw err;
    }
    // Timed out: the script may still run when the ledger answers again. Nothing is served under this id (503, or
    // admitted unchecked when open), so give it up now: its hold is dropped, or never made if it lands later.
    if (err instanceof LedgerUnavailableError) {
      releaseInBackground(ledger, reservation, retry, stopped, (released, e) => {
        if (!released)
          log?.warn(
            { generation_id: reservation.id, err: e instanceof Error ? e.message : String(e) },
            'abandoned reservation not released: it lapses at its expiry',
          );
      });
    }
    return this.unreachable(err);
  }

  private decided({ reservation, request, meta }: HeldRequest, result: ReserveResult): AdmitDecision {
    if (result.ok) {
      const granted: Reservation =
        reservation.holdKeys.length > 0 ? { ...reservation, amountMicros: result.granted } : reservation;
      if (granted.holdKeys.length > 0) this.opts.held?.(granted);
      return { allowed: true, reservation: granted };
    }
    const m = meta[result.index]!;
    return {
      allowed: false,
      blockedBy: { ...m, countedMicros: result.countedMicros, blocked: result.countedMicros >= m.limitMicros },
      heldMicros: result.heldMicros,
      requestMicros: request.checks[result.index]!.amount,
    };
  }

  /** Without a maximum: the current windows against every limit, nothing held. */
  private async check(req: AdmitRequest): Promise<AdmitDecision> {
    const { guardrails, workspace } = budgetScopes(req.account, req.who);
    const refs = budgetRefs(guardrails, workspace);
    if (refs.length === 0) return { allowed: true, reservation: null };
    let spend: Awaited<ReturnType<typeof readWindows>>;
    try {
      spend = await readWindows(this.opts.ledger, this.opts.keys.keys, req.account.accountId, refs, req.at);
    } catch (err) {
      return this.unreachable(err);
    }
    const zero = { nonByokMicros: 0, byokMicros: 0 };
    const decision = decideBudget({
      guardrails: guardrails.map((g) => ({
        guardrail: g,
        spend: spend.get(`guardrail/${g.id}`)?.[g.budget?.resetInterval ?? 'lifetime'] ?? zero,
      })),
      workspace:
        workspace === null
          ? null
          : {
              workspace,
              spend: Object.fromEntries(
                workspace.budgets.map((b) => [
                  b.interval,
                  spend.get(`workspace/${workspace.id}`)?.[b.interval] ?? zero,
                ]),
              ),
            },
    });
    return decision.blockedBy === null
      ? { allowed: true, reservation: null }
      : { allowed: false, blockedBy: decision.blockedBy, heldMicros: 0, requestMicros: 0 };
  }
}
