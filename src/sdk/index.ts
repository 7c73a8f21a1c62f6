// The gateway SDK: what gateway pods import. Depends only on the domain core, node built-ins and the
// node-only wire formats of src/contract/ (routing.ts, envelope.ts, canonical-json.ts); no Kubernetes client, no HTTP.
export { loadRoutingConfig, resolveGeneration, RoutingConfigError, type RoutingConfig, type RoutingConfigErrorCode } from './load.ts';
export { watchRoutingConfig, type ReloadFailure, type RoutingConfigWatcher, type WatchOptions } from './watch.ts';
export { createCredentialDecryptor, CredentialPayloadError, readKeyring, type CredentialDecryptor, type CredentialPayloadOptions, type DecryptorOptions } from './credentials.ts';
export { planFor, type GatewayRequest, type PlanOutcome } from './plan.ts';
export { BundleError, envelopeVersion } from '../contract/envelope.ts';
export type { RoutingIndex, IndexShard, IndexPart, ShardDocument } from '../contract/routing.ts';
