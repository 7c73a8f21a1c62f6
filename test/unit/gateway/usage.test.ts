// Upstream usage is tenant input (issue 25 §2): only non-negative safe integers within the request's bounds are
// metered as reported; anything else becomes a bounded estimate, flagged with the reason.
import { describe, expect, test } from '@jest/globals';
import { estimateUsage, meteredUsage, readUsage, USAGE_CEILING_TOKENS, usageBounds } from '../../../src/gateway/usage.ts';

describe('usage from an upstream', () => {
  const bounds = usageBounds(8192, { max_tokens: 100 });

  test('bounds: the context length, and max_tokens (or max_completion_tokens) for the completion', () => {
    expect(bounds).toEqual({ maxPromptTokens: 8192, maxCompletionTokens: 100 });
    expect(usageBounds(null, {})).toEqual({ maxPromptTokens: USAGE_CEILING_TOKENS, maxCompletionTokens: USAGE_CEILING_TOKENS });
    expect(usageBounds(1000, { max_completion_tokens: 50, max_tokens: 900 })).toEqual({ maxPromptTokens: 1000, maxCompletionTokens: 50 });
    // A max_tokens past the context, or not a positive integer, does not widen anything.
    expect(usageBounds(1000, { max_tokens: 5000 }).maxCompletionTokens).toBe(1000);
    for (const bad of [0, -5, 1.5, '100', null]) expect(usageBounds(1000, { max_tokens: bad }).maxCompletionTokens).toBe(1000);
  });

  test('well-formed counts within bounds are used as reported', () => {
    expect(readUsage({ prompt_tokens: 12, completion_tokens: 9, total_tokens: 21 }, bounds)).toEqual({ usage: { promptTokens: 12, completionTokens: 9 } });
    expect(meteredUsage({ prompt_tokens: 0, completion_tokens: 0 }, bounds, 400, 400)).toEqual({ promptTokens: 0, completionTokens: 0 });
  });

  test.each([
    [undefined, 'missing'],
    [null, 'missing'],
    ['12', 'invalid'],
    [{ prompt_tokens: 0.5, completion_tokens: 1 }, 'invalid'],
    [{ prompt_tokens: -1, completion_tokens: 1 }, 'invalid'],
    [{ prompt_tokens: 1, completion_tokens: '9' }, 'invalid'],
    [{ prompt_tokens: Number.NaN, completion_tokens: 1 }, 'invalid'],
    [{ prompt_tokens: 4e15, completion_tokens: 4e15 }, 'out_of_bounds'],
    [{ prompt_tokens: 2 ** 60, completion_tokens: 1 }, 'invalid'],
    [{ prompt_tokens: 10, completion_tokens: 101 }, 'out_of_bounds'],
  ])('%j → an estimate (%s)', (value, reason) => {
    expect(readUsage(value, bounds)).toEqual({ problem: reason });
    const metered = meteredUsage(value, bounds, 4000, 1000);
    expect(metered).toEqual({ promptTokens: 1000, completionTokens: 100, estimated: reason });
  });

  test('estimates round up, and never pass the bounds', () => {
    expect(estimateUsage(1, 1, bounds)).toEqual({ promptTokens: 1, completionTokens: 1 });
    expect(estimateUsage(10 ** 9, 10 ** 9, bounds)).toEqual({ promptTokens: 8192, completionTokens: 100 });
    expect(estimateUsage(0, 0, bounds)).toEqual({ promptTokens: 0, completionTokens: 0 });
  });
});
