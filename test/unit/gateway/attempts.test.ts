// The attempt loop alone: a fake `send` answers each attempt as a script says, so failover order,
// deadlines, the client leaving, one- and many-chunk streams and provider_responses are checked in milliseconds.
import { PassThrough } from 'node:stream';
import { describe, expect, test } from '@jest/globals';
import type { Attempt, CatalogEndpoint, ProviderSlug } from '../../../src/domain/index.ts';
import {
  AttemptJournal,
  type AttemptLoopDeps,
  type AttemptTimer,
  bufferedSink,
  ClientLink,
  failureAnswer,
  type Outcome,
  runAttempts,
  streamingSink,
  type UpstreamResponse,
} from '../../../src/gateway/attempts.ts';
import { SseUsageScanner } from '../../../src/gateway/sse-scanner.ts';
import { type UpstreamRequest, UpstreamSetupError } from '../../../src/gateway/upstream.ts';
import { beforeCap } from '../../support/order.ts';

const endpoint = (provider: ProviderSlug): CatalogEndpoint => ({
  id: provider,
  provider,
  region: null,
  zdr: false,
  dataCollection: false,
  pricing: { kind: 'per-token', promptUsdPerMillionTokens: '1', completionUsdPerMillionTokens: '2' },
  price: { kind: 'per-token', promptMicrosPerMillionTokens: 1_000_000, completionMicrosPerMillionTokens: 2_000_000 },
});
const byok = (provider: ProviderSlug, credentialId: string): Attempt => ({
  kind: 'credential',
  credentialId,
  provider,
  endpoint: endpoint(provider),
  section: 'prioritized',
});
const shared = (provider: ProviderSlug): Attempt => ({ kind: 'shared', provider, endpoint: endpoint(provider) });

/** What the fake upstream does for one attempt. */
type Script =
  | { status: number; chunks: string[]; gapMs?: number; breakAfter?: boolean }
  | { refuse: true }
  | { hang: true }
  | { setup: string };

/** A response that plays its chunks (a real Readable, as node:http gives), optionally breaking after them. */
function respond(s: Extract<Script, { status: number }>): UpstreamResponse {
  const res = new PassThrough() as PassThrough & { statusCode?: number; complete?: boolean };
  res.statusCode = s.status;
  void (async () => {
    // As node:http: the head first; the body's events come later.
    await new Promise((r) => setImmediate(r));
    for (const c of s.chunks) {
      if (s.gapMs) await new Promise((r) => setTimeout(r, s.gapMs));
      if (res.destroyed) return;
      res.write(c);
    }
    if (s.breakAfter) {
      res.destroy(new Error('socket hang up'));
      return;
    }
    res.complete = true;
    res.end();
  })();
  return res;
}

// The per-attempt deadline is a real timer: tests about deadlines pass their own; the others get one no loaded
// machine reaches, so an answer that is on its way is never cut as a timeout.
function harness(scripts: Script[], timeoutMs = 10_000) {
  const sent: string[] = [];
  const observed: { provider: string; outcome: Outcome; status: number | null; last: boolean }[] = [];
  const transportFailures: unknown[] = [];
  let i = 0;
  const deps: AttemptLoopDeps = {
    timeoutMs,
    prepare: async (a) => {
      const s = scripts[i]!;
      if ('setup' in s) {
        i++;
        throw new UpstreamSetupError(s.setup);
      }
      return {
        url: new URL(`https://${a.provider}.test/v1/chat/completions`),
        headers: {},
        body: '{}',
      } satisfies UpstreamRequest;
    },
    setupFailure: (err) => (err instanceof Error ? err.message : 'setup failed'),
    send: (req, timer: AttemptTimer) => {
      const s = scripts[i++]!;
      sent.push(req.url.hostname);
      return new Promise<UpstreamResponse>((resolve, reject) => {
        let res: UpstreamResponse | undefined;
        // As a ClientRequest's destroy(): the request fails, and so does a response already under way.
        timer.attach({
          destroy: (err?: Error) => {
            reject(err ?? new Error('destroyed'));
            res?.destroy(err);
          },
        });
        if ('refuse' in s)
          setImmediate(() =>
            reject(Object.assign(new Error('connect ECONNREFUSED 10.0.0.7:443'), { code: 'ECONNREFUSED' })),
          );
        else if ('status' in s) setImmediate(() => resolve((res = respond(s))));
        // hang: never answers; only the deadline or the client ends it.
      });
    },
    transportFailure: (err) => transportFailures.push(err),
  };
  const journal = new AttemptJournal((a, outcome, status, last) =>
    observed.push({ provider: a.provider, outcome, status, last }),
  );
  const client = new ClientLink();
  return { deps, journal, client, sent, observed, transportFailures };
}

const completion = (usage: unknown) => JSON.stringify({ id: 'x', choices: [{ message: { content: 'hi' } }], usage });

describe('the attempt loop, buffered', () => {
  test('fails over in plan order and commits the first usable answer; provider_responses name each failure', async () => {
    const h = harness([
      { status: 429, chunks: ['{"error":"slow down"}'] },
      { refuse: true },
      { status: 200, chunks: ['{not json'] },
      { status: 200, chunks: [completion({ prompt_tokens: 3, completion_tokens: 4 })] },
      { status: 200, chunks: ['{}'] },
    ]);
    const attempts = [
      byok('openai', 'c1'),
      byok('anthropic', 'c2'),
      shared('groq'),
      shared('mistral'),
      shared('together'),
    ];
    const result = await runAttempts(attempts, bufferedSink, h.deps, h.journal, h.client);
    expect(result.committed).toBe(true);
    if (!result.committed) return;
    expect(result.attempt.provider).toBe('mistral');
    expect(result.last).toBe(false);
    expect(result.value.body.usage).toEqual({ prompt_tokens: 3, completion_tokens: 4 });
    expect(h.sent).toEqual(['openai.test', 'anthropic.test', 'groq.test', 'mistral.test']);
    // The committed attempt is the caller's to record; the failures are here, in order, with no upstream text.
    expect(
      h.journal.responses.map(({ provider, credential, status, error }) => ({ provider, credential, status, error })),
    ).toEqual([
      { provider: 'openai', credential: 'c1', status: 429, error: undefined },
      { provider: 'anthropic', credential: 'c2', status: null, error: 'upstream unreachable' },
      { provider: 'groq', credential: 'shared', status: 200, error: 'invalid JSON in the upstream response' },
    ]);
    expect(JSON.stringify(h.journal.responses)).not.toContain('10.0.0.7');
    expect(h.transportFailures).toHaveLength(1);
    expect(h.observed.map((o) => o.outcome)).toEqual(['rate_limited', 'transport_error', 'upstream_error']);
  });

  test('a deadline fails the attempt over as a timeout; every attempt failing gives the last upstream status', async () => {
    const h = harness([{ status: 503, chunks: ['busy'] }, { hang: true }], 30);
    const result = await runAttempts(
      [shared('openai'), shared('anthropic')],
      bufferedSink,
      h.deps,
      h.journal,
      h.client,
    );
    expect(result.committed).toBe(false);
    expect(h.journal.responses.map((r) => [r.status, r.error])).toEqual([
      [503, undefined],
      [null, 'no response within 30 ms'],
    ]);
    expect(h.observed.map((o) => [o.outcome, o.last])).toEqual([
      ['upstream_error', false],
      ['timeout', true],
    ]);
    // The timeout does not mask the 503 an upstream did answer.
    expect(failureAnswer(h.journal.responses)).toEqual({
      status: 503,
      message: 'every attempt failed; the last upstream status was 503 (openai)',
    });
  });

  test("a provider refusing the key last is 424 upstream_auth_error, naming whose key: the team's or the platform's", () => {
    const resp = (credential: string, status: number | null) => ({
      provider: 'openai',
      endpoint_id: 'openai',
      credential,
      status,
      latency_ms: 1,
    });
    const byok = failureAnswer([resp('cred-1', 500), resp('cred-2', 401), resp('shared', null)]);
    expect(byok).toMatchObject({ status: 424, type: 'upstream_auth_error' });
    expect(byok.message).toContain(
      "openai refused the team's own key (BYOK credential cred-2) with 401; your gateway API key was accepted",
    );
    const shared = failureAnswer([resp('cred-1', 500), resp('shared', 403)]);
    expect(shared).toMatchObject({ status: 424, type: 'upstream_auth_error' });
    expect(shared.message).toContain("openai refused the platform's shared key with 403");
    // A refusal followed by an answered 5xx: the last answer decides, as before.
    expect(failureAnswer([resp('cred-1', 401), resp('shared', 503)])).toEqual({
      status: 503,
      message: 'every attempt failed; the last upstream status was 503 (openai)',
    });
  });

  test('only timeouts and no status: 504; a 2xx that is not an object, a 3xx: 502', async () => {
    const h = harness([{ hang: true }], 10);
    await runAttempts([shared('openai')], bufferedSink, h.deps, h.journal, h.client);
    expect(failureAnswer(h.journal.responses).status).toBe(504);
    const h2 = harness([
      { status: 200, chunks: ['[1,2]'] },
      { status: 307, chunks: [''] },
    ]);
    await runAttempts([shared('openai'), shared('groq')], bufferedSink, h2.deps, h2.journal, h2.client);
    expect(h2.journal.responses.map((r) => r.error)).toEqual(['the upstream response is not a JSON object', undefined]);
    expect(failureAnswer(h2.journal.responses).status).toBe(502);
  });

  test('bounded reads: a 2xx body past 16 MiB fails over with a named error; a 4 MiB error body fails over with its status', async () => {
    const MiB = 'x'.repeat(1024 * 1024);
    const h = harness(
      [
        { status: 500, chunks: Array.from({ length: 4 }, () => MiB) },
        { status: 200, chunks: ['{"pad":"', ...Array.from({ length: 17 }, () => MiB), '"}'] },
        { status: 200, chunks: [completion(null)] },
      ],
      5_000,
    );
    const result = await runAttempts(
      [shared('openai'), shared('groq'), shared('mistral')],
      bufferedSink,
      h.deps,
      h.journal,
      h.client,
    );
    expect(result.committed && result.attempt.provider).toBe('mistral');
    expect(h.journal.responses.map((r) => [r.status, r.error])).toEqual([
      [500, undefined],
      [200, 'the upstream response is larger than 16 MiB'],
    ]);
    expect(h.observed.map((o) => o.outcome)).toEqual(['upstream_error', 'upstream_error']);
  });

  test('a payload that cannot be prepared is a credential_error and the loop goes on, sending nothing for it', async () => {
    const h = harness([
      { setup: 'the credential payload does not parse for its provider' },
      { status: 200, chunks: [completion(null)] },
    ]);
    const result = await runAttempts(
      [byok('openai', 'bad'), shared('groq')],
      bufferedSink,
      h.deps,
      h.journal,
      h.client,
    );
    expect(result.committed && result.attempt.provider).toBe('groq');
    expect(h.sent).toEqual(['groq.test']);
    expect(h.journal.responses[0]).toMatchObject({
      credential: 'bad',
      status: null,
      error: 'the credential payload does not parse for its provider',
    });
    expect(h.observed[0]!.outcome).toBe('credential_error');
  });

  test('the client leaving tears down the request in flight and stops the loop', async () => {
    const h = harness([{ hang: true }, { status: 200, chunks: [completion(null)] }], 5_000);
    setTimeout(() => h.client.leave(), 20);
    // Over before the attempt timeout (5 s, the trap: waiting out the hung request) fires.
    const result = await beforeCap(5_000, 'the attempt timeout', () =>
      runAttempts([shared('openai'), shared('groq')], bufferedSink, h.deps, h.journal, h.client),
    );
    expect(result.committed).toBe(false);
    expect(h.sent).toEqual(['openai.test']);
    expect(h.journal.responses).toEqual([expect.objectContaining({ provider: 'openai', error: 'client went away' })]);
  });
});

describe('the attempt loop, streaming', () => {
  const sse = (n: number) => [
    ...Array.from({ length: n }, (_, k) => `data: {"choices":[{"delta":{"content":"${k}"}}]}\n\n`),
    'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":20}}\n\n',
    'data: [DONE]\n\n',
  ];

  async function drain(body: { pipe(sink: { chunk(c: Buffer): boolean; end(e: string | undefined): void }): void }) {
    const scanner = new SseUsageScanner();
    let text = '';
    const error = await new Promise<string | undefined>((resolve) =>
      body.pipe({
        chunk: (c) => {
          text += c.toString('utf8');
          scanner.scan(c);
          return true;
        },
        end: resolve,
      }),
    );
    return { text, error, usage: scanner.finish() };
  }

  test('one chunk: a body that ends in the same read as its only data still ends, with its usage', async () => {
    const h = harness([{ status: 200, chunks: [sse(1).join('')] }]);
    const result = await runAttempts([shared('openai')], streamingSink, h.deps, h.journal, h.client);
    expect(result.committed).toBe(true);
    if (!result.committed) return;
    const out = await drain(result.value);
    expect(out.error).toBeUndefined();
    expect(out.text).toBe(sse(1).join(''));
    expect(out.usage).toEqual({ prompt_tokens: 5, completion_tokens: 20 });
  });

  test('many chunks, split mid-event: all bytes pass through in order and usage is found across the splits', async () => {
    const whole = sse(20).join('');
    const pieces = whole.match(/[\s\S]{1,37}/g)!;
    const h = harness([{ status: 200, chunks: pieces, gapMs: 1 }]);
    const result = await runAttempts([shared('openai')], streamingSink, h.deps, h.journal, h.client);
    if (!result.committed) throw new Error('not committed');
    const out = await drain(result.value);
    expect(out.text).toBe(whole);
    expect(result.value.bytes).toBe(Buffer.byteLength(whole));
    expect(out.usage).toEqual({ prompt_tokens: 5, completion_tokens: 20 });
  });

  test('before the first byte a stream fails over (broken, or a non-2xx); after it the break reaches the sink', async () => {
    const h = harness([
      { status: 200, chunks: [], breakAfter: true },
      { status: 500, chunks: ['oops'] },
      { status: 200, chunks: ['data: {"a":1}\n\n'], breakAfter: true },
    ]);
    const result = await runAttempts(
      [shared('openai'), shared('groq'), shared('mistral')],
      streamingSink,
      h.deps,
      h.journal,
      h.client,
    );
    expect(h.journal.responses.map((r) => [r.provider, r.status, r.error])).toEqual([
      ['openai', 200, 'stream broke before the first byte'],
      ['groq', 500, undefined],
    ]);
    expect(h.observed.map((o) => o.outcome)).toEqual(['stream_broken', 'upstream_error']);
    if (!result.committed) throw new Error('not committed');
    expect(result.attempt.provider).toBe('mistral');
    const out = await drain(result.value);
    expect(out.text).toBe('data: {"a":1}\n\n');
    expect(out.error).toBe('upstream connection failed mid-stream');
  });

  test('a stream that sends nothing before the deadline is a timeout', async () => {
    const h = harness([{ status: 200, chunks: ['data: late\n\n'], gapMs: 200 }], 20);
    const result = await runAttempts([shared('openai')], streamingSink, h.deps, h.journal, h.client);
    expect(result.committed).toBe(false);
    expect(h.journal.responses[0]).toMatchObject({ status: null, error: 'no response within 20 ms' });
  });
});

describe('SSE usage scanning', () => {
  test('a trailing event without its blank line, and a plain JSON body answered to stream: true, are read', () => {
    const a = new SseUsageScanner();
    a.scan('data: {"x":1}\n\ndata: {"usage":{"prompt_tokens":1,"completion_tokens":2}}');
    expect(a.finish()).toEqual({ prompt_tokens: 1, completion_tokens: 2 });
    const b = new SseUsageScanner();
    b.scan(completion({ prompt_tokens: 7, completion_tokens: 8 }));
    expect(b.finish()).toEqual({ prompt_tokens: 7, completion_tokens: 8 });
    const c = new SseUsageScanner();
    c.scan('data: [DONE]\n\ndata: {"usage": nope}\n\n');
    expect(c.finish()).toBeUndefined();
  });
});
