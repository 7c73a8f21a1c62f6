// The gateway part of `byok-operator dev`: loopback upstreams for a few providers, the kubelet-like projector that
// writes the compiled routing objects into directories (the layout pods see), the one catalog with its upstreams moved
// to loopback, shared keys, and the gateway itself. The shared Anthropic key is rate-limited on purpose, so one curl
// shows a failover from shared capacity to the account's fallback Bedrock credential; other words in a key inject the
// other faults (DEV_UPSTREAM_FAULTS).
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { DEFAULT_DELIVERY_AUDIENCE } from '../contract/delivery.ts';
import { createGatewayMetrics, sharedKeyFileName, startGateway } from '../gateway/index.ts';
import { kubeClient } from '../kube/client.ts';
import type { KubeAccess } from '../kube/kubeconfig.ts';
import { startProjector } from '../kube/projector.ts';
import { defaultCatalogFile, deriveCatalog } from './catalog.ts';
import { openGatewaySpendGate } from './gateway-ledger.ts';

/** The dev gateway's ServiceAccount in the routing namespace: the identity it presents to the delivery stream. */
export const DEV_GATEWAY_SERVICE_ACCOUNT = 'byok-gateway';
/** The kubelet renews a projected token at 80 % of its life; dev does the same for its one-hour token. */
const TOKEN_SECONDS = 3600;

/**
 * What the kubelet does for a pod's projected ServiceAccount token: the ServiceAccount exists, a token with the
 * stream's audience is requested (TokenRequest API) into `file` and renewed before it expires.
 */
async function projectDeliveryToken(
  kubeConfig: KubeAccess,
  namespace: string,
  serviceAccount: string,
  file: string,
): Promise<() => void> {
  const client = kubeClient(kubeConfig);
  try {
    await client.request('POST', `/api/v1/namespaces/${encodeURIComponent(namespace)}/serviceaccounts`, {
      body: { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: serviceAccount } },
    });
  } catch (err) {
    if ((err as { status?: number }).status !== 409) throw err;
  }
  const write = async () => {
    const r = await client.request<{ status: { token: string } }>(
      'POST',
      `/api/v1/namespaces/${encodeURIComponent(namespace)}/serviceaccounts/${encodeURIComponent(serviceAccount)}/token`,
      {
        body: {
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenRequest',
          spec: { audiences: [DEFAULT_DELIVERY_AUDIENCE], expirationSeconds: TOKEN_SECONDS },
        },
      },
    );
    writeFileSync(file, r.status.token, { mode: 0o600 });
  };
  await write();
  const renew = setInterval(() => void write().catch(() => undefined), TOKEN_SECONDS * 800);
  renew.unref();
  return () => clearInterval(renew);
}

export interface DevGateway {
  url: string;
  /** The ops listener: health, metrics, the operator's status endpoint. */
  opsUrl: string;
  /** The one catalog the dev gateway's is derived from (what `explain` reads by default). */
  catalogSource: string;
  /** The dev gateway's catalog: catalogSource with the upstream URLs on loopback. */
  catalogFile: string;
  /** Lines for the dev banner: two curls (a completion, a failover). */
  lines(gatewayApiKey: string): string[];
  stop(): Promise<void>;
}

/**
 * Fault injection of the dev upstream: a key (BYOK payload or shared key) containing one of these markers makes the
 * loopback upstream misbehave, so every UpstreamHealthy state can be tried in dev (docs/gateway.md, "Dev upstream
 * faults"). Matched in the Authorization / api-key header, so Bedrock access key ids (SigV4) work too.
 */
export const DEV_UPSTREAM_FAULTS = [
  { marker: 'unauthorized', answer: '401 (a revoked key)', health: 'Unauthorized' },
  { marker: 'ratelimited', answer: '429', health: 'RateLimited' },
  { marker: 'servererror', answer: '500', health: 'UpstreamErrors' },
  { marker: 'timeout', answer: 'nothing: the attempt times out (10 s in dev)', health: 'UpstreamErrors' },
  {
    marker: 'cutstream',
    answer: '200, then the stream (or body) stops mid-event and the connection closes',
    health: 'UpstreamErrors',
  },
] as const;
export type DevUpstreamFault = (typeof DEV_UPSTREAM_FAULTS)[number]['marker'];

/** The fault a request's credentials ask for; the first marker in table order wins. */
export function devUpstreamFault(auth: string): DevUpstreamFault | undefined {
  const lower = auth.toLowerCase();
  return DEV_UPSTREAM_FAULTS.find((f) => lower.includes(f.marker))?.marker;
}

/** How long a "timeout" request is held when the gateway never gives up on it: far past any attempt timeout. */
const HANG_MS = 5 * 60_000;

/**
 * Answers every chat completion with a fixed reply naming the upstream (as SSE when `stream` is true), unless the key
 * carries a fault marker (DEV_UPSTREAM_FAULTS).
 */
export function startLoopbackUpstream(): Promise<Server> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const auth = `${req.headers.authorization ?? ''}${req.headers['api-key'] ?? ''}`;
      const upstream = (req.url ?? '/').split('/')[1] ?? 'upstream';
      const json = (status: number, body: unknown) =>
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      const fault = devUpstreamFault(auth);
      if (fault === 'unauthorized')
        return json(401, { error: { message: `${upstream}: invalid API key (dev loopback)` } });
      if (fault === 'ratelimited')
        return json(429, { error: { message: `${upstream}: rate limit reached (dev loopback)` } });
      if (fault === 'servererror')
        return json(500, { error: { message: `${upstream}: internal error (dev loopback)` } });
      if (fault === 'timeout') {
        // Never answer; the gateway's attempt timeout ends it (the socket closes), or the cap does.
        const cap = setTimeout(() => res.destroy(), HANG_MS);
        res.on('close', () => clearTimeout(cap));
        return;
      }
      let request: { model?: string; stream?: boolean } = {};
      try {
        request = JSON.parse(Buffer.concat(chunks).toString('utf8')) as typeof request;
      } catch {
        // Not JSON: answer anyway; this is a dev stand-in.
      }
      const model = request.model ?? 'unknown';
      const content = `Hello from the ${upstream} loopback upstream.`;
      const usage = { prompt_tokens: 12, completion_tokens: 9, total_tokens: 21 };
      const created = Math.floor(Date.now() / 1000);
      if (request.stream === true) {
        const event = (data: unknown) => `data: ${JSON.stringify(data)}\n\n`;
        const chunk = (delta: Record<string, unknown>, finish: string | null) =>
          event({
            id: 'chatcmpl-dev',
            object: 'chat.completion.chunk',
            created,
            model,
            choices: [{ index: 0, delta, finish_reason: finish }],
          });
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        res.write(chunk({ role: 'assistant', content: 'Hello ' }, null));
        if (fault === 'cutstream') {
          // Half an event, then the connection drops.
          res.write('data: {"id":"chatcmpl-dev","object":"chat.completion.chunk","choi');
          setTimeout(() => res.destroy(), 20);
          return;
        }
        res.write(chunk({ content: content.slice('Hello '.length) }, null));
        res.write(chunk({}, 'stop'));
        res.end(
          `${event({ id: 'chatcmpl-dev', object: 'chat.completion.chunk', created, model, choices: [], usage })}data: [DONE]\n\n`,
        );
        return;
      }
      const body = JSON.stringify({
        id: 'chatcmpl-dev',
        object: 'chat.completion',
        created,
        model,
        choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
        usage,
      });
      if (fault === 'cutstream') {
        // The headers promise a whole body; half of it arrives, then the connection drops.
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) });
        res.write(body.slice(0, Math.floor(body.length / 2)));
        setTimeout(() => res.destroy(), 20);
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(body);
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

export async function startDevGateway(opts: {
  kubeConfig: KubeAccess;
  routingNamespace: string;
  devDir: string;
  logger: Logger;
  /** Start serving once the compiled config holds this API key (the dev key), so the printed curls work at once. */
  apiKeyHash: string;
  /** Serve GET /byok/status with this token (the dev operator pulls it into UpstreamHealthy / Delivered). */
  statusToken?: string;
  /** The shared ledger (dev's redis-server); absent: the embedded ledger with a snapshot beside the config. */
  redisUrl?: string;
  /** Default: config/catalog/catalog.json. */
  catalogSource?: string;
  /** The operator's delivery stream and the ServiceAccount whose token the gateway presents; absent: the mount alone. */
  deliveryStream?: { url: string; serviceAccount: string };
}): Promise<DevGateway> {
  const root = join(opts.devDir, 'gateway');
  const dirs = {
    config: join(root, 'routing'),
    bundles: join(root, 'bundles'),
    key: join(root, 'key'),
    shared: join(root, 'shared-keys'),
  };
  mkdirSync(dirs.shared, { recursive: true });
  const upstream = await startLoopbackUpstream();
  const base = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  // The one catalog (src/cli/catalog.ts), with its upstream URLs moved to the loopback upstream and kept in step with
  // the source while dev runs: `explain` over config/catalog/catalog.json plans what this gateway plans.
  const catalogFile = join(root, 'catalog.json');
  const catalog = deriveCatalog(opts.catalogSource ?? defaultCatalogFile(), catalogFile, base, {
    onError: (err) =>
      opts.logger.warn({ err: err.message }, 'dev catalog not rewritten; the gateway keeps the last good one'),
  });
  writeFileSync(join(dirs.shared, sharedKeyFileName('openai')), 'sk-dev-shared-openai\n', { mode: 0o600 });
  writeFileSync(join(dirs.shared, sharedKeyFileName('anthropic')), 'sk-dev-shared-anthropic-ratelimited\n', {
    mode: 0o600,
  });

  const projector = startProjector({
    kubeConfig: opts.kubeConfig,
    routingNamespace: opts.routingNamespace,
    configDir: dirs.config,
    bundleDir: dirs.bundles,
    keyDir: dirs.key,
    onError: (err) => opts.logger.warn({ err: err.message }, 'projector sync failed'),
  });
  const deadline = Date.now() + 30_000;
  for (;;) {
    await projector.sync();
    try {
      const { loadRoutingConfig } = await import('../sdk/index.ts');
      if (loadRoutingConfig(dirs.config).apiKey(opts.apiKeyHash)) break;
    } catch {
      // Not compiled yet.
    }
    if (Date.now() > deadline) throw new Error('the operator did not compile a routing config within 30 s');
    await new Promise((r) => setTimeout(r, 200));
  }
  const tokenFile = join(root, 'delivery-token');
  const stopToken = opts.deliveryStream
    ? await projectDeliveryToken(opts.kubeConfig, opts.routingNamespace, opts.deliveryStream.serviceAccount, tokenFile)
    : undefined;
  const metrics = createGatewayMetrics();
  const gatewayLog = opts.logger.child({ component: 'gateway' });
  // The embedded ledger, snapshot beside the projected config: the dev stack meters fees and enforces budgets.
  // With Redis, the spend journal beside it, as the chart mounts one. Started empty, as dev's Redis is: an earlier
  // run's records must not replay into this run's ledger.
  const journalDir = join(root, 'spend-journal');
  if (opts.redisUrl) rmSync(journalDir, { recursive: true, force: true });
  const spendGate = await openGatewaySpendGate({
    ...(opts.redisUrl ? { redisUrl: opts.redisUrl, journalDir } : { snapshotPath: join(root, 'ledger.json') }),
    registry: metrics.registry,
    logger: gatewayLog,
  });
  const gateway = await startGateway({
    configDir: dirs.config,
    bundleDir: dirs.bundles,
    keyDir: dirs.key,
    catalogFile,
    sharedKeysDir: dirs.shared,
    host: '127.0.0.1',
    port: 0,
    opsPort: 0,
    attemptTimeoutMs: 10_000,
    logger: gatewayLog,
    metrics,
    spendGate,
    ...(opts.statusToken ? { statusToken: opts.statusToken } : {}),
    ...(opts.deliveryStream
      ? { deliveryStream: { url: opts.deliveryStream.url, tokenFile, dir: join(root, 'delivery') } }
      : {}),
  });
  const curl = (apiKey: string, model: string) =>
    `curl -s -H 'Authorization: Bearer ${apiKey}' -H 'Content-Type: application/json' ${gateway.url}/api/v1/chat/completions -d '{"model":"${model}","messages":[{"role":"user","content":"Hello"}]}'`;
  return {
    url: `${gateway.url}/api/v1`,
    opsUrl: gateway.opsUrl,
    catalogSource: opts.catalogSource ?? defaultCatalogFile(),
    catalogFile,
    lines: (apiKey) => [
      `  ${curl(apiKey, 'openai/gpt-5')}`,
      '  # failover: shared Anthropic is rate-limited (429), no shared Bedrock key, then the fallback Bedrock credential (SigV4) serves:',
      `  ${curl(apiKey, 'anthropic/claude-sonnet-4')}`,
      '',
      'Upstream faults (a key containing the word; docs/gateway.md, "Dev upstream faults"):',
      ...DEV_UPSTREAM_FAULTS.map((f) => `  ${f.marker.padEnd(13)} ${f.answer} -> UPSTREAM ${f.health}`),
    ],
    async stop() {
      stopToken?.();
      catalog.stop();
      await gateway.close();
      await spendGate.close();
      await projector.stop();
      await new Promise<void>((r) => {
        upstream.closeAllConnections();
        upstream.close(() => r());
      });
    },
  };
}
