// Kept for tests written against the old location; the module lives in test/support/fixtures/domain.ts.
export * from '../../support/fixtures/domain.ts';
