// Metering's bounds, each guarded end to end: real apiserver → operator → projected config → gateway with the
// embedded spend ledger as the CLI wires it → loopback upstreams. (1) n: 8 on shared capacity is metered as 8
// completions and a budget refuses once it is reached; (2) a tenant's own Azure endpoint answering zero usage for a
// long answer is metered at least the delivered floor, buffered and streamed; (3) concurrent image requests under a
// budget that fits 5 admit at most 5 (their reservation covers an image part at the model's context length).

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { bodyFloorTokens, streamFloorTokens } from '../../../src/gateway/usage.ts';
import { type Projector, startProjector } from '../../../src/kube/projector.ts';
import {
  account,
  asDefault,
  credential,
  gatewayKey,
  guardrail,
  keyHash,
  withBudget,
  withGuardrail,
  withProvider,
  withSpec,
  workspace,
} from '../../support/builders.ts';
import { endpoint, gpt4o, writeCatalog } from '../../support/catalog.ts';
import { createTestNamespace, testKubeConfig } from '../../support/kube.ts';
import {
  gatewayDirs,
  LOOPBACK_ALLOWED,
  type MeteredGateway,
  projected,
  startMeteredGateway,
  stopAll,
} from '../../support/metered-gateway.ts';
import { type CapturedOperator, createSecret, resource, startTestOperator } from '../../support/operator.ts';
import {
  IMAGE_PART_TOKENS,
  LONG_ANSWER,
  PROMPT_TOKENS,
  startUpstreams,
  type Upstreams,
} from '../../support/upstreams.ts';

const kc = testKubeConfig();
const KEY_N = 'sk-gw-bounds-n-0123456789abcdef0123';
const KEY_IMG = 'sk-gw-bounds-img-0123456789abcdef01';
const KEY_AZ = 'sk-gw-bounds-az-0123456789abcdef012';
// gpt-4o's list prices: 2.5 and 10 USD per million tokens, i.e. 2.5 and 10 micros per token.
const cost = (prompt: number, completion: number) => Math.round(prompt * 2.5) + completion * 10;
/** An image request, as billed by the provider: one image part, max_tokens 10. */
const IMAGE_COST = cost(PROMPT_TOKENS + IMAGE_PART_TOKENS, 10);
const CONTEXT = 2000;

describe('metering bounds both sides, end to end', () => {
  let ns = '';
  let run: CapturedOperator;
  let up: Upstreams;
  let projector: Projector;
  let stack: MeteredGateway | undefined;
  const dirs = gatewayDirs('byok-int-bounds-');

  const chat = async (key: string, body: Record<string, unknown>) => {
    const before = up.hits.length;
    const res = await fetch(`${stack!.gw.url}/api/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], ...body }),
    });
    const text = await res.text();
    return {
      status: res.status,
      text,
      json: (body.stream === true ? {} : JSON.parse(text)) as Record<string, any>,
      id: res.headers.get('x-generation-id'),
      hits: up.hits.length - before,
    };
  };
  const settled = (key: string, id: string) => stack!.settled(keyHash(key), id);

  beforeAll(async () => {
    up = await startUpstreams();
    ns = await createTestNamespace('gw-bounds');
    const routingNs = await createTestNamespace('gw-bounds-routing');
    run = await startTestOperator(kc, {
      routingNamespace: routingNs,
      watchNamespaces: [ns],
      compile: { coalesceMs: 10 },
      egress: LOOPBACK_ALLOWED,
    });
    await resource('accounts', ns).create(account('acct', withSpec({ plan: 'pay-as-you-go' })));
    await resource('workspaces', ns).create(workspace('main', asDefault()));
    // 0.10 USD: were n: 8 metered as one completion, all twelve requests would fit.
    await resource('guardrails', ns).create(
      guardrail('n-budget', withBudget({ limitUsd: 0.1, resetInterval: 'monthly' })),
    );
    // Room for exactly five image requests at what the provider bills for them.
    await resource('guardrails', ns).create(
      guardrail('img-budget', withBudget({ limitUsd: (5 * IMAGE_COST) / 1e6, resetInterval: 'monthly' })),
    );
    await resource('gatewayapikeys', ns).create(gatewayKey('n', keyHash(KEY_N), withGuardrail('n-budget')));
    await resource('gatewayapikeys', ns).create(gatewayKey('img', keyHash(KEY_IMG), withGuardrail('img-budget')));
    await resource('gatewayapikeys', ns).create(gatewayKey('az', keyHash(KEY_AZ)));
    // The tenant's own Azure deployment: an endpoint_url it chose (tenantUrl), which answers zero usage.
    await createSecret(
      kc,
      ns,
      'az-key',
      JSON.stringify([
        {
          api_key: 'az-zero-usage-key',
          model_slug: 'openai/gpt-4o-mini',
          endpoint_url: `${up.base}/azure/deployments/dep-zero/chat/completions?api-version=2024-10-21`,
          model_id: 'dep-zero',
        },
      ]),
    );
    await resource('byokcredentials', ns).create(
      credential('az', withProvider('azure'), withSpec({ isByokOnly: true })),
    );
    up.behavior.set('sk-shared-openai', 'bills-honestly');
    up.behavior.set('api-key:az-zero-usage-key', 'zero-usage-long');

    writeCatalog(dirs.catalog, [
      // Shared capacity on the platform's key (a catalog upstream: trusted).
      { ...gpt4o(up), contextLength: CONTEXT },
      {
        model: 'openai/gpt-4o-mini',
        contextLength: 128_000,
        endpoints: [endpoint(up, 'azure', { upstream: { baseUrl: `${up.base}/azure/unused`, model: 'gpt-4o-mini' } })],
      },
    ]);
    mkdirSync(dirs.shared, { recursive: true });
    writeFileSync(join(dirs.shared, 'openai'), 'sk-shared-openai\n');
    projector = startProjector({
      kubeConfig: kc,
      routingNamespace: routingNs,
      configDir: dirs.config,
      bundleDir: dirs.bundles,
      keyDir: dirs.key,
      pollMs: 100,
    });
    await projected(projector, dirs, 'the compiled credential, keys and guardrails', (accounts) => {
      const account = accounts.get(ns);
      return (
        account?.credentials.length === 1 &&
        account.apiKeys.length === 3 &&
        account.apiKeys.filter((k) => k.guardrailId !== null).length === 2
      );
    });
    stack = await startMeteredGateway(dirs, up);
  }, 60_000);

  afterAll(async () => {
    await stopAll({ stack, projector, run, up }, dirs);
  });

  test('n: 8 on shared capacity is metered as 8 completions, and the budget refuses once its limit is reached', async () => {
    const served: number[] = [];
    const refused: string[] = [];
    for (let i = 0; i < 12; i++) {
      const r = await chat(KEY_N, { model: 'openai/gpt-4o', n: 8, max_tokens: 500 });
      if (r.status === 402) {
        expect(r.hits).toBe(0);
        refused.push(r.json.error.message as string);
        continue;
      }
      expect([r.status, r.hits, (r.json.choices as unknown[]).length]).toEqual([200, 1, 8]);
      const g = await settled(KEY_N, r.id!);
      // The provider billed 8 × 500 completion tokens: metered as reported (before: clamped to 500).
      expect(g).toMatchObject({
        tokens_prompt: PROMPT_TOKENS,
        tokens_completion: 4000,
        usage_estimated: null,
        list_cost_micros: cost(PROMPT_TOKENS, 4000),
        charged_micros: cost(PROMPT_TOKENS, 4000),
      });
      served.push(g.charged_micros!);
    }
    // 0.1 USD fits two requests of 0.0401 USD; the third reservation (n × max_tokens priced) no longer fits.
    expect(served).toHaveLength(2);
    expect(served.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(100_000);
    expect(refused).toHaveLength(10);
    expect(refused[0]).toMatch(
      /^request over budget: this request would need up to 0\.040\d+ USD and this month's \(UTC\) monthly budget of guardrail "n-budget" has 0\.0198 USD left/,
    );
  });

  test('n out of 1..128 is refused with the spec error body before any upstream', async () => {
    for (const n of [0, 129, 2.5, '8']) {
      const r = await chat(KEY_N, { model: 'openai/gpt-4o', n });
      expect([r.status, r.hits, r.json]).toEqual([
        400,
        0,
        { error: { code: 400, message: 'n must be an integer from 1 to 128', metadata: null } },
      ]);
    }
  });

  test.each([false, true])(
    'a tenant endpoint answering zero usage for a long answer is metered at least the delivered floor (stream: %s)',
    async (stream) => {
      const r = await chat(KEY_AZ, { model: 'openai/gpt-4o-mini', stream });
      expect([r.status, r.hits]).toEqual([200, 1]);
      expect(stream ? r.text : r.json.choices[0].message.content).toContain(LONG_ANSWER.slice(0, 40));
      const g = await settled(KEY_AZ, r.id!);
      // At least the floor of the answer's text alone: buffered, its bytes past the framing allowances; streamed in
      // 40-character events (each under the event allowance), one token per event past the 2n + 3 tokenless ones.
      const one = { n: 1, logprobEntries: 0 };
      const floor = stream
        ? streamFloorTokens({ bytes: 0, excessBytes: 0, dataEvents: LONG_ANSWER.length / 40, plainJson: false }, one)
        : bodyFloorTokens(Buffer.byteLength(LONG_ANSWER), one);
      expect(floor).toBeGreaterThan(stream ? 190 : 370);
      expect(g.tokens_completion).toBeGreaterThanOrEqual(floor);
      // The prompt ("hi") is within the forwarded body's 1 KiB framing allowance: its floor is 0, as reported.
      expect(g.tokens_prompt).toBe(0);
      expect(g).toMatchObject({ usage_estimated: 'out_of_bounds', is_byok: true });
      expect(g.list_cost_micros).toBeGreaterThanOrEqual(cost(0, floor));
      expect(await stack!.metrics.registry.getSingleMetricAsString('byok_gateway_usage_out_of_bounds_total')).toMatch(
        /byok_gateway_usage_out_of_bounds_total\{upstream="tenant",bound="below"\} [1-9]/,
      );
    },
  );

  test('60 concurrent image requests under a budget that fits 5 admit at most 5', async () => {
    const image = {
      model: 'openai/gpt-4o',
      max_tokens: 10,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'what is this?' },
            { type: 'image_url', image_url: { url: 'https://images.example/cat.png' } },
          ],
        },
      ],
    };
    const before = up.hits.length;
    const results = await Promise.all(Array.from({ length: 60 }, () => chat(KEY_IMG, image)));
    const ok = results.filter((r) => r.status === 200);
    expect(results.filter((r) => r.status !== 200 && r.status !== 402)).toEqual([]);
    // Each reserves the context for its image part (the catalog has no per-part maximum): 5,100 micros against a
    // limit of 5 × 2,863, so a few run at once and settle at what the provider bills.
    expect(ok.length).toBeGreaterThanOrEqual(1);
    expect(ok.length).toBeLessThanOrEqual(5);
    expect(up.hits.length - before).toBe(ok.length);
    const charged = await Promise.all(ok.map(async (r) => (await settled(KEY_IMG, r.id!)).charged_micros!));
    for (const c of charged) expect(c).toBe(IMAGE_COST);
    expect(charged.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(5 * IMAGE_COST);
    const last = await chat(KEY_IMG, image);
    expect(last.status).toBe(402);
  });
});
