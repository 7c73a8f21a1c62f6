// Where spend lives: integer counters (micro-dollars) under string keys, each expiring after its window. Two
// backends implement it: embedded (one gateway replica, optional snapshot file) and Redis (several replicas).
import type { RateHold } from '../contract/spend-gate.ts';
import type { Micros } from '../domain/money.ts';

export interface CounterIncrement {
  key: string;
  by: Micros;
  /** When the counter may be forgotten (ms since epoch): its window's end plus a margin; null = never. */
  expiresAt: number | null;
}

/**
 * One budget a reservation must fit: the counters that count against it (summed), the hold set of in-flight
 * reservations on it, its limit, and what this request holds on it (0: the request cannot count here, e.g. a
 * BYOK-only request under a budget that excludes BYOK; it is still refused once the budget is reached).
 */
export interface HoldCheck {
  countedKeys: readonly string[];
  holdKey: string;
  limitMicros: Micros;
  amount: Micros;
}

export interface ReserveRequest {
  /** Unique per request (the generation id): the hold's member in every hold set. */
  id: string;
  /**
   * Redis only: the account's `validated` key. The reservation is refused with LedgerResetError unless it names the
   * running Redis process (a restarted Redis may have lost spend; the operator's rebuild validates it again).
   */
  validatedKey?: string;
  checks: readonly HoldCheck[];
  /**
   * Shrink instead of refuse: every non-zero amount is lowered to the least room (limit - counted - held) any of
   * them has, down to this floor; refused only when some room is below it. What is held is decided in the same
   * atomic step as the check, so concurrent shrunk reservations still never pass a limit. Absent or 0: all or nothing.
   */
  floor?: Micros;
  /**
   * With a floor, when the room is short of the amount: grant this share of the room (rounded down), never below the
   * floor. Below 1, concurrent shrinking reservations each leave room for the next. Default 1.
   */
  share?: number;
  /** How long the holds last unless released (a gateway that crashed mid-request never settles them), in ms. */
  ttlMs: number;
}

/**
 * One API key's rate limits as one request meets them (docs/ledger.md, "Key rate limits"): the three sets it is
 * counted in (keys of one account) and each limit (0: none, that set is neither read nor written).
 */
export type RateCheck = RateHold;

export type RateLimitName = 'requests' | 'tokens' | 'in_flight';

/**
 * Admitted, or the first limit that refused: what it counted and its limit, and in how many ms room comes back
 * (null: unknown, a slot frees when a request finishes; or never, for a request needing more tokens than the limit).
 */
export type RateResult =
  | { ok: true }
  | { ok: false; limit: RateLimitName; used: number; max: number; retryAfterMs: number | null };

/** A reservation dropped in the same atomic step as the increments that settle its request. */
export interface HoldRelease {
  /** The reservation's id (the request's generation id) and the amount it held. */
  id: string;
  amount: Micros;
  holdKeys: readonly string[];
}

/** `granted`: what every non-zero check now holds (the amount, or less with a floor). */
export type ReserveResult =
  | { ok: true; granted: Micros }
  | { ok: false; index: number; countedMicros: Micros; heldMicros: Micros };

export interface Ledger {
  readonly backend: 'embedded' | 'redis';
  /** Current totals in order; 0 for a counter never written or already expired. */
  read(keys: readonly string[]): Promise<Micros[]>;
  /**
   * Adds every increment atomically (all or none, one round trip) and returns the new totals in order. With `settle`,
   * the request's reservation is dropped in the same step: its real cost and its hold are never both counted, nor
   * neither, and settling costs no round trip of its own.
   * With `id` (the generation id), the add happens once: an add whose id was already applied (a replay of a call that
   * timed out on the client but ran) changes nothing and returns the first counter's total as its first application
   * returned it (what a BYOK fee is computed from), then the current totals. Ids are kept per account (the hash tag of
   * the keys) for ID_RETENTION_MS at least.
   * With `keep` (a journaled record: a key of the same account), the id is also marked there, and found there until
   * `forgetKept` deletes it (or KEPT_ID_TTL_MS passes): a replay at any age while its journal holds it counts once.
   */
  add(increments: readonly CounterIncrement[], settle?: HoldRelease, id?: string, keep?: string): Promise<Micros[]>;
  /** Deletes keep marks (a journal segment whose records are all done was deleted). */
  forgetKept(keys: readonly string[]): Promise<void>;
  /**
   * Check-and-reserve, atomically (one script in Redis, one synchronous step embedded): every check must fit
   * (counted + live holds + amount <= limit, or < limit for a 0 amount; with a floor, the amount shrinks to fit down
   * to the floor), else nothing is held and the first failing check is reported; when all fit, each non-zero amount
   * is held under `id` until released or expired.
   * Idempotent: a repeated reservation replaces its own hold (and does not count it against itself); one whose id
   * was already settled or released holds nothing and is refused with ReservationSettledError.
   */
  reserve(req: ReserveRequest): Promise<ReserveResult>;
  /**
   * In-process backends only (the embedded ledger): `add` and `reserve` done in the caller's turn, so the spend gate's
   * common path costs no promise chain per request. Same semantics and errors, thrown instead of rejected. A wrapper
   * that changes `add` or `reserve` (a fault injector, a counter) must leave these out, or the gate goes around it.
   */
  addNow?(increments: readonly CounterIncrement[], settle?: HoldRelease, id?: string, keep?: string): Micros[];
  reserveNow?(req: ReserveRequest): ReserveResult;
  /**
   * In-process backends only: how many ids this process remembers for exactly-once (20 to 40 minutes of writes, in
   * its own heap; docs/ledger.md, "Exactly once"). Redis keeps them in Redis.
   */
  idCount?(): number;
  /**
   * The operator's rebuild after a restart: raises every listed counter to at least its floor (the spend mirrored in
   * status), atomically, and marks the account validated for the running process. Returns how many counters were
   * raised and the largest raise (spend the restart had lost; 0: nothing was lost). Embedded: a no-op (its snapshot
   * is its durable copy).
   */
  restore(
    validatedKey: string,
    entries: readonly RestoreEntry[],
  ): Promise<{ raisedCounters: number; largestMicros: Micros; alreadyValid: boolean }>;
  /**
   * Drops the holds of a reservation (settled or abandoned): its id and the amount it held; unknown ones are ignored.
   * The id is remembered as released, so a reservation that arrives later (sent before a stall, run after) holds nothing.
   */
  release(id: string, amount: Micros, holdKeys: readonly string[]): Promise<void>;
  /**
   * Check-and-count a request against its key's rate limits, atomically (one script in Redis on Redis's clock, one
   * synchronous step embedded): admitted only when every limit has room, and then counted in every set at once.
   */
  admitRate(check: RateCheck): Promise<RateResult>;
  /**
   * A rate-limited request finished: its in-flight slot frees, and its tokens become what it used; `usedTokens` null:
   * it was never served (refused after admission, e.g. by a budget) and leaves every set.
   */
  settleRate(check: RateCheck, usedTokens: number | null): Promise<void>;
  close(): Promise<void>;
}

/**
 * The ledger restarted (or was never checked) since the account's counters were last checked against the durable copy
 * in etcd: they may be missing spend, so budgets fail closed until the operator's rebuild (docs/ledger.md, "Resets").
 */
export class LedgerResetError extends Error {
  readonly statusCode = 503;
  constructor(message: string) {
    super(message);
    this.name = 'LedgerResetError';
  }
}

/**
 * A reservation for a request already recorded or released: nothing is held. What a reservation that ran after its
 * caller gave up (a stall past the command timeout) meets, or a generation id used twice.
 */
export class ReservationSettledError extends Error {
  constructor(id: string) {
    super(`reservation ${id} was already settled or released: nothing held (generation ids must be unique)`);
    this.name = 'ReservationSettledError';
  }
}

/** Counters restored from the durable copy: key, the floor it must have, its expiry (ms since epoch) or null. */
export interface RestoreEntry {
  key: string;
  floorMicros: Micros;
  expiresAt: number | null;
}

/** The ledger could not be reached (Redis down, timed out); nothing was read or written. */
export class LedgerUnavailableError extends Error {
  /** HTTP frameworks (fastify) answer an unhandled error with its statusCode: a retryable 503, not a 500. */
  readonly statusCode = 503;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'LedgerUnavailableError';
  }
}
