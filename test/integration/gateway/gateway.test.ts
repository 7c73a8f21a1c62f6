// The gateway end to end: credentials written to the real apiserver → operator → compiled ConfigMaps/Secrets →
// kubelet-style projected directories → gateway → loopback HTTPS upstreams that check authentication exactly.
// Rules are asserted on the wire: which upstream received which key, in which order.

import { generateKeyPairSync } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, beforeEach, describe, expect, test } from '@jest/globals';
import { EventsV1Api } from '@kubernetes/client-node';
import pino from 'pino';
import { parseEgressAllowList } from '../../../src/domain/egress.ts';
import { publicId } from '../../../src/domain/index.ts';
import { type FinishedRequest, type RunningGateway, type SpendGate, startGateway } from '../../../src/gateway/index.ts';
import { type Projector, startProjector } from '../../../src/kube/projector.ts';
import {
  asDefault,
  credential as credentialOf,
  gatewayKey,
  keyHash,
  withProvider,
  withSpec,
  workspace,
} from '../../support/builders.ts';
import { untilCompiled } from '../../support/compiled.ts';
import { createTestNamespace, testKubeConfig } from '../../support/kube.ts';
import { type CapturedOperator, createSecret, resource, setSecret, startTestOperator } from '../../support/operator.ts';
import { beforeCap } from '../../support/order.ts';
import { createAccountNamespace } from '../../support/tenant.ts';
import { sleep, until } from '../../support/until.ts';
import { publicKeyOf, startUpstreams, type Upstreams } from '../../support/upstreams.ts';

const kc = testKubeConfig();
const CANARY = 'sk-CANARY-9d1e2f3a4b5c6d7e8f90aabbccddeeff';
const KEY_A = 'sk-gw-test-owner-a-0123456789abcdef';
const KEY_B = 'sk-gw-test-plain-b-0123456789abcdef';
const ATTEMPT_TIMEOUT_MS = 1500;
// The loopback upstreams serve tenant URLs (an Azure endpoint_url, a Vertex token_uri): allowed explicitly, as an
// operator would (egress.test.ts proves the default refuses them).
const LOOPBACK_ALLOWED = parseEgressAllowList(['127.0.0.1/32']);

describe("gateway on the operator's compiled config", () => {
  let ns = '';
  let routingNs = '';
  let run: CapturedOperator;
  let up: Upstreams;
  let projector: Projector;
  let gw: RunningGateway;
  const root = mkdtempSync(join(tmpdir(), 'byok-int-gateway-'));
  const dirs = {
    config: join(root, 'routing'),
    bundles: join(root, 'bundles'),
    key: join(root, 'key'),
    shared: join(root, 'shared'),
  };
  const gatewayLogs: string[] = [];
  const responses: string[] = [];
  const admitAllowed = { value: true as boolean | 'throw' };
  const recorded: FinishedRequest[] = [];
  const spendGate: SpendGate = {
    admit: async () => {
      if (admitAllowed.value === 'throw') throw new Error('ledger unreachable');
      return admitAllowed.value
        ? { allowed: true, reservation: null }
        : {
            allowed: false,
            heldMicros: 0,
            requestMicros: 0,
            blockedBy: {
              scope: 'workspace',
              id: 'ws-1',
              name: 'team-budget',
              interval: 'monthly',
              limitMicros: 1_000_000,
              countedMicros: 1_000_000,
              includesByok: true,
              blocked: true,
            },
          };
    },
    record: async (req) => {
      recorded.push(req);
      return {
        feeMicros: Math.round(req.byokCredentialId ? req.listCostMicros * 0.05 : 0),
        chargedMicros: req.byokCredentialId ? 0 : req.listCostMicros,
        freeListCostMicros: 0,
      };
    },
    release: async () => undefined,
    close: async () => undefined,
  };
  const credId = (name: string) => publicId('BYOKCredential', ns, name);
  let creds: ReturnType<typeof resource>;

  const chat = async (apiKey: string, body: Record<string, unknown>) => {
    const res = await fetch(`${gw.url}/api/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], ...body }),
    });
    const text = await res.text();
    responses.push(text, JSON.stringify([...res.headers]));
    return {
      status: res.status,
      text,
      json: (body.stream ? undefined : JSON.parse(text)) as Record<string, any> | undefined,
      headers: res.headers,
    };
  };
  /** Runs a request and returns the upstream hits it caused. */
  const wire = async (apiKey: string, body: Record<string, unknown>) => {
    const before = up.hits.length;
    const r = await chat(apiKey, body);
    return { ...r, hits: up.hits.slice(before) };
  };
  const credential = async (name: string, provider: string, key: string, spec: Record<string, unknown> = {}) => {
    await createSecret(kc, ns, `${name}-key`, key);
    await creds.create(credentialOf(name, withProvider(provider), withSpec(spec)));
  };

  const vertexKey = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  const VERTEX_EMAIL = 'gateway-test@proj-1.iam.gserviceaccount.com';

  beforeAll(async () => {
    up = await startUpstreams();
    up.iamSecrets.set('AKIAGATEWAYTEST0001', 'iam-secret-value-0001');
    up.vertexKeys.set(VERTEX_EMAIL, publicKeyOf(vertexKey.privateKey));
    ns = await createAccountNamespace('gw-acct');
    routingNs = await createTestNamespace('gw-routing');
    creds = resource('byokcredentials', ns);
    run = await startTestOperator(kc, {
      routingNamespace: routingNs,
      watchNamespaces: [ns],
      compile: { coalesceMs: 10 },
      gatewaySlots: { routing: 0, bundles: 8 },
      egress: LOOPBACK_ALLOWED,
    });
    await resource('workspaces', ns).create(workspace('main', asDefault()));
    await resource('gatewayapikeys', ns).create(gatewayKey('a', keyHash(KEY_A), withSpec({ owner: 'user-1' })));
    await resource('gatewayapikeys', ns).create(gatewayKey('b', keyHash(KEY_B)));
    await credential('oa-0', 'openai', 'sk-oa-0-aaaaaaaaaaaa', { sortOrder: 0 });
    await credential('oa-1', 'openai', `${CANARY}-oa1`, { sortOrder: 1 });
    await credential('oa-fb', 'openai', 'sk-oa-fb-ffffffffffff', { sortOrder: 0, isFallback: true });
    await credential('oa-eu', 'openai', JSON.stringify({ api_key: 'sk-oa-eu-eeeeeeeeeee', region: 'eu' }), {
      sortOrder: 2,
      allowedApiKeyHashes: [keyHash(KEY_B)],
    });
    await credential('an-req', 'anthropic', `${CANARY}-anthropic`, { isRequired: true });
    await credential('mi-only', 'mistral', 'sk-mi-only-mmmmmmmm', {
      isByokOnly: true,
      allowedModels: ['openai/gpt-4o'],
    });
    await credential(
      'az',
      'azure',
      JSON.stringify([
        { api_key: 'az-resource-key', resource_name: 'res1' },
        {
          api_key: 'az-deployment-key',
          model_slug: 'openai/gpt-4o-mini',
          endpoint_url: `${up.base}/azure/deployments/dep-mini/chat/completions?api-version=2024-10-21`,
          model_id: 'dep-mini',
        },
      ]),
    );
    await credential('br-key', 'amazon-bedrock', 'bedrock-api-key-value', { sortOrder: 0 });
    await credential(
      'br-iam',
      'amazon-bedrock',
      JSON.stringify({
        accessKeyId: 'AKIAGATEWAYTEST0001',
        secretAccessKey: 'iam-secret-value-0001',
        region: 'eu-west-1',
      }),
      { sortOrder: 1 },
    );
    await credential(
      'vx',
      'google-vertex',
      JSON.stringify({
        type: 'service_account',
        project_id: 'proj-1',
        private_key_id: 'a1b2c3d4e5f60718',
        private_key: vertexKey.privateKey,
        client_email: VERTEX_EMAIL,
        client_id: '1234567890',
        auth_uri: 'https://accounts.google.com/o/oauth2/auth',
        token_uri: `${up.base}/token`,
        auth_provider_x509_cert_url: 'https://www.googleapis.com/oauth2/v1/certs',
        client_x509_cert_url: 'https://www.googleapis.com/robot/v1/metadata/x509/gateway-test',
        region: 'us-central1',
      }),
    );
    await credential('member', 'groq', 'gsk-member-only-key', { allowedUserIds: ['user-1'] });

    const pricing = { kind: 'per-token', promptUsdPerMillionTokens: '2.5', completionUsdPerMillionTokens: '10' };
    const ep = (
      id: string,
      provider: string,
      upstream: Record<string, unknown>,
      extra: Record<string, unknown> = {},
    ) => ({ id, provider, pricing, upstream, ...extra });
    const openai = ep('openai', 'openai', {
      baseUrl: `${up.base}/openai/v1`,
      model: 'gpt-4o',
      regionalBaseUrls: { eu: `${up.base}/openai-eu/v1` },
    });
    const azure = ep('azure', 'azure', {
      baseUrl: `${up.base}/azure/unused`,
      model: 'gpt-4.1',
      azureOpenAiUrl: `${up.base}/azure/{resource_name}/openai/v1`,
    });
    writeFileSync(
      join(root, 'catalog.json'),
      JSON.stringify({
        format: 'byok-gateway-catalog/v1',
        models: [
          { model: 'openai/gpt-4o', endpoints: [openai] },
          { model: 'openai/gpt-4.1', endpoints: [openai, azure] },
          { model: 'openai/gpt-4o-mini', endpoints: [azure] },
          {
            model: 'anthropic/claude-sonnet',
            endpoints: [ep('anthropic', 'anthropic', { baseUrl: `${up.base}/anthropic/v1` })],
          },
          { model: 'mistral/large', endpoints: [ep('mistral', 'mistral', { baseUrl: `${up.base}/mistral/v1` })] },
          {
            model: 'amazon/nova-pro',
            endpoints: [
              ep('amazon-bedrock', 'amazon-bedrock', {
                baseUrl: `${up.base}/bedrock/{region}/openai/v1`,
                defaultRegion: 'us-east-1',
              }),
            ],
          },
          {
            model: 'google/gemini-2.5-pro',
            endpoints: [
              ep('google-vertex', 'google-vertex', {
                baseUrl: `${up.base}/vertex/v1/projects/{project}/locations/{location}/endpoints/openapi`,
              }),
            ],
          },
          {
            model: 'meta/llama-3.3-70b',
            endpoints: [ep('groq', 'groq', { baseUrl: `${up.base}/groq/v1` }, { dataCollection: true })],
          },
          {
            model: 'openai/o3',
            endpoints: [
              ep(
                'openai/eu',
                'openai',
                { baseUrl: `${up.base}/openai-eu-region/v1`, model: 'o3' },
                { region: 'eu', zdr: true },
              ),
            ],
          },
        ],
      }),
    );
    mkdirSync(dirs.shared, { recursive: true });
    for (const p of ['openai', 'anthropic', 'mistral', 'groq']) writeFileSync(join(dirs.shared, p), `sk-shared-${p}\n`);

    projector = startProjector({
      kubeConfig: kc,
      routingNamespace: routingNs,
      configDir: dirs.config,
      bundleDir: dirs.bundles,
      keyDir: dirs.key,
      pollMs: 100,
    });
    const sink = new Writable({
      write(c: Buffer, _e, cb) {
        gatewayLogs.push(c.toString('utf8'));
        cb();
      },
    });
    await untilCompiled(projector, dirs.config, ns, 11);
    gw = await startGateway({
      configDir: dirs.config,
      bundleDir: dirs.bundles,
      keyDir: dirs.key,
      catalogFile: join(root, 'catalog.json'),
      sharedKeysDir: dirs.shared,
      attemptTimeoutMs: ATTEMPT_TIMEOUT_MS,
      host: '127.0.0.1',
      port: 0,
      upstreamCaPem: up.caPem,
      spendGate,
      pollMs: 100,
      egress: LOOPBACK_ALLOWED,
      logger: pino({ level: 'info' }, sink),
    });
  }, 60_000);

  afterAll(async () => {
    await gw?.close();
    await projector?.stop();
    await run?.op.stop();
    await up?.close();
    rmSync(root, { recursive: true, force: true });
  });

  beforeEach(() => up.behavior.clear());

  test('ready, models from the catalog, 401 in the spec 7 body for an unknown key', async () => {
    expect((await fetch(`${gw.url}/readyz`)).status).toBe(200);
    const models = (await (await fetch(`${gw.url}/api/v1/models`)).json()) as {
      data: { id: string; endpoints: { pricing: { prompt: string } }[] }[];
    };
    expect(models.data.map((m) => m.id)).toContain('openai/gpt-4o');
    expect(models.data[0]!.endpoints[0]!.pricing.prompt).toBe('0.0000025');
    const r = await wire('sk-unknown', { model: 'openai/gpt-4o' });
    expect(r.status).toBe(401);
    expect(r.json).toEqual({ error: { code: 401, message: 'invalid gateway API key', metadata: null } });
    expect(r.hits).toEqual([]);
    const malformed = await fetch(`${gw.url}/api/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' },
      body: '{"model":',
    });
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toEqual({
      error: { code: 400, message: 'the request body is not valid JSON', metadata: null },
    });
    expect((await wire(KEY_A, { messages: [] })).json!.error.message).toContain('model is required');
  });

  test('the catalog is hot-reloaded; a broken file keeps the last good one', async () => {
    const file = join(root, 'catalog.json');
    const doc = JSON.parse(readFileSync(file, 'utf8')) as { models: { model: string }[] };
    writeFileSync(file, '{ broken');
    await sleep(400);
    expect((await chat(KEY_A, { model: 'openai/gpt-4o' })).status).toBe(200);
    writeFileSync(
      file,
      JSON.stringify({ ...doc, models: [...doc.models, { ...doc.models[0], model: 'openai/gpt-4o-hot' }] }),
    );
    await until('the new model', async () =>
      ((await (await fetch(`${gw.url}/api/v1/models`)).json()) as { data: { id: string }[] }).data.some(
        (m) => m.id === 'openai/gpt-4o-hot',
      ),
    );
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    expect(metrics).toMatch(/byok_gateway_reloads_total\{what="catalog",result="error"\} [1-9]/);
  });

  test('rules 2, 3, 11: prioritized by sortOrder, failover on 429/500, then shared, then fallback; exact keys on the wire', async () => {
    up.behavior.set('sk-oa-0-aaaaaaaaaaaa', '429');
    up.behavior.set(`${CANARY}-oa1`, '500');
    up.behavior.set('sk-oa-eu-eeeeeeeeeee', '500');
    // Key B passes oa-eu's API-key filter: its {api_key, region} payload goes to the EU base URL.
    let r = await wire(KEY_B, { model: 'openai/gpt-4o' });
    expect(r.status).toBe(200);
    expect(r.hits.map((h) => [h.path, h.auth, h.status])).toEqual([
      ['/openai/v1/chat/completions', 'sk-oa-0-aaaaaaaaaaaa', 429],
      ['/openai/v1/chat/completions', `${CANARY}-oa1`, 500],
      ['/openai-eu/v1/chat/completions', 'sk-oa-eu-eeeeeeeeeee', 500],
      ['/openai/v1/chat/completions', 'sk-shared-openai', 200],
    ]);
    expect(r.hits.every((h) => h.model === 'gpt-4o')).toBe(true);
    expect(
      r.json!.provider_responses.map((p: { credential: string; status: number }) => [p.credential, p.status]),
    ).toEqual([
      [credId('oa-0'), 429],
      [credId('oa-1'), 500],
      [credId('oa-eu'), 500],
      ['shared', 200],
    ]);
    expect(r.json!.choices[0].message.content).toBe('hello from upstream');
    expect(r.json!.id).toMatch(/^gen-/);

    // Key A does not pass oa-eu's filter; shared fails too, so the fallback credential serves.
    up.behavior.set('sk-shared-openai', '500');
    r = await wire(KEY_A, { model: 'openai/gpt-4o' });
    expect(r.hits.map((h) => h.auth)).toEqual([
      'sk-oa-0-aaaaaaaaaaaa',
      `${CANARY}-oa1`,
      'sk-shared-openai',
      'sk-oa-fb-ffffffffffff',
    ]);
    expect(r.status).toBe(200);

    // Everything fails: the last upstream status in the spec 7 body, every attempt listed.
    up.behavior.set('sk-oa-fb-ffffffffffff', '429');
    r = await wire(KEY_A, { model: 'openai/gpt-4o' });
    expect(r.status).toBe(429);
    expect(r.json!.error.code).toBe(429);
    expect(r.json!.error.message).toContain('every attempt failed');
    expect(r.json!.error.metadata.provider_responses).toHaveLength(4);
  });

  test('rule 3: a slow upstream times out per attempt and the next credential serves', async () => {
    up.behavior.set('sk-oa-0-aaaaaaaaaaaa', 'slow');
    // Served before the slow upstream would have answered (4 s; the cap, started first): its attempt was given up.
    const r = await beforeCap(4000, "the slow upstream's answer", () => wire(KEY_A, { model: 'openai/gpt-4o' }));
    expect(r.status).toBe(200);
    expect(r.json!.provider_responses[0]).toMatchObject({
      credential: credId('oa-0'),
      status: null,
      error: `no response within ${ATTEMPT_TIMEOUT_MS} ms`,
    });
    expect(r.json!.provider_responses[1]).toMatchObject({ credential: credId('oa-1'), status: 200 });
  });

  test('rule 5: is_required stops before shared capacity of that provider', async () => {
    up.behavior.set(`${CANARY}-anthropic`, '500');
    const r = await wire(KEY_A, { model: 'anthropic/claude-sonnet' });
    expect(r.hits.map((h) => h.provider)).toEqual(['anthropic']);
    expect(r.status).toBe(500);
    expect(r.json!.error.metadata.provider_responses).toEqual([
      expect.objectContaining({ credential: credId('an-req'), status: 500 }),
    ]);
  });

  test('rule 6: is_byok_only removes shared capacity even for models outside the allowlist: a 404 naming the reason', async () => {
    const r = await wire(KEY_A, { model: 'mistral/large' });
    expect(r.hits).toEqual([]);
    expect(r.status).toBe(404);
    expect(r.json!.error.message).toContain('no_available_endpoint');
    expect(r.json!.error.metadata.excluded).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ endpoint_id: 'mistral', rule: 'rule-6-byok-only' }),
        expect.objectContaining({ credential: credId('mi-only'), rule: 'rule-11-model-filter' }),
      ]),
    );
    const unknown = await wire(KEY_A, { model: 'nobody/none' });
    expect(unknown.status).toBe(400);
    expect(unknown.json!.error.message).toContain('model_not_in_catalog');
  });

  test('rule 11 member filter: the API key owner is the requesting member', async () => {
    expect((await wire(KEY_A, { model: 'meta/llama-3.3-70b' })).hits.map((h) => h.auth)).toEqual([
      'gsk-member-only-key',
    ]);
    expect((await wire(KEY_B, { model: 'meta/llama-3.3-70b' })).hits.map((h) => h.auth)).toEqual(['sk-shared-groq']);
  });

  test('azure: per-deployment config wins for its model_slug, resource config otherwise; provider.only is honoured', async () => {
    const dep = await wire(KEY_A, { model: 'openai/gpt-4o-mini' });
    expect(dep.hits.map((h) => [h.path, h.auth, h.model])).toEqual([
      ['/azure/deployments/dep-mini/chat/completions?api-version=2024-10-21', 'api-key:az-deployment-key', 'dep-mini'],
    ]);
    const res = await wire(KEY_A, { model: 'openai/gpt-4.1', provider: { only: ['azure'] } });
    expect(res.hits.map((h) => [h.path, h.auth, h.model])).toEqual([
      ['/azure/res1/openai/v1/chat/completions', 'api-key:az-resource-key', 'gpt-4.1'],
    ]);
    const bad = await wire(KEY_A, { model: 'openai/gpt-4.1', provider: { only: 'azure' } });
    expect(bad.status).toBe(400);
  });

  test('bedrock: API key as bearer, IAM signed with SigV4 (verified independently upstream)', async () => {
    up.behavior.set('bedrock-api-key-value', '500');
    const r = await wire(KEY_A, { model: 'amazon/nova-pro' });
    expect(r.hits.map((h) => [h.path, h.auth, h.status])).toEqual([
      ['/bedrock/us-east-1/openai/v1/chat/completions', 'bedrock-api-key-value', 500],
      ['/bedrock/eu-west-1/openai/v1/chat/completions', 'sigv4:AKIAGATEWAYTEST0001:eu-west-1', 200],
    ]);
  });

  test('vertex: service-account JWT exchanged at its own token_uri, token cached until expiry', async () => {
    const before = up.tokenExchanges;
    const r1 = await wire(KEY_A, { model: 'google/gemini-2.5-pro' });
    const r2 = await wire(KEY_A, { model: 'google/gemini-2.5-pro' });
    expect(r1.status).toBe(200);
    expect(r1.hits[0]!.path).toBe(
      '/vertex/v1/projects/proj-1/locations/us-central1/endpoints/openapi/chat/completions',
    );
    expect(r1.hits[0]!.auth).toMatch(/^vertex:ya29\.test-/);
    expect(r2.hits[0]!.auth).toBe(r1.hits[0]!.auth);
    expect(up.tokenExchanges - before).toBe(1);
  });

  test('streaming: usage forced, failover before the first byte, none after; provider_responses in a final SSE comment', async () => {
    up.behavior.set('sk-oa-0-aaaaaaaaaaaa', 'empty-then-close');
    let r = await wire(KEY_A, { model: 'openai/gpt-4o', stream: true });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toContain('text/event-stream');
    expect(r.hits.map((h) => [h.auth, h.includeUsage])).toEqual([
      ['sk-oa-0-aaaaaaaaaaaa', true],
      [`${CANARY}-oa1`, true],
    ]);
    expect(r.text).toContain('"hello "');
    expect(r.text).toContain('data: [DONE]');
    const comment = /^: provider_responses (.*)$/m.exec(r.text)?.[1];
    const meta = JSON.parse(comment!) as {
      generation_id: string;
      provider_responses: { credential: string; error?: string }[];
    };
    expect(meta.provider_responses.map((p) => p.credential)).toEqual([credId('oa-0'), credId('oa-1')]);
    expect(meta.provider_responses[0]!.error).toBe('stream broke before the first byte');
    // The generation record carries the usage of the final chunk and the list cost (1000 × 2.5 + 500 × 10 micros).
    const gen = await fetch(`${gw.url}/api/v1/generation?id=${meta.generation_id}`, {
      headers: { authorization: `Bearer ${KEY_A}` },
    });
    const record = ((await gen.json()) as { data: Record<string, unknown> }).data;
    expect(record).toMatchObject({
      tokens_prompt: 1000,
      tokens_completion: 500,
      list_cost_micros: 7500,
      byok_credential_id: credId('oa-1'),
      streamed: true,
    });
    // Another key may not read it.
    expect(
      (
        await fetch(`${gw.url}/api/v1/generation?id=${meta.generation_id}`, {
          headers: { authorization: `Bearer ${KEY_B}` },
        })
      ).status,
    ).toBe(404);

    up.behavior.set('sk-oa-0-aaaaaaaaaaaa', 'broken-stream');
    r = await wire(KEY_A, { model: 'openai/gpt-4o', stream: true });
    expect(r.hits).toHaveLength(1);
    expect(r.text).toContain('"hello "');
    expect(r.text).toContain('the upstream stream broke after data was sent');
    expect(r.text).toMatch(/^: provider_responses /m);
  });

  // however the upstream chunks its body, the stream ends promptly with the provider_responses comment,
  // and every stream that delivered bytes is metered (the upstream's usage, or an estimate when it never came).
  test.each([
    ['sse-one-write', null],
    ['sse-byte-per-write', null],
    ['plain-json-stream', null],
    ['cut-mid-event', 'missing'],
  ] as const)(
    'stream whose upstream answers %s: ends promptly, provider_responses last, metered',
    async (behavior, estimated) => {
      up.behavior.set('sk-oa-0-aaaaaaaaaaaa', behavior);
      // Ended before the attempt timeout (the cap, started first) could end it.
      const { res, text } = await beforeCap(ATTEMPT_TIMEOUT_MS, 'the attempt timeout', async () => {
        const res = await fetch(`${gw.url}/api/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'openai/gpt-4o', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
          signal: AbortSignal.timeout(10_000),
        });
        return { res, text: await res.text() };
      });
      expect(res.status).toBe(200);
      expect(text).toMatch(/\n: provider_responses \{[^\n]*\}\n\n$/);
      if (behavior === 'cut-mid-event') expect(text).toContain('the upstream stream broke after data was sent');
      const id = res.headers.get('x-generation-id')!;
      const record = gw.generations.get(id, keyHash(KEY_A))!;
      expect(record).toMatchObject({ streamed: true, byok_credential_id: credId('oa-0'), usage_estimated: estimated });
      if (estimated === null)
        expect(record).toMatchObject({ tokens_prompt: 1000, tokens_completion: 500, list_cost_micros: 7500 });
      else expect(record.tokens_completion).toBeGreaterThan(0);
      const spend = await until('the spend record', async () => recorded.find((x) => x.generationId === id), 5000, 20);
      expect(spend.listCostMicros).toBe(record.list_cost_micros);
      expect(spend.listCostMicros).toBeGreaterThan(0);
    },
  );

  test('a client that abandons a stream is still billed for what was delivered', async () => {
    up.behavior.set('sk-oa-0-aaaaaaaaaaaa', 'slow-stream');
    const res = await fetch(`${gw.url}/api/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'openai/gpt-4o', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    });
    const id = res.headers.get('x-generation-id')!;
    const reader = res.body!.getReader();
    await reader.read();
    await reader.cancel();
    const spend = await until(
      'a spend record for the abandoned stream',
      async () => recorded.find((x) => x.generationId === id),
      10_000,
      50,
    );
    expect(spend.listCostMicros).toBeGreaterThan(0);
    const record = gw.generations.get(id, keyHash(KEY_A))!;
    expect(record).toMatchObject({ usage_estimated: 'missing', byok_credential_id: credId('oa-0') });
    expect(record.provider_responses.at(-1)!.error).toBe('client went away');
  }, 30_000);

  // usage is tenant input. The client always gets its completion; the ledger never gets a bad number.
  test.each([
    ['usage-fractional', 'invalid'],
    ['usage-negative', 'invalid'],
    // 4e15 tokens is no count any request has (past 1e9: not a count), whoever reports it.
    ['usage-huge', 'invalid'],
    ['usage-missing', 'missing'],
  ] as const)(
    'upstream usage %s: 200 with the completion, metered as an estimate (%s), safe integers only',
    async (behavior, reason) => {
      up.behavior.set('sk-oa-0-aaaaaaaaaaaa', behavior);
      const r = await chat(KEY_A, { model: 'openai/gpt-4o', max_tokens: 64 });
      expect(r.status).toBe(200);
      expect(r.json!.choices[0].message.content).toBe('hello from upstream');
      expect(r.json!.error).toBeUndefined();
      const id = r.headers.get('x-generation-id')!;
      const record = gw.generations.get(id, keyHash(KEY_A))!;
      expect(record.usage_estimated).toBe(reason);
      // The completion estimate is bounded by the request's max_tokens.
      expect(record.tokens_completion).toBeLessThanOrEqual(64);
      const spend = await until('the spend record', async () => recorded.find((x) => x.generationId === id), 5000, 20);
      for (const n of [spend.promptTokens, spend.completionTokens, spend.listCostMicros]) {
        expect(Number.isSafeInteger(n)).toBe(true);
        expect(n).toBeGreaterThanOrEqual(0);
      }
      expect(await (await fetch(`${gw.url}/metrics`)).text()).toMatch(
        new RegExp(`byok_gateway_usage_estimated_total\\{reason="${reason}"\\} [1-9]`),
      );
    },
  );

  test('hygiene at the tenant door: a lower-case bearer scheme, invalid UTF-8 and over-deep JSON', async () => {
    const post = (body: Buffer | string, auth = `Bearer ${KEY_A}`) =>
      fetch(`${gw.url}/api/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: auth, 'content-type': 'application/json' },
        body,
      });
    const ok = await post(JSON.stringify({ model: 'openai/gpt-4o', messages: [] }), `bearer ${KEY_A}`);
    expect(ok.status).toBe(200);
    expect((await post(JSON.stringify({ model: 'openai/gpt-4o', messages: [] }), `BEARER ${KEY_A}`)).status).toBe(200);
    const before = up.hits.length;
    const utf8 = await post(
      Buffer.concat([
        Buffer.from('{"model":"openai/gpt-4o","messages":[{"role":"user","content":"ab'),
        Buffer.from([0xff]),
        Buffer.from('"}]}'),
      ]),
    );
    expect(utf8.status).toBe(400);
    expect(await utf8.json()).toEqual({
      error: { code: 400, message: 'the request body is not valid UTF-8 (byte 65)', metadata: null },
    });
    const deep = await post(`{"model":"openai/gpt-4o","messages":${'['.repeat(100_000)}${']'.repeat(100_000)}}`);
    expect(deep.status).toBe(400);
    expect(((await deep.json()) as { error: { message: string } }).error.message).toBe(
      'the request body nests deeper than 128 levels',
    );
    const proto = await post('{"model":"openai/gpt-4o","messages":[],"__proto__":{"x":1}}');
    expect(proto.status).toBe(400);
    expect(up.hits.length).toBe(before);
  });

  test('transport failures reach the tenant as one generic string; the detail stays in the gateway log', async () => {
    // A closed port in the catalog: ECONNREFUSED must not show through provider_responses.
    const file = join(root, 'catalog.json');
    const doc = JSON.parse(readFileSync(file, 'utf8')) as { models: { model: string; endpoints: unknown[] }[] };
    writeFileSync(
      file,
      JSON.stringify({
        ...doc,
        models: [
          ...doc.models,
          {
            model: 'closed/port',
            endpoints: [
              {
                id: 'groq',
                provider: 'groq',
                pricing: { kind: 'per-request', usdPerRequest: '0.01' },
                upstream: { baseUrl: 'https://127.0.0.1:9/v1' },
              },
            ],
          },
        ],
      }),
    );
    await until('the new model', async () =>
      ((await (await fetch(`${gw.url}/api/v1/models`)).json()) as { data: { id: string }[] }).data.some(
        (m) => m.id === 'closed/port',
      ),
    );
    const r = await chat(KEY_A, { model: 'closed/port' });
    expect(r.status).toBe(502);
    const errors = r.json!.error.metadata.provider_responses.map((p: { error?: string }) => p.error);
    expect(errors.length).toBeGreaterThan(0);
    for (const e of errors) expect(e).toBe('upstream unreachable');
    expect(r.text).not.toMatch(/ECONN|EPROTO|CERT|VERIFY/);
    expect(gatewayLogs.join('')).toMatch(/"code":"ECONNREFUSED".*upstream transport failure/);
    writeFileSync(file, JSON.stringify(doc));
  });

  test('an upstream 3xx or unusable 2xx is never passed on: 502 with the upstream codes in provider_responses', async () => {
    for (const key of ['sk-oa-0-aaaaaaaaaaaa', `${CANARY}-oa1`, 'sk-shared-openai']) up.behavior.set(key, '307');
    up.behavior.set('sk-oa-fb-ffffffffffff', '200-not-json');
    const r = await wire(KEY_A, { model: 'openai/gpt-4o' });
    expect(r.status).toBe(502);
    expect(r.json!.error.code).toBe(502);
    expect(r.json!.error.metadata.provider_responses.map((p: { status: number }) => p.status)).toEqual([
      307, 307, 307, 200,
    ]);
  });

  test('a provider refusing the keys is its own error (424 upstream_auth_error), never the 401 of a bad gateway key', async () => {
    for (const key of ['sk-oa-0-aaaaaaaaaaaa', `${CANARY}-oa1`, 'sk-shared-openai']) up.behavior.set(key, '500');
    up.behavior.set('sk-oa-fb-ffffffffffff', '401');
    const r = await wire(KEY_A, { model: 'openai/gpt-4o' });
    expect(r.status).toBe(424);
    expect(r.json!.error).toMatchObject({ code: 424, type: 'upstream_auth_error' });
    expect(r.json!.error.message).toBe(
      `upstream authentication failed: openai refused the team's own key (BYOK credential ${credId('oa-fb')}) with 401; your gateway API key was accepted. Every attempt failed; provider_responses lists them. Fix or rotate the provider key (kubectl get byok shows UPSTREAM)`,
    );
    expect(r.json!.error.metadata.provider_responses.map((p: { status: number }) => p.status)).toEqual([
      500, 500, 500, 401,
    ]);
    expect(r.text).not.toContain(CANARY);
  });

  test('a management key sent to the gateway is told which key this door takes, without echoing it', async () => {
    const mk = 'sk-byok-mgmt-v1-0123456789abcdef0123456789abcdef';
    const r = await wire(mk, { model: 'openai/gpt-4o' });
    expect(r.status).toBe(401);
    expect(r.json!.error.message).toBe(
      'this is a management key (sk-byok-mgmt-v1-…), which only the REST API takes; the gateway takes a gateway API key (sk-byok-gw-v1-…): create one with `byok-operator gateway-key create`',
    );
    expect(r.text).not.toContain('0123456789abcdef');
    expect(r.hits).toEqual([]);
  });

  test('spend gate: a refused request reaches no upstream (402 naming the budget); finished requests are recorded with list cost', async () => {
    admitAllowed.value = false;
    const refused = await wire(KEY_A, { model: 'openai/gpt-4o' });
    admitAllowed.value = true;
    expect(refused.status).toBe(402);
    expect(refused.hits).toEqual([]);
    expect(refused.json!.error.message).toContain(
      `budget reached: this month's (UTC) monthly budget of workspace "team-budget" has reached its limit`,
    );
    expect(refused.json!.error.metadata.reason).toBe('budget_reached');
    admitAllowed.value = 'throw';
    const unavailable = await wire(KEY_A, { model: 'openai/gpt-4o' });
    admitAllowed.value = true;
    expect(unavailable.status).toBe(503);
    expect(unavailable.hits).toEqual([]);
    const before = recorded.length;
    const ok = await wire(KEY_A, { model: 'openai/gpt-4o' });
    await until('the spend record', () => recorded.length > before);
    expect(recorded[recorded.length - 1]).toMatchObject({
      generationId: ok.json!.id,
      model: 'openai/gpt-4o',
      endpointId: 'openai',
      provider: 'openai',
      byokCredentialId: credId('oa-0'),
      promptTokens: 1000,
      completionTokens: 500,
      listCostMicros: 7500,
      who: { apiKeyHash: keyHash(KEY_A), userId: 'user-1' },
    });
    await until('the fee on the generation record', async () => {
      const g = (await (
        await fetch(`${gw.url}/api/v1/generation?id=${ok.json!.id}`, { headers: { authorization: `Bearer ${KEY_A}` } })
      ).json()) as { data: { fee_micros: number | null } };
      return g.data.fee_micros === 375;
    });
  });

  test('rule 8: with provider.order, credentials still come first (in the requested provider order), then shared endpoints', async () => {
    for (const k of ['api-key:az-resource-key', 'sk-oa-0-aaaaaaaaaaaa', `${CANARY}-oa1`]) up.behavior.set(k, '500');
    const r = await wire(KEY_A, { model: 'openai/gpt-4.1', provider: { order: ['azure', 'openai'] } });
    expect(r.hits.map((h) => h.auth)).toEqual([
      'api-key:az-resource-key',
      'sk-oa-0-aaaaaaaaaaaa',
      `${CANARY}-oa1`,
      'sk-shared-openai',
    ]);
    // The shared azure endpoint has no platform key here: recorded as a failed attempt, never sent.
    expect(
      r.json!.provider_responses.map((p: { credential: string; endpoint_id: string; error?: string }) => [
        p.credential === 'shared' ? 'shared' : 'byok',
        p.endpoint_id,
        p.error ?? null,
      ]),
    ).toEqual([
      ['byok', 'azure', null],
      ['byok', 'openai', null],
      ['byok', 'openai', null],
      ['shared', 'azure', 'no shared key configured for provider azure'],
      ['shared', 'openai', null],
    ]);
  });

  test('rule 9: a provider with only regional endpoints: prioritized credentials route there, shared only when targeted, fallback never', async () => {
    for (const k of ['sk-oa-0-aaaaaaaaaaaa', `${CANARY}-oa1`]) up.behavior.set(k, '500');
    let r = await wire(KEY_A, { model: 'openai/o3' });
    expect(r.hits.map((h) => [h.path, h.auth])).toEqual([
      ['/openai-eu-region/v1/chat/completions', 'sk-oa-0-aaaaaaaaaaaa'],
      ['/openai-eu-region/v1/chat/completions', `${CANARY}-oa1`],
    ]);
    expect(r.status).toBe(500);
    r = await wire(KEY_A, { model: 'openai/o3', provider: { order: ['openai/eu'] } });
    expect(r.hits.map((h) => h.auth)).toEqual(['sk-oa-0-aaaaaaaaaaaa', `${CANARY}-oa1`, 'sk-shared-openai']);
    expect(r.status).toBe(200);
  });

  test('rule 10: data policies apply before credentials: no compliant endpoint fails even with a valid credential', async () => {
    const deny = await wire(KEY_A, { model: 'meta/llama-3.3-70b', provider: { data_collection: 'deny' } });
    expect(deny.hits).toEqual([]);
    expect(deny.status).toBe(404);
    expect(deny.json!.error.metadata.reason).toBe('no_compliant_endpoint');
    const zdr = await wire(KEY_A, { model: 'openai/gpt-4o', provider: { zdr: true } });
    expect(zdr.hits).toEqual([]);
    expect(zdr.json!.error.metadata.excluded).toEqual(
      expect.arrayContaining([expect.objectContaining({ endpoint_id: 'openai', rule: 'rule-10-zdr' })]),
    );
    // A ZDR endpoint stays usable.
    expect((await wire(KEY_A, { model: 'openai/o3', provider: { zdr: true } })).status).toBe(200);
  });

  test('rotation reaches the upstream without a restart; a disabled credential is skipped', async () => {
    await setSecret(kc, ns, 'oa-0-key', 'sk-oa-0-rotated-bbbbbbbb');
    await until(
      'the rotated key on the wire',
      async () => (await wire(KEY_A, { model: 'openai/gpt-4o' })).hits[0]?.auth === 'sk-oa-0-rotated-bbbbbbbb',
      30_000,
      200,
    );
    await creds.update('oa-0', (o) => {
      o.spec!.disabled = true;
    });
    await until(
      'the disabled credential skipped',
      async () => (await wire(KEY_A, { model: 'openai/gpt-4o' })).hits[0]?.auth === `${CANARY}-oa1`,
      30_000,
      200,
    );
  });

  test('the operator warns (log, metric, Event) when the compiled config needs more slots than gateway pods mount', async () => {
    const metrics = await (await fetch(`${run.op.httpAddress}/metrics`)).text();
    expect(metrics).toContain('byok_gateway_slots_exceeded{kind="routing"} 1');
    expect(metrics).toContain('byok_gateway_slots_exceeded{kind="bundles"} 0');
    expect(run.logs.some((l) => l.includes('needs 1 routing slots but gateway pods mount 0'))).toBe(true);
    await until('the GatewaySlotsExceeded Event', async () => {
      const events = await kc.makeApiClient(EventsV1Api).listNamespacedEvent({ namespace: routingNs });
      return events.items.some(
        (e) => e.reason === 'GatewaySlotsExceeded' && e.regarding?.name === 'byok-routing-index',
      );
    });
  });

  test('canary: the key never appears in a response, a log line or a metric', async () => {
    // The canary key served requests above (oa-1, an-req); it did reach its upstream, and nothing else.
    expect(up.hits.some((h) => h.auth.startsWith(CANARY))).toBe(true);
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    const operatorMetrics = await (await fetch(`${run.op.httpAddress}/metrics`)).text();
    expect(metrics).toMatch(
      /byok_gateway_attempts_total\{provider="openai",kind="byok",outcome="rate_limited"\} [1-9]/,
    );
    expect(metrics).toMatch(/byok_gateway_failovers_total\{provider="openai",kind="byok"\} [1-9]/);
    expect(metrics).toContain('byok_gateway_overhead_seconds_bucket');
    const everything = [metrics, operatorMetrics, ...responses, ...gatewayLogs, ...run.logs].join('\n');
    expect(everything).not.toContain(CANARY);
    expect(everything).not.toContain('sk-oa-0-aaaaaaaaaaaa');
    expect(everything).not.toContain('iam-secret-value-0001');
    expect(gatewayLogs.some((l) => l.includes('"provider_responses"'))).toBe(true);
    // Upstream request bodies never carry a key either (keys travel only in auth headers).
    expect(up.bodies.join('\n')).not.toContain(CANARY);
  });
});
