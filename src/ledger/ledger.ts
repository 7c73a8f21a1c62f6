// Where spend lives: integer counters (micro-dollars) under string keys, each expiring after its window. Two
// backends implement it: embedded (one gateway replica, optional snapshot file) and Redis (several replicas).
import type { Micros } from '../domain/money.ts';

export interface CounterIncrement {
  key: string;
  by: Micros;
  /** When the counter may be forgotten (ms since epoch): its window's end plus a margin; null = never. */
  expiresAt: number | null;
}

export interface Ledger {
  readonly backend: 'embedded' | 'redis';
  /** Current totals in order; 0 for a counter never written or already expired. */
  read(keys: readonly string[]): Promise<Micros[]>;
  /** Adds every increment atomically (all or none, one round trip) and returns the new totals in order. */
  add(increments: readonly CounterIncrement[]): Promise<Micros[]>;
  close(): Promise<void>;
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
