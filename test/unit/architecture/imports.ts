// Kept for tests written against the old location; the module lives in test/support/module-imports.ts.
export * from '../../support/module-imports.ts';
