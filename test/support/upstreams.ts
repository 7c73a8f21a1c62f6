// Loopback upstreams for the gateway tests: one HTTPS server (certificate from a test CA) that plays every provider
// by path, checks authentication exactly (bearer value, Azure api-key header, a SigV4 signature re-computed here with
// @smithy/signature-v4, a Vertex token issued by its own loopback token_uri after verifying the JWT assertion), logs
// what it received, and answers as told per credential: ok, 429, 500, slowly, or with a broken stream.
import { createPublicKey, type KeyObject, verify } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { Sha256 } from '@aws-crypto/sha256-js';
import { SignatureV4 } from '@smithy/signature-v4';
import { createCertificateAuthority } from '../../src/controlplane/pki.ts';

export type Behavior =
  | 'ok'
  | '401'
  | '429'
  | '500'
  | 'slow'
  | 'broken-stream'
  | 'empty-then-close'
  // Stream chunking: the whole SSE body in one write, one byte per write, plain JSON for stream: true,
  // and a body cut in the middle of an event.
  | 'sse-one-write'
  | 'sse-byte-per-write'
  | 'plain-json-stream'
  | 'cut-mid-event'
  | 'slow-stream'
  // Usage an upstream may report (it is tenant input): fractional, negative, past 2^53, missing.
  | 'usage-fractional'
  | 'usage-negative'
  | 'usage-huge'
  | 'usage-missing'
  // A 3xx with no Location, and a 2xx whose body is not JSON: neither is an answer for the client.
  | '307'
  | '200-not-json'
  // a provider that bills what it delivers (n choices of max_tokens each, 1,105 tokens per image part), and
  // a tenant endpoint that delivers LONG_ANSWER and reports zero usage.
  | 'bills-honestly'
  | 'zero-usage-long'
  // a tenant endpoint streaming 4 MiB in CRLF framing (BIG_CRLF_STREAM), paused halfway (Upstreams.pause).
  | 'crlf-4mib'
  // Key limits: answers only once Upstreams.held is released (requests in flight stay in flight until then).
  | 'held';

/** 8,000 characters of prose: what 'zero-usage-long' delivers (per choice), with usage {0, 0}. */
export const LONG_ANSWER =
  'It was a bright cold day in April, and the clocks were striking thirteen. Winston Smith slipped quickly through the glass doors of Victory Mansions. '
    .repeat(60)
    .slice(0, 8000);
/**
 * What 'crlf-4mib' sends: 4 MiB of content events framed with CRLF, then a usage event whose JSON spans two `data:`
 * lines (SSE joins them with LF), then [DONE]. The usage is an honest count for the content (about 4.4 characters per
 * token), above the floor of its bytes.
 */
export const BIG_CRLF_STREAM = (() => {
  const words = 'It was a bright cold day in April and the clocks were striking thirteen. ';
  const content = words.repeat(28).slice(0, 2000);
  const event = `data: ${JSON.stringify({ id: 'chatcmpl-big', object: 'chat.completion.chunk', model: 'dep-big', choices: [{ index: 0, delta: { content } }] })}\r\n\r\n`;
  const count = Math.ceil((4 * 1024 * 1024) / event.length);
  const usage = { prompt_tokens: 12, completion_tokens: count * 455, total_tokens: 12 + count * 455 };
  const events = [
    ...Array.from({ length: count }, () => event),
    `data: {"id":"chatcmpl-big","choices":[],\r\ndata: "usage":${JSON.stringify(usage)}}\r\n\r\n`,
    'data: [DONE]\r\n\r\n',
  ];
  return { events, usage, body: events.join('') };
})();

/** A stream that waits halfway until the test lets it go on: `reached` resolves when it waits. */
export interface StreamPause {
  reached: Promise<void>;
  release(): void;
}
export function streamPause(): StreamPause & { arrive(): void; released: Promise<void> } {
  let arrive!: () => void;
  let release!: () => void;
  const reached = new Promise<void>((r) => (arrive = r));
  const released = new Promise<void>((r) => (release = r));
  return { reached, release, arrive, released };
}

/** What 'bills-honestly' bills per image part, and for the rest of a prompt. */
export const IMAGE_PART_TOKENS = 1105;
export const PROMPT_TOKENS = 40;

interface MeteredRequestBody {
  n?: number;
  max_tokens?: number;
  max_completion_tokens?: number;
  messages?: { content?: unknown }[];
}

/** The choices and usage of the metering behaviours. */
function meteredAnswer(
  parsed: MeteredRequestBody,
  behavior: 'bills-honestly' | 'zero-usage-long',
): { contents: string[]; usage: Record<string, number> } {
  const n = parsed.n ?? 1;
  if (behavior === 'zero-usage-long')
    return {
      contents: Array.from({ length: n }, () => LONG_ANSWER),
      usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 },
    };
  const perChoice = parsed.max_completion_tokens ?? parsed.max_tokens ?? 16;
  const images = (parsed.messages ?? []).reduce(
    (sum, m) =>
      sum +
      (Array.isArray(m.content) ? (m.content as { type?: string }[]).filter((p) => p.type === 'image_url').length : 0),
    0,
  );
  const prompt = PROMPT_TOKENS + images * IMAGE_PART_TOKENS;
  return {
    contents: Array.from({ length: n }, (_, i) => `choice ${i}`),
    usage: { prompt_tokens: prompt, completion_tokens: n * perChoice, total_tokens: prompt + n * perChoice },
  };
}

export interface Hit {
  /** provider path segment, e.g. openai, azure, bedrock, vertex. */
  provider: string;
  path: string;
  /** The authentication the upstream accepted, as the test names it (bearer value, api-key value, sigv4:<keyId>, vertex:<token>). */
  auth: string;
  model: string;
  stream: boolean;
  includeUsage: boolean;
  status: number;
}

export interface Upstreams {
  base: string;
  caPem: string;
  hits: Hit[];
  /** Told of each completion request and its body as it arrives (the e2e times when a rotated key is first used). */
  hitListeners: Set<(hit: Hit, body: string) => void>;
  /** What to do for a given accepted auth value (default ok). */
  behavior: Map<string, Behavior>;
  /** Every raw header/body the upstream saw (for the canary check: only the auth headers may carry keys). */
  bodies: string[];
  iamSecrets: Map<string, string>;
  vertexKeys: Map<string, KeyObject>;
  tokenExchanges: number;
  /** Where /token-redirect points (default: this server's own /token). */
  tokenRedirectTo: string | undefined;
  /** GET .../models calls (idle-credential probes). */
  probes: { provider: string; path: string; auth: string }[];
  /** Where 'crlf-4mib' waits halfway, when set. */
  pause: ReturnType<typeof streamPause> | undefined;
  /** What 'held' requests wait for: `arrived` counts them, `release()` answers them all (and every later one). */
  held: { arrived: number; release(): void; released: Promise<void> };
  close(): Promise<void>;
}

const USAGE_OF: Partial<Record<Behavior, unknown>> = {
  'usage-fractional': { prompt_tokens: 0.5, completion_tokens: 500, total_tokens: 500.5 },
  'usage-negative': { prompt_tokens: -1000, completion_tokens: 500, total_tokens: -500 },
  'usage-huge': { prompt_tokens: 4e15, completion_tokens: 4e15, total_tokens: 8e15 },
  'usage-missing': undefined,
};

const completion = (model: string, behavior: Behavior = 'ok') =>
  JSON.stringify({
    id: 'chatcmpl-upstream',
    object: 'chat.completion',
    created: 1,
    model,
    choices: [{ index: 0, message: { role: 'assistant', content: 'hello from upstream' }, finish_reason: 'stop' }],
    usage:
      behavior in USAGE_OF ? USAGE_OF[behavior] : { prompt_tokens: 1000, completion_tokens: 500, total_tokens: 1500 },
  });

const chunk = (model: string, content: string) =>
  `data: ${JSON.stringify({ id: 'chatcmpl-upstream', object: 'chat.completion.chunk', model, choices: [{ index: 0, delta: { content } }] })}\n\n`;

/** A streamed answer, shaped by the key's behavior (whole, byte by byte, slow, cut, broken...). */
async function streamAnswer(res: ServerResponse, hit: Hit, model: string, behavior: Behavior): Promise<void> {
  hit.status = 200;
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  const usageEvent = `data: ${JSON.stringify({ id: 'chatcmpl-upstream', choices: [], usage: { prompt_tokens: 1000, completion_tokens: 500, total_tokens: 1500 } })}\n\n`;
  const whole = `${chunk(model, 'hello ')}${chunk(model, 'world')}${hit.includeUsage ? usageEvent : ''}data: [DONE]\n\n`;
  if (behavior === 'sse-one-write') return void res.end(whole);
  if (behavior === 'sse-byte-per-write') {
    const bytes = Buffer.from(whole);
    for (let i = 0; i < bytes.length; i++) {
      res.write(bytes.subarray(i, i + 1));
      // Yield so each byte leaves in its own write (and usually its own read at the gateway).
      if (i % 8 === 7) await new Promise((r) => setImmediate(r));
    }
    return void res.end();
  }
  if (behavior === 'slow-stream') {
    // One chunk every 100 ms for 5 s, no usage until the end: a client that leaves early gets only part.
    for (let i = 0; i < 50 && !res.destroyed; i++) {
      res.write(chunk(model, `part ${i} `));
      await new Promise((r) => setTimeout(r, 100));
    }
    return void res.end('data: [DONE]\n\n');
  }
  if (behavior === 'cut-mid-event') {
    res.write(`${chunk(model, 'hello ')}data: {"id":"chatcmpl-upstream","choi`);
    setTimeout(() => res.destroy(), 20);
    return;
  }
  if (behavior === 'empty-then-close') {
    // A 200 head reaches the gateway, then the connection dies before any body byte.
    res.flushHeaders();
    setTimeout(() => res.destroy(), 20);
    return;
  }
  res.write(chunk(model, 'hello '));
  if (behavior === 'broken-stream') {
    setTimeout(() => res.destroy(), 20);
    return;
  }
  res.write(chunk(model, 'world'));
  if (hit.includeUsage)
    res.write(
      `data: ${JSON.stringify({ id: 'chatcmpl-upstream', choices: [], usage: { prompt_tokens: 1000, completion_tokens: 500, total_tokens: 1500 } })}\n\n`,
    );
  res.end('data: [DONE]\n\n');
}

/** BIG_CRLF_STREAM, waiting halfway for `pause` when one is set. */
async function bigCrlfAnswer(
  res: ServerResponse,
  hit: Hit,
  pause: ReturnType<typeof streamPause> | undefined,
): Promise<void> {
  hit.status = 200;
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  const { events } = BIG_CRLF_STREAM;
  const half = events.length >> 1;
  // Writes of about 64 KiB, each after the last drained: the gateway reads the stream as a network delivers it.
  const send = async (from: number, to: number) => {
    for (let i = from; i < to; i += 30)
      if (!res.write(events.slice(i, Math.min(i + 30, to)).join(''))) await new Promise((r) => res.once('drain', r));
  };
  await send(0, half);
  if (pause) {
    pause.arrive();
    await pause.released;
  }
  await send(half, events.length);
  res.end();
}

/** Where 'held' requests wait until released. */
function heldGate(): Upstreams['held'] {
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  return { arrived: 0, release, released };
}

/** `host`: the address to listen on (the e2e node's bridge address, which its pods reach); loopback by default. */
export async function startUpstreams(host = '127.0.0.1'): Promise<Upstreams> {
  const ca = await createCertificateAuthority('byok-gateway-test-ca');
  const leaf = await ca.issue({
    commonName: host,
    usage: 'server',
    ipAddresses: [...new Set(['127.0.0.1', host])],
    dnsNames: ['localhost'],
  });
  const state = {
    hits: [] as Hit[],
    hitListeners: new Set<(hit: Hit, body: string) => void>(),
    behavior: new Map<string, Behavior>(),
    bodies: [] as string[],
    iamSecrets: new Map<string, string>(),
    vertexKeys: new Map<string, KeyObject>(),
    tokenExchanges: 0,
    tokenRedirectTo: undefined as string | undefined,
    probes: [] as { provider: string; path: string; auth: string }[],
    pause: undefined as ReturnType<typeof streamPause> | undefined,
    held: heldGate(),
  };
  const issuedTokens = new Set<string>();
  let tokenCounter = 0;

  const authOf = async (
    provider: string,
    req: IncomingMessage,
    body: string,
    url: URL,
  ): Promise<string | undefined> => {
    const h = req.headers;
    if (provider === 'azure') return typeof h['api-key'] === 'string' ? `api-key:${h['api-key']}` : undefined;
    if (
      provider === 'bedrock' &&
      typeof h.authorization === 'string' &&
      h.authorization.startsWith('AWS4-HMAC-SHA256')
    ) {
      const keyId = /Credential=([^/]+)\//.exec(h.authorization)?.[1];
      const region = /Credential=[^/]+\/\d{8}\/([^/]+)\/bedrock\//.exec(h.authorization)?.[1];
      const secret = keyId ? state.iamSecrets.get(keyId) : undefined;
      const amzDate = h['x-amz-date'];
      if (!keyId || !region || !secret || typeof amzDate !== 'string') return undefined;
      const signingDate = new Date(
        amzDate.replace(/^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/, '$1-$2-$3T$4:$5:$6Z'),
      );
      const signer = new SignatureV4({
        service: 'bedrock',
        region,
        credentials: { accessKeyId: keyId, secretAccessKey: secret },
        sha256: Sha256,
      });
      const query: Record<string, string> = {};
      url.searchParams.forEach((v, k) => (query[k] = v));
      const expected = await signer.sign(
        // GET for a probe's models list (signed without content-type), POST for completions.
        {
          method: req.method ?? 'POST',
          protocol: 'https:',
          hostname: url.hostname,
          port: Number(url.port),
          path: url.pathname,
          query,
          headers: {
            host: String(h.host),
            ...(h['content-type'] ? { 'content-type': String(h['content-type']) } : {}),
          },
          body,
        },
        { signingDate },
      );
      return expected.headers.authorization === h.authorization ? `sigv4:${keyId}:${region}` : undefined;
    }
    const bearer =
      typeof h.authorization === 'string' && h.authorization.startsWith('Bearer ')
        ? h.authorization.slice(7)
        : undefined;
    if (provider === 'vertex') return bearer && issuedTokens.has(bearer) ? `vertex:${bearer}` : undefined;
    return bearer;
  };

  const tokenEndpoint = (body: string, res: ServerResponse) => {
    const form = new URLSearchParams(body);
    const assertion = form.get('assertion') ?? '';
    const [head, claims, sig] = assertion.split('.');
    const iss = claims
      ? (JSON.parse(Buffer.from(claims, 'base64url').toString('utf8')) as { iss?: string }).iss
      : undefined;
    const key = iss ? state.vertexKeys.get(iss) : undefined;
    const ok =
      form.get('grant_type') === 'urn:ietf:params:oauth:grant-type:jwt-bearer' &&
      key !== undefined &&
      sig !== undefined &&
      verify('RSA-SHA256', Buffer.from(`${head}.${claims}`), key, Buffer.from(sig, 'base64url'));
    if (!ok) {
      res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'invalid_grant' }));
      return;
    }
    state.tokenExchanges++;
    const token = `ya29.test-${++tokenCounter}`;
    issuedTokens.add(token);
    res
      .writeHead(200, { 'content-type': 'application/json' })
      .end(JSON.stringify({ access_token: token, expires_in: 3600, token_type: 'Bearer' }));
  };

  const server: Server = createServer({ cert: leaf.certPem, key: leaf.keyPem }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const body = Buffer.concat(chunks).toString('utf8');
        const url = new URL(req.url ?? '/', `https://${req.headers.host}`);
        state.bodies.push(body);
        if (url.pathname === '/token') return tokenEndpoint(body, res);
        // A token endpoint that redirects: the gateway must treat it as a refusal, never follow it.
        if (url.pathname === '/token-redirect')
          return void res
            .writeHead(307, { location: state.tokenRedirectTo ?? `https://${req.headers.host}/token` })
            .end();
        const provider = url.pathname.split('/')[1] ?? '';
        const auth = await authOf(provider, req, body, url);
        if (req.method === 'GET' && url.pathname.endsWith('/models')) {
          // The probe's models list: authenticated like a completion, answered as the key's behavior says.
          state.probes.push({ provider, path: url.pathname, auth: auth ?? '<rejected>' });
          const behavior = auth ? (state.behavior.get(auth) ?? 'ok') : '401';
          const status = behavior === '401' ? 401 : behavior === '429' ? 429 : behavior === '500' ? 500 : 200;
          res
            .writeHead(status, { 'content-type': 'application/json' })
            .end(JSON.stringify(status === 200 ? { object: 'list', data: [] } : { error: { message: 'refused' } }));
          return;
        }
        const parsed = JSON.parse(body) as {
          model: string;
          stream?: boolean;
          stream_options?: { include_usage?: boolean };
        } & MeteredRequestBody;
        const hit: Hit = {
          provider,
          path: url.pathname + url.search,
          auth: auth ?? '<rejected>',
          model: parsed.model,
          stream: parsed.stream === true,
          includeUsage: parsed.stream_options?.include_usage === true,
          status: 0,
        };
        state.hits.push(hit);
        for (const listener of state.hitListeners) listener(hit, body);
        const answer = (status: number, text: string) => {
          hit.status = status;
          res.writeHead(status, { 'content-type': 'application/json' }).end(text);
        };
        if (auth === undefined) return answer(401, JSON.stringify({ error: { message: 'invalid credentials' } }));
        const behavior = state.behavior.get(auth) ?? 'ok';
        if (behavior === '401') return answer(401, JSON.stringify({ error: { message: 'invalid api key' } }));
        if (behavior === '429') return answer(429, JSON.stringify({ error: { message: 'rate limited' } }));
        if (behavior === '500') return answer(500, JSON.stringify({ error: { message: 'internal error' } }));
        if (behavior === '307') return answer(307, '');
        if (behavior === '200-not-json') return answer(200, '<html>not json</html>');
        if (behavior === 'slow') await new Promise((r) => setTimeout(r, 4000));
        if (behavior === 'held') {
          state.held.arrived++;
          await state.held.released;
        }
        if (res.destroyed) return;
        if (behavior === 'bills-honestly' || behavior === 'zero-usage-long') {
          const { contents, usage } = meteredAnswer(parsed, behavior);
          if (!hit.stream) {
            const choices = contents.map((content, index) => ({
              index,
              message: { role: 'assistant', content },
              finish_reason: 'stop',
            }));
            return answer(
              200,
              JSON.stringify({
                id: 'chatcmpl-upstream',
                object: 'chat.completion',
                created: 1,
                model: parsed.model,
                choices,
                usage,
              }),
            );
          }
          hit.status = 200;
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          contents.forEach((content, index) => {
            for (let i = 0; i < content.length; i += 40)
              res.write(
                `data: ${JSON.stringify({ id: 'chatcmpl-upstream', object: 'chat.completion.chunk', model: parsed.model, choices: [{ index, delta: { content: content.slice(i, i + 40) } }] })}\n\n`,
              );
          });
          if (hit.includeUsage)
            res.write(`data: ${JSON.stringify({ id: 'chatcmpl-upstream', choices: [], usage })}\n\n`);
          return void res.end('data: [DONE]\n\n');
        }
        if (behavior === 'crlf-4mib' && hit.stream) return bigCrlfAnswer(res, hit, state.pause);
        if (!hit.stream || behavior === 'plain-json-stream') return answer(200, completion(parsed.model, behavior));
        return streamAnswer(res, hit, parsed.model, behavior);
      })();
    });
  });
  await new Promise<void>((r) => server.listen(0, host, r));
  const port = (server.address() as AddressInfo).port;
  return {
    base: `https://${host}:${port}`,
    caPem: ca.certPem,
    ...state,
    get tokenExchanges() {
      return state.tokenExchanges;
    },
    get tokenRedirectTo() {
      return state.tokenRedirectTo;
    },
    set tokenRedirectTo(to: string | undefined) {
      state.tokenRedirectTo = to;
    },
    get pause() {
      return state.pause;
    },
    set pause(p: ReturnType<typeof streamPause> | undefined) {
      state.pause = p;
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  } as Upstreams;
}

export function publicKeyOf(privatePem: string): KeyObject {
  return createPublicKey(privatePem);
}
