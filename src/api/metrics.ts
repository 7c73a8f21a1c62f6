// Prometheus metrics of the REST API server at GET /metrics: requests and latency by route template and status,
// authentication failures by kind and rate-limit refusals. Labels are bounded: the route is fastify's template
// (`/api/v1/byok/:id`), never the raw URL, and unmatched paths share one value.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest, RawServerDefault } from 'fastify';
import { Counter, collectDefaultMetrics, Histogram, Registry } from 'prom-client';

export interface ApiMetricsOptions {
  /** Where the metrics live (default: a new Registry with the process metrics). */
  registry?: Registry;
  /** Path of the scrape endpoint (default /metrics). */
  path?: string;
}

const UNMATCHED_ROUTE = 'unmatched';

function routeOf(req: FastifyRequest): string {
  return req.routeOptions.url ?? UNMATCHED_ROUTE;
}

/** Which authentication failure a 401/403 was; undefined for other statuses. */
function authFailure(reply: FastifyReply): string | undefined {
  if (reply.statusCode === 403) return 'not_management_key';
  if (reply.statusCode !== 401) return undefined;
  return String(reply.getHeader('www-authenticate') ?? '').includes('invalid_token')
    ? 'invalid_token'
    : 'missing_token';
}

/** Adds the hooks and the scrape route to `app`; call before the routes are declared. */
export function registerApiMetrics<L extends FastifyBaseLogger>(
  app: FastifyInstance<RawServerDefault, IncomingMessage, ServerResponse, L>,
  opts: ApiMetricsOptions = {},
): Registry {
  const registry = opts.registry ?? new Registry();
  if (!opts.registry) collectDefaultMetrics({ register: registry });
  const registers = [registry];
  const requests = new Counter({
    name: 'byok_api_requests_total',
    help: 'REST API requests by method, route template and status code.',
    labelNames: ['method', 'route', 'status'],
    registers,
  });
  const duration = new Histogram({
    name: 'byok_api_request_duration_seconds',
    help: 'REST API request latency by method, route template and status code.',
    labelNames: ['method', 'route', 'status'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers,
  });
  const authFailures = new Counter({
    name: 'byok_api_auth_failures_total',
    help: 'Requests refused by management-key authentication, by reason.',
    labelNames: ['reason'],
    registers,
  });
  const rateLimited = new Counter({
    name: 'byok_api_rate_limited_total',
    help: 'Requests refused with 429 by the per-key rate limit, by route template.',
    labelNames: ['route'],
    registers,
  });
  const path = opts.path ?? '/metrics';

  app.addHook('onResponse', async (req, reply) => {
    const route = routeOf(req);
    if (route === path) return;
    const labels = { method: req.method, route, status: String(reply.statusCode) };
    requests.inc(labels);
    duration.observe(labels, reply.elapsedTime / 1000);
    const failure = authFailure(reply);
    if (failure) authFailures.inc({ reason: failure });
    if (reply.statusCode === 429) rateLimited.inc({ route });
  });
  app.get(path, async (_req, reply) => reply.type(registry.contentType).send(await registry.metrics()));
  return registry;
}
