// `gateway-key create` mints keys the gateway accepts: the GatewayAPIKey holds the SHA-256 the gateway computes
// from `Authorization: Bearer <key>`, and the object carries no key material.
import { describe, expect, test } from '@jest/globals';
import { apiKeyHash } from '../../../src/gateway/completions.ts';
import { GATEWAY_KEY_PREFIX, gatewayKeyObject, generateGatewayKey } from '../../../src/service/gateway-keys.ts';
import { sha256Hex } from '../../../src/service/management-keys.ts';
import { validateManifest } from '../../../src/schema/validators.ts';

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
