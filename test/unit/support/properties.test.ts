// The property helpers decide exactly as the Jest matchers they stand for.
import { describe, expect, test } from '@jest/globals';
import { expectEqual, expectIs } from '../../support/properties.ts';

describe('expectIs and expectEqual', () => {
  test('expectIs passes and fails where toBe does', () => {
    expectIs(Number.NaN, Number.NaN);
    const same = { a: 1 };
    expectIs(same, same);
    expect(() => expectIs(0, -0)).toThrow(/toBe/);
    expect(() => expectIs({ a: 1 }, { a: 1 })).toThrow(/toBe/);
  });

  test('expectEqual passes and fails where toEqual does, with its message', () => {
    expectEqual({ a: [1, { b: new Set([2]) }] }, { a: [1, { b: new Set([2]) }] });
    // Equal to toEqual, not strictly: the cheap check misses and Jest's matcher decides.
    expectEqual({ a: 1, b: undefined }, { a: 1 });
    expect(() => expectEqual({ a: 1 }, { a: 2 })).toThrow(/toEqual/);
    expect(() => expectEqual([1, 2], [1, 2, 3])).toThrow(/toEqual/);
  });
});
