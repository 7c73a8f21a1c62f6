// GET /metrics on the REST API server: requests and latency by route template and status, authentication
// failures by reason, rate-limit refusals; labels never carry raw URLs or keys.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { type Account, type Harness, seedAccount, startHarness } from '../../support/api-harness.ts';

function sample(text: string, name: string, labels: Record<string, string>): number {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  return text
    .split('\n')
    .filter((l) => l.startsWith(`${name}{`) && want.every((w) => l.includes(w)))
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
}

describe('REST API /metrics', () => {
  let a: Account;
  let h: Harness;
  beforeAll(async () => {
    a = await seedAccount('api-metrics');
    h = await startHarness([a.namespace], { rateLimit: { max: 4, timeWindowMs: 60_000 } });
  });
  afterAll(async () => {
    await h?.close();
  });

  test('counts by route template and status, auth failures by reason, rate-limit hits', async () => {
    const unknownId = '00000000-0000-4000-8000-000000000000';
    expect((await h.call('GET', '/byok', { key: a.managementKey })).status).toBe(200);
    expect((await h.call('GET', `/byok/${unknownId}`, { key: a.managementKey })).status).toBe(404);
    expect((await h.call('GET', '/byok')).status).toBe(401);
    expect((await h.call('GET', '/byok', { key: 'sk-byok-mgmt-v1-not-a-key' })).status).toBe(401);
    expect((await h.call('GET', '/byok', { key: a.gatewayKey })).status).toBe(403);
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push((await h.call('GET', '/byok', { key: a.managementKey })).status);
    expect(statuses).toContain(429);

    const res = await fetch(new URL('/metrics', h.base));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await res.text();
    expect(
      sample(text, 'byok_api_requests_total', { method: 'GET', route: '/api/v1/byok', status: '200' }),
    ).toBeGreaterThanOrEqual(2);
    expect(sample(text, 'byok_api_requests_total', { method: 'GET', route: '/api/v1/byok/:id', status: '404' })).toBe(
      1,
    );
    expect(sample(text, 'byok_api_request_duration_seconds_count', { route: '/api/v1/byok', status: '401' })).toBe(2);
    expect(sample(text, 'byok_api_auth_failures_total', { reason: 'missing_token' })).toBe(1);
    expect(sample(text, 'byok_api_auth_failures_total', { reason: 'invalid_token' })).toBe(1);
    expect(sample(text, 'byok_api_auth_failures_total', { reason: 'not_management_key' })).toBe(1);
    expect(sample(text, 'byok_api_rate_limited_total', { route: '/api/v1/byok' })).toBe(
      statuses.filter((s) => s === 429).length,
    );
    // Bounded labels: the id is in the template only; no key, no raw path.
    expect(text).not.toContain(unknownId);
    expect(text).not.toContain(a.managementKey);
    expect(text).not.toContain('not-a-key');
  });
});
