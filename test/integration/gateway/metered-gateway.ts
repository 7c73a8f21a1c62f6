// Kept for tests written against the old location; the module lives in test/support/metered-gateway.ts.
export * from '../../support/metered-gateway.ts';
