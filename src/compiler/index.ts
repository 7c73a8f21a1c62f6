// Public surface of the compiler: pure functions from cached account state to routing ConfigMap payloads.

export * from '../contract/routing.ts';
export { compareCredentials, compileAccount, credentialExclusion, DEFAULT_RESET_INTERVAL } from './compile.ts';
export { electAccount, electDefaultWorkspace, electKeyHolder, keysNotHolding, previousHashesNotHeld } from './elect.ts';
export { accountMissingMessage, isRoutedNamespace } from './gate.ts';
export {
  DEFAULTS as SHARD_DEFAULTS,
  type EncodedBucket,
  type SerializedAccount,
  type ShardObject,
  type ShardOptions,
  type ShardSet,
  serializeAccount,
  shardAccounts,
  shardSerialized,
} from './shard.ts';
export type { AccountSnapshot, CredentialVerdict, SnapshotCredential } from './snapshot.ts';
