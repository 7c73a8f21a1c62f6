// Public API of the domain core: pure functions and types, no I/O.

export * from './account.ts';
export * from './api-keys.ts';
export * from './billing.ts';
export * from './budgets.ts';
export * from './catalog.ts';
export type * from './compiled.ts';
export * from './egress.ts';
export * from './errors.ts';
export {
  type CredentialPatch,
  type CredentialSettings,
  type CredentialWriteInput,
  type CredentialWriteResult,
  DEFAULT_SETTINGS,
  FILTER_FIELDS,
  type FilterField,
  FLAG_FIELDS,
  type FlagField,
  MAX_FILTER_ENTRIES,
  patchFromSpec,
  resolveCredentialWrite,
  SPEC_FIELD_NAMES,
  specFieldPath,
  specFromSettings,
  validateFilterShape,
} from './filters.ts';
export * from './hints.ts';
export * from './ids.ts';
export * from './label.ts';
export * from './money.ts';
export * from './payloads.ts';
export * from './planner.ts';
export * from './providers.ts';
export * from './secret-ref.ts';
