// Public surface of the compiler: pure functions from cached account state to routing ConfigMap payloads.
export type { AccountSnapshot, CredentialVerdict, SnapshotCredential } from './snapshot.ts';
export { compileAccount, compareCredentials, credentialExclusion, DEFAULT_RESET_INTERVAL } from './compile.ts';
export { electAccount, electDefaultWorkspace, electKeyHolder, keysNotHolding, previousHashesNotHeld } from './elect.ts';
export { accountMissingMessage, isRoutedNamespace } from './gate.ts';
export {
  shardAccounts,
  shardSerialized,
  serializeAccount,
  DEFAULTS as SHARD_DEFAULTS,
  type ShardOptions,
  type ShardObject,
  type ShardSet,
  type SerializedAccount,
  type EncodedBucket,
} from './shard.ts';
export * from '../contract/routing.ts';
