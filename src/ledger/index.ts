// Spend ledger: counters (embedded or Redis), UTC budget windows, and the SpendGate the gateway calls.
export { createEmbeddedLedger, type EmbeddedLedger, type EmbeddedLedgerOptions } from './embedded.ts';
export { createRedisLedger, type RedisLedger, type RedisLedgerOptions } from './redis.ts';
export { LedgerResetError, LedgerUnavailableError, ReservationSettledError, type CounterIncrement, type Ledger, type RestoreEntry } from './ledger.ts';
export { DEFAULT_EXPIRY_MARGIN_MS, DEFAULT_KEY_PREFIX, ID_RETENTION_MS, keySpace, type KeySpace } from './keys.ts';
export { createSpendGate, RESERVATION_TTL_MS, type LedgerSpendGate, type SpendGateOptions } from './spend-gate.ts';
export { microsText, readAccountMonth, readWindows, type AccountMonth, type WindowSpend } from './spend-view.ts';
export { INTERVALS, windowOf, windowsAt, type BudgetWindow } from './windows.ts';
export { openLedger, type LedgerConfig } from './open.ts';
