// The README's first command: `dev` brings up a real control plane, the operator, the API server and the sample
// account, writes .dev/connection.json, and cleans everything up on Ctrl-C.
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import type { DevConnection } from '../../../src/cli/dev.ts';
import { startDevStack } from '../../support/dev-stack.ts';
import { kubectlWith } from '../../support/kube.ts';
import { until } from '../../support/until.ts';

describe('npm run dev', () => {
  let child: ChildProcess;
  let output: () => string;
  let devDir: string;
  let connection: DevConnection;

  beforeAll(async () => {
    const stack = await startDevStack('byok-dev-');
    ({ child, devDir, connection } = stack);
    output = stack.output;
  }, 180_000);

  afterAll(() => {
    if (child?.exitCode === null) child.kill('SIGKILL');
  });

  test('prints how to use it and writes the connection details', () => {
    expect(output()).toContain('kubectl');
    expect(output()).toContain('curl -s -H');
    expect(connection.apiBaseUrl).toMatch(/\/api\/v1$/);
    expect(connection.routingNamespace).toBe('byok-system');
    expect(connection.accountNamespace).toBe('acme');
    expect(connection.gatewayApiKeyHash).toMatch(/^[0-9a-f]{64}$/);
    expect(existsSync(connection.kubeconfig)).toBe(true);
  });

  test("the banner and the connection file give the gateway's ops URL: metrics and health answer there", async () => {
    expect(connection.gatewayOpsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(connection.gatewayOpsUrl).not.toBe(new URL(connection.gatewayBaseUrl).origin);
    expect(output()).toContain(`gateway ops:     ${connection.gatewayOpsUrl}/metrics`);
    const metrics = await fetch(`${connection.gatewayOpsUrl}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain('byok_gateway_requests_total');
    expect((await fetch(`${connection.gatewayOpsUrl}/healthz`)).status).toBe(200);
    expect((await fetch(`${connection.gatewayOpsUrl}/readyz`)).status).toBe(200);
  });

  test("the dev gateway holds the operator's delivery stream with its ServiceAccount's token and loads what it pushes", async () => {
    const connected = async () =>
      /^byok_gateway_delivery_stream_connected 1$/m.test(
        await (await fetch(`${connection.gatewayOpsUrl}/metrics`)).text(),
      );
    const deadline = Date.now() + 20_000;
    while (!(await connected()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    const text = await (await fetch(`${connection.gatewayOpsUrl}/metrics`)).text();
    expect(text).toMatch(/^byok_gateway_delivery_stream_connected 1$/m);
    expect(
      Number(/^byok_gateway_delivery_stream_batches_total\{result="loaded"\} (\d+)$/m.exec(text)?.[1] ?? 0),
    ).toBeGreaterThanOrEqual(1);
  });

  test('start-up logs no warning for the apiserver filling its watch caches (429 "storage is (re)initializing")', () => {
    const warnings = output()
      .split('\n')
      .filter((l) => l.startsWith('{') && (JSON.parse(l) as { level: number }).level >= 40);
    expect(warnings.filter((l) => l.includes('initializing'))).toEqual([]);
  });

  test('the sample credentials are listed by the API with the management key', async () => {
    const res = await fetch(`${connection.apiBaseUrl}/byok`, {
      headers: { authorization: `Bearer ${connection.managementKey}` },
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { data: { provider: string; label: string }[]; total_count: number };
    expect(body.data.map((k) => k.provider).sort()).toEqual(['amazon-bedrock', 'openai']);
    for (const key of body.data) expect(key.label).toContain('...');
  });

  test('the gateway serves a completion and shows a failover to the fallback credential', async () => {
    const chat = async (model: string) => {
      const res = await fetch(`${connection.gatewayBaseUrl}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${connection.gatewayApiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model, messages: [{ role: 'user', content: 'Hello' }] }),
      });
      return {
        status: res.status,
        body: (await res.json()) as {
          provider_responses: { provider: string; credential: string; status: number | null }[];
        },
      };
    };
    expect(output()).toContain(`${connection.gatewayBaseUrl}/chat/completions`);
    const ok = await chat('openai/gpt-5');
    expect(ok.status).toBe(200);
    expect(ok.body.provider_responses).toEqual([expect.objectContaining({ provider: 'openai', status: 200 })]);
    const failover = await chat('anthropic/claude-sonnet-4');
    expect(failover.status).toBe(200);
    expect(
      failover.body.provider_responses.map((p) => [
        p.provider,
        p.credential === 'shared' ? 'shared' : 'byok',
        p.status,
      ]),
    ).toEqual([
      ['anthropic', 'shared', 429],
      ['amazon-bedrock', 'shared', null],
      ['amazon-bedrock', 'byok', 200],
    ]);
    // The dev ledger is a loopback redis-server with AOF: the operator mirrors what the gateway metered
    // into the Account's status (the MTD column of kubectl get byokacct).
    expect(connection.ledger).toMatchObject({
      backend: 'redis',
      url: expect.stringMatching(/^redis:\/\/127\.0\.0\.1:\d+\/0$/),
    });
    const run = (...args: string[]) => kubectlWith(connection.kubeconfig, ...args);
    await until(
      'BYOK spend in Account.status.spend',
      async () => {
        const out = await run(
          'get',
          'accounts.byok.gateway.dev',
          '-n',
          'acme',
          '-o',
          'jsonpath={.items[0].status.spend.byokListCostUsd}',
        );
        return Number(out) > 0 ? out : undefined;
      },
      30_000,
      100,
    );
  }, 60_000);

  test('the dev upstream streams SSE and injects faults by key (docs/gateway.md, "Dev upstream faults")', async () => {
    const chat = (model: string, stream = false) =>
      fetch(`${connection.gatewayBaseUrl}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${connection.gatewayApiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model, stream, messages: [{ role: 'user', content: 'Hello' }] }),
      });
    const streamed = await chat('openai/gpt-5', true);
    expect(streamed.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const text = await streamed.text();
    expect(text).toContain('loopback upstream.');
    expect(text).toContain('data: [DONE]');
    // The banner lists the fault markers.
    expect(output()).toContain('Upstream faults');
    expect(output()).toMatch(/cutstream\s+200, then the stream/);
    // A Mistral key that makes the upstream answer 500: mistralai/mistral-large has no other endpoint.
    const created = await fetch(`${connection.apiBaseUrl}/byok`, {
      method: 'POST',
      headers: { authorization: `Bearer ${connection.managementKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ provider: 'mistral', key: 'sk-dev-servererror-0001' }),
    });
    expect(created.status).toBe(201);
    const first = await until(
      'the gateway to try the new Mistral credential',
      async () => {
        // Every attempt failed: the answer is an error whose metadata lists them.
        const body = (await (await chat('mistralai/mistral-large')).json()) as {
          error?: {
            metadata?: { provider_responses?: { provider: string; credential: string; status: number | null }[] };
          };
        };
        return body.error?.metadata?.provider_responses?.find(
          (p) => p.provider === 'mistral' && p.credential !== 'shared',
        );
      },
      30_000,
      100,
    );
    expect(first.status).toBe(500);
  }, 60_000);

  test('the API server answers its Kubernetes probes without auth', async () => {
    const origin = connection.apiBaseUrl.replace(/\/api\/v1$/, '');
    expect((await fetch(`${origin}/healthz`)).status).toBe(200);
    expect(await (await fetch(`${origin}/readyz`)).json()).toEqual({ status: 'ready' });
  });

  test('the aggregated API is registered: kubectl get byokkeys lists the sample credentials', async () => {
    expect(connection.aggregatedApi).toMatchObject({
      group: 'api.byok.gateway.dev',
      version: 'v1',
      apiService: 'v1.api.byok.gateway.dev',
    });
    const run = (...args: string[]) => kubectlWith(connection.kubeconfig, ...args);
    expect(
      await run('get', 'apiservice', 'v1.api.byok.gateway.dev', '-o', 'jsonpath={.status.conditions[0].status}'),
    ).toBe('True');
    const table = await run('get', 'byokkeys', '-n', 'acme');
    expect(table).toMatch(/^ID\s+CREDENTIAL\s+PROVIDER\s+LABEL/);
    expect(table).toContain('amazon-bedrock');
    const raw = JSON.parse(await run('get', '--raw', '/apis/api.byok.gateway.dev/v1/namespaces/acme/byok')) as {
      total_count: number;
    };
    expect(raw.total_count).toBeGreaterThan(0);
  });

  test('kubectl wait --for=condition=Delivered: the dev gateway has loaded every sample credential; kubectl get byok shows UPSTREAM', async () => {
    const run = (...args: string[]) => kubectlWith(connection.kubeconfig, ...args);
    await run('wait', '--for=condition=Delivered', 'byokcredentials', '--all', '-n', 'acme', '--timeout=60s');
    const delivery = JSON.parse(
      await run('get', 'byokcredentials', '-n', 'acme', '-o', 'jsonpath={.items[0].status.delivery}'),
    ) as { loaded: number; total: number };
    expect(delivery).toMatchObject({ loaded: 1, total: 1 });
    expect(await run('get', 'byokcredentials', '-n', 'acme')).toMatch(/UPSTREAM\s+LAST USED/);
  }, 90_000);

  test('the gateway API key is not a management key', async () => {
    const res = await fetch(`${connection.apiBaseUrl}/byok`, {
      headers: { authorization: `Bearer ${connection.gatewayApiKey}` },
    });
    expect(res.status).toBe(403);
  });

  test('the operator compiled routing config for the sample account', async () => {
    const kc = new KubeConfig();
    kc.loadFromFile(connection.kubeconfig);
    const maps = await kc.makeApiClient(CoreV1Api).listNamespacedConfigMap({ namespace: connection.routingNamespace });
    const names = maps.items.map((m) => m.metadata?.name ?? '');
    expect(names).toContain('byok-routing-index');
    expect(names.some((n) => /^byok-routing-\d+/.test(n))).toBe(true);
  });

  test('Ctrl-C stops everything and removes the connection file and the control plane', async () => {
    const workDir = join(connection.kubeconfig, '..');
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill('SIGINT');
    expect(await exited).toBe(0);
    expect(existsSync(join(devDir, 'connection.json'))).toBe(false);
    expect(existsSync(workDir)).toBe(false);
  }, 30_000);
});
