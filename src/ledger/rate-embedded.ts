// Key rate limits in the embedded ledger (one replica): the same three sets as the Redis scripts (rate-scripts.ts),
// in memory, each check-and-count one synchronous step, so no other request interleaves.
import type { Ledger, RateCheck, RateResult } from './ledger.ts';

/** Members older than this are swept (longer than any rate window; in-flight slots lapse on their own). */
const SWEEP_AFTER_MS = 5 * 60_000;
/** Admissions between two sweeps of every set. */
const SWEEP_EVERY = 1000;

/** member id -> [score (ms), tokens]. */
type RateSet = Map<string, [number, number]>;

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
      const flight = this.pruned(c.keys.inFlight, (score) => score <= now);
      if (flight.size >= c.maxInFlight) return { ok: false, limit: 'in_flight', used: flight.size, max: c.maxInFlight, retryAfterMs: null };
    }
    if (c.requestsPerWindow > 0) {
      const requests = this.pruned(c.keys.requests, (score) => score <= now - c.windowMs);
      if (requests.size >= c.requestsPerWindow) {
        const scores = [...requests.values()].map(([s]) => s).sort((a, b) => a - b);
        return { ok: false, limit: 'requests', used: requests.size, max: c.requestsPerWindow, retryAfterMs: scores[requests.size - c.requestsPerWindow]! + c.windowMs - now };
      }
    }
    if (c.tokensPerWindow > 0) {
      const tokens = this.pruned(c.keys.tokens, (score) => score <= now - c.windowMs);
      const entries = [...tokens.values()].sort((a, b) => a[0] - b[0]);
      const used = entries.reduce((sum, [, n]) => sum + n, 0);
      if (c.tokens > c.tokensPerWindow) return { ok: false, limit: 'tokens', used, max: c.tokensPerWindow, retryAfterMs: null };
      if (used + c.tokens > c.tokensPerWindow) {
        let left = used;
        for (const [score, n] of entries) {
          left -= n;
          if (left + c.tokens <= c.tokensPerWindow) return { ok: false, limit: 'tokens', used, max: c.tokensPerWindow, retryAfterMs: score + c.windowMs - now };
        }
        return { ok: false, limit: 'tokens', used, max: c.tokensPerWindow, retryAfterMs: null };
      }
    }
    if (c.requestsPerWindow > 0) this.set(c.keys.requests).set(c.id, [now, 0]);
    if (c.tokensPerWindow > 0) this.set(c.keys.tokens).set(c.id, [now, c.tokens]);
    if (c.maxInFlight > 0) this.set(c.keys.inFlight).set(c.id, [now + c.lapseMs, 0]);
    return { ok: true };
  }

  settle(c: RateCheck, usedTokens: number | null): void {
    this.sets.get(c.keys.inFlight)?.delete(c.id);
    const tokens = this.sets.get(c.keys.tokens);
    if (usedTokens === null) {
      this.sets.get(c.keys.requests)?.delete(c.id);
      tokens?.delete(c.id);
      return;
    }
    const entry = tokens?.get(c.id);
    if (entry) {
      if (usedTokens > 0) entry[1] = usedTokens;
      else tokens!.delete(c.id);
    }
  }

  /** Drops empty sets and lapsed members everywhere: keys of idle API keys do not stay in memory. */
  sweep(windowMs: number): void {
    const now = this.now();
    for (const [key, set] of this.sets) {
      for (const [id, [score]] of set) if (score <= now - windowMs && score <= now) set.delete(id);
      if (set.size === 0) this.sets.delete(key);
    }
  }

  private set(key: string): RateSet {
    let s = this.sets.get(key);
    if (!s) this.sets.set(key, (s = new Map()));
    return s;
  }

  private pruned(key: string, gone: (score: number) => boolean): RateSet {
    const s = this.set(key);
    for (const [id, [score]] of s) if (gone(score)) s.delete(id);
    return s;
  }
}
