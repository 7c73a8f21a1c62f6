import { describe, expect, it } from '@jest/globals';
import type { Account, GatewayAPIKey, Workspace } from '../../../src/schema/generated/types.ts';
import { GroupedStore } from '../../../src/service/grouped-store.ts';
import { ApiState } from '../../../src/service/read-model.ts';

describe('GroupedStore', () => {
  it('keeps values by group then name, and returns what a set replaced or a delete removed', () => {
    const store = new GroupedStore<string>();
    expect(store.set('ns-a', 'x', 'one')).toBeUndefined();
    expect(store.set('ns-a', 'y', 'two')).toBeUndefined();
    expect(store.set('ns-b', 'x', 'three')).toBeUndefined();
    expect(store.set('ns-a', 'x', 'four')).toBe('one');
    expect(store.get('ns-a', 'x')).toBe('four');
    expect(store.get('ns-b', 'x')).toBe('three');
    expect([...store.values('ns-a')]).toEqual(['four', 'two']);
    expect(store.delete('ns-a', 'x')).toBe('four');
    expect(store.delete('ns-a', 'x')).toBeUndefined();
    expect(store.delete('ns-missing', 'x')).toBeUndefined();
    expect([...store.values('ns-a')]).toEqual(['two']);
  });

  it('drops a group with its last value and gives an empty iteration for unknown groups', () => {
    const store = new GroupedStore<number>();
    store.set('g', 'only', 1);
    store.delete('g', 'only');
    expect([...store.values('g')]).toEqual([]);
    expect((store as unknown as { groups: Map<string, unknown> }).groups.size).toBe(0);
    store.set('g', 'again', 2);
    expect([...store.values('g')]).toEqual([2]);
  });
});

const meta = (namespace: string, name: string, extra: Record<string, unknown> = {}) => ({ namespace, name, ...extra });
const apiKey = (namespace: string, name: string, hash: string): GatewayAPIKey =>
  ({
    apiVersion: 'byok.gateway.dev/v1alpha1',
    kind: 'GatewayAPIKey',
    metadata: meta(namespace, name),
    spec: { hash },
  }) as unknown as GatewayAPIKey;
const workspace = (namespace: string, name: string, isDefault: boolean): Workspace =>
  ({
    apiVersion: 'byok.gateway.dev/v1alpha1',
    kind: 'Workspace',
    metadata: meta(namespace, name),
    spec: { default: isDefault },
  }) as unknown as Workspace;
const account = (namespace: string, name: string, created: string, maxCredentials: number): Account =>
  ({
    apiVersion: 'byok.gateway.dev/v1alpha1',
    kind: 'Account',
    metadata: meta(namespace, name, { creationTimestamp: created }),
    spec: { limits: { maxCredentials } },
  }) as unknown as Account;

const HASH_1 = 'a'.repeat(64);
const HASH_2 = 'b'.repeat(64);

describe('ApiState per-kind stores', () => {
  it('moves a gateway API key in the hash index when its hash changes, and forgets it on delete', () => {
    const state = new ApiState();
    state.upsertApiKey(apiKey('acct-1', 'k', HASH_1));
    expect(state.isLiveApiKeyHash(HASH_1)).toBe(true);
    expect([...state.liveApiKeyHashes('acct-1')]).toEqual([HASH_1]);
    state.upsertApiKey(apiKey('acct-1', 'k', HASH_2));
    expect(state.isLiveApiKeyHash(HASH_1)).toBe(false);
    expect(state.isLiveApiKeyHash(HASH_2)).toBe(true);
    expect([...state.liveApiKeyHashes('acct-1')]).toEqual([HASH_2]);
    // The same hash in another account is its own entry.
    state.upsertApiKey(apiKey('acct-2', 'k', HASH_2));
    state.removeApiKey(apiKey('acct-1', 'k', HASH_2));
    expect(state.isLiveApiKeyHash(HASH_2)).toBe(true);
    expect([...state.liveApiKeyHashes('acct-1')]).toEqual([]);
    state.removeApiKey(apiKey('acct-2', 'k', HASH_2));
    expect(state.isLiveApiKeyHash(HASH_2)).toBe(false);
  });

  it("resolves a filter hash only in the account whose key holds it, as the operator does (the REST door's filters)", () => {
    const state = new ApiState();
    const at = (namespace: string, name: string, hash: string, created: string) =>
      ({
        ...apiKey(namespace, name, hash),
        metadata: meta(namespace, name, { creationTimestamp: created, uid: `${namespace}-${name}` }),
      }) as unknown as GatewayAPIKey;
    state.upsertApiKey(at('victim', 'k', HASH_1, '2026-01-01T00:00:00Z'));
    // The copier's namespace sorts first, its key is newer, its hash a case respelling: it holds nothing.
    state.upsertApiKey(at('a-copier', 'copy', HASH_1.toUpperCase(), '2026-01-02T00:00:00Z'));
    expect([...state.liveApiKeyHashes('victim')]).toEqual([HASH_1]);
    expect([...state.liveApiKeyHashes('a-copier')]).toEqual([]);
    state.removeApiKey(at('victim', 'k', HASH_1, '2026-01-01T00:00:00Z'));
    expect([...state.liveApiKeyHashes('a-copier')]).toEqual([HASH_1.toUpperCase()]);
  });

  it('answers the default workspace and the credential limit per account', () => {
    const state = new ApiState();
    state.upsertWorkspace(workspace('acct-1', 'zeta', true));
    state.upsertWorkspace(workspace('acct-1', 'alpha', true));
    state.upsertWorkspace(workspace('acct-2', 'main', true));
    expect(state.defaultWorkspace('acct-1')?.metadata.name).toBe('alpha');
    state.upsertWorkspace(workspace('acct-1', 'alpha', false));
    expect(state.defaultWorkspace('acct-1')?.metadata.name).toBe('zeta');
    state.removeWorkspace(workspace('acct-1', 'zeta', true));
    expect(state.defaultWorkspace('acct-1')).toBeUndefined();
    expect(state.defaultWorkspace('acct-2')?.metadata.name).toBe('main');

    state.upsertAccount(account('acct-1', 'newer', '2026-02-01T00:00:00Z', 5));
    state.upsertAccount(account('acct-1', 'older', '2026-01-01T00:00:00Z', 7));
    expect(state.credentialLimit('acct-1')).toBe(7);
    state.removeAccount(account('acct-1', 'older', '2026-01-01T00:00:00Z', 7));
    expect(state.credentialLimit('acct-1')).toBe(5);
    expect(state.credentialLimit('acct-2')).toBeUndefined();
  });
});
