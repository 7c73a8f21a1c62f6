// Real gateway processes (`node src/cli/main.ts gateway`, as a pod runs it) metering into a real redis-server, for
// the spend-durability tests and bench/ledger-faults.ts: the operator compiles one account (a BYOK credential, an
// API key, no budget: admission never needs Redis, so requests are served through a Redis outage, as the issue
// measured), a projector writes the routing files, a loopback upstream answers each request with 1000 + 500 tokens
// (7,500 micros at the catalog price). Load lanes keep the generation ids of the responses that completed; what
// Redis recorded is read back from the account's id sets (one field per recorded generation id) and its BYOK list
// cost counter (7,500 per counted request).
import type { ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { type Projector, startProjector } from '../../src/kube/projector.ts';
import { createRedisLedger, keySpace } from '../../src/ledger/index.ts';
import { API_VERSION } from '../../src/schema/resources.ts';
import { loadRoutingConfig } from '../../src/sdk/index.ts';
import { credential, secret, withSecret, withSpec } from './builders.ts';
import { gpt4o, writeGatewayFiles } from './catalog.ts';
import { type GatewayProcess, spawnGateway, stopProcess } from './gateway-process.ts';
import { createTestNamespace, testKubeConfig } from './kube.ts';
import { type CapturedOperator, resource, startTestOperator } from './operator.ts';
import { type RedisServer, startRedis } from './redis.ts';
import { createObjects } from './tenant.ts';
import { until } from './until.ts';
import { type Behavior, startUpstreams, type Upstreams } from './upstreams.ts';

const KEY = 'sk-spend-durability-0123456789abcdef';
/** With budgets: the key under the Guardrail `pilot-<i>` that has the i-th. */
export const budgetKey = (i: number): string => `sk-spend-durability-budgeted-${i}-0123456789`;
const OPENAI_KEY = 'sk-durability-openai-aaaaaaaa';
/** List cost of one request: 1000 prompt tokens at 2.5 USD/M + 500 completion tokens at 10 USD/M. */
export const REQUEST_MICROS = 7500;

export type { GatewayProcess };

export interface SpendStack {
  redis: RedisServer;
  root: string;
  upstreams: Upstreams;
  /** Starts a gateway process on the shared Redis; with `journalDir`, its spend journal there (else `--ledger-journal none`). */
  gateway(journalDir?: string): Promise<GatewayProcess>;
  close(): Promise<void>;
}

export interface SpendStackOptions {
  /** Per entry a Guardrail `pilot-<i>` with this daily budget (BYOK counted) and budgetKey(i) under it; the account validated in Redis. */
  budgetsUsd?: number[];
  /** The model's output cap in the catalog: what a request without max_tokens reserves. */
  maxOutputTokens?: number;
  /** How the loopback OpenAI answers the credential. */
  behavior?: Behavior;
}

export async function startSpendStack(prefix: string, opts: SpendStackOptions = {}): Promise<SpendStack> {
  const kc = testKubeConfig();
  const root = mkdtempSync(join(tmpdir(), `byok-${prefix}-`));
  const dirs = { config: join(root, 'routing'), bundles: join(root, 'bundles'), key: join(root, 'key') };
  const redis = await startRedis();
  const up: Upstreams = await startUpstreams();
  const ns = await createTestNamespace(`${prefix}-acct`);
  const routingNs = await createTestNamespace(`${prefix}-routing`);
  const run: CapturedOperator = await startTestOperator(kc, {
    routingNamespace: routingNs,
    watchNamespaces: [ns],
    compile: { coalesceMs: 10 },
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
  await resource('gatewayapikeys', ns).create({
    apiVersion: API_VERSION,
    kind: 'GatewayAPIKey',
    metadata: { name: 'k' },
    spec: { hash: createHash('sha256').update(KEY).digest('hex') },
  });
  const budgets = opts.budgetsUsd ?? [];
  for (const [i, limitUsd] of budgets.entries()) {
    await resource('guardrails', ns).create({
      apiVersion: API_VERSION,
      kind: 'Guardrail',
      metadata: { name: `pilot-${i}` },
      spec: { budget: { limitUsd, resetInterval: 'daily', includeByokInBudgets: true } },
    });
    await resource('gatewayapikeys', ns).create({
      apiVersion: API_VERSION,
      kind: 'GatewayAPIKey',
      metadata: { name: `pilot-${i}` },
      spec: { hash: createHash('sha256').update(budgetKey(i)).digest('hex'), guardrail: `pilot-${i}` },
    });
  }
  if (opts.behavior) up.behavior.set(OPENAI_KEY, opts.behavior);
  await createObjects(
    ns,
    secret('oa-key', OPENAI_KEY),
    credential('oa', withSecret('oa-key'), withSpec({ isByokOnly: true })),
  );
  writeGatewayFiles(root, up, { models: [gpt4o(up, { maxOutputTokens: opts.maxOutputTokens })] });
  const projector: Projector = startProjector({
    kubeConfig: kc,
    routingNamespace: routingNs,
    configDir: dirs.config,
    bundleDir: dirs.bundles,
    keyDir: dirs.key,
    pollMs: 100,
  });
  await until(
    'the compiled credential',
    async () => {
      await projector.sync();
      try {
        const account = loadRoutingConfig(dirs.config).accounts.get(ns);
        return (
          account?.credentials.length === 1 &&
          account.apiKeys.length === 1 + budgets.length &&
          account.guardrails.length === budgets.length
        );
      } catch {
        return false;
      }
    },
    30_000,
    200,
  );
  // The projected files are all a gateway needs from here on: stop watching.
  await projector.stop();
  await run.op.stop();
  if (budgets.length > 0) {
    // What the operator's first spend pass does: the account's counters validated for this Redis process.
    const ledger = await createRedisLedger({ url: redis.url });
    await ledger.restore(keySpace().validated(loadRoutingConfig(dirs.config).accounts.get(ns)!.accountId), []);
    await ledger.close();
  }
  const running = new Set<ChildProcess>();
  const killAll = () => {
    for (const c of running) c.kill('SIGKILL');
  };

  return {
    redis,
    root,
    upstreams: up,
    async gateway(journalDir) {
      // Its own ports (0): the URLs come from its "gateway listening" line, so info level.
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
          journalDir ?? 'none',
        ],
        running,
      );
      await until(
        'the gateway ready',
        async () => {
          if (gw.child.exitCode !== null)
            throw new Error(`gateway exited (${gw.child.exitCode}): ${gw.output.join('')}`);
          try {
            return (await fetch(`${gw.opsUrl}/readyz`)).ok;
          } catch {
            return false;
          }
        },
        30_000,
        100,
      );
      return gw;
    },
    async close() {
      killAll();
      await redis.stop();
      await up.close();
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** `lanes` clients sending chat requests until stopped or the gateway dies; the ids of the 200s whose body arrived in full. */
export function load(
  gw: GatewayProcess,
  lanes: number,
): { served: string[]; failed: () => number; stop(): Promise<void> } {
  const served: string[] = [];
  let failed = 0;
  let stopped = false;
  const lane = async () => {
    while (!stopped) {
      try {
        const res = await fetch(`${gw.url}/api/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
          body: JSON.stringify({
            model: 'openai/gpt-4o',
            max_tokens: 500,
            messages: [{ role: 'user', content: 'hi' }],
          }),
        });
        const body = (await res.json()) as { id?: string };
        if (res.status === 200 && body.id) served.push(body.id);
        else failed++;
      } catch {
        // The gateway was killed: this response never completed.
        failed++;
        if (gw.child.exitCode !== null || gw.child.signalCode !== null) return;
      }
    }
  };
  const all = Promise.all(Array.from({ length: lanes }, lane));
  return {
    served,
    failed: () => failed,
    async stop() {
      stopped = true;
      await all;
    },
  };
}

/** kill -9, waiting for the exit. */
export async function kill9(gw: GatewayProcess): Promise<void> {
  if (gw.child.exitCode !== null || gw.child.signalCode !== null) return;
  const exited = new Promise((r) => gw.child.once('exit', r));
  gw.child.kill('SIGKILL');
  await exited;
}

/** SIGTERM (the gateway closes its spend gate), SIGKILL after 10 s. */
export const stopGateway = (gw: GatewayProcess): Promise<void> => stopProcess(gw.child, 10_000);

export interface Recorded {
  /** Generation ids Redis has applied (fee writes left out). */
  ids: Set<string>;
  /** The month's BYOK list cost over every account: REQUEST_MICROS per counted request. */
  byokListMicros: number;
}

/** What Redis holds: every recorded generation id, and the BYOK list cost counters. */
export async function recorded(redisUrl: string): Promise<Recorded> {
  const client = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  try {
    const ids = new Set<string>();
    let byokListMicros = 0;
    for (const key of await client.keys('*:ids:*'))
      for (const id of Object.keys(await client.hgetall(key))) if (!id.endsWith(':fee')) ids.add(id);
    for (const key of await client.keys('*:acct:*:byok_list')) byokListMicros += Number((await client.get(key)) ?? 0);
    return { ids, byokListMicros };
  } finally {
    client.disconnect();
  }
}

/** Served ids Redis does not have, and requests counted more than once (counted cost past one per recorded id). */
export function compare(
  served: readonly string[],
  r: Recorded,
): { served: number; recorded: number; lost: number; countedTwice: number } {
  const lost = served.filter((id) => !r.ids.has(id)).length;
  return {
    served: served.length,
    recorded: r.ids.size,
    lost,
    countedTwice: Math.round(r.byokListMicros / REQUEST_MICROS) - r.ids.size,
  };
}

/** Waits until every served id is recorded (or `timeoutMs` passes), and returns the comparison. */
export async function settle(
  redisUrl: string,
  served: readonly string[],
  timeoutMs: number,
): Promise<ReturnType<typeof compare>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const c = compare(served, await recorded(redisUrl));
    if (c.lost === 0 || Date.now() > deadline) return c;
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * A Redis outage that keeps Redis's data: `SHUTDOWN SAVE` (the RDB written to the server's directory, which the same
 * server loads when it starts again). The test server has no persistence, and a Redis that restarts empty is the
 * "Resets" rule's concern (docs/ledger.md), not the gateway's: here only what the gateway does may lose spend.
 */
export async function redisDown(redis: RedisServer): Promise<void> {
  const client = new Redis(redis.url, { maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on('error', () => {});
  await client.call('SHUTDOWN', 'SAVE').catch(() => {});
  client.disconnect();
  await until(
    'redis-server stopped',
    async () => {
      const probe = new Redis(redis.url, {
        lazyConnect: true,
        maxRetriesPerRequest: 0,
        retryStrategy: () => null,
        connectTimeout: 300,
      });
      probe.on('error', () => {});
      try {
        await probe.connect();
        await probe.ping();
        return false;
      } catch {
        return true;
      } finally {
        probe.disconnect();
      }
    },
    10_000,
    50,
  );
  // The process is gone or going (after its save): reaps it.
  await new Promise((r) => setTimeout(r, 200));
  await redis.kill();
}

/** A fresh journal directory under the stack's root. */
export const journalDir = (stack: SpendStack, name: string) => join(stack.root, name);
