// The processes bench/peers.ts measures beside the gateway: the loopback upstream and the two floors (a bare
// node:http pipe and a bare fastify proxy). Started as `node peer-servers.ts --<role> ...`; this module imports
// only node:http and fastify, so a floor's heap and RSS are the floor's own.
import { Agent, createServer, type IncomingMessage, request } from 'node:http';
import { fileURLToPath } from 'node:url';
import Fastify, { type FastifyInstance } from 'fastify';

export const CHUNKS = 20;
/** The upstream's chat completion, the same for every bench that proxies one. */
export const COMPLETION = JSON.stringify({
  id: 'chatcmpl-bench',
  object: 'chat.completion',
  created: 1,
  model: 'gpt-4o',
  choices: [
    { index: 0, message: { role: 'assistant', content: 'Hello! How can I help you today?' }, finish_reason: 'stop' },
  ],
  usage: { prompt_tokens: 12, completion_tokens: 9, total_tokens: 21 },
});
const SSE_EVENTS = [
  ...Array.from(
    { length: CHUNKS - 1 },
    (_, i) =>
      `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content: `tok${i} ` } }] })}\n\n`,
  ),
  `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', choices: [], usage: { prompt_tokens: 12, completion_tokens: CHUNKS - 1, total_tokens: 31 } })}\n\ndata: [DONE]\n\n`,
];

/** The loopback upstream: a chat completion, or an SSE stream of CHUNKS events (one write each); counts what it served. */
function serveUpstream(port: number): void {
  let served = 0;
  const server = createServer((req, res) => {
    if (req.method === 'GET') {
      res.end(JSON.stringify({ served }));
      return;
    }
    const body: Buffer[] = [];
    req.on('data', (c: Buffer) => body.push(c));
    req.on('end', () => {
      served++;
      if (!Buffer.concat(body).includes('"stream":true')) {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(COMPLETION) });
        res.end(COMPLETION);
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      let i = 0;
      const next = () => {
        res.write(SSE_EVENTS[i++]);
        if (i < SSE_EVENTS.length) setImmediate(next);
        else res.end();
      };
      next();
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(port, '127.0.0.1');
}

/** The floor of any Node proxy: node:http in, node:http out, bodies piped, nothing parsed. */
function servePipe(upstream: string, port: number): void {
  const agent = new Agent({ keepAlive: true, maxSockets: 1024 });
  const target = new URL(upstream);
  const server = createServer((req, res) => {
    const out = request(
      {
        host: target.hostname,
        port: target.port,
        path: '/v1/chat/completions',
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/json',
          ...(req.headers['content-length'] ? { 'content-length': req.headers['content-length'] } : {}),
        },
      },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    out.once('error', () => res.destroy());
    req.pipe(out);
  });
  server.keepAliveTimeout = 60_000;
  server.listen(port, '127.0.0.1');
}

/**
 * A bare fastify proxy, the floor of bench/peers.ts and bench/gateway.ts: the JSON body parsed, forwarded with
 * node:http to the upstream's chat completions, the answer parsed and sent as JSON; a stream piped.
 */
export function bareFastifyProxy(upstream: string, route: string): FastifyInstance {
  const agent = new Agent({ keepAlive: true, maxSockets: 1024 });
  const target = new URL(`${upstream}/v1/chat/completions`);
  const app = Fastify({ logger: false });
  app.post(route, async (req, reply) => {
    const body = JSON.stringify({ ...(req.body as object), model: 'gpt-4o' });
    const res = await new Promise<IncomingMessage>((resolve, reject) => {
      const r = request(
        target,
        {
          method: 'POST',
          agent,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        },
        resolve,
      );
      r.once('error', reject);
      r.end(body);
    });
    if ((req.body as { stream?: boolean }).stream) return reply.type('text/event-stream').send(res);
    const chunks: Buffer[] = [];
    for await (const c of res) chunks.push(c as Buffer);
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
  });
  return app;
}

async function serveFastify(upstream: string, port: number): Promise<void> {
  await bareFastifyProxy(upstream, '/api/v1/chat/completions').listen({ host: '127.0.0.1', port });
}

/** This module's file: benches start its servers through peerArgv, so a move follows the import. */
export const PEER_SERVERS = fileURLToPath(import.meta.url);
export type PeerRole = 'upstream' | 'pipe' | 'fastify';

/** `node` arguments that start `role`: upstream <port>; pipe and fastify <upstream url> <port>. */
export function peerArgv(role: PeerRole, ...args: string[]): string[] {
  return [PEER_SERVERS, `--${role}`, ...args];
}

if (process.argv[1] === PEER_SERVERS) {
  const role = process.argv[2];
  // Exit cleanly on SIGTERM, so --cpu-prof and --heap-prof runs of the floors write their profiles.
  process.once('SIGTERM', () => process.exit(0));
  if (role === '--upstream') serveUpstream(Number(process.argv[3]));
  else if (role === '--pipe') servePipe(process.argv[3]!, Number(process.argv[4]));
  else if (role === '--fastify') await serveFastify(process.argv[3]!, Number(process.argv[4]));
  else throw new Error(`unknown role ${role}`);
}
