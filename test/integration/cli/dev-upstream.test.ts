// The dev stack's loopback upstream and its fault injection (docs/gateway.md, "Dev upstream faults"): each marker in
// a key gives the answer the table promises, so every UpstreamHealthy state can be tried in dev.
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { DEV_UPSTREAM_FAULTS, devUpstreamFault, startLoopbackUpstream } from '../../../src/cli/dev-gateway.ts';

describe('dev loopback upstream', () => {
  let server: Server;
  let base: string;
  beforeAll(async () => {
    server = await startLoopbackUpstream();
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mistral/v1/chat/completions`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  const call = (key: string, body: Record<string, unknown> = {}, signal?: AbortSignal) =>
    fetch(base, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'mistral-large', messages: [{ role: 'user', content: 'Hi' }], ...body }),
      ...(signal ? { signal } : {}),
    });

  test('the markers, in table order; matched case-insensitively', () => {
    expect(DEV_UPSTREAM_FAULTS.map((f) => f.marker)).toEqual([
      'unauthorized',
      'ratelimited',
      'servererror',
      'timeout',
      'cutstream',
    ]);
    expect(devUpstreamFault('Bearer sk-dev-UNAUTHORIZED-1')).toBe('unauthorized');
    expect(
      devUpstreamFault('AWS4-HMAC-SHA256 Credential=AKIATIMEOUT0000/20261125/us-east-1/bedrock/aws4_request'),
    ).toBe('timeout');
    expect(devUpstreamFault('Bearer sk-demo-openai-0000AbCd')).toBeUndefined();
  });

  test('401, 429 and 500 with an OpenAI-shaped error body', async () => {
    for (const [key, status] of [
      ['sk-unauthorized-1', 401],
      ['sk-ratelimited-1', 429],
      ['sk-servererror-1', 500],
    ] as const) {
      const res = await call(key);
      expect(res.status).toBe(status);
      expect(((await res.json()) as { error: { message: string } }).error.message).toContain('mistral');
    }
  });

  test('a normal key: a completion with usage, or SSE ending in usage and [DONE] when streaming', async () => {
    const plain = (await (await call('sk-fine')).json()) as {
      choices: { message: { content: string } }[];
      usage: { total_tokens: number };
    };
    expect(plain.choices[0]!.message.content).toBe('Hello from the mistral loopback upstream.');
    expect(plain.usage.total_tokens).toBe(21);
    const streamed = await call('sk-fine', { stream: true });
    expect(streamed.headers.get('content-type')).toBe('text/event-stream');
    const text = await streamed.text();
    const events = text.split('\n\n').filter(Boolean);
    expect(events.at(-1)).toBe('data: [DONE]');
    const parsed = events.slice(0, -1).map(
      (e) =>
        JSON.parse(e.replace(/^data: /, '')) as {
          choices: { delta: { content?: string } }[];
          usage?: { total_tokens: number };
        },
    );
    expect(parsed.map((e) => e.choices[0]?.delta.content ?? '').join('')).toBe(
      'Hello from the mistral loopback upstream.',
    );
    expect(parsed.at(-1)!.usage!.total_tokens).toBe(21);
  });

  test("timeout: no answer at all (the gateway's attempt timeout ends it)", async () => {
    const started = Date.now();
    await expect(call('sk-timeout-1', {}, AbortSignal.timeout(1500))).rejects.toThrow(/abort|timeout/i);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1400);
  });

  test('cutstream: one event and half of the next, then the connection closes; without stream, half the body', async () => {
    const streamed = await call('sk-cutstream-1', { stream: true });
    expect(streamed.status).toBe(200);
    const reader = streamed.body!.getReader();
    let received = '';
    await expect(
      (async () => {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) return;
          received += Buffer.from(value).toString();
        }
      })(),
    ).rejects.toThrow();
    expect(received).toMatch(/^data: \{.*"content":"Hello "/);
    expect(received).toMatch(/"choi$/);
    expect(received).not.toContain('[DONE]');
    const plain = await call('sk-cutstream-1');
    expect(plain.status).toBe(200);
    await expect(plain.text()).rejects.toThrow();
  });
});
