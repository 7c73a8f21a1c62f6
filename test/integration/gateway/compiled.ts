// Kept for tests written against the old location; the module lives in test/support/compiled.ts.
export * from '../../support/compiled.ts';
