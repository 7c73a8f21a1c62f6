// Kept for tests written against the old location; the module lives in test/support/fixtures/compiler.ts.
export * from '../../support/fixtures/compiler.ts';
