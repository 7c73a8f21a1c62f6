// Stream framing end to end: real apiserver → operator → projected config → gateway with the embedded spend ledger →
// loopback upstreams. A tenant's own Azure endpoint streams 4 MiB framed with CRLF (which never contains LF LF), its
// usage event's JSON over two data lines; before the fix each read rescanned everything since the last LF LF (4.2-4.5
// s of CPU for one answer, another account's requests waited behind it) and the usage was unreadable. The client gets
// the bytes unchanged, the request is metered at the usage the upstream reported, and another account's requests,
// sent while the stream is halfway, are all served before it ends.

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { SseUsageScanner } from '../../../src/gateway/sse-scanner.ts';
import { streamFloorTokens } from '../../../src/gateway/usage.ts';
import { type Projector, startProjector } from '../../../src/kube/projector.ts';
import {
  account,
  asDefault,
  credential,
  gatewayKey,
  keyHash,
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
import { createTenant } from '../../support/tenant.ts';
import { until } from '../../support/until.ts';
import { BIG_CRLF_STREAM, startUpstreams, streamPause, type Upstreams } from '../../support/upstreams.ts';

const kc = testKubeConfig();
const KEY_BIG = 'sk-gw-framing-big-0123456789abcdef01';
const KEY_OTHER = 'sk-gw-framing-other-0123456789abcdef';

describe('a 4 MiB CRLF-framed stream from a tenant endpoint, end to end', () => {
  let nsBig = '';
  let nsOther = '';
  let run: CapturedOperator;
  let up: Upstreams;
  let projector: Projector;
  let stack: MeteredGateway | undefined;
  const dirs = gatewayDirs('byok-int-framing-');

  const post = (key: string, body: Record<string, unknown>) =>
    fetch(`${stack!.gw.url}/api/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], ...body }),
    });

  beforeAll(async () => {
    up = await startUpstreams();
    nsBig = await createTestNamespace('gw-framing-big');
    nsOther = await createTestNamespace('gw-framing-other');
    const routingNs = await createTestNamespace('gw-framing-routing');
    run = await startTestOperator(kc, {
      routingNamespace: routingNs,
      watchNamespaces: [nsBig, nsOther],
      compile: { coalesceMs: 10 },
      egress: LOOPBACK_ALLOWED,
    });
    for (const [ns, key] of [
      [nsBig, KEY_BIG],
      [nsOther, KEY_OTHER],
    ] as const) {
      await createTenant(ns, {
        account: account('acct', (a) => void (a.spec.plan = 'pay-as-you-go')),
        workspaces: [workspace('main', asDefault())],
        gatewayKeys: [gatewayKey('k', keyHash(key))],
      });
    }
    // The tenant's own Azure deployment: an endpoint_url it chose (tenantUrl), which streams 4 MiB framed with CRLF.
    await createSecret(
      kc,
      nsBig,
      'az-key',
      JSON.stringify([
        {
          api_key: 'az-big-key',
          model_slug: 'openai/gpt-4o-mini',
          endpoint_url: `${up.base}/azure/deployments/dep-big/chat/completions?api-version=2024-10-21`,
          model_id: 'dep-big',
        },
      ]),
    );
    await resource('byokcredentials', nsBig).create(
      credential('az', withProvider('azure'), withSpec({ isByokOnly: true })),
    );
    up.behavior.set('api-key:az-big-key', 'crlf-4mib');
    const pricing = {
      kind: 'per-token',
      promptUsdPerMillionTokens: '0.15',
      completionUsdPerMillionTokens: '0.6',
    } as const;
    writeCatalog(dirs.catalog, [
      gpt4o(up, { pricing }),
      // No context length: the answer's honest count (about 900,000 tokens) is within its bounds.
      {
        model: 'openai/gpt-4o-mini',
        endpoints: [
          endpoint(up, 'azure', { pricing, upstream: { baseUrl: `${up.base}/azure/unused`, model: 'gpt-4o-mini' } }),
        ],
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
    await projected(
      projector,
      dirs,
      'both accounts compiled',
      (accounts) => accounts.get(nsBig)?.credentials.length === 1 && accounts.get(nsOther)?.apiKeys.length === 1,
    );
    stack = await startMeteredGateway(dirs, up);
  }, 60_000);

  afterAll(async () => {
    await stopAll({ stack, projector, run, up }, dirs);
  });

  test('relayed unchanged, metered at the reported usage, and another account is served while it streams', async () => {
    const pause = streamPause();
    up.pause = pause;
    const order: string[] = [];
    const res = await post(KEY_BIG, { model: 'openai/gpt-4o-mini', stream: true });
    expect(res.status).toBe(200);
    const id = res.headers.get('x-generation-id')!;
    const received: Buffer[] = [];
    let receivedBytes = 0;
    const reading = (async () => {
      for await (const c of res.body as unknown as AsyncIterable<Uint8Array>) {
        received.push(Buffer.from(c));
        receivedBytes += c.length;
      }
      order.push('stream ended');
    })();

    // Halfway: the upstream waits, and the client has what it sent so far (the gateway has read all of it).
    await pause.reached;
    const half = Buffer.byteLength(BIG_CRLF_STREAM.events.slice(0, BIG_CRLF_STREAM.events.length >> 1).join(''));
    await until('the first half at the client', async () => receivedBytes >= half, 20_000, 10);
    const others = await Promise.all(
      Array.from({ length: 10 }, async (_, i) => {
        const r = await post(KEY_OTHER, { model: 'openai/gpt-4o', stream: i % 2 === 0 });
        const text = await r.text();
        order.push(`other ${i}`);
        return { status: r.status, text };
      }),
    );
    pause.release();
    await reading;

    expect(others.map((o) => o.status)).toEqual(Array.from({ length: 10 }, () => 200));
    expect(
      others.filter((_, i) => i % 2 === 0).every((o) => o.text.includes('hello ') && o.text.includes('[DONE]')),
    ).toBe(true);
    expect(order.indexOf('stream ended')).toBe(10);

    // Unchanged: the upstream's bytes, then the closing comment as an event of its own.
    const body = Buffer.concat(received);
    const upstreamBody = Buffer.from(BIG_CRLF_STREAM.body);
    expect(body.length).toBeGreaterThan(4 * 1024 * 1024);
    expect(body.subarray(0, upstreamBody.length).equals(upstreamBody)).toBe(true);
    expect(body.subarray(upstreamBody.length).toString('utf8')).toMatch(/^: provider_responses \{.*\}\n\n$/);

    // Metered at the usage it reported (over two data lines), which is above the floor of the bytes relayed.
    const floorCheck = new SseUsageScanner();
    floorCheck.scan(upstreamBody);
    floorCheck.finish();
    const floor = streamFloorTokens(floorCheck, { n: 1, logprobEntries: 0 });
    expect(floor).toBeGreaterThan(100_000);
    expect(BIG_CRLF_STREAM.usage.completion_tokens).toBeGreaterThan(floor);
    const g = await stack!.settled(keyHash(KEY_BIG), id);
    expect(g).toMatchObject({
      tokens_prompt: BIG_CRLF_STREAM.usage.prompt_tokens,
      tokens_completion: BIG_CRLF_STREAM.usage.completion_tokens,
      usage_estimated: null,
      is_byok: true,
    });
  }, 120_000);
});
