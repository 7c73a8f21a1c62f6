// The controls of a gateway key (docs/gateway.md, "Key controls"), against real processes: the operator compiling
// one account, a projector writing the routing files, TWO gateway processes (`node src/cli/main.ts gateway`, as
// pods run it) sharing one real redis-server, a loopback upstream. Rate limits are counted across both replicas in
// Redis: N concurrent requests at a limit of k admit exactly k, the rest are 429 with Retry-After. The allowlist
// answers 403 naming the allowed models; `gateway-key create --expires` writes the expiry; `gateway-key rotate`
// keeps the old secret working inside its overlap and refuses it after (asserted by the order of outcomes).

import type { ChildProcess } from 'node:child_process';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { kubeClient } from '../../../src/kube/client.ts';
import { type Projector, startProjector } from '../../../src/kube/projector.ts';
import type { GatewayAPIKey } from '../../../src/schema/generated/types.ts';
import { API_VERSION, GROUP, VERSION } from '../../../src/schema/resources.ts';
import { loadRoutingConfig } from '../../../src/sdk/index.ts';
import { createGatewayKey, rotateGatewayKey } from '../../../src/service/gateway-keys.ts';
import { credential, keyHash, secret, withSecret, withSpec } from '../../support/builders.ts';
import { gpt4o, writeGatewayFiles } from '../../support/catalog.ts';
import { type GatewayProcess, spawnGateway, stopProcess } from '../../support/gateway-process.ts';
import { createTestNamespace, kubectl, rejection, testKubeConfig, testKubeconfigPath } from '../../support/kube.ts';
import { type CapturedOperator, resource, startTestOperator } from '../../support/operator.ts';
import { type RedisServer, startRedis } from '../../support/redis.ts';
import { createObjects } from '../../support/tenant.ts';
import { until } from '../../support/until.ts';
import { startUpstreams, type Upstreams } from '../../support/upstreams.ts';

const execFileAsync = promisify(execFile);
const MAIN = join(import.meta.dirname, '..', '..', '..', 'src', 'cli', 'main.ts');
const OPENAI_KEY = 'sk-key-controls-openai-aaaaaaaa';
const secretOf = (name: string) => `sk-byok-gw-v1-key-controls-${name}-0123456789abcdef`;

/** The keys of the account: name -> spec beyond its hash. */
const KEYS: Record<string, Record<string, unknown>> = {
  rpm: { limits: { requestsPerMinute: 5 } },
  flight: { limits: { maxInFlight: 3 } },
  tpm: { limits: { tokensPerMinute: 1200 } },
  models: { models: ['openai/gpt-4o-mini', 'anthropic/claude-sonnet-4'] },
  rotating: {},
};

let redis: RedisServer;
let up: Upstreams;
let ns: string;
let root: string;
let op: CapturedOperator;
let projector: Projector;
let dirs: { config: string; bundles: string; key: string };
const gateways: GatewayProcess[] = [];
const running = new Set<ChildProcess>();

const chat = (gw: GatewayProcess, key: string, body: Record<string, unknown> = {}) =>
  fetch(`${gw.url}/api/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'openai/gpt-4o',
      max_tokens: 100,
      messages: [{ role: 'user', content: 'hi' }],
      ...body,
    }),
  });

const compiledKeys = async (): Promise<number> => {
  await projector.sync();
  try {
    return loadRoutingConfig(dirs.config).accounts.get(ns)?.apiKeys.length ?? 0;
  } catch {
    return 0;
  }
};

async function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await execFileAsync(
      process.execPath,
      [MAIN, ...args, '--kubeconfig', testKubeconfigPath()],
      { encoding: 'utf8' },
    );
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? 1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

beforeAll(async () => {
  const kc = testKubeConfig();
  root = mkdtempSync(join(tmpdir(), 'byok-key-controls-'));
  dirs = { config: join(root, 'routing'), bundles: join(root, 'bundles'), key: join(root, 'key') };
  redis = await startRedis();
  up = await startUpstreams();
  ns = await createTestNamespace('keyctl-acct');
  const routingNs = await createTestNamespace('keyctl-routing');
  op = await startTestOperator(kc, {
    routingNamespace: routingNs,
    watchNamespaces: [ns],
    compile: { coalesceMs: 10 },
    spendStatus: { redisUrl: redis.url, intervalMs: 200 },
  });
  await resource('accounts', ns).create({
    apiVersion: API_VERSION,
    kind: 'Account',
    metadata: { name: 'acct' },
    spec: { plan: 'pay-as-you-go' },
  });
  await resource('workspaces', ns).create({
    apiVersion: API_VERSION,
    kind: 'Workspace',
    metadata: { name: 'main' },
    spec: { default: true },
  });
  for (const [name, spec] of Object.entries(KEYS)) {
    await resource('gatewayapikeys', ns).create({
      apiVersion: API_VERSION,
      kind: 'GatewayAPIKey',
      metadata: { name },
      spec: { hash: keyHash(secretOf(name)), ...spec },
    });
  }
  await createObjects(
    ns,
    secret('oa-key', OPENAI_KEY),
    credential('oa', withSecret('oa-key'), withSpec({ isByokOnly: true })),
  );
  writeGatewayFiles(root, up, { models: [gpt4o(up, { maxOutputTokens: 4096 })] });
  projector = startProjector({
    kubeConfig: kc,
    routingNamespace: routingNs,
    configDir: dirs.config,
    bundleDir: dirs.bundles,
    keyDir: dirs.key,
    pollMs: 100,
  });
  await until('every key compiled', async () => (await compiledKeys()) === Object.keys(KEYS).length, 30_000, 200);
  for (let i = 0; i < 2; i++) {
    const gw = await spawnGateway(
      [
        '--config-dir',
        dirs.config,
        '--bundle-dir',
        dirs.bundles,
        '--key-dir',
        dirs.key,
        '--catalog',
        join(root, 'catalog.json'),
        '--upstream-ca',
        join(root, 'upstream-ca.pem'),
        '--port',
        '0',
        '--ops-port',
        '0',
        '--ledger-redis-url',
        redis.url,
        '--log-level',
        'info',
        '--ledger-journal',
        'none',
      ],
      running,
    );
    await until(
      'the gateway ready',
      async () => (await fetch(`${gw.opsUrl}/readyz`).catch(() => undefined))?.ok,
      30_000,
      100,
    );
    gateways.push(gw);
  }
}, 120_000);

afterAll(async () => {
  up?.held.release();
  for (const gw of gateways) await stopProcess(gw.child);
  await projector?.stop();
  await op?.op.stop();
  await redis?.stop();
  await up?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

describe('gateway key controls across two gateway replicas sharing one redis-server', () => {
  test('requests per minute: 20 concurrent requests over both replicas at a limit of 5 admit exactly 5; the rest are 429 with Retry-After', async () => {
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => chat(gateways[i % 2]!, secretOf('rpm'))));
    const statuses = answers.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(15);
    for (const r of answers.filter((a) => a.status === 429)) {
      const retry = Number(r.headers.get('retry-after'));
      expect(retry).toBeGreaterThanOrEqual(1);
      expect(retry).toBeLessThanOrEqual(60);
      const body = (await r.json()) as { error: { code: number; message: string; metadata: Record<string, unknown> } };
      expect(body.error).toMatchObject({
        code: 429,
        metadata: { reason: 'key_rate_limited', limit: 'requests', limit_value: 5, used: 5 },
      });
      expect(body.error.message).toContain('5 requests per minute');
    }
    // Both replicas served: the count is shared, not per replica.
    const servedBy = answers.map((r, i) => (r.status === 200 ? i % 2 : -1)).filter((x) => x >= 0);
    expect(servedBy.length).toBe(5);
  }, 60_000);

  test('requests in flight: 10 concurrent at a limit of 3 send exactly 3 upstream; the rest are 429 with Retry-After: 1; once they finish there is room again', async () => {
    up.behavior.set(OPENAI_KEY, 'held');
    try {
      const pending = Array.from({ length: 10 }, (_, i) => chat(gateways[i % 2]!, secretOf('flight')));
      // The refusals answer at once; the admitted ones wait upstream.
      const refused = await until(
        '7 refusals',
        async () => {
          const settled = await Promise.all(
            pending.map((p) =>
              Promise.race([p.then((r) => r), new Promise<null>((r) => setTimeout(() => r(null), 20))]),
            ),
          );
          const done = settled.filter((r): r is Response => r !== null);
          return done.length === 7 && up.held.arrived === 3 ? done : undefined;
        },
        30_000,
        100,
      );
      for (const r of refused) {
        expect(r.status).toBe(429);
        expect(r.headers.get('retry-after')).toBe('1');
        expect(((await r.json()) as { error: { metadata: { limit: string } } }).error.metadata.limit).toBe('in_flight');
      }
      expect(up.held.arrived).toBe(3);
      up.held.release();
      const admitted = await Promise.all(pending);
      expect(admitted.filter((r) => r.status === 200)).toHaveLength(3);
    } finally {
      up.behavior.delete(OPENAI_KEY);
    }
    // Their slots were freed when they finished.
    await until(
      'room in flight again',
      async () => (await chat(gateways[1]!, secretOf('flight'))).status === 200,
      10_000,
      100,
    );
  }, 60_000);

  test('tokens per minute: a request counts its bound when admitted and what it used when done; one that alone needs more is refused without Retry-After', async () => {
    const tooBig = await chat(gateways[0]!, secretOf('tpm'), { max_tokens: 2000 });
    expect(tooBig.status).toBe(429);
    expect(tooBig.headers.get('retry-after')).toBeNull();
    expect(((await tooBig.json()) as { error: { message: string } }).error.message).toContain('lower max_tokens');
    // Within the limit when admitted; the upstream then reports 1,500 tokens used, more than the 1,200 per minute.
    expect((await chat(gateways[0]!, secretOf('tpm'))).status).toBe(200);
    const next = await until(
      'the used count settled',
      async () => {
        const r = await chat(gateways[1]!, secretOf('tpm'));
        return r.status === 429 ? r : undefined;
      },
      10_000,
      100,
    );
    const retry = Number(next.headers.get('retry-after'));
    expect(retry).toBeGreaterThanOrEqual(1);
    expect(retry).toBeLessThanOrEqual(60);
    expect(((await next.json()) as { error: { metadata: { limit: string } } }).error.metadata.limit).toBe('tokens');
  }, 60_000);

  test("a model outside the key's allowlist is refused with 403 naming the allowed models, before any upstream is tried", async () => {
    const hits = up.hits.length;
    const r = await chat(gateways[0]!, secretOf('models'));
    expect(r.status).toBe(403);
    const body = (await r.json()) as {
      error: { code: number; message: string; metadata: { reason: string; allowed_models: string[] } };
    };
    expect(body.error.code).toBe(403);
    expect(body.error.metadata).toMatchObject({
      reason: 'model_not_allowed',
      allowed_models: ['anthropic/claude-sonnet-4', 'openai/gpt-4o-mini'],
    });
    expect(body.error.message).toContain('openai/gpt-4o-mini');
    expect(body.error.message).toContain('anthropic/claude-sonnet-4');
    expect(up.hits.length).toBe(hits);
  }, 30_000);

  test('the spend of each key is a metric labelled <namespace>/<key name>', async () => {
    // Whichever replica served the admitted requests of the rpm key: both are read.
    const text = (await Promise.all(gateways.map(async (gw) => (await fetch(`${gw.opsUrl}/metrics`)).text()))).join(
      '\n',
    );
    expect(text).toMatch(new RegExp(`byok_gateway_key_spend_usd_total\\{key="${ns}/rpm"\\} [0-9.e-]+`));
    expect(text).toMatch(/byok_gateway_key_rate_limited_total\{limit="requests"\} \d+/);
    // No series is named after a hash: the label is the key object's name.
    expect(text).not.toMatch(/byok_gateway_key_spend_usd_total\{key="[^"]*[0-9a-f]{64}/);
  }, 30_000);

  test('the spend of each key is in its status and in `kubectl get gwkey` (Spend MTD USD)', async () => {
    // The rpm key served 5 requests, each metered at 1,000 prompt + 500 completion tokens: 7,500 micros at this price.
    const key = await until(
      'GatewayAPIKey.status.spend',
      async () => {
        const o = await resource('gatewayapikeys', ns).get('rpm');
        return (o.status?.spend as { spentUsd?: number } | undefined)?.spentUsd === 0.0375 ? o : undefined;
      },
      30_000,
      200,
    );
    expect((key.status?.spend as { month?: string } | undefined)?.month).toMatch(/^\d{4}-\d{2}$/);
    const table = await kubectl('get', 'gwkey', 'rpm', '-n', ns);
    const [header, row] = table.trim().split('\n');
    expect(header).toContain('SPEND MTD USD');
    // kubectl aligns each column at its header's offset (an empty column, such as EXPIRES AT, is blank there).
    const at = header!.indexOf('SPEND MTD USD');
    expect(row!.slice(at).split(/\s+/)[0]).toBe('0.0375');
    // A key that served nothing has no spend written.
    expect((await resource('gatewayapikeys', ns).get('models')).status?.spend).toBeUndefined();
  }, 60_000);

  test('gateway-key create --expires writes the expiry (a duration or an RFC 3339 time) and refuses one in the past', async () => {
    const before = Date.now();
    const made = await cli(
      'gateway-key',
      'create',
      '--namespace',
      ns,
      '--name',
      'expiring',
      '--expires',
      '2h',
      '--rpm',
      '7',
      '--models',
      'openai/gpt-4o',
    );
    const after = Date.now();
    expect(made.code).toBe(0);
    expect(made.stdout.trim()).toMatch(/^sk-byok-gw-v1-[0-9a-f]{64}$/);
    const key = (await resource('gatewayapikeys', ns).get('expiring')) as unknown as {
      spec: { expiresAt: string; limits: unknown; models: string[] };
    };
    const at = Date.parse(key.spec.expiresAt);
    expect(at).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000 + 7_200_000);
    expect(at).toBeLessThanOrEqual(after + 7_200_000);
    expect(key.spec.limits).toEqual({ requestsPerMinute: 7 });
    expect(key.spec.models).toEqual(['openai/gpt-4o']);
    const fixed = await cli(
      'gateway-key',
      'create',
      '--namespace',
      ns,
      '--name',
      'fixed',
      '--expires',
      '2999-01-31T00:00:00Z',
    );
    expect(fixed.code).toBe(0);
    expect(
      ((await resource('gatewayapikeys', ns).get('fixed')) as unknown as { spec: { expiresAt: string } }).spec
        .expiresAt,
    ).toBe('2999-01-31T00:00:00Z');
    const past = await cli(
      'gateway-key',
      'create',
      '--namespace',
      ns,
      '--name',
      'past',
      '--expires',
      '2000-01-01T00:00:00Z',
    );
    expect(past.code).not.toBe(0);
    expect(past.stderr).toContain('in the past');
    const junk = await cli('gateway-key', 'create', '--namespace', ns, '--name', 'junk', '--expires', 'tomorrow');
    expect(junk.code).not.toBe(0);
    expect(junk.stderr).toContain('neither a duration');
  }, 60_000);

  test('gateway-key rotate: the new secret works, the old one keeps working inside the overlap and is refused (401) after it, never the other way round', async () => {
    const old = secretOf('rotating');
    expect((await chat(gateways[0]!, old)).status).toBe(200);
    const rotated = await cli('gateway-key', 'rotate', '--namespace', ns, '--name', 'rotating', '--overlap', '8s');
    expect(rotated.code).toBe(0);
    const fresh = rotated.stdout.trim();
    expect(fresh).toMatch(/^sk-byok-gw-v1-[0-9a-f]{64}$/);
    // The key is printed once, on stdout: never in what the command says.
    expect(rotated.stderr).not.toContain(fresh);
    const spec = (
      (await resource('gatewayapikeys', ns).get('rotating')) as unknown as {
        spec: { hash: string; previousHash: string; previousHashExpiresAt: string };
      }
    ).spec;
    expect(spec).toMatchObject({ hash: keyHash(fresh), previousHash: keyHash(old) });
    // The old secret, asked again and again from both replicas: served, then refused, and never served again.
    const outcomes: number[] = [];
    await until(
      'the old secret refused',
      async () => {
        const r = await chat(gateways[outcomes.length % 2]!, old);
        outcomes.push(r.status);
        return r.status === 401;
      },
      40_000,
      200,
    );
    expect(outcomes[0]).toBe(200);
    const firstRefusal = outcomes.indexOf(401);
    expect(outcomes.slice(0, firstRefusal).every((s) => s === 200)).toBe(true);
    for (let i = 0; i < 4; i++) expect((await chat(gateways[i % 2]!, old)).status).toBe(401);
    // The new one is served on both replicas.
    await until(
      'the new secret served',
      async () => (await chat(gateways[0]!, fresh)).status === 200 && (await chat(gateways[1]!, fresh)).status === 200,
      30_000,
      200,
    );
    // The compile drops the old hash once the overlap is over: only the new one is left of this key.
    await until(
      'the old hash compiled out',
      async () => {
        await projector.sync();
        const keys = loadRoutingConfig(dirs.config).accounts.get(ns)?.apiKeys ?? [];
        return keys.some((k) => k.hash === keyHash(fresh)) && !keys.some((k) => k.hash === keyHash(old));
      },
      30_000,
      200,
    );
  }, 120_000);

  test('gateway-key rotate survives writes that move the resourceVersion between its read and its patch (the operator writing status)', async () => {
    const kc = testKubeConfig();
    const made = await createGatewayKey(kc, ns, { name: 'racing' });
    const client = kubeClient(kc);
    const path = `/apis/${GROUP}/${VERSION}/namespaces/${ns}/gatewayapikeys/racing`;
    let stop = false;
    let ticks = 0;
    // A write every ~20 ms, as a busy operator's status writes come: most rotations meet none, some meet one.
    const churn = (async () => {
      while (!stop) {
        await client.request('PATCH', path, {
          contentType: 'application/merge-patch+json',
          body: { metadata: { annotations: { 'test.byok.gateway.dev/tick': String(ticks++) } } },
        });
        await sleep(20);
      }
    })();
    let hash = made.hash;
    try {
      // At least 20 rotations, and on until 20 writes ran beside them, however fast either is (at most 1,000).
      for (let i = 0; (i < 20 || ticks < 20) && i < 1000; i++) {
        const r = await rotateGatewayKey(kc, ns, 'racing', 60_000);
        expect(r.previousHash).toBe(hash);
        hash = r.hash;
      }
    } finally {
      stop = true;
      await churn;
    }
    expect(ticks).toBeGreaterThanOrEqual(20); // the writes ran beside the rotations
    expect((await client.request<GatewayAPIKey>('GET', path)).spec.hash).toBe(hash);
  }, 60_000);

  test('two rotations at once: the later is refused as a concurrent rotation, or they run in turn; no secret is lost', async () => {
    const kc = testKubeConfig();
    await createGatewayKey(kc, ns, { name: 'twice' });
    const client = kubeClient(kc);
    const path = `/apis/${GROUP}/${VERSION}/namespaces/${ns}/gatewayapikeys/twice`;
    const stored = async () => (await client.request<GatewayAPIKey>('GET', path)).spec;
    let raced = 0;
    for (let i = 0; i < 5; i++) {
      const before = (await stored()).hash;
      const results = await Promise.allSettled([
        rotateGatewayKey(kc, ns, 'twice', 60_000),
        rotateGatewayKey(kc, ns, 'twice', 60_000),
      ]);
      const done = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
      for (const r of results)
        if (r.status === 'rejected') expect(String(r.reason)).toContain('was rotated by someone else');
      const now = await stored();
      if (done.length === 1) {
        raced++;
        expect([now.hash, now.previousHash]).toEqual([done[0]!.hash, before]);
      } else {
        // In turn: the later one moved the earlier one's hash to previousHash.
        expect(done).toHaveLength(2);
        const last = done.find((d) => d.hash === now.hash)!;
        const first = done.find((d) => d !== last)!;
        expect([last.previousHash, first.previousHash, now.previousHash]).toEqual([first.hash, before, first.hash]);
      }
    }
    expect(raced).toBeGreaterThan(0); // both read before either wrote, at least once
  }, 60_000);

  test('the apiserver refuses a hash change that is not a rotation', async () => {
    const other = 'f'.repeat(64);
    const bare = await rejection(
      resource('gatewayapikeys', ns).update('rpm', (o) => {
        (o.spec as Record<string, unknown>).hash = other;
      }),
    );
    expect(bare.code).toBe(422);
    expect(bare.message).toContain('hash may change only by a rotation');
    const half = await rejection(
      resource('gatewayapikeys', ns).update('rpm', (o) => {
        Object.assign(o.spec as Record<string, unknown>, { hash: other, previousHash: keyHash(secretOf('rpm')) });
      }),
    );
    expect(half.message).toContain('previousHash and previousHashExpiresAt go together');
    // Naming another key's hash as this key's previous one, with the current hash unchanged, is refused.
    const inAnHour = new Date(Date.now() + 3_600_000).toISOString();
    const claimed = await rejection(
      resource('gatewayapikeys', ns).update('rpm', (o) => {
        Object.assign(o.spec as Record<string, unknown>, { previousHash: other, previousHashExpiresAt: inAnHour });
      }),
    );
    expect(claimed.code).toBe(422);
    expect(claimed.message).toContain('previousHash may only be set to the hash this key had');
  }, 30_000);
});
