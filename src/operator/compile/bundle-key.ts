// The bundle data-key Secret: `active` = key id, `<keyId>` = 32 random bytes. Gateway pods mount it.
// Rotation adds a key and (optionally later) makes it active; old keys stay so existing envelopes still open.
import {
  ACTIVE_KEY_ENTRY,
  BundleError,
  isKeyId,
  type Keyring,
  keyringFromEntries,
  newDataKey,
  newKeyId,
} from '../../contract/envelope.ts';
import { ROUTING_LABEL } from '../../contract/routing.ts';
import type { RoutingStore } from './store.ts';

function decode(data: Record<string, string>): Map<string, Buffer> {
  return new Map(Object.entries(data).map(([k, v]) => [k, Buffer.from(v, 'base64')]));
}

/** Reads the key Secret, creating it with a fresh key when absent. */
export async function ensureBundleKey(store: RoutingStore, namespace: string, name: string): Promise<Keyring> {
  const existing = await store.readSecret(name);
  if (existing) return keyringFromEntries(decode(existing));
  const kid = newKeyId();
  await store.createSecret({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, namespace, labels: { [ROUTING_LABEL]: 'bundle-key' } },
    type: 'Opaque',
    data: { [ACTIVE_KEY_ENTRY]: Buffer.from(kid).toString('base64'), [kid]: newDataKey().toString('base64') },
  });
  // Re-read: if another replica won the create race, its key is the one to use.
  const data = await store.readSecret(name);
  if (!data) throw new BundleError('bad-keyring', `bundle key Secret ${name} vanished after create`);
  return keyringFromEntries(decode(data));
}

/**
 * Adds a new data key. With activate=false the key is only staged: gateway pods learn it first, and a later
 * `activateBundleKey` switches sealing to it (avoids pods seeing envelopes under a key they cannot read yet).
 */
export async function addBundleKey(
  store: RoutingStore,
  name: string,
  opts: { activate: boolean; keyId?: string },
): Promise<string> {
  const current = await store.readSecretWithVersion(name);
  if (!current) throw new BundleError('bad-keyring', `bundle key Secret ${name} not found`);
  const kid = opts.keyId ?? newKeyId();
  if (!isKeyId(kid) || kid in current.data) throw new BundleError('bad-keyring', `invalid or existing key id ${kid}`);
  const data: Record<string, string> = { [kid]: newDataKey().toString('base64') };
  if (opts.activate) data[ACTIVE_KEY_ENTRY] = Buffer.from(kid).toString('base64');
  await store.updateSecretData(name, data, current.resourceVersion);
  return kid;
}

export async function activateBundleKey(store: RoutingStore, name: string, keyId: string): Promise<void> {
  const current = await store.readSecretWithVersion(name);
  if (!current || !(keyId in current.data)) throw new BundleError('unknown-key', `no key ${keyId} in ${name}`);
  await store.updateSecretData(
    name,
    { [ACTIVE_KEY_ENTRY]: Buffer.from(keyId).toString('base64') },
    current.resourceVersion,
  );
}
