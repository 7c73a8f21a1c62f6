// The reference gateway: OpenAI-compatible front, SDK planning, failover execution. See docs/gateway.md.
export { startGateway, type GatewayOptions, type RunningGateway } from './server.ts';
export { parseCatalog, loadCatalog, watchCatalog, CatalogError, CATALOG_FORMAT, type GatewayCatalog, type UpstreamSpec } from './catalog.ts';
export { createUpstreamAuth, sharedKeyFileName, UpstreamSetupError } from './upstream.ts';
export { GenerationStore, type GenerationRecord, type ProviderResponse } from './generations.ts';
export { createGatewayMetrics, type GatewayMetrics } from './metrics.ts';
export { directAccessLog, pinoAccessLog, type AccessLog, type AccessLine } from './access-log.ts';
export type { SpendGate, AdmitDecision, FinishedRequest, RecordedSpend, SpendRequestContext } from '../contract/spend-gate.ts';
