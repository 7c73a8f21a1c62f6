// Kept for tests written against the old location; the module lives in test/support/gateway-fleet.ts.
export * from '../../support/gateway-fleet.ts';
