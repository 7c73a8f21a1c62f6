// The gateway SDK: what gateway pods import. Depends only on the domain core, node built-ins and the
// node-only wire formats of src/contract/ (routing.ts, envelope.ts, canonical-json.ts); no Kubernetes client, no HTTP.

export { BundleError, envelopeVersion } from '../contract/envelope.ts';
export type { IndexPart, IndexShard, RoutingIndex, ShardDocument } from '../contract/routing.ts';
export {
  type CredentialDecryptor,
  CredentialPayloadError,
  type CredentialPayloadOptions,
  createCredentialDecryptor,
  type DecryptorOptions,
  readKeyring,
} from './credentials.ts';
export {
  loadRoutingConfig,
  type RoutingConfig,
  RoutingConfigError,
  type RoutingConfigErrorCode,
  resolveGeneration,
} from './load.ts';
export { type GatewayRequest, type PlanOutcome, planFor } from './plan.ts';
export { type ReloadFailure, type RoutingConfigWatcher, type WatchOptions, watchRoutingConfig } from './watch.ts';
