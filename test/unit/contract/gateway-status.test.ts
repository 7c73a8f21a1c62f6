// The gateway status report is one format on both sides: what the gateway's counters produce parses on the
// operator's side and matches the published schema; anything else is refused with an error that names a field,
// never a value.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { Ajv2020 } from 'ajv/dist/2020.js';
import {
  GATEWAY_STATUS_FORMAT,
  GatewayStatusError,
  type GatewayStatusReport,
  parseGatewayStatusReport,
} from '../../../src/contract/gateway-status.ts';
import { gatewayStatusSchema } from '../../../src/contract/schemas.ts';
import { DeliveryTracker } from '../../../src/gateway/delivered-routing.ts';
import { bundleInventory, CredentialHealth } from '../../../src/gateway/health.ts';

/** A report as the gateway assembles it (src/gateway/server.ts), from real counters and a real bundle directory. */
function gatewayReport(): GatewayStatusReport {
  const dir = mkdtempSync(join(tmpdir(), 'byok-status-'));
  try {
    writeFileSync(join(dir, 'cred-a'), '{"v":1}');
    const health = new CredentialHealth();
    health.record('cred-a', 'ok', 1000);
    health.record('cred-a', 'unauthorized', 2000);
    health.record('cred-b', 'rateLimited', 3000);
    health.recordProbe('cred-b', { at: 4000, outcome: 'unauthorized', status: 401 });
    health.recordProbe('cred-c', { at: 5000, outcome: 'upstreamError', status: null });
    const delivery = new DeliveryTracker('down');
    delivery.connection(true);
    delivery.batch({
      batch: 3,
      result: 'refused',
      reason: 'Secret/byok-bundle-0: signed with key id k2, which this pod does not hold',
    });
    return {
      format: GATEWAY_STATUS_FORMAT,
      instance: '0b6c8f1e-5d0a-4f8e-9c1a-3e2d1f0a9b8c',
      at: 6000,
      routing: { version: 'a'.repeat(64) },
      bundle: bundleInventory(dir, join(dir, 'no-key'))(),
      credentials: health.snapshot(),
      probes: health.probeSnapshot(),
      delivery: delivery.report(),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const wire = (value: unknown): unknown => JSON.parse(JSON.stringify(value));
const validate = new Ajv2020({ allErrors: true, strict: false }).compile(gatewayStatusSchema);

describe('gateway status report (src/contract/gateway-status.ts)', () => {
  test('what the gateway writes, the operator reads back unchanged, and the schema accepts', () => {
    const report = gatewayReport();
    expect(parseGatewayStatusReport(wire(report))).toEqual(report);
    expect([validate(wire(report)), validate.errors]).toEqual([true, null]);
    // Before the first routing load and without a bundle key.
    const cold = {
      ...report,
      routing: { version: null },
      bundle: { keyId: null, generation: '', credentials: {} },
      credentials: {},
      probes: {},
    };
    expect(parseGatewayStatusReport(wire(cold))).toEqual(cold);
    expect(validate(wire(cold))).toBe(true);
  });

  test('a report without delivery (gateways that cannot hold a status request) reads without it; a reason is kept printable and bounded', () => {
    const { delivery: _delivery, ...old } = gatewayReport();
    expect(parseGatewayStatusReport(wire(old)).delivery).toBeUndefined();
    expect(validate(wire(old))).toBe(true);
    const long = {
      ...gatewayReport(),
      delivery: {
        seq: 1,
        stream: 'connected',
        lastBatch: { batch: 1, result: 'refused', reason: `bad\u0000${'x'.repeat(600)}` },
      },
    };
    const reason = parseGatewayStatusReport(wire(long)).delivery!.lastBatch!.reason!;
    expect(reason.length).toBe(512);
    expect(reason).toMatch(/^bad\?x+\.\.\.$/);
  });

  test('a report without probes (gateways from before probes) reads as no probes', () => {
    const { probes: _probes, ...old } = gatewayReport();
    expect(parseGatewayStatusReport(wire(old)).probes).toEqual({});
  });

  test('refuses what a gateway never writes, naming the field and no value', () => {
    const good = wire(gatewayReport()) as Record<string, unknown>;
    const counters = (good.credentials as Record<string, Record<string, unknown>>)['cred-a']!;
    const bad: Record<string, unknown>[] = [
      { ...good, format: 'byok-gateway-status/v2' },
      { ...good, instance: '' },
      { ...good, at: 'now' },
      { ...good, routing: { version: 7 } },
      { ...good, bundle: { keyId: null, credentials: {} } },
      { ...good, bundle: { keyId: null, generation: '', credentials: { 'cred-secret-id': 5 } } },
      { ...good, credentials: [] },
      { ...good, credentials: { 'cred-secret-id': { ...counters, ok: -1 } } },
      { ...good, credentials: { 'cred-secret-id': { ...counters, ok: 1.5 } } },
      { ...good, credentials: { 'cred-secret-id': { ...counters, lastSuccess: 'yesterday' } } },
      { ...good, probes: { 'cred-secret-id': { at: 1, outcome: 'fine', status: 200 } } },
      { ...good, probes: { 'cred-secret-id': { at: 1, outcome: 'ok', status: '200' } } },
      { ...good, delivery: { seq: -1, stream: 'connected' } },
      { ...good, delivery: { seq: 1, stream: 'sideways' } },
      { ...good, delivery: { seq: 1, stream: 'off', lastBatch: { batch: 1, result: 'maybe' } } },
      { ...good, delivery: { seq: 1, stream: 'off', lastBatch: { batch: 1, result: 'refused', reason: 5 } } },
    ];
    for (const report of bad) {
      let error: unknown;
      try {
        parseGatewayStatusReport(report);
      } catch (err) {
        error = err;
      }
      expect(error).toBeInstanceOf(GatewayStatusError);
      expect((error as Error).message).not.toMatch(/cred-secret-id|byok-gateway-status\/v2/);
      // The published schema refuses the same reports.
      expect({ report, valid: validate(report) }).toEqual({ report, valid: false });
    }
    expect(() => parseGatewayStatusReport(null)).toThrow(GatewayStatusError);
    expect(() => parseGatewayStatusReport('{}')).toThrow(GatewayStatusError);
  });

  test('a credential id "__proto__" is an ordinary key of the parsed maps', () => {
    const text = JSON.stringify(wire(gatewayReport())).replace(/"cred-a"/g, '"__proto__"');
    const parsed = parseGatewayStatusReport(JSON.parse(text));
    expect(Object.keys(parsed.credentials)).toContain('__proto__');
    expect(Object.getPrototypeOf(parsed.credentials)).toBe(Object.prototype);
    expect(parsed.bundle.credentials['__proto__']).toMatch(/^[0-9a-f]{16}$/);
  });
});
