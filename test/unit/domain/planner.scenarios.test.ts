// Routing scenario table: one or more cases per spec 1.1 rule and per interaction between rules, each with the
// exact attempt order and the exact explanation (every credential and shared endpoint left out, with its rule).
import { describe, expect, test } from '@jest/globals';
import { createCatalog, planRoute, RULES } from '../../../src/domain/index.ts';
import {
  account,
  attemptsOf,
  defaultEndpoints,
  exclusionsOf,
  MODEL,
  OTHER_MODEL,
  req,
} from '../../support/fixtures/domain.ts';
import { cases } from '../../support/fixtures/planner-scenarios.ts';

describe('route planner scenarios (spec 1.1)', () => {
  test.each(cases)('$name', (c) => {
    const endpoints = c.endpoints ?? defaultEndpoints();
    const catalog = createCatalog([
      { model: MODEL, endpoints },
      { model: OTHER_MODEL, endpoints },
    ]);
    const plan = planRoute(account(c.creds, c.account), catalog, req(c.request));
    expect(attemptsOf(plan)).toEqual(c.attempts);
    expect(exclusionsOf(plan)).toEqual([...c.excluded].sort());
    expect(plan.error?.code).toBe(c.error);
    for (const x of plan.excluded) expect(x.reason).toBe(RULES[x.rule]);
  });

  test('every rule id is exercised by the table', () => {
    const seen = new Set<string>();
    for (const c of cases) for (const x of c.excluded) seen.add(x.split(' ')[1] ?? '');
    expect([...seen].sort()).toEqual(Object.keys(RULES).sort());
  });
});
