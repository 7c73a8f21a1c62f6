// Kept for tests written against the old location; the module lives in test/support/fixtures/planner-scenarios.ts.
export * from '../../support/fixtures/planner-scenarios.ts';
