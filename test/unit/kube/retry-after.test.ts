// Retry-After as the kube client reads it: delay-seconds only (what the apiserver sends); anything else means the
// 429 is the answer.
import { describe, expect, test } from '@jest/globals';
import { retryAfterMs } from '../../../src/kube/client.ts';

describe('retryAfterMs', () => {
  test('delay-seconds become milliseconds', () => {
    expect(retryAfterMs('1')).toBe(1000);
    expect(retryAfterMs(' 2 ')).toBe(2000);
    expect(retryAfterMs('0')).toBe(0);
    expect(retryAfterMs(['3', '9'])).toBe(3000);
  });

  test('absent, an HTTP date, a fraction, a sign or an absurd size: no retry', () => {
    for (const header of [undefined, '', 'Wed, 21 Oct 2015 07:28:00 GMT', '1.5', '-1', '+1', '1e3', '1234567', []])
      expect(retryAfterMs(header)).toBeUndefined();
  });
});
