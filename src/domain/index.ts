// Public API of the domain core: pure functions and types, no I/O.
export * from './providers.ts';
export * from './ids.ts';
export * from './api-keys.ts';
export type * from './compiled.ts';
export * from './errors.ts';
export * from './money.ts';
export * from './payloads.ts';
export * from './secret-ref.ts';
export * from './egress.ts';
export * from './label.ts';
export {
  DEFAULT_SETTINGS,
  FILTER_FIELDS,
  FLAG_FIELDS,
  MAX_FILTER_ENTRIES,
  SPEC_FIELD_NAMES,
  patchFromSpec,
  resolveCredentialWrite,
  specFieldPath,
  specFromSettings,
  validateFilterShape,
  type CredentialPatch,
  type CredentialSettings,
  type CredentialWriteInput,
  type CredentialWriteResult,
  type FilterField,
  type FlagField,
} from './filters.ts';
export * from './catalog.ts';
export * from './account.ts';
export * from './planner.ts';
export * from './billing.ts';
export * from './budgets.ts';
export * from './hints.ts';
