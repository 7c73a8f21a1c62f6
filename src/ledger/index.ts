// Spend ledger: counters (embedded or Redis), UTC budget windows, and the SpendGate the gateway calls.
export { createEmbeddedLedger, type EmbeddedLedger, type EmbeddedLedgerOptions } from './embedded.ts';
export { DEFAULT_EXPIRY_MARGIN_MS, DEFAULT_KEY_PREFIX, ID_RETENTION_MS, type KeySpace, keySpace } from './keys.ts';
export {
  type CounterIncrement,
  type Ledger,
  LedgerResetError,
  LedgerUnavailableError,
  ReservationSettledError,
  type RestoreEntry,
} from './ledger.ts';
export { type LedgerConfig, openLedger } from './open.ts';
export { createRedisLedger, type RedisLedger, type RedisLedgerOptions } from './redis.ts';
export { createSpendGate, type LedgerSpendGate, RESERVATION_TTL_MS, type SpendGateOptions } from './spend-gate.ts';
export { type AccountMonth, microsText, readAccountMonth, readWindows, type WindowSpend } from './spend-view.ts';
export { type BudgetWindow, INTERVALS, windowOf, windowsAt } from './windows.ts';
