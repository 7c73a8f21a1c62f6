import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { bundleInventory, CredentialHealth, healthOutcome } from '../../../src/gateway/health.ts';
import { envelopeVersion } from '../../../src/sdk/index.ts';

describe('gateway health counters', () => {
  test('outcome classes: 401/403 refused, 429 rate limited, 5xx/timeouts/transport errors; other 4xx say nothing about the key', () => {
    expect(healthOutcome(200, 'ok')).toBe('ok');
    expect(healthOutcome(401, 'rejected')).toBe('unauthorized');
    expect(healthOutcome(403, 'rejected')).toBe('unauthorized');
    expect(healthOutcome(429, 'rate_limited')).toBe('rateLimited');
    expect(healthOutcome(503, 'upstream_error')).toBe('upstreamError');
    expect(healthOutcome(null, 'timeout')).toBe('upstreamError');
    expect(healthOutcome(null, 'transport_error')).toBe('upstreamError');
    expect(healthOutcome(200, 'stream_broken')).toBe('upstreamError');
    expect(healthOutcome(400, 'rejected')).toBeNull();
    expect(healthOutcome(null, 'credential_error')).toBeNull();
  });

  test('counts per credential with last success and failure; retain drops credentials that left the config', () => {
    const h = new CredentialHealth();
    h.record('a', 'ok', 1000);
    h.record('a', 'unauthorized', 2000);
    h.record('b', 'rateLimited', 3000);
    h.recordProbe('b', { at: 4000, outcome: 'ok', status: 200 });
    expect(h.snapshot()).toEqual({
      a: { ok: 1, unauthorized: 1, rateLimited: 0, upstreamError: 0, lastSuccess: 1000, lastFailure: 2000 },
      b: { ok: 0, unauthorized: 0, rateLimited: 1, upstreamError: 0, lastFailure: 3000 },
    });
    h.retain((id) => id === 'a');
    expect(Object.keys(h.snapshot())).toEqual(['a']);
    expect(h.probeSnapshot()).toEqual({});
  });

  test("the bundle inventory reports each envelope file's version, never its content", () => {
    const dir = mkdtempSync(join(tmpdir(), 'byok-health-'));
    try {
      writeFileSync(join(dir, 'cred-1'), '{"envelope":"one"}');
      const inv = bundleInventory(dir, join(dir, 'no-key'))();
      expect(inv).toEqual({
        keyId: null,
        generation: '',
        credentials: { 'cred-1': envelopeVersion('{"envelope":"one"}') },
      });
      expect(JSON.stringify(inv)).not.toContain('envelope');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
