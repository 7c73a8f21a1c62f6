// The compile pipeline's metrics, shared by its parts. Registered once per Registry: a second pipeline on the same
// Registry (tests, a new leader term) reuses them.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

export interface CompileMetrics {
  duration: Histogram;
  bytes: Gauge;
  shards: Gauge;
  accounts: Gauge;
  cmWrites: Counter;
  secretWrites: Counter;
  errors: Counter;
  quarantined: Gauge;
}

export function compileMetrics(registry: Registry): CompileMetrics {
  const registers = [registry];
  const get = <T>(name: string, make: () => T): T => (registry.getSingleMetric(name) as T | undefined) ?? make();
  return {
    duration: get(
      'byok_compile_duration_seconds',
      () =>
        new Histogram({
          name: 'byok_compile_duration_seconds',
          help: 'Time from taking dirty accounts to all changed routing objects written.',
          buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
          registers,
        }),
    ),
    bytes: get(
      'byok_routing_config_bytes',
      () =>
        new Gauge({
          name: 'byok_routing_config_bytes',
          help: 'Stored bytes of the compiled routing config.',
          labelNames: ['kind'],
          registers,
        }),
    ),
    shards: get(
      'byok_routing_shards',
      () =>
        new Gauge({
          name: 'byok_routing_shards',
          help: 'Routing objects currently written.',
          labelNames: ['kind'],
          registers,
        }),
    ),
    accounts: get(
      'byok_compiled_accounts',
      () => new Gauge({ name: 'byok_compiled_accounts', help: 'Accounts in the compiled routing config.', registers }),
    ),
    cmWrites: get(
      'byok_configmap_writes_total',
      () =>
        new Counter({
          name: 'byok_configmap_writes_total',
          help: 'Routing ConfigMap writes.',
          labelNames: ['op', 'object'],
          registers,
        }),
    ),
    secretWrites: get(
      'byok_bundle_secret_writes_total',
      () =>
        new Counter({
          name: 'byok_bundle_secret_writes_total',
          help: 'Credential bundle Secret writes.',
          labelNames: ['op'],
          registers,
        }),
    ),
    errors: get(
      'byok_compile_errors_total',
      () =>
        new Counter({
          name: 'byok_compile_errors_total',
          help: 'Compile runs that failed (retried with backoff).',
          registers,
        }),
    ),
    quarantined: get(
      'byok_quarantined_accounts',
      () =>
        new Gauge({
          name: 'byok_quarantined_accounts',
          help: 'Accounts whose routing the apiserver refused to store; they keep their last good state while every other account compiles.',
          registers,
        }),
    ),
  };
}
