// /metrics, /healthz and /readyz on one small node:http server (no framework needed for three routes).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

export interface HealthServer {
  address: string;
  close(): Promise<void>;
}

export async function startHealthServer(opts: {
  port: number;
  host?: string;
  registry: Registry;
  ready: () => boolean;
  healthy?: () => boolean;
}): Promise<HealthServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const reply = (code: number, body: string, type = 'text/plain; charset=utf-8') => {
      res.writeHead(code, { 'Content-Type': type });
      res.end(body);
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') return reply(405, 'method not allowed\n');
    if (path === '/healthz' || path === '/livez')
      return (opts.healthy?.() ?? true) ? reply(200, 'ok\n') : reply(500, 'unhealthy\n');
    if (path === '/readyz') return opts.ready() ? reply(200, 'ok\n') : reply(503, 'caches not synced\n');
    if (path === '/metrics') {
      opts.registry.metrics().then(
        (text) => reply(200, text, opts.registry.contentType),
        (err: unknown) => reply(500, `metrics failed: ${err instanceof Error ? err.message : String(err)}\n`),
      );
      return;
    }
    reply(404, 'not found\n');
  });
  const { url, close } = await listen(server, opts.port, opts.host);
  return { address: url, close };
}

/** Listens on `host:port` (default all interfaces); the URL to reach it (loopback for a wildcard) and a close that ends every connection. */
export async function listen(
  server: Server,
  port: number,
  host = '0.0.0.0',
): Promise<{ url: string; close(): Promise<void> }> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const { port: bound } = server.address() as AddressInfo;
  return {
    url: `http://${host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host}:${bound}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
