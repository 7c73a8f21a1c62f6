import { describe, expect, test } from '@jest/globals';
import { counterDelta, decideDelivered, decideUpstreamHealth, DEFAULT_THRESHOLDS, OutcomeWindow } from '../../../src/operator/health-decide.ts';
import { ownedStatus } from '../../../src/operator/status/ownership.ts';

const counts = (ok: number, unauthorized = 0, rateLimited = 0, upstreamError = 0) => ({ ok, unauthorized, rateLimited, upstreamError });
const t = DEFAULT_THRESHOLDS;

describe('UpstreamHealthy decision', () => {
  test('a failure class decides at minFailures and the ratio; 401/403 before 429 before errors', () => {
    expect(decideUpstreamHealth(counts(0, 3), undefined, t, '5 min')).toMatchObject({ status: 'False', reason: 'Unauthorized' });
    expect(decideUpstreamHealth(counts(0, 3, 5), undefined, t, '5 min')).toMatchObject({ status: 'False', reason: 'RateLimited' });
    expect(decideUpstreamHealth(counts(1, 0, 0, 4), undefined, t, '5 min')).toMatchObject({ status: 'False', reason: 'UpstreamErrors' });
    // Below the ratio: successes win.
    expect(decideUpstreamHealth(counts(10, 3), undefined, t, '5 min')).toMatchObject({ status: 'True', reason: 'Serving' });
    // One stray 401 is not a verdict.
    expect(decideUpstreamHealth(counts(0, 1), undefined, t, '5 min')).toMatchObject({ status: 'Unknown', reason: 'Inconclusive' });
  });

  test('no attempts: Unused, but a False verdict stands until an attempt says otherwise', () => {
    expect(decideUpstreamHealth(counts(0), undefined, t, '5 min')).toMatchObject({ status: 'Unknown', reason: 'Unused' });
    expect(decideUpstreamHealth(counts(0), { status: 'True', reason: 'Serving', message: '' }, t, '5 min')).toMatchObject({ status: 'Unknown', reason: 'Unused' });
    expect(decideUpstreamHealth(counts(0), { status: 'False', reason: 'Unauthorized', message: 'm' }, t, '5 min')).toMatchObject({ status: 'False', reason: 'Unauthorized' });
    expect(decideUpstreamHealth(counts(1), { status: 'False', reason: 'Unauthorized', message: 'm' }, t, '5 min')).toMatchObject({ status: 'True' });
  });
});

describe('counters and the window', () => {
  test('deltas of monotonic counters; a restart (lower value) counts the whole value', () => {
    expect(counterDelta(counts(5, 2), counts(3, 2))).toEqual(counts(2, 0));
    expect(counterDelta(counts(1), counts(3))).toEqual(counts(1));
    expect(counterDelta(counts(4), undefined)).toEqual(counts(4));
  });

  test('the window forgets attempts older than windowMs', () => {
    const w = new OutcomeWindow();
    w.add(1000, counts(1, 2));
    w.add(5000, counts(0, 1));
    expect(w.sum(6000, 10_000)).toEqual(counts(1, 3));
    expect(w.sum(12_000, 10_000)).toEqual(counts(0, 1));
    expect(w.sum(20_000, 10_000)).toEqual(counts(0));
    expect(w.isEmpty()).toBe(true);
  });
});

test('Delivered from pod counts', () => {
  expect(decideDelivered(2, 2, 'v')).toMatchObject({ status: 'True', reason: 'Delivered' });
  expect(decideDelivered(1, 2, 'v')).toMatchObject({ status: 'False', reason: 'Pending', message: '1 of 2 gateway pods have loaded version v' });
  expect(decideDelivered(0, 0, 'v')).toMatchObject({ status: 'Unknown', reason: 'NoGateways' });
});

test('the reconcilers compare status without the health writer\'s fields and conditions', () => {
  const ready = { type: 'Ready', status: 'True', reason: 'Ready', message: '', lastTransitionTime: 'x' };
  const stored = { id: 'a', conditions: [ready, { ...ready, type: 'UpstreamHealthy' }, { ...ready, type: 'Delivered' }], lastUsedTime: 't', delivery: { loaded: 1 }, spend: {} };
  expect(ownedStatus(stored)).toEqual({ id: 'a', conditions: [ready] });
  const plain = { id: 'a', conditions: [ready] };
  expect(ownedStatus(plain)).toBe(plain);
});
