// Key rate limits in the embedded ledger (one replica): the same three sets as the Redis scripts (rate-scripts.ts),
// in memory, each check-and-count one synchronous step, so no other request interleaves.
import type { Ledger, RateCheck, RateResult } from './ledger.ts';

/** Members older than this are swept (longer than any rate window; in-flight slots lapse on their own). */
const SWEEP_AFTER_MS = 5 * 60_000;
/** Admissions between two sweeps of every set. */
const SWEEP_EVERY = 1000;

/**
 * Members in admission order (member id -> [score (ms), tokens]) and the sum of their tokens. Scores grow with
 * insertion (admission time, or admission time plus a fixed lapse), so pruning stops at the first live member; a
 * clock stepping back leaves members a little longer, which only over-counts.
 */
interface RateSet {
  members: Map<string, [number, number]>;
  tokens: number;
}

export class EmbeddedRateSets {
  private readonly sets = new Map<string, RateSet>();
  private readonly now: () => number;
  private sinceSweep = 0;

  constructor(now: () => number) {
    this.now = now;
  }

  /** The Ledger's two rate-limit methods over these sets. */
  ledgerMethods(ensureOpen: () => void): Pick<Ledger, 'admitRate' | 'settleRate'> {
    return {
      admitRate: async (check) => {
        ensureOpen();
        return this.admit(check);
      },
      settleRate: async (check, usedTokens) => this.settle(check, usedTokens),
    };
  }

  admit(c: RateCheck): RateResult {
    if (++this.sinceSweep >= SWEEP_EVERY) {
      this.sinceSweep = 0;
      this.sweep(SWEEP_AFTER_MS);
    }
    const now = this.now();
    if (c.maxInFlight > 0) {
      const flight = this.pruned(c.keys.inFlight, now);
      if (flight.members.size >= c.maxInFlight)
        return { ok: false, limit: 'in_flight', used: flight.members.size, max: c.maxInFlight, retryAfterMs: null };
    }
    if (c.requestsPerWindow > 0) {
      const requests = this.pruned(c.keys.requests, now - c.windowMs);
      const n = requests.members.size;
      if (n >= c.requestsPerWindow) {
        // Room comes back when the (n - limit + 1) oldest admissions have left the window.
        let i = 0;
        for (const [score] of requests.members.values())
          if (i++ === n - c.requestsPerWindow)
            return {
              ok: false,
              limit: 'requests',
              used: n,
              max: c.requestsPerWindow,
              retryAfterMs: score + c.windowMs - now,
            };
      }
    }
    if (c.tokensPerWindow > 0) {
      const tokens = this.pruned(c.keys.tokens, now - c.windowMs);
      const used = tokens.tokens;
      if (c.tokens > c.tokensPerWindow)
        return { ok: false, limit: 'tokens', used, max: c.tokensPerWindow, retryAfterMs: null };
      if (used + c.tokens > c.tokensPerWindow) {
        let left = used;
        for (const [score, n] of tokens.members.values()) {
          left -= n;
          if (left + c.tokens <= c.tokensPerWindow)
            return { ok: false, limit: 'tokens', used, max: c.tokensPerWindow, retryAfterMs: score + c.windowMs - now };
        }
        return { ok: false, limit: 'tokens', used, max: c.tokensPerWindow, retryAfterMs: null };
      }
    }
    if (c.requestsPerWindow > 0) this.put(c.keys.requests, c.id, now, 0);
    if (c.tokensPerWindow > 0) this.put(c.keys.tokens, c.id, now, c.tokens);
    if (c.maxInFlight > 0) this.put(c.keys.inFlight, c.id, now + c.lapseMs, 0);
    return { ok: true };
  }

  settle(c: RateCheck, usedTokens: number | null): void {
    this.sets.get(c.keys.inFlight)?.members.delete(c.id);
    const tokens = this.sets.get(c.keys.tokens);
    const entry = tokens?.members.get(c.id);
    if (usedTokens === null) {
      this.sets.get(c.keys.requests)?.members.delete(c.id);
      if (entry) {
        tokens!.tokens -= entry[1];
        tokens!.members.delete(c.id);
      }
      return;
    }
    if (entry) {
      // Replaced in place: the member keeps its admission time and its place in the order.
      tokens!.tokens += usedTokens - entry[1];
      entry[1] = usedTokens;
    }
  }

  /** Drops lapsed members and empty sets everywhere: keys of idle API keys do not stay in memory. */
  sweep(olderThanMs: number): void {
    const now = this.now();
    for (const [key, set] of this.sets) {
      this.prune(set, Math.min(now - olderThanMs, now));
      if (set.members.size === 0) this.sets.delete(key);
    }
  }

  private put(key: string, id: string, score: number, tokens: number): void {
    let s = this.sets.get(key);
    if (!s) this.sets.set(key, (s = { members: new Map(), tokens: 0 }));
    const before = s.members.get(id);
    if (before) s.tokens -= before[1];
    s.members.set(id, [score, tokens]);
    s.tokens += tokens;
  }

  /** The set at `key` without its members scored at or below `upTo`. */
  private pruned(key: string, upTo: number): RateSet {
    let s = this.sets.get(key);
    if (!s) this.sets.set(key, (s = { members: new Map(), tokens: 0 }));
    this.prune(s, upTo);
    return s;
  }

  private prune(s: RateSet, upTo: number): void {
    for (const [id, [score, tokens]] of s.members) {
      if (score > upTo) break;
      s.members.delete(id);
      s.tokens -= tokens;
    }
  }
}
