// Kept for tests written against the old location; the module lives in test/support/fixtures/export.ts.
export * from '../../support/fixtures/export.ts';
