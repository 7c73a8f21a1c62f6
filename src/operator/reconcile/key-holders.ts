// Who holds a gateway-key hash, read from the GatewayAPIKey informer's cross-account index: the key that named it
// first, in any account (electKeyHolder). The reconcilers, the compile snapshot and the watches all ask here, so a
// key counts as its hash's holder in one place and not in another only for as long as a cache lags.

import { electKeyHolder, keysNotHolding, previousHashesNotHeld } from '../../compiler/elect.ts';
import { normalizeKeyHash } from '../../domain/api-keys.ts';
import type { ObjectCache } from '../../kube/informer.ts';
import { INDEX } from '../../kube/resources.ts';
import type { GatewayAPIKey } from '../../schema/generated/types.ts';
import { nsOf } from './objects.ts';

type KeyCache = Pick<ObjectCache<GatewayAPIKey>, 'byIndex' | 'list'>;

/** Every cached key, of any account, that names `hash`. */
export const keysNaming = (apiKeys: KeyCache, hash: string): GatewayAPIKey[] =>
  apiKeys.byIndex(INDEX.keyHolders, normalizeKeyHash(hash));

/** The key that holds `hash`, if any key names it. */
export const holderOf = (apiKeys: KeyCache, hash: string): GatewayAPIKey | undefined =>
  electKeyHolder(hash, keysNaming(apiKeys, hash)).winner;

/** Names of the namespace's keys whose hash another key holds (never compiled; Ready=False Conflicting). */
export const conflictingKeys = (apiKeys: KeyCache, namespace: string): Set<string> =>
  keysNotHolding(apiKeys.list(namespace), (h) => keysNaming(apiKeys, h));

/** Names of the namespace's keys whose previous hash (before a rotation) another key holds: that secret is not compiled. */
export const unheldPreviousHashes = (apiKeys: KeyCache, namespace: string): Set<string> =>
  previousHashesNotHeld(apiKeys.list(namespace), (h) => keysNaming(apiKeys, h));

/** The namespaces whose keys name `hash`: a change to one holder can change what the others hold. */
export function namespacesNaming(apiKeys: KeyCache, hash: string): Set<string> {
  return new Set(keysNaming(apiKeys, hash).map(nsOf));
}
