// The reference gateway: OpenAI-compatible front, SDK planning, failover execution. See docs/gateway.md.

export type {
  AdmitDecision,
  FinishedRequest,
  RecordedSpend,
  SpendGate,
  SpendRequestContext,
} from '../contract/spend-gate.ts';
export { type AccessLine, type AccessLog, directAccessLog, pinoAccessLog } from './access-log.ts';
export {
  CATALOG_FORMAT,
  CatalogError,
  type GatewayCatalog,
  loadCatalog,
  parseCatalog,
  type UpstreamSpec,
  watchCatalog,
} from './catalog.ts';
export { type GenerationRecord, GenerationStore, type ProviderResponse } from './generations.ts';
export { createGatewayMetrics, type GatewayMetrics } from './metrics.ts';
export { type GatewayOptions, type RunningGateway, startGateway } from './server.ts';
export { createUpstreamAuth, sharedKeyFileName, UpstreamSetupError } from './upstream.ts';
