// The API server's read model: derived indexes over the informer caches, updated from informer events (which
// include our own observed writes, so a write is visible to the next read on this replica). Every credential's
// REST form and its JSON text are computed once per resourceVersion, not per request.
import type { V1Secret } from '@kubernetes/client-node';
import { keysNotHolding } from '../compiler/elect.ts';
import { isApiKeyLive, normalizeKeyHash } from '../domain/api-keys.ts';
import { publicId } from '../domain/ids.ts';
import type { Account, BYOKCredential, GatewayAPIKey, Workspace } from '../schema/generated/types.ts';
import { GroupedStore } from './grouped-store.ts';
import { ManagementKeyIndex } from './management-keys.ts';
import { type BYOKKey, compareKeys, credentialId, isManagedByApi, toByokKey } from './mapping.ts';

export interface CredentialEntry {
  readonly obj: BYOKCredential;
  readonly namespace: string;
  readonly name: string;
  readonly key: BYOKKey;
  /** JSON.stringify(key), reused by every response that includes it. */
  readonly json: string;
  readonly managedByApi: boolean;
  /** The encoded `{"data": key}` body, built on first read. */
  single?: Buffer;
}

interface View {
  entries: CredentialEntry[];
  /** Encoded list pages by `offset:limit`, bounded. */
  pages: Map<string, Buffer>;
}

const MAX_PAGES_PER_VIEW = 64;

interface NamespaceCredentials {
  byName: Map<string, CredentialEntry>;
  /** All entries in list order; rebuilt lazily after a change. */
  sorted: CredentialEntry[] | undefined;
  /** Filtered views per (workspace, provider), dropped on any change in the namespace. */
  views: Map<string, View>;
}

/** A change to the credential read model, for watchers (the aggregated API's watch). */
export interface CredentialChange {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  entry: CredentialEntry;
  /** The object as delivered: for DELETED its resourceVersion may be the deletion's. */
  obj: BYOKCredential;
}

const nsName = (o: { metadata?: { namespace?: string; name?: string } }) =>
  [o.metadata?.namespace ?? '', o.metadata?.name ?? ''] as const;

export class ApiState {
  readonly managementKeys = new ManagementKeyIndex();
  private readonly credentials = new Map<string, NamespaceCredentials>();
  private readonly credentialsById = new Map<string, CredentialEntry>();
  private readonly workspaces = new GroupedStore<Workspace>();
  private readonly workspacesById = new Map<string, Workspace>();
  private readonly apiKeys = new GroupedStore<GatewayAPIKey>();
  /** Gateway API keys by hash, then `namespace/name`. */
  private readonly apiKeysByHash = new GroupedStore<GatewayAPIKey>();
  private readonly accounts = new GroupedStore<Account>();
  private readonly credentialListeners = new Set<(change: CredentialChange) => void>();

  /** Called after every credential change lands in the read model; returns the unsubscribe function. */
  onCredentialChange(listener: (change: CredentialChange) => void): () => void {
    this.credentialListeners.add(listener);
    return () => this.credentialListeners.delete(listener);
  }

  private notify(change: CredentialChange): void {
    for (const l of this.credentialListeners) {
      try {
        l(change);
      } catch {
        // A watcher's failure must never break the read model the informer is updating.
      }
    }
  }

  // ---- credentials ----

  upsertCredential(obj: BYOKCredential): void {
    const [ns, name] = nsName(obj);
    const bucket = this.bucket(ns);
    const old = bucket.byName.get(name);
    if (old) this.credentialsById.delete(old.key.id);
    const key = toByokKey(obj);
    const entry: CredentialEntry = {
      obj,
      namespace: ns,
      name,
      key,
      json: JSON.stringify(key),
      managedByApi: isManagedByApi(obj),
    };
    bucket.byName.set(name, entry);
    this.credentialsById.set(key.id, entry);
    bucket.sorted = undefined;
    bucket.views.clear();
    this.notify({ type: old ? 'MODIFIED' : 'ADDED', entry, obj });
  }

  removeCredential(obj: BYOKCredential): void {
    const [ns, name] = nsName(obj);
    const bucket = this.credentials.get(ns);
    const old = bucket?.byName.get(name);
    if (!bucket || !old) return;
    bucket.byName.delete(name);
    if (this.credentialsById.get(old.key.id) === old) this.credentialsById.delete(old.key.id);
    bucket.sorted = undefined;
    bucket.views.clear();
    this.notify({ type: 'DELETED', entry: old, obj });
  }

  /** Every credential of one account (all workspaces), or of every account, in list order. */
  allCredentials(namespace?: string): CredentialEntry[] {
    const buckets =
      namespace === undefined
        ? [...this.credentials.values()]
        : [this.credentials.get(namespace)].filter((b) => b !== undefined);
    const out: CredentialEntry[] = [];
    for (const b of buckets) {
      if (!b.sorted) b.sorted = [...b.byName.values()].sort((x, y) => compareKeys(x.key, y.key));
      out.push(...b.sorted);
    }
    return out;
  }

  /** The credential with this public id in this account, or undefined (also when it belongs to another account). */
  credentialById(namespace: string, id: string): CredentialEntry | undefined {
    const e = this.credentialsById.get(id);
    return e && e.namespace === namespace ? e : undefined;
  }

  credential(namespace: string, name: string): CredentialEntry | undefined {
    return this.credentials.get(namespace)?.byName.get(name);
  }

  /**
   * Credentials visible in a workspace: those scoped to it plus the global ones (usable in every workspace),
   * optionally of one provider, in list order. The returned array is shared: do not mutate.
   */
  listCredentials(namespace: string, workspaceName: string, provider?: string): readonly CredentialEntry[] {
    return this.view(namespace, workspaceName, provider)?.entries ?? [];
  }

  /**
   * The encoded body of one list page, `{"data":[...],"total_count":n}`. Pages are cached until the next change
   * in the namespace, so a steady list load costs a map lookup, not serialisation.
   */
  listPage(
    namespace: string,
    workspaceName: string,
    provider: string | undefined,
    offset: number,
    limit: number,
  ): Buffer {
    const view = this.view(namespace, workspaceName, provider);
    if (!view) return Buffer.from('{"data":[],"total_count":0}');
    const pageKey = `${offset}:${limit}`;
    let page = view.pages.get(pageKey);
    if (!page) {
      const slice = view.entries.slice(offset, offset + limit);
      let json = '{"data":[';
      for (let i = 0; i < slice.length; i++) json += (i === 0 ? '' : ',') + (slice[i] as CredentialEntry).json;
      page = Buffer.from(`${json}],"total_count":${view.entries.length}}`);
      if (view.pages.size >= MAX_PAGES_PER_VIEW) view.pages.clear();
      view.pages.set(pageKey, page);
    }
    return page;
  }

  private view(namespace: string, workspaceName: string, provider: string | undefined): View | undefined {
    const bucket = this.credentials.get(namespace);
    if (!bucket) return undefined;
    const viewKey = `${workspaceName}\u0000${provider ?? ''}`;
    let view = bucket.views.get(viewKey);
    if (!view) {
      if (!bucket.sorted) bucket.sorted = [...bucket.byName.values()].sort((a, b) => compareKeys(a.key, b.key));
      const entries = bucket.sorted.filter((e) => {
        const ws = e.obj.spec.workspace;
        return (ws === undefined || ws === workspaceName) && (provider === undefined || e.key.provider === provider);
      });
      view = { entries, pages: new Map() };
      bucket.views.set(viewKey, view);
    }
    return view;
  }

  /** Next free position for a new credential of this provider in this account: one past the highest in use. */
  nextSortOrder(namespace: string, provider: string): number {
    let max = -1;
    for (const e of this.credentials.get(namespace)?.byName.values() ?? []) {
      if (e.key.provider === provider && e.key.sort_order > max) max = e.key.sort_order;
    }
    return max + 1;
  }

  /** Credentials of the account, whichever door created them (the quota counts them all). */
  credentialCount(namespace: string): number {
    return this.credentials.get(namespace)?.byName.size ?? 0;
  }

  /** Namespaces that hold credentials. */
  credentialNamespaces(): string[] {
    return [...this.credentials.keys()];
  }

  /** Names of the Secrets that credentials of this namespace reference. */
  referencedSecrets(namespace: string): Set<string> {
    const out = new Set<string>();
    for (const e of this.credentials.get(namespace)?.byName.values() ?? []) out.add(e.obj.spec.secretRef.name);
    return out;
  }

  private bucket(ns: string): NamespaceCredentials {
    let b = this.credentials.get(ns);
    if (!b) {
      b = { byName: new Map(), sorted: undefined, views: new Map() };
      this.credentials.set(ns, b);
    }
    return b;
  }

  // ---- workspaces ----

  upsertWorkspace(obj: Workspace): void {
    const [ns, name] = nsName(obj);
    this.workspaces.set(ns, name, obj);
    this.workspacesById.set(publicId('Workspace', ns, name), obj);
  }

  removeWorkspace(obj: Workspace): void {
    const [ns, name] = nsName(obj);
    this.workspaces.delete(ns, name);
    this.workspacesById.delete(publicId('Workspace', ns, name));
  }

  /** The account's default workspace; with several marked default (a misconfiguration), the first by name. */
  defaultWorkspace(namespace: string): Workspace | undefined {
    let best: Workspace | undefined;
    for (const ws of this.workspaces.values(namespace)) {
      if (ws.spec.default === true && (!best || (ws.metadata.name ?? '') < (best.metadata.name ?? ''))) best = ws;
    }
    return best;
  }

  workspaceById(namespace: string, id: string): Workspace | undefined {
    const ws = this.workspacesById.get(id);
    return ws && ws.metadata.namespace === namespace ? ws : undefined;
  }

  // ---- gateway API keys ----

  upsertApiKey(obj: GatewayAPIKey): void {
    const [ns, name] = nsName(obj);
    // The hash may have changed: drop the old one from the index first.
    this.removeApiKey(obj);
    this.apiKeys.set(ns, name, obj);
    this.apiKeysByHash.set(normalizeKeyHash(obj.spec.hash), `${ns}/${name}`, obj);
  }

  removeApiKey(obj: GatewayAPIKey): void {
    const [ns, name] = nsName(obj);
    const old = this.apiKeys.delete(ns, name);
    if (old) this.apiKeysByHash.delete(normalizeKeyHash(old.spec.hash), `${ns}/${name}`);
  }

  /**
   * Hashes of the live gateway API keys of one account (filters may name only these); a key whose hash an older key
   * holds (perhaps another account's, electKeyHolder) resolves nothing, as in the operator.
   */
  liveApiKeyHashes(namespace: string, now = Date.now()): Set<string> {
    const keys = [...this.apiKeys.values(namespace)];
    const conflicting = keysNotHolding(keys, (h) => [...this.apiKeysByHash.values(h)]);
    const out = new Set<string>();
    for (const k of keys)
      if (isApiKeyLive(k.spec, now) && !conflicting.has(k.metadata.name ?? '')) out.add(k.spec.hash);
    return out;
  }

  /** Whether a live gateway API key with this hash exists in any account. */
  isLiveApiKeyHash(hash: string, now = Date.now()): boolean {
    for (const k of this.apiKeysByHash.values(normalizeKeyHash(hash))) if (isApiKeyLive(k.spec, now)) return true;
    return false;
  }

  // ---- accounts ----

  upsertAccount(obj: Account): void {
    const [ns, name] = nsName(obj);
    this.accounts.set(ns, name, obj);
  }

  removeAccount(obj: Account): void {
    const [ns, name] = nsName(obj);
    this.accounts.delete(ns, name);
  }

  /** The account's `spec.limits.maxCredentials`, from its oldest Account (the one the operator honours). */
  credentialLimit(namespace: string): number | undefined {
    let oldest: Account | undefined;
    for (const a of this.accounts.values(namespace)) {
      const t = String(a.metadata.creationTimestamp ?? '');
      if (!oldest || t < String(oldest.metadata.creationTimestamp ?? '')) oldest = a;
    }
    return oldest?.spec.limits?.maxCredentials;
  }

  // ---- management keys ----

  upsertManagementSecret(s: V1Secret): void {
    this.managementKeys.upsert(s);
  }

  removeManagementSecret(s: V1Secret): void {
    this.managementKeys.remove(s);
  }
}

export { credentialId };
