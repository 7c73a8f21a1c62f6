// Kept for tests written against the old location; the module lives in test/support/export-crds.ts.
export * from '../../support/export-crds.ts';
