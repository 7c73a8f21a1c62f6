import { describe, expect, test } from '@jest/globals';
import type { GatewayStatusReport } from '../../../../src/contract/gateway-status.ts';
import {
  accountVersion,
  type CredentialHealthFacts,
  counterDelta,
  DEFAULT_THRESHOLDS,
  decideDelivered,
  decideUpstreamHealth,
  deliveryPart,
  evaluateCredentialHealth,
  OutcomeWindow,
  serves,
  servesApiKey,
  stalePodNote,
  upstreamHealthEvent,
} from '../../../../src/operator/health/evaluate.ts';
import { ownedStatus } from '../../../../src/operator/status/ownership.ts';

const counts = (ok: number, unauthorized = 0, rateLimited = 0, upstreamError = 0) => ({
  ok,
  unauthorized,
  rateLimited,
  upstreamError,
});
const t = DEFAULT_THRESHOLDS;

describe('UpstreamHealthy decision', () => {
  test('a failure class decides at minFailures and the ratio; 401/403 before 429 before errors', () => {
    expect(decideUpstreamHealth(counts(0, 3), undefined, t, '5 min')).toMatchObject({
      status: 'False',
      reason: 'Unauthorized',
    });
    expect(decideUpstreamHealth(counts(0, 3, 5), undefined, t, '5 min')).toMatchObject({
      status: 'False',
      reason: 'RateLimited',
    });
    expect(decideUpstreamHealth(counts(1, 0, 0, 4), undefined, t, '5 min')).toMatchObject({
      status: 'False',
      reason: 'UpstreamErrors',
    });
    // Below the ratio: successes win.
    expect(decideUpstreamHealth(counts(10, 3), undefined, t, '5 min')).toMatchObject({
      status: 'True',
      reason: 'Serving',
    });
    // One stray 401 is not a verdict.
    expect(decideUpstreamHealth(counts(0, 1), undefined, t, '5 min')).toMatchObject({
      status: 'Unknown',
      reason: 'Inconclusive',
    });
  });

  test('no attempts: Unused, but a False verdict stands until an attempt says otherwise', () => {
    expect(decideUpstreamHealth(counts(0), undefined, t, '5 min')).toMatchObject({
      status: 'Unknown',
      reason: 'Unused',
    });
    expect(
      decideUpstreamHealth(counts(0), { status: 'True', reason: 'Serving', message: '' }, t, '5 min'),
    ).toMatchObject({ status: 'Unknown', reason: 'Unused' });
    expect(
      decideUpstreamHealth(counts(0), { status: 'False', reason: 'Unauthorized', message: 'm' }, t, '5 min'),
    ).toMatchObject({ status: 'False', reason: 'Unauthorized' });
    expect(
      decideUpstreamHealth(counts(1), { status: 'False', reason: 'Unauthorized', message: 'm' }, t, '5 min'),
    ).toMatchObject({ status: 'True' });
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
  expect(decideDelivered(1, 2, 'v')).toMatchObject({
    status: 'False',
    reason: 'Pending',
    message: '1 of 2 gateway pods have loaded version v',
  });
  expect(decideDelivered(0, 0, 'v')).toMatchObject({ status: 'Unknown', reason: 'NoGateways' });
});

test("the reconcilers compare status without the health writer's fields and conditions", () => {
  const ready = { type: 'Ready', status: 'True', reason: 'Ready', message: '', lastTransitionTime: 'x' };
  const stored = {
    id: 'a',
    conditions: [ready, { ...ready, type: 'UpstreamHealthy' }, { ...ready, type: 'Delivered' }],
    lastUsedTime: 't',
    delivery: { loaded: 1 },
    spend: {},
  };
  expect(ownedStatus(stored)).toEqual({ id: 'a', conditions: [ready] });
  const plain = { id: 'a', conditions: [ready] };
  expect(ownedStatus(plain)).toBe(plain);
});

// ---- a credential's status part, from what a pass gathered (gather → pure evaluation → write) ----

const NOW = Date.parse('2026-11-26T12:00:00Z');
const condition = (type: string, status: string, reason: string, message = 'm') => ({
  type,
  status,
  reason,
  message,
  lastTransitionTime: '2026-11-26T11:00:00Z',
  observedGeneration: 1,
});
const facts = (over: Partial<CredentialHealthFacts> = {}): CredentialHealthFacts => ({
  stored: undefined,
  generation: 1,
  now: NOW,
  window: counts(0),
  probe: undefined,
  rotated: false,
  lastUsed: undefined,
  delivery: undefined,
  thresholds: t,
  lastUsedResolutionMs: 60_000,
  ...over,
});

describe('evaluateCredentialHealth', () => {
  test('a first pass with traffic: Serving, lastUsedTime and Delivered in one part, a transition to write', () => {
    const e = evaluateCredentialHealth(
      facts({ window: counts(4), lastUsed: NOW - 1000, delivery: { version: 'v1', loaded: 2, total: 2 } }),
    );
    expect(e.health).toMatchObject({
      type: 'UpstreamHealthy',
      status: 'True',
      reason: 'Serving',
      message: '4 ok, 0 refused, 0 rate limited, 0 errors in the last 5 min',
    });
    expect(e.part).toEqual({
      lastUsedTime: '2026-11-26T11:59:59Z',
      delivery: { loaded: 2, total: 2, configVersion: 'v1' },
      conditions: [
        {
          ...condition('UpstreamHealthy', 'True', 'Serving', e.health.message),
          lastTransitionTime: '2026-11-26T12:00:00Z',
        },
        {
          ...condition('Delivered', 'True', 'Delivered', 'all 2 gateway pods have loaded version v1'),
          lastTransitionTime: '2026-11-26T12:00:00Z',
        },
      ],
    });
    expect(e).toMatchObject({
      unchanged: false,
      transition: true,
      pending: false,
      storedFalse: false,
      rotatedFromFalse: false,
    });
  });

  test('the same verdict keeps the stored message and transition time: nothing to write', () => {
    const stored = {
      conditions: [
        condition('Ready', 'True', 'Ready'),
        condition('UpstreamHealthy', 'True', 'Serving', 'the old tally'),
      ],
    };
    const e = evaluateCredentialHealth(facts({ stored, window: counts(9) }));
    expect(e.health.message).toBe('the old tally');
    expect(e.part).toEqual({ conditions: [condition('UpstreamHealthy', 'True', 'Serving', 'the old tally')] });
    expect(e).toMatchObject({ unchanged: true, transition: false });
  });

  test('lastUsedTime moves only by the resolution', () => {
    const stored = {
      lastUsedTime: '2026-11-26T11:59:30Z',
      conditions: [condition('UpstreamHealthy', 'Unknown', 'Unused')],
    };
    expect(evaluateCredentialHealth(facts({ stored, lastUsed: NOW - 10_000 })).part.lastUsedTime).toBe(
      '2026-11-26T11:59:30Z',
    );
    expect(evaluateCredentialHealth(facts({ stored, lastUsed: NOW + 30_000 })).part.lastUsedTime).toBe(
      '2026-11-26T12:00:30Z',
    );
    // Not used since this leader started: the stored time stays.
    expect(evaluateCredentialHealth(facts({ stored })).part.lastUsedTime).toBe('2026-11-26T11:59:30Z');
  });

  test('a pod without the version: Delivered False Pending, poll again soon', () => {
    const e = evaluateCredentialHealth(facts({ delivery: { version: 'v2', loaded: 1, total: 3 } }));
    expect(e.part.delivery).toEqual({ loaded: 1, total: 3, configVersion: 'v2' });
    expect(e.part.conditions).toContainEqual(
      expect.objectContaining({ type: 'Delivered', status: 'False', reason: 'Pending' }),
    );
    expect(e.pending).toBe(true);
  });

  test('a delivered credential keeps its record when only the pod count moves', () => {
    const stored = {
      delivery: { loaded: 2, total: 2, configVersion: 'v1' },
      conditions: [
        condition('UpstreamHealthy', 'Unknown', 'Unused'),
        condition('Delivered', 'True', 'Delivered', 'all 2'),
      ],
    };
    const e = evaluateCredentialHealth(facts({ stored, delivery: { version: 'v1', loaded: 3, total: 3 } }));
    expect(e.part.delivery).toEqual({ loaded: 2, total: 2, configVersion: 'v1' });
    expect(e.unchanged).toBe(true);
    // Not compiled (any more): the stored Delivered and record stay as they are.
    expect(evaluateCredentialHealth(facts({ stored })).part).toMatchObject({
      delivery: stored.delivery,
      conditions: [expect.anything(), expect.objectContaining({ type: 'Delivered', status: 'True' })],
    });
  });

  test('a rotated key does not build on the old verdict, and remembers it left a False one', () => {
    const stored = { conditions: [condition('UpstreamHealthy', 'False', 'Unauthorized', 'refused')] };
    // Not rotated: the False verdict stands while the key is idle.
    expect(evaluateCredentialHealth(facts({ stored })).health).toMatchObject({
      status: 'False',
      reason: 'Unauthorized',
      message: 'refused',
    });
    const e = evaluateCredentialHealth(facts({ stored, rotated: true }));
    expect(e.health).toMatchObject({ status: 'Unknown', reason: 'Unused' });
    expect(e).toMatchObject({ transition: true, storedFalse: true, rotatedFromFalse: true });
  });

  test('a probe decides alone without traffic, only within the window', () => {
    expect(
      evaluateCredentialHealth(facts({ probe: { at: NOW - 1000, outcome: 'unauthorized', status: 401 } })).health,
    ).toMatchObject({
      status: 'False',
      reason: 'Unauthorized',
      message:
        'the provider refused this key (401/403): rotate it: the probe of this idle credential failed (HTTP 401)',
    });
    expect(
      evaluateCredentialHealth(facts({ probe: { at: NOW - t.windowMs, outcome: 'unauthorized', status: 401 } })).health,
    ).toMatchObject({ status: 'Unknown', reason: 'Unused' });
  });
});

describe('Events and the account part', () => {
  test('a transition into False is a Warning named after its class; out of False an UpstreamRecovered', () => {
    const health = (status: 'True' | 'False' | 'Unknown', reason: string) => ({
      type: 'UpstreamHealthy',
      status,
      reason,
      message: 'msg',
    });
    expect(upstreamHealthEvent(health('False', 'Unauthorized'), false)).toEqual({
      eventType: 'Warning',
      reason: 'UpstreamUnauthorized',
      note: 'msg',
    });
    expect(upstreamHealthEvent(health('False', 'RateLimited'), false)).toEqual({
      eventType: 'Warning',
      reason: 'UpstreamRateLimited',
      note: 'msg',
    });
    expect(upstreamHealthEvent(health('False', 'UpstreamErrors'), false)).toEqual({
      eventType: 'Warning',
      reason: 'UpstreamErrors',
      note: 'msg',
    });
    expect(upstreamHealthEvent(health('True', 'Serving'), true)).toEqual({
      eventType: 'Normal',
      reason: 'UpstreamRecovered',
      note: 'the provider accepts this credential again: msg',
    });
    expect(upstreamHealthEvent(health('True', 'Serving'), false)).toBeUndefined();
    expect(upstreamHealthEvent(health('Unknown', 'Unused'), true)).toBeUndefined();
  });

  test("an Account's delivery part, unchanged when stored", () => {
    const { part, unchanged } = deliveryPart(undefined, 3, { loaded: 1, total: 2, version: 'abc' }, NOW);
    expect(part).toEqual({
      delivery: { loaded: 1, total: 2, configVersion: 'abc' },
      conditions: [
        {
          ...condition('Delivered', 'False', 'Pending', '1 of 2 gateway pods have loaded version abc'),
          observedGeneration: 3,
          lastTransitionTime: '2026-11-26T12:00:00Z',
        },
      ],
    });
    expect(unchanged).toBe(false);
    expect(
      deliveryPart(
        { ...part, conditions: [condition('Ready', 'True', 'Ready'), ...part.conditions] },
        3,
        { loaded: 1, total: 2, version: 'abc' },
        NOW + 60_000,
      ).unchanged,
    ).toBe(true);
  });

  test("a key whose account's budgets are not open stays Delivered=False (Pending) on every pod, saying why; True once they open", () => {
    const waiting = "the account's budgets are not open yet";
    const held = deliveryPart(undefined, 2, { loaded: 2, total: 2, version: 'k1' }, NOW, waiting);
    expect(held.pending).toBe(true);
    expect(held.part.conditions[0]).toMatchObject({
      type: 'Delivered',
      status: 'False',
      reason: 'Pending',
      message: `all 2 gateway pods have loaded version k1; ${waiting}`,
    });
    // Waiting adds nothing to a version the pods do not hold yet.
    expect(
      deliveryPart(undefined, 2, { loaded: 1, total: 2, version: 'k1' }, NOW, waiting).part.conditions[0]!.message,
    ).toBe('1 of 2 gateway pods have loaded version k1');
    const open = deliveryPart(held.part, 2, { loaded: 2, total: 2, version: 'k1' }, NOW + 1000);
    expect(open).toMatchObject({ pending: false, unchanged: false });
    expect(open.part.conditions[0]).toMatchObject({ status: 'True', reason: 'Delivered' });
  });

  test('a pod serves a key from the run that first carried its entry, once it has a routing config', () => {
    const report = (routing: string | null) =>
      ({ routing: { version: routing }, bundle: { credentials: {} } }) as unknown as GatewayStatusReport;
    const delivery = { version: 'k', since: 5 };
    expect(servesApiKey(report('idx'), 5, delivery)).toBe(true);
    expect(servesApiKey(report('idx'), 4, delivery)).toBe(false);
    expect(servesApiKey(report(null), 9, delivery)).toBe(false);
  });

  test('a pod serves a credential with its envelope in its bundles and a routing index from the run that brought the entry', () => {
    const report = (routing: string | null, envelope: string) =>
      ({ routing: { version: routing }, bundle: { credentials: { id1: envelope } } }) as unknown as GatewayStatusReport;
    const delivery = { version: 'v', envelope: 'e2', since: 5 };
    expect(serves(report('idx', 'e2'), 5, 'id1', delivery)).toBe(true);
    expect(serves(report('idx', 'e2'), 4, 'id1', delivery)).toBe(false);
    expect(serves(report('idx', 'e1'), 9, 'id1', delivery)).toBe(false);
    expect(serves(report(null, 'e2'), -1, 'id1', { ...delivery, since: 0 })).toBe(false);
    expect(
      accountVersion(
        new Map([
          ['b', delivery],
          ['a', { ...delivery, version: 'w' }],
        ]),
      ),
    ).toBe(
      accountVersion(
        new Map([
          ['a', { ...delivery, version: 'w' }],
          ['b', delivery],
        ]),
      ),
    );
  });

  test('the stale-pod note says whether the pod answers', () => {
    expect(stalePodNote('gw-1', true, 'abc', 301_400)).toBe(
      "gateway pod gw-1 has not loaded this account's current credentials (version abc) for 301 s: check its projected volumes (a missing bundle slot or a Secret it cannot read)",
    );
    expect(stalePodNote('gw-1', false, 'abc', 300_000)).toBe(
      'gateway pod gw-1 has not answered the status endpoint for 300 s',
    );
  });
});
