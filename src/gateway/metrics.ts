// Prometheus metrics of the gateway, on its own registry (labels carry provider slugs and outcomes, never ids or keys).
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export interface GatewayMetrics {
  registry: Registry;
  requests: Counter<'status'>;
  attempts: Counter<'provider' | 'kind' | 'outcome'>;
  failovers: Counter<'provider' | 'kind'>;
  overhead: Histogram<'stream'>;
  configVersion: Gauge<'version'>;
  reloads: Counter<'what' | 'result'>;
  usageEstimated: Counter<'reason'>;
}

export function createGatewayMetrics(opts: { defaultMetrics?: boolean } = {}): GatewayMetrics {
  const registry = new Registry();
  if (opts.defaultMetrics ?? true) collectDefaultMetrics({ register: registry, prefix: 'byok_gateway_' });
  return {
    registry,
    requests: new Counter({ name: 'byok_gateway_requests_total', help: 'Chat completion requests by HTTP status answered.', labelNames: ['status'], registers: [registry] }),
    attempts: new Counter({
      name: 'byok_gateway_attempts_total',
      help: 'Upstream attempts by provider, kind (byok or shared) and outcome (ok, rate_limited, upstream_error, rejected, timeout, transport_error, credential_error, stream_broken).',
      labelNames: ['provider', 'kind', 'outcome'],
      registers: [registry],
    }),
    failovers: new Counter({ name: 'byok_gateway_failovers_total', help: 'Failed attempts followed by another attempt, by the failed attempt\'s provider and kind.', labelNames: ['provider', 'kind'], registers: [registry] }),
    overhead: new Histogram({
      name: 'byok_gateway_overhead_seconds',
      help: 'Time a request spent in the gateway itself (total minus time waiting on upstreams).',
      labelNames: ['stream'],
      buckets: [0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1],
      registers: [registry],
    }),
    configVersion: new Gauge({ name: 'byok_gateway_routing_config_info', help: 'The loaded routing config version (value 1).', labelNames: ['version'], registers: [registry] }),
    usageEstimated: new Counter({
      name: 'byok_gateway_usage_estimated_total',
      help: 'Served requests metered with an estimate because the upstream usage was missing, invalid or out of bounds (reason).',
      labelNames: ['reason'],
      registers: [registry],
    }),
    reloads: new Counter({ name: 'byok_gateway_reloads_total', help: 'Routing config and catalog reloads by result.', labelNames: ['what', 'result'], registers: [registry] }),
  };
}
