// The gateway part of `byok-operator dev`: loopback upstreams for a few providers, the kubelet-like projector that
// writes the compiled routing objects into directories (the layout pods see), the one catalog with its upstreams moved
// to loopback, shared keys, and the gateway itself. The shared Anthropic key is rate-limited on purpose, so one curl
// shows a failover from shared capacity to the account's fallback Bedrock credential.
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { KubeAccess } from '../kube/kubeconfig.ts';
import type { Logger } from 'pino';
import { createGatewayMetrics, sharedKeyFileName, startGateway } from '../gateway/index.ts';
import { defaultCatalogFile, deriveCatalog } from './catalog.ts';
import { openGatewaySpendGate } from './gateway-ledger.ts';
import { startProjector } from '../kube/projector.ts';

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

/** Answers every chat completion with a fixed reply naming the upstream; 429 for keys containing "ratelimited". */
function startLoopbackUpstream(): Promise<Server> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const auth = `${req.headers.authorization ?? ''}${req.headers['api-key'] ?? ''}`;
      const upstream = (req.url ?? '/').split('/')[1] ?? 'upstream';
      if (auth.includes('ratelimited')) {
        res.writeHead(429, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: `${upstream}: rate limit reached (dev loopback)` } }));
        return;
      }
      let model = 'unknown';
      try {
        model = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { model?: string }).model ?? model;
      } catch {
        // Not JSON: answer anyway; this is a dev stand-in.
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          id: 'chatcmpl-dev',
          object: 'chat.completion',
          created: Math.floor(Date.now() / 1000),
          model,
          choices: [{ index: 0, message: { role: 'assistant', content: `Hello from the ${upstream} loopback upstream.` }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 12, completion_tokens: 9, total_tokens: 21 },
        }),
      );
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
}): Promise<DevGateway> {
  const root = join(opts.devDir, 'gateway');
  const dirs = { config: join(root, 'routing'), bundles: join(root, 'bundles'), key: join(root, 'key'), shared: join(root, 'shared-keys') };
  mkdirSync(dirs.shared, { recursive: true });
  const upstream = await startLoopbackUpstream();
  const base = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  // The one catalog (src/cli/catalog.ts), with its upstream URLs moved to the loopback upstream and kept in step with
  // the source while dev runs: `explain` over config/catalog/catalog.json plans what this gateway plans.
  const catalogFile = join(root, 'catalog.json');
  const catalog = deriveCatalog(opts.catalogSource ?? defaultCatalogFile(), catalogFile, base, {
    onError: (err) => opts.logger.warn({ err: err.message }, 'dev catalog not rewritten; the gateway keeps the last good one'),
  });
  writeFileSync(join(dirs.shared, sharedKeyFileName('openai')), 'sk-dev-shared-openai\n', { mode: 0o600 });
  writeFileSync(join(dirs.shared, sharedKeyFileName('anthropic')), 'sk-dev-shared-anthropic-ratelimited\n', { mode: 0o600 });

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
  const metrics = createGatewayMetrics();
  const gatewayLog = opts.logger.child({ component: 'gateway' });
  // The embedded ledger, snapshot beside the projected config: the dev stack meters fees and enforces budgets.
  const spendGate = await openGatewaySpendGate({ ...(opts.redisUrl ? { redisUrl: opts.redisUrl } : { snapshotPath: join(root, 'ledger.json') }), registry: metrics.registry, logger: gatewayLog });
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
    ],
    async stop() {
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
