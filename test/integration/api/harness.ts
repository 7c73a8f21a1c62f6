// Kept for tests written against the old location; the module lives in test/support/api-harness.ts.
export * from '../../support/api-harness.ts';
