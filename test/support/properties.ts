import { isDeepStrictEqual } from 'node:util';
import { expect } from '@jest/globals';

// How many cases a property-based test generates. The full suite (`npm test`, CI) runs every property at its full
// count; `npm run verify`, the check before a push, sets BYOK_QUICK_PROPERTIES=1 and runs a tenth of each (at least
// 20), so it stays under a minute while every test file still runs.
const QUICK = process.env.BYOK_QUICK_PROPERTIES === '1';

export function propertyRuns(full: number): number {
  return QUICK ? Math.min(full, Math.max(20, Math.ceil(full / 10))) : full;
}

/**
 * `expect(actual).toBe(expected)` for the inside of a property. Jest's expect() builds every matcher and an Error on
 * each call, which across thousands of cases cost more than the code under test; this checks first and calls Jest's
 * matcher, with its message, only on a difference.
 */
export function expectIs(actual: unknown, expected: unknown): void {
  if (!Object.is(actual, expected)) expect(actual).toBe(expected);
}

/**
 * `expect(actual).toEqual(expected)` for the inside of a property, checked first as strict deep equality (which
 * implies toEqual's), so Jest's matcher runs only to decide a difference and to describe it.
 */
export function expectEqual(actual: unknown, expected: unknown): void {
  if (!isDeepStrictEqual(actual, expected)) expect(actual).toEqual(expected);
}
