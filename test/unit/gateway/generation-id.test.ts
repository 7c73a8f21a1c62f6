import { describe, expect, it } from '@jest/globals';
import { nextGenerationId } from '../../../src/gateway/completions.ts';

describe('generation ids', () => {
  it('are v4-shaped UUIDs after gen-, distinct per request', () => {
    const ids = Array.from({ length: 1000 }, () => nextGenerationId());
    for (const id of ids)
      expect(id).toMatch(/^gen-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(new Set(ids).size).toBe(ids.length);
  });
});
