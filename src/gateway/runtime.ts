// What every part of a running gateway shares: the loaded config and catalog, the upstream side (auth, payloads,
// transport), and what is recorded (metrics, health, generations, spend). Built once by server.ts.
import type { Logger } from 'pino';
import type { SpendGate } from '../contract/spend-gate.ts';
import type { BaseAddress } from '../domain/index.ts';
import type { RoutingConfigWatcher } from '../sdk/index.ts';
import type { CatalogWatcher } from './catalog.ts';
import type { GenerationStore } from './generations.ts';
import type { CredentialHealth } from './health.ts';
import type { Metering } from './metering.ts';
import type { GatewayMetrics } from './metrics.ts';
import type { AttemptPayloads } from './payloads.ts';
import type { UpstreamTransport } from './transport.ts';
import type { UpstreamAuth } from './upstream.ts';

export interface GatewayRuntime {
  log: Logger | undefined;
  metrics: GatewayMetrics;
  routing: RoutingConfigWatcher;
  catalog: CatalogWatcher;
  generations: GenerationStore;
  health: CredentialHealth;
  metering: Metering;
  spendGate: SpendGate | undefined;
  auth: UpstreamAuth;
  payloads: AttemptPayloads;
  transport: UpstreamTransport;
  baseAddress: BaseAddress;
  attemptTimeoutMs: number;
}

export interface SpecError {
  /** `type`: set where an SDK must tell one failure from another with the same status family (upstream_auth_error). */
  error: { code: number; message: string; metadata: Record<string, unknown> | null; type?: string };
}

/** The spec 7 error body. */
export const specError = (
  code: number,
  message: string,
  metadata: Record<string, unknown> | null = null,
  type?: string,
): SpecError => ({ error: type === undefined ? { code, message, metadata } : { code, type, message, metadata } });
