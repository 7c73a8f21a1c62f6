// What the health writer remembers between passes (src/operator/health/memory.ts): pod counters into windows,
// key rotations, recoveries, deleted credentials and lagging pods. Pure: reports in, numbers out.
import { describe, expect, test } from '@jest/globals';
import {
  type CredentialCounters,
  GATEWAY_STATUS_FORMAT,
  type GatewayStatusReport,
} from '../../../../src/contract/gateway-status.ts';
import { HealthMemory } from '../../../../src/operator/health/memory.ts';

const WINDOW = 300_000;
const counters = (ok: number, unauthorized = 0, extra: Partial<CredentialCounters> = {}): CredentialCounters => ({
  ok,
  unauthorized,
  rateLimited: 0,
  upstreamError: 0,
  ...extra,
});
const report = (
  instance: string,
  credentials: Record<string, CredentialCounters>,
  probes: GatewayStatusReport['probes'] = {},
): GatewayStatusReport => ({
  format: GATEWAY_STATUS_FORMAT,
  instance,
  at: 0,
  routing: { version: 'idx' },
  bundle: { keyId: 'k', generation: '', credentials: {} },
  credentials,
  probes,
});
const pods = (...names: string[]) => names.map((pod) => ({ pod }));

describe('HealthMemory', () => {
  test('counters of several pods become one window of deltas; a restarted pod counts from zero', () => {
    const m = new HealthMemory(0);
    m.absorb(
      new Map([
        ['a', report('a1', { c: counters(3) })],
        ['b', report('b1', { c: counters(1, 1) })],
      ]),
      pods('a', 'b'),
      1000,
    );
    expect(m.window('c', 1000, WINDOW)).toEqual({ ok: 4, unauthorized: 1, rateLimited: 0, upstreamError: 0 });
    // Pod a moved by 2; pod b restarted (new instance) and reports 1 ok since.
    m.absorb(
      new Map([
        ['a', report('a1', { c: counters(5) })],
        ['b', report('b2', { c: counters(1) })],
      ]),
      pods('a', 'b'),
      2000,
    );
    expect(m.window('c', 2000, WINDOW)).toEqual({ ok: 7, unauthorized: 1, rateLimited: 0, upstreamError: 0 });
    // Attempts older than the window are forgotten.
    expect(m.window('c', 1000 + WINDOW, WINDOW)).toEqual({ ok: 3, unauthorized: 0, rateLimited: 0, upstreamError: 0 });
    expect(m.window('unknown', 2000, WINDOW)).toEqual({ ok: 0, unauthorized: 0, rateLimited: 0, upstreamError: 0 });
  });

  test('a pod no longer found is forgotten: when it comes back its counters are new', () => {
    const m = new HealthMemory(0);
    m.absorb(new Map([['a', report('a1', { c: counters(3) })]]), pods('a'), 1000);
    m.absorb(new Map(), pods(), 2000);
    m.absorb(new Map([['a', report('a1', { c: counters(4) })]]), pods('a'), 3000);
    expect(m.window('c', 3000, WINDOW).ok).toBe(7);
  });

  test('last use and the newest probe across pods decide idleness; before any, the start counts', () => {
    const m = new HealthMemory(500);
    expect(m.idleSince('c')).toBe(500);
    const probe = { at: 900, outcome: 'ok' as const, status: 200 };
    m.absorb(
      new Map([
        ['a', report('a1', { c: counters(1, 0, { lastSuccess: 700 }) }, { c: probe })],
        ['b', report('b1', { c: counters(0, 1, { lastFailure: 800 }) }, { c: { ...probe, at: 600 } })],
      ]),
      pods('a', 'b'),
      1000,
    );
    expect(m.lastUsedAt('c')).toBe(800);
    expect(m.probe('c')).toEqual(probe);
    expect(m.idleSince('c')).toBe(900);
  });

  test('a new key version clears the window and probe; the first version seen is no rotation', () => {
    const m = new HealthMemory(0);
    m.absorb(
      new Map([['a', report('a1', { c: counters(0, 5) }, { c: { at: 10, outcome: 'unauthorized', status: 401 } })]]),
      pods('a'),
      1000,
    );
    expect(m.rotate('c', 'e1')).toBe(false);
    expect(m.rotate('c', undefined)).toBe(false);
    expect(m.rotate('c', 'e1')).toBe(false);
    expect(m.window('c', 1000, WINDOW).unauthorized).toBe(5);
    expect(m.rotate('c', 'e2')).toBe(true);
    expect(m.window('c', 1000, WINDOW).unauthorized).toBe(0);
    expect(m.probe('c')).toBeUndefined();
  });

  test('a recovery after a rotation away from False is reported once a verdict other than Unknown is written', () => {
    const m = new HealthMemory(0);
    expect(m.recovers('c', false, 'True')).toBe(false);
    expect(m.recovers('c', true, 'True')).toBe(true);
    m.markRotatedFromFalse('c');
    expect(m.recovers('c', false, 'Unknown')).toBe(true);
    expect(m.recovers('c', false, 'True')).toBe(true);
    expect(m.recovers('c', false, 'True')).toBe(false);
  });

  test('deleted credentials are forgotten, once each', () => {
    const m = new HealthMemory(0);
    m.absorb(
      new Map([
        [
          'a',
          report(
            'a1',
            { keep: counters(1), gone: counters(1, 0, { lastSuccess: 5 }) },
            { gone: { at: 1, outcome: 'ok', status: 200 } },
          ),
        ],
      ]),
      pods('a'),
      1000,
    );
    m.rotate('gone', 'e1');
    m.rotate('keep', 'e1');
    expect(m.forgetCredentialsExcept(new Set(['keep']))).toEqual(['gone']);
    expect(m.window('gone', 1000, WINDOW).ok).toBe(0);
    expect(m.lastUsedAt('gone')).toBeUndefined();
    expect(m.window('keep', 1000, WINDOW).ok).toBe(1);
    expect(m.forgetCredentialsExcept(new Set(['keep']))).toEqual([]);
  });

  test('a lagging pod turns stale after the threshold and warns once; catching up or going away resets it', () => {
    const m = new HealthMemory(0);
    expect(m.lag('p', 'ns', true, 0, 1000)).toBeUndefined();
    expect(m.lag('p', 'ns', false, 100, 1000)).toEqual({ stale: false, firstStale: false, lagMs: 0 });
    expect(m.lag('p', 'ns', false, 1100, 1000)).toEqual({ stale: true, firstStale: true, lagMs: 1000 });
    expect(m.lag('p', 'ns', false, 1500, 1000)).toEqual({ stale: true, firstStale: false, lagMs: 1400 });
    // Another account on the same pod lags on its own clock.
    expect(m.lag('p', 'other', false, 1500, 1000)).toEqual({ stale: false, firstStale: false, lagMs: 0 });
    expect(m.lag('p', 'ns', true, 1600, 1000)).toBeUndefined();
    expect(m.lag('p', 'ns', false, 1700, 1000)).toEqual({ stale: false, firstStale: false, lagMs: 0 });
    m.forgetPodsExcept(pods('q'));
    expect(m.lag('p', 'other', false, 5000, 1000)).toEqual({ stale: false, firstStale: false, lagMs: 0 });
  });
});
