// Kept for tests written against the old location; the module lives in test/support/upstreams.ts.
export * from '../../support/upstreams.ts';
