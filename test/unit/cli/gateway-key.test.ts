// `gateway-key create` mints keys the gateway accepts: the GatewayAPIKey holds the SHA-256 the gateway computes
// from `Authorization: Bearer <key>`, and the object carries no key material.
import { describe, expect, test } from '@jest/globals';
import { apiKeyHash } from '../../../src/gateway/completions.ts';
import { validateManifest } from '../../../src/schema/validators.ts';
import {
  expiryTime,
  GATEWAY_KEY_PREFIX,
  gatewayKeyObject,
  generateGatewayKey,
  parseDuration,
} from '../../../src/service/gateway-keys.ts';
import { sha256Hex } from '../../../src/service/management-keys.ts';

describe('gateway keys', () => {
  test('the format is prefixed like the management key, and the gateway hashes it to the stored hash', () => {
    const key = generateGatewayKey();
    expect(key).toMatch(/^sk-byok-gw-v1-[0-9a-f]{64}$/);
    expect(key.startsWith(GATEWAY_KEY_PREFIX)).toBe(true);
    expect(generateGatewayKey()).not.toBe(key);
    expect(apiKeyHash(`Bearer ${key}`)).toEqual({ hash: sha256Hex(key) });
    expect(apiKeyHash(`bearer ${key}`)).toEqual({ hash: sha256Hex(key) });
  });

  test('the GatewayAPIKey passes the CRD schema, with workspace and guardrail when given, and holds no key', () => {
    const key = generateGatewayKey();
    const plain = gatewayKeyObject('team-a', 'app', sha256Hex(key));
    expect(plain.spec).toEqual({ hash: sha256Hex(key) });
    const scoped = gatewayKeyObject('team-a', 'app', sha256Hex(key), { workspace: 'main', guardrail: 'cap' });
    expect(scoped.spec).toEqual({ hash: sha256Hex(key), workspace: 'main', guardrail: 'cap' });
    for (const o of [plain, scoped]) {
      expect(validateManifest(o)?.problems).toEqual([]);
      expect(JSON.stringify(o)).not.toContain(key.slice(GATEWAY_KEY_PREFIX.length));
    }
  });
});

describe('gateway-key --expires and --overlap', () => {
  const NOW = Date.UTC(2026, 10, 28, 12, 0, 0);

  test('durations: seconds to weeks, combined; anything else is not one', () => {
    expect(parseDuration('90s')).toBe(90_000);
    expect(parseDuration('15m')).toBe(900_000);
    expect(parseDuration('1h30m')).toBe(5_400_000);
    expect(parseDuration('30d')).toBe(30 * 86_400_000);
    expect(parseDuration('2w')).toBe(14 * 86_400_000);
    for (const bad of ['', '0s', '1.5h', 'h', '10', '1y', '-1h', '1h ', 'tomorrow'])
      expect(parseDuration(bad)).toBeUndefined();
  });

  test('--expires: a duration from now, or a future RFC 3339 time with its offset, as UTC', () => {
    expect(expiryTime('12h', NOW)).toEqual({ at: '2026-11-29T00:00:00Z' });
    expect(expiryTime('2027-01-31T00:00:00Z', NOW)).toEqual({ at: '2027-01-31T00:00:00Z' });
    expect(expiryTime('2027-01-31T02:00:00+02:00', NOW)).toEqual({ at: '2027-01-31T00:00:00Z' });
    expect(expiryTime('2026-11-28T11:59:59Z', NOW)).toMatchObject({ error: expect.stringContaining('in the past') });
    // No offset: ambiguous, refused rather than read in the machine's zone.
    expect(expiryTime('2027-01-31T00:00:00', NOW)).toMatchObject({
      error: expect.stringContaining('neither a duration'),
    });
    expect(expiryTime('2027-01-31', NOW)).toMatchObject({ error: expect.stringContaining('neither a duration') });
  });

  test('the key object carries expiry, models and limits, and passes the CRD schema', () => {
    const o = gatewayKeyObject('team-a', 'app', sha256Hex(generateGatewayKey()), {
      expiresAt: '2027-01-31T00:00:00Z',
      models: ['openai/gpt-4o'],
      limits: { requestsPerMinute: 60, maxInFlight: 4 },
    });
    expect(o.spec).toMatchObject({
      expiresAt: '2027-01-31T00:00:00Z',
      models: ['openai/gpt-4o'],
      limits: { requestsPerMinute: 60, maxInFlight: 4 },
    });
    expect(validateManifest(o)?.problems).toEqual([]);
    const bad = gatewayKeyObject('team-a', 'app', sha256Hex(generateGatewayKey()), {
      limits: { requestsPerMinute: 0 },
    });
    expect(JSON.stringify(validateManifest(bad)?.problems)).toContain('requestsPerMinute');
  });
});
