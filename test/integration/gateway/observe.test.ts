// The gateway observed and its models list (§7), on the operator's compiled config: real apiserver →
// operator → projected files → gateway → loopback HTTPS upstreams. The metrics a scrape of the ops port shows after
// served, streamed, failed, refused and invalid requests, and what GET /v1/models lists for a key's account.

import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import pino from 'pino';
import { type RunningGateway, type SpendGate, startGateway } from '../../../src/gateway/index.ts';
import { type Projector, startProjector } from '../../../src/kube/projector.ts';
import {
  account,
  asDefault,
  credential,
  gatewayKey,
  keyHash,
  secret,
  withSecret,
  withSpec,
  workspace,
} from '../../support/builders.ts';
import { untilCompiled } from '../../support/compiled.ts';
import { createTestNamespace, testKubeConfig } from '../../support/kube.ts';
import { type CapturedOperator, startTestOperator } from '../../support/operator.ts';
import { createTenant } from '../../support/tenant.ts';
import { until } from '../../support/until.ts';
import { startUpstreams, type Upstreams } from '../../support/upstreams.ts';

const kc = testKubeConfig();
const KEY = 'sk-gw-observe-0123456789abcdef0123';
const OTHER_KEY = 'sk-gw-observe-unknown-0123456789abcd';

describe('gateway metrics and models list', () => {
  let run: CapturedOperator;
  let up: Upstreams;
  let projector: Projector;
  let gw: RunningGateway;
  const root = mkdtempSync(join(tmpdir(), 'byok-int-observe-'));
  const dirs = {
    config: join(root, 'routing'),
    bundles: join(root, 'bundles'),
    key: join(root, 'key'),
    shared: join(root, 'shared'),
  };
  const admit = { allowed: true };
  const spendGate: SpendGate = {
    admit: async () =>
      admit.allowed
        ? { allowed: true, reservation: null }
        : {
            allowed: false,
            heldMicros: 0,
            requestMicros: 0,
            blockedBy: {
              scope: 'workspace',
              id: 'ws-1',
              name: 'team',
              interval: 'monthly',
              limitMicros: 1_000_000,
              countedMicros: 1_000_000,
              includesByok: true,
              blocked: true,
            },
          },
    // A 5% BYOK fee, list cost charged for shared capacity.
    record: async (req) => ({
      feeMicros: req.byokCredentialId ? Math.round(req.listCostMicros * 0.05) : 0,
      chargedMicros: req.byokCredentialId ? 0 : req.listCostMicros,
      freeListCostMicros: 0,
    }),
    release: async () => undefined,
    close: async () => undefined,
  };

  const chat = async (body: Record<string, unknown>, key = KEY) => {
    const res = await fetch(`${gw.url}/api/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], ...body }),
    });
    return { status: res.status, text: await res.text() };
  };
  const metrics = async () => (await fetch(`${gw.opsUrl}/metrics`)).text();
  const models = async (path: string, key?: string) => {
    const res = await fetch(
      `${gw.url}${path}`,
      key === undefined ? {} : { headers: { authorization: `Bearer ${key}` } },
    );
    return {
      status: res.status,
      json: (await res.json()) as {
        object?: string;
        data?: { id: string; object: string; created: number; owned_by: string }[];
        error?: { code: number };
      },
    };
  };

  beforeAll(async () => {
    up = await startUpstreams();
    const ns = await createTestNamespace('gw-observe');
    const routingNs = await createTestNamespace('gw-observe-routing');
    run = await startTestOperator(kc, {
      routingNamespace: routingNs,
      watchNamespaces: [ns],
      compile: { coalesceMs: 10 },
    });
    await createTenant(ns, {
      account: account('acct', (a) => void (a.spec.plan = 'pay-as-you-go')),
      workspaces: [workspace('main', asDefault())],
      gatewayKeys: [gatewayKey('k', keyHash(KEY))],
      secrets: [secret('oa-key', 'sk-observe-openai-aaaaaaaa')],
      // BYOK only on openai, and only for gpt-4o: gpt-4o-mini has neither a credential nor shared openai capacity.
      credentials: [
        credential('oa', withSecret('oa-key'), withSpec({ isByokOnly: true, allowedModels: ['openai/gpt-4o'] })),
      ],
    });
    // The platform holds a shared key for anthropic only: mistral is planned on shared capacity nobody can use.
    mkdirSync(dirs.shared, { recursive: true });
    writeFileSync(join(dirs.shared, 'anthropic'), 'sk-shared-anthropic\n');
    const pricing = { kind: 'per-token', promptUsdPerMillionTokens: '2.5', completionUsdPerMillionTokens: '10' };
    const model = (slug: string, provider: string) => ({
      model: slug,
      endpoints: [
        {
          id: provider,
          provider,
          pricing,
          upstream: { baseUrl: `${up.base}/${provider}/v1`, model: slug.split('/')[1] },
        },
      ],
    });
    writeFileSync(
      join(root, 'catalog.json'),
      JSON.stringify({
        format: 'byok-gateway-catalog/v1',
        models: [
          model('openai/gpt-4o', 'openai'),
          model('openai/gpt-4o-mini', 'openai'),
          model('anthropic/claude-sonnet-4', 'anthropic'),
          model('mistralai/mistral-large', 'mistral'),
        ],
      }),
    );
    projector = startProjector({
      kubeConfig: kc,
      routingNamespace: routingNs,
      configDir: dirs.config,
      bundleDir: dirs.bundles,
      keyDir: dirs.key,
      pollMs: 100,
    });
    await untilCompiled(projector, dirs.config, ns, 1);
    gw = await startGateway({
      configDir: dirs.config,
      bundleDir: dirs.bundles,
      keyDir: dirs.key,
      catalogFile: join(root, 'catalog.json'),
      sharedKeysDir: dirs.shared,
      host: '127.0.0.1',
      port: 0,
      opsPort: 0,
      upstreamCaPem: up.caPem,
      spendGate,
      pollMs: 100,
      logger: pino({ level: 'silent' }),
    });
    await until('the gateway loaded its routing config', async () => gw.routing.current() !== undefined, 10_000, 50);
  }, 60_000);

  afterAll(async () => {
    await gw?.close();
    await projector?.stop();
    await run?.op.stop();
    await up?.close();
    rmSync(root, { recursive: true, force: true });
  });

  test("GET /v1/models: the OpenAI list of the models the key's account can reach; the key is required", async () => {
    const listed = await models('/v1/models', KEY);
    expect(listed.status).toBe(200);
    expect(listed.json.object).toBe('list');
    expect(listed.json.data!.map((m) => m.id).sort()).toEqual(['anthropic/claude-sonnet-4', 'openai/gpt-4o']);
    for (const m of listed.json.data!) {
      expect(m.object).toBe('model');
      expect(Number.isInteger(m.created) && m.created > 1_700_000_000).toBe(true);
      expect(m.owned_by).toBe(m.id.split('/')[0]);
    }
    expect((await models('/v1/models')).status).toBe(401);
    expect((await models('/v1/models', OTHER_KEY)).status).toBe(401);
    // OpenRouter's path: the public catalog without a key, the account's models with one.
    const pub = await models('/api/v1/models');
    expect(pub.status).toBe(200);
    expect(pub.json.object).toBe('list');
    expect(pub.json.data!.map((m) => m.id).sort()).toEqual([
      'anthropic/claude-sonnet-4',
      'mistralai/mistral-large',
      'openai/gpt-4o',
      'openai/gpt-4o-mini',
    ]);
    expect((await models('/api/v1/models', KEY)).json.data!.map((m) => m.id).sort()).toEqual([
      'anthropic/claude-sonnet-4',
      'openai/gpt-4o',
    ]);
    expect((await models('/api/v1/models', OTHER_KEY)).status).toBe(401);
  });

  test('served, streamed, failed, refused and invalid requests in the GenAI, cost and refusal series, with bounded labels', async () => {
    expect((await chat({ model: 'openai/gpt-4o' })).status).toBe(200);
    const stream = await chat({ model: 'openai/gpt-4o', stream: true });
    expect(stream.status).toBe(200);
    expect(stream.text).toContain('[DONE]');
    up.behavior.set('sk-shared-anthropic', '429');
    expect((await chat({ model: 'anthropic/claude-sonnet-4' })).status).toBe(429);
    admit.allowed = false;
    expect((await chat({ model: 'openai/gpt-4o' })).status).toBe(402);
    admit.allowed = true;
    const bogus = 'vendor/not-in-catalog-9f8e7d';
    expect((await chat({ model: bogus })).status).toBe(400);
    expect((await chat({ model: 'openai/gpt-4o' }, OTHER_KEY)).status).toBe(401);

    const g = (provider: string, model: string) =>
      `gen_ai_operation_name="chat",gen_ai_provider_name="${provider}",gen_ai_request_model="${model}"`;
    const gpt = g('openai', 'openai/gpt-4o');
    // The fee lands when the ledger answers, off the response path.
    await until(
      'the BYOK fees',
      async () =>
        /byok_gateway_cost_usd_total\{type="fee",provider="openai",model="openai\/gpt-4o",kind="byok"\} 0\.00075\b/.test(
          await metrics(),
        ),
      5000,
      50,
    );
    const text = await metrics();
    expect(text).toContain(`gen_ai_server_request_duration_seconds_count{${gpt}} 2`);
    expect(text).toContain(
      `gen_ai_server_request_duration_seconds_count{${g('anthropic', 'anthropic/claude-sonnet-4')},error_type="429"} 1`,
    );
    expect(text).toContain(`gen_ai_server_time_to_first_token_seconds_count{${gpt}} 1`);
    expect(text).toContain(`gen_ai_server_time_per_output_token_seconds_count{${gpt}} 1`);
    // 1000 prompt and 500 completion tokens per served request (the loopback upstream's usage).
    expect(text).toContain(`gen_ai_client_token_usage_sum{${gpt},gen_ai_token_type="input"} 2000`);
    expect(text).toContain(`gen_ai_client_token_usage_sum{${gpt},gen_ai_token_type="output"} 1000`);
    expect(text).toContain(`gen_ai_client_token_usage_bucket{le="1024",${gpt},gen_ai_token_type="input"} 2`);
    // 1000 × 2.5 + 500 × 10 USD per million tokens = 0.0075 USD per request, twice.
    expect(text).toContain(
      'byok_gateway_cost_usd_total{type="list",provider="openai",model="openai/gpt-4o",kind="byok"} 0.015',
    );
    expect(text).toMatch(
      /byok_gateway_attempts_total\{provider="anthropic",kind="shared",outcome="rate_limited"\} 1\b/,
    );
    expect(text).toContain('byok_gateway_budget_refusals_total{scope="workspace",interval="monthly"} 1');
    expect(text).toMatch(/byok_gateway_requests_total\{status="402"\} 1\b/);
    expect(text).toMatch(/byok_gateway_requests_total\{status="400"\} 1\b/);
    // Model labels come from the catalog, never from request text it did not validate; no account or key labels.
    expect(text).not.toContain(bogus);
    expect(text).not.toMatch(/(account|api_key|credential|workspace)[a-z_]*="/);
    // Standard process and Node.js metrics.
    expect(text).toMatch(/^process_cpu_seconds_total /m);
    expect(text).toMatch(/^nodejs_heap_size_used_bytes /m);
    expect(text).not.toMatch(/^byok_gateway_(process|nodejs)_/m);
  });
  test("POST /v1/chat/completions: the OpenAI SDK path serves like OpenRouter's, key required (last: it adds spend)", async () => {
    const chat = async (path: string, key?: string) => {
      const res = await fetch(`${gw.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
        body: JSON.stringify({ model: 'openai/gpt-4o', messages: [{ role: 'user', content: 'hi' }] }),
      });
      return { status: res.status, json: (await res.json()) as { provider?: string; provider_responses?: unknown[] } };
    };
    const sdkPath = await chat('/v1/chat/completions', KEY);
    expect(sdkPath.status).toBe(200);
    expect(sdkPath.json.provider).toBe('openai');
    const routerPath = await chat('/api/v1/chat/completions', KEY);
    expect({ status: routerPath.status, provider: routerPath.json.provider }).toEqual({
      status: 200,
      provider: 'openai',
    });
    expect((await chat('/v1/chat/completions')).status).toBe(401);
  });
});
