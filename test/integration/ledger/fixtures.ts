// Kept for tests written against the old location; the module lives in test/support/ledger-fixtures.ts.
export * from '../../support/ledger-fixtures.ts';
