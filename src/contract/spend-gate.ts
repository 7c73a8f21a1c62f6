// The contract between the gateway's request path (src/gateway) and spend accounting (src/ledger). The gateway
// asks before a request whether its budgets admit it, and reports every finished request; the ledger answers
// from month-to-date and per-window totals it keeps (embedded or Redis). Plain data only, so either side can be
// tested without the other.
import type { RequestIdentity } from '../domain/account.ts';
import type { BudgetCheck } from '../domain/budgets.ts';
import type { CompiledAccount, KeyRateLimits } from '../domain/compiled.ts';
import type { Micros } from '../domain/money.ts';

export interface SpendRequestContext {
  account: CompiledAccount;
  /** API key hash, workspace id and requesting member (the key's owner), as the planner saw them. */
  who: RequestIdentity;
  at: Date;
}

export interface AdmitRequest extends SpendRequestContext {
  /**
   * Reserve at admission, settle at completion: the most this request can cost (its prompt estimate and max output
   * at the priciest endpoint of its plan). Absent: checked against the current totals only, nothing is held.
   */
  maximum?: {
    /** Unique per request (the generation id). */
    id: string;
    costMicros: Micros;
    /**
     * Serve with less rather than refuse: hold what the budgets have room for, down to this much (the prompt and the
     * least answer worth sending). The reservation's amountMicros says what was granted; the caller caps the answer
     * to it. Absent: all of costMicros or nothing.
     */
    floorMicros?: Micros;
    /** With a floor: the share of a room short of costMicros that is granted (never below the floor). Default 1. */
    shareOfRoom?: number;
    /** Every attempt of the plan is a BYOK credential: budgets that exclude BYOK are only checked, not held. */
    byokOnly: boolean;
  };
}

/** What a request holds against its budgets until record() settles it or release() gives it back. */
export interface Reservation {
  id: string;
  /** What it holds on each of its hold sets: the maximum cost, or less when a floor let the ledger grant less. */
  amountMicros: Micros;
  holdKeys: readonly string[];
}

export type AdmitDecision =
  | { allowed: true; reservation: Reservation | null }
  /**
   * The first budget the request does not fit (its counted total has reached the limit, or with what is held by
   * requests in flight it has no room for this request's maximum cost); the request must not reach an upstream.
   */
  | { allowed: false; blockedBy: BudgetCheck; heldMicros: Micros; requestMicros: Micros };

export interface FinishedRequest extends SpendRequestContext {
  generationId: string;
  /** The GatewayAPIKey's name: its month's spend is counted under it. Absent: not counted per key. */
  keyName?: string;
  /** The reservation admit() made, released once the real cost is recorded. */
  reservation?: Reservation | null;
  model: string;
  /** The endpoint that served the request (catalog endpoint id) and its provider. */
  endpointId: string;
  provider: string;
  /** BYOK credential id that served it, or null for shared capacity. */
  byokCredentialId: string | null;
  promptTokens: number;
  completionTokens: number;
  /** List cost of this request on the serving endpoint (catalog pricing). */
  listCostMicros: Micros;
}

export interface RecordedSpend {
  /** BYOK fee charged against the account (0 for shared capacity and inside the free allowance). */
  feeMicros: Micros;
  /** What the gateway charged for a shared-capacity request (its list cost); 0 for BYOK. */
  chargedMicros: Micros;
  /** Part of a BYOK request's list cost covered by the free allowance. */
  freeListCostMicros: Micros;
}

/**
 * One request counted against its API key's rate limits (requests and tokens per minute, requests in flight), until
 * settleRate: the sets it is counted in and what it counts. Plain data, built by the gate.
 */
export interface RateHold {
  id: string;
  /** tokensSum: the running sum of the tokens set (so admission never scans it). */
  keys: { requests: string; tokens: string; tokensSum: string; inFlight: string };
  requestsPerWindow: number;
  tokensPerWindow: number;
  /** What the request counts against tokensPerWindow until it settles: the most it can use. */
  tokens: number;
  maxInFlight: number;
  windowMs: number;
  lapseMs: number;
}

export interface RateAdmitRequest {
  account: CompiledAccount;
  /** The key's name (what its limits are counted under, both secrets of a rotation) and its limits. */
  key: { name: string; limits: KeyRateLimits };
  /** Unique per request (the generation id). */
  id: string;
  /** The most tokens the request can use (prompt estimate plus its answer's bound). */
  tokens: number;
}

export type RateDecision =
  | { allowed: true; hold: RateHold }
  /** The first limit without room: what it counts, its limit, and in how many seconds room comes back (null: unknown or never). */
  | {
      allowed: false;
      limit: 'requests' | 'tokens' | 'in_flight';
      used: number;
      max: number;
      retryAfterSeconds: number | null;
    };

export interface SpendGate {
  admit(req: AdmitRequest): Promise<AdmitDecision>;
  /**
   * Check-and-count against the key's rate limits, atomically across replicas (throws when the ledger is unreachable).
   * A gate without it cannot count rate limits: the gateway refuses (503) the requests of keys that have some.
   */
  admitRate?(req: RateAdmitRequest): Promise<RateDecision>;
  /** The request is over: its in-flight slot frees, its tokens become `usedTokens`; null: never served, it leaves every count. Never throws. */
  settleRate?(hold: RateHold | null, usedTokens: number | null): Promise<void>;
  record(req: FinishedRequest): Promise<RecordedSpend>;
  /** Gives a reservation back when nothing was served (every attempt failed). Never throws. */
  release(reservation: Reservation | null): Promise<void>;
  close(): Promise<void>;
}
