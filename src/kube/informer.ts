// A list+watch cache that does not die silently. client-node's ListWatch has a history of stopping without a
// word (a watch that ends with an error is not always restarted, a 410 relist can drop deletes), so this is our
// own loop on top of the raw watch stream, with a supervisor per stream:
//  - errors restart the watch with capped, jittered exponential backoff;
//  - 410 Gone (too old resourceVersion) relists and diffs against the cache, synthesising delete events for
//    objects that vanished while we were not watching;
//  - a staleness watchdog restarts a watch that delivered no event and no bookmark for `staleSeconds`;
//  - a periodic full relist (default 5 min) diffs as well, as a last line of defence.
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { KubeApiError, type KubeClient, type KubeStatus, kubeClient, namespacedPath, type Query } from './client.ts';
import type { KubeAccess } from './kubeconfig.ts';

export interface ObjectCache<T> {
  get(namespace: string, name: string): T | undefined;
  list(namespace?: string): T[];
  byIndex(index: string, value: string): T[];
}

export type IndexFn<T> = (obj: T) => string[];

export interface InformerHandlers<T> {
  add: (obj: T) => void;
  update: (obj: T, old: T) => void;
  delete: (obj: T) => void;
}

/** `warming`: the apiserver's watch cache was not ready yet (429 at its start); not an error, so no alert counts it. */
export type RestartReason = 'error' | 'warming' | 'gone' | 'stale' | 'resync' | 'closed';

export interface InformerOptions {
  kubeConfig: KubeAccess;
  /** Collection path, cluster-wide form: '/apis/byok.gateway.dev/v1alpha1/byokcredentials', '/api/v1/secrets'. */
  path: string;
  /** Watch each of these namespaces; cluster-wide when absent or empty. */
  namespaces?: string[];
  labelSelector?: string;
  fieldSelector?: string;
  /** For logs and metrics. */
  name: string;
  logger?: Logger;
  /** Periodic full relist with diff; 0 disables. Default 300. */
  resyncSeconds?: number;
  /** Restart a watch that has been silent (no event, no bookmark) this long. Default 150 (bookmarks come about every minute). */
  staleSeconds?: number;
  /** Server-side watch timeout; randomised in [t, 2t) like client-go. Default 300. */
  watchTimeoutSeconds?: number;
  backoffInitialMs?: number;
  backoffMaxMs?: number;
  pageSize?: number;
  /** Called on every watch restart, for metrics. */
  onRestart?: (reason: RestartReason) => void;
  /**
   * Applied to every object before it enters the cache (list, watch, observe) and before handlers see it, like
   * client-go's SetTransform: drop what the consumers never read to keep the cache small (see
   * stripBulkyMetadata). Must keep apiVersion, kind, namespace, name and resourceVersion; must not mutate its
   * argument (an observed object belongs to the caller). Default: none.
   */
  transform?: (obj: KubernetesObject) => KubernetesObject;
}

/** The apiserver's 429 while its watch cache (re)initializes, as opposed to a throttling or a real failure. */
export function warmingUp(err: unknown): boolean {
  return (
    err instanceof KubeApiError && err.status === 429 && /\(re\)initializing/.test(err.body?.message ?? err.message)
  );
}

export const LAST_APPLIED_ANNOTATION = 'kubectl.kubernetes.io/last-applied-configuration';

/**
 * An informer transform that drops metadata.managedFields and kubectl's last-applied-configuration annotation:
 * the bulkiest parts of most objects (managedFields alone are often larger than spec and status together; the
 * annotation is a second copy of the whole manifest, for a Secret applied with kubectl including its data),
 * and nothing the operator reads. Returns a shallow copy; the argument is not modified.
 */
export function stripBulkyMetadata<T extends KubernetesObject>(obj: T): T {
  const meta = obj.metadata;
  if (!meta || (meta.managedFields === undefined && meta.annotations?.[LAST_APPLIED_ANNOTATION] === undefined))
    return obj;
  const { managedFields: _managedFields, annotations, ...rest } = meta;
  let kept = annotations;
  if (annotations?.[LAST_APPLIED_ANNOTATION] !== undefined) {
    const { [LAST_APPLIED_ANNOTATION]: _lastApplied, ...others } = annotations;
    kept = Object.keys(others).length > 0 ? others : undefined;
  }
  return { ...obj, metadata: { ...rest, ...(kept !== undefined ? { annotations: kept } : {}) } };
}

/**
 * Wraps a cache transform so the object keeps one managedFields entry: the time of its newest write outside status.
 * The key-hash election reads it as a bound on when an edited key's spec was written (claimedSince in
 * src/compiler/elect.ts); the rest of managedFields stays dropped.
 */
export function keepingLastWriteTime<T extends KubernetesObject>(transform: (obj: T) => T): (obj: T) => T {
  return (obj) => {
    let newest: { time: Date | string; ms: number } | undefined;
    for (const entry of obj.metadata?.managedFields ?? []) {
      if (entry.subresource === 'status' || entry.time === undefined) continue;
      const ms = entry.time instanceof Date ? entry.time.getTime() : Date.parse(String(entry.time));
      if (!Number.isNaN(ms) && (newest === undefined || ms > newest.ms)) newest = { time: entry.time, ms };
    }
    const out = transform(obj);
    if (newest === undefined) return out;
    return { ...out, metadata: { ...out.metadata, managedFields: [{ time: newest.time }] } };
  };
}

/** An index value's objects: the key of the only one, or a Set once several share the value. */
type IndexEntry = string | Set<string>;

/** Shares one copy of strings that repeat across many cached objects. Bounded: when full it starts over (strings
 *  already shared stay shared; only new ones stop being deduplicated until the table refills). */
export class StringInterner {
  private readonly table = new Map<string, string>();
  private readonly max: number;
  constructor(max = 50_000) {
    this.max = max;
  }
  intern(value: string): string;
  intern(value: string | undefined): string | undefined;
  intern(value: string | undefined): string | undefined {
    if (value === undefined) return undefined;
    const hit = this.table.get(value);
    if (hit !== undefined) return hit;
    if (this.table.size >= this.max) this.table.clear();
    this.table.set(value, value);
    return value;
  }
}

/** The spec fields many credentials share: the provider, the workspace, the Secret key name, gateway key hashes. */
interface SpecLike {
  provider?: unknown;
  workspace?: unknown;
  secretRef?: { key?: unknown; name?: unknown };
  allowedApiKeyHashes?: unknown[];
}
interface ConditionLike {
  type?: string;
  status?: string;
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
}
const cacheStrings = new StringInterner();
const cacheValues = new Map<string, unknown>();

/**
 * One frozen copy of a small JSON value that many cached objects carry whole: a Secret's labels, a status's
 * conditions (the same four conditions, with the same message and, for a burst of writes, the same transition
 * time, on thousands of Ready credentials). Frozen because it is shared: a reader that tried to modify it would
 * throw instead of changing other objects. Bounded like StringInterner.
 */
function sharedValue<V extends object>(value: V): V {
  const key = JSON.stringify(value);
  const hit = cacheValues.get(key);
  if (hit !== undefined) return hit as V;
  if (cacheValues.size >= 20_000) cacheValues.clear();
  const frozen = deepFreeze(structuredClone(value));
  cacheValues.set(key, frozen);
  return frozen;
}

function deepFreeze<V>(value: V): V {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}

/**
 * stripBulkyMetadata, then one shared copy of the strings that repeat across thousands of cached objects: the
 * apiVersion and kind, the spec's provider, workspace, Secret name and key and gateway key hashes, a
 * Secret's type and name, the namespace (every object of an account), the creation time (also status.createdAt),
 * status.workspaceScope, and,
 * as one frozen shared value, label sets and status conditions (the same few messages on every Ready credential,
 * the same time on each condition of one write). Parsed JSON gives every object its own copies, a large share of
 * the cached credentials' heap (docs/operator.md has the figures). Values are unchanged, so readers cannot tell, except that a
 * Secret's uid is dropped; the argument is not modified.
 *
 * The copy is made by a JSON round trip, then only existing properties are reassigned: JSON.parse lays every
 * object out with its properties in the object itself. Objects built key by key (rest destructuring, a property
 * added after creation) carry a separate property array instead, three per cached credential and its Secret.
 */
export function compactForCache<T extends KubernetesObject>(obj: T): T {
  const stripped = stripBulkyMetadata(obj);
  // A Secret's uid: nothing in the operator reads it (at 100k credentials, 100k 36-character strings).
  // JSON.stringify leaves out the undefined.
  const source =
    stripped.kind === 'Secret' && stripped.metadata?.uid !== undefined
      ? { ...stripped, metadata: { ...stripped.metadata, uid: undefined } }
      : stripped;
  const out = JSON.parse(JSON.stringify(source)) as T & {
    status?: { conditions?: unknown; createdAt?: unknown; workspaceScope?: unknown };
  };
  if (typeof out.apiVersion === 'string') out.apiVersion = cacheStrings.intern(out.apiVersion);
  if (typeof out.kind === 'string') out.kind = cacheStrings.intern(out.kind);
  const meta = out.metadata;
  if (meta) {
    if (meta.namespace !== undefined) meta.namespace = cacheStrings.intern(meta.namespace);
    if (typeof meta.creationTimestamp === 'string')
      meta.creationTimestamp = cacheStrings.intern(meta.creationTimestamp) as unknown as Date;
    if (meta.labels) meta.labels = sharedValue(meta.labels);
    // Secret names repeat across namespaces (one per provider).
    if (out.kind === 'Secret' && typeof meta.name === 'string') meta.name = cacheStrings.intern(meta.name);
  }
  const spec = (out as { spec?: SpecLike }).spec;
  if (spec && typeof spec === 'object' && !Array.isArray(spec)) {
    if (typeof spec.provider === 'string') spec.provider = cacheStrings.intern(spec.provider);
    if (typeof spec.workspace === 'string') spec.workspace = cacheStrings.intern(spec.workspace);
    const ref = spec.secretRef;
    if (ref && typeof ref === 'object') {
      if (typeof ref.key === 'string') ref.key = cacheStrings.intern(ref.key);
      if (typeof ref.name === 'string') ref.name = cacheStrings.intern(ref.name);
    }
    const hashes = spec.allowedApiKeyHashes;
    if (Array.isArray(hashes)) hashes.forEach((h, i) => typeof h === 'string' && (hashes[i] = cacheStrings.intern(h)));
  }
  const typed = out as { type?: unknown };
  if (typeof typed.type === 'string') typed.type = cacheStrings.intern(typed.type);
  const status = out.status;
  if (status && typeof status === 'object') {
    if (typeof status.createdAt === 'string') status.createdAt = cacheStrings.intern(status.createdAt);
    if (typeof status.workspaceScope === 'string') status.workspaceScope = cacheStrings.intern(status.workspaceScope);
    if (Array.isArray(status.conditions)) status.conditions = sharedValue(status.conditions as ConditionLike[]);
  }
  return out;
}

interface Stream {
  namespace: string | undefined;
  rv: string | undefined;
  needList: boolean;
  synced: boolean;
  lastActivity: number;
  abort: AbortController | undefined;
  gate: Promise<void> | undefined;
  openGate: (() => void) | undefined;
}

class RestartSignal extends Error {
  readonly reason: RestartReason;
  constructor(reason: RestartReason) {
    super(`watch restart: ${reason}`);
    this.reason = reason;
  }
}

interface WatchEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: KubernetesObject & KubeStatus;
}

interface ListResponse<T> {
  apiVersion?: string;
  kind?: string;
  metadata?: { resourceVersion?: string; continue?: string };
  items?: T[];
}

const namespacedName = (ns: string, name: string) => `${ns}/${name}`;
const nsOf = (o: KubernetesObject) => o.metadata?.namespace ?? '';
const nameOf = (o: KubernetesObject) => o.metadata?.name ?? '';
const rvOf = (o: KubernetesObject | undefined) => o?.metadata?.resourceVersion;

/**
 * True when resourceVersion a is newer than b. resourceVersions are opaque by contract but are etcd revisions in
 * every real apiserver; when either is not numeric we fall back to "different means newer".
 */
export function rvNewer(a: string | undefined, b: string | undefined): boolean {
  if (a === undefined) return false;
  if (b === undefined) return true;
  if (/^\d+$/.test(a) && /^\d+$/.test(b)) return BigInt(a) > BigInt(b);
  return a !== b;
}

const TOMBSTONE_TTL_MS = 120_000;

export class SupervisedInformer<T extends KubernetesObject> implements ObjectCache<T> {
  readonly name: string;
  private readonly opts: InformerOptions;
  private readonly client: KubeClient;
  private readonly log: Logger | undefined;
  private readonly objects = new Map<string, Map<string, T>>();
  /** index → value → the key (`ns/name`) of the one object with it, or a Set when several share it. At 100k
   *  credentials most values (ids, Secret refs) belong to one object, and a Set each cost ~150 bytes. */
  private readonly indexes = new Map<string, { fn: IndexFn<T>; values: Map<string, IndexEntry> }>();
  private readonly tombstones = new Map<string, { rv: string; at: number }>();
  private readonly handlers: {
    add: ((o: T) => void)[];
    update: ((o: T, old: T) => void)[];
    delete: ((o: T) => void)[];
  } = { add: [], update: [], delete: [] };
  private readonly streams: Stream[];
  private loops: Promise<void>[] = [];
  private timers: NodeJS.Timeout[] = [];
  private sleepers = new Set<() => void>();
  private stopped = false;
  private started = false;
  private syncWaiters: { resolve: () => void; reject: (e: Error) => void }[] = [];

  constructor(opts: InformerOptions) {
    this.opts = opts;
    this.name = opts.name;
    this.client = kubeClient(opts.kubeConfig);
    this.log = opts.logger?.child({ informer: opts.name });
    const namespaces = opts.namespaces && opts.namespaces.length > 0 ? [...new Set(opts.namespaces)] : [undefined];
    this.streams = namespaces.map((namespace) => ({
      namespace,
      rv: undefined,
      needList: true,
      synced: false,
      lastActivity: Date.now(),
      abort: undefined,
      gate: undefined,
      openGate: undefined,
    }));
  }

  on(event: 'add', fn: (obj: T) => void): void;
  on(event: 'update', fn: (obj: T, old: T) => void): void;
  on(event: 'delete', fn: (obj: T) => void): void;
  on(event: keyof InformerHandlers<T>, fn: ((obj: T) => void) | ((obj: T, old: T) => void)): void {
    (this.handlers[event] as unknown[]).push(fn);
  }

  addIndex(name: string, fn: IndexFn<T>): void {
    const entry = { fn, values: new Map<string, IndexEntry>() };
    this.indexes.set(name, entry);
    for (const byName of this.objects.values())
      for (const obj of byName.values()) this.indexOne(entry, namespacedName(nsOf(obj), nameOf(obj)), obj);
  }

  // ---- read API ----

  get(namespace: string, name: string): T | undefined {
    return this.objects.get(namespace)?.get(name);
  }

  /** How many objects are cached, without building the list. */
  size(): number {
    let n = 0;
    for (const byName of this.objects.values()) n += byName.size;
    return n;
  }

  list(namespace?: string): T[] {
    if (namespace !== undefined) return [...(this.objects.get(namespace)?.values() ?? [])];
    const out: T[] = [];
    for (const byName of this.objects.values()) out.push(...byName.values());
    return out;
  }

  byIndex(index: string, value: string): T[] {
    const entry = this.indexes.get(index);
    if (!entry) throw new Error(`informer ${this.name}: no index ${index}`);
    const out: T[] = [];
    const keys = entry.values.get(value);
    for (const key of typeof keys === 'string' ? [keys] : (keys ?? [])) {
      const i = key.indexOf('/');
      const obj = this.get(key.slice(0, i), key.slice(i + 1));
      if (obj) out.push(obj);
    }
    return out;
  }

  namespaces(): string[] {
    return [...this.objects.keys()].filter((ns) => this.hasNamespace(ns));
  }

  /** Whether any cached object is in this namespace. */
  hasNamespace(namespace: string): boolean {
    return (this.objects.get(namespace)?.size ?? 0) > 0;
  }

  hasSynced(): boolean {
    return this.streams.every((s) => s.synced);
  }

  /** Applies an object known from a write response when it is newer than the cached one (read-your-writes). */
  observe(obj: T): void {
    this.upsert(obj, 'observe');
  }

  /** Removes an object known to be deleted (from a delete response) before the watch says so. */
  observeDeleted(namespace: string, name: string): void {
    const cached = this.get(namespace, name);
    if (!cached) return;
    const rv = rvOf(cached);
    if (rv) this.tombstones.set(namespacedName(namespace, name), { rv, at: Date.now() });
    this.remove(cached);
  }

  // ---- lifecycle ----

  /** Starts every stream; resolves once each has completed its initial list. */
  start(): Promise<void> {
    if (this.started) return this.waitForSync();
    this.started = true;
    const synced = this.waitForSync();
    this.loops = this.streams.map((s) => this.supervise(s));
    const resync = this.opts.resyncSeconds ?? 300;
    if (resync > 0) {
      const t = setInterval(() => {
        for (const s of this.streams) {
          s.needList = true;
          s.abort?.abort(new RestartSignal('resync'));
        }
      }, resync * 1000);
      t.unref();
      this.timers.push(t);
    }
    const staleMs = (this.opts.staleSeconds ?? 150) * 1000;
    const watchdog = setInterval(
      () => {
        const now = Date.now();
        for (const s of this.streams) {
          if (s.abort && !s.abort.signal.aborted && now - s.lastActivity > staleMs) {
            this.log?.warn(
              { namespace: s.namespace, silentMs: now - s.lastActivity },
              'watch went quiet; restarting it',
            );
            s.abort.abort(new RestartSignal('stale'));
          }
        }
        for (const [k, t] of this.tombstones) if (now - t.at > TOMBSTONE_TTL_MS) this.tombstones.delete(k);
      },
      Math.max(100, Math.min(staleMs / 4, 5000)),
    );
    watchdog.unref();
    this.timers.push(watchdog);
    return synced;
  }

  private waitForSync(): Promise<void> {
    if (this.hasSynced()) return Promise.resolve();
    return new Promise((resolve, reject) => this.syncWaiters.push({ resolve, reject }));
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const t of this.timers) clearInterval(t);
    for (const s of this.streams) {
      s.abort?.abort(new RestartSignal('closed'));
      s.openGate?.();
    }
    for (const wake of this.sleepers) wake();
    for (const w of this.syncWaiters.splice(0)) w.reject(new Error(`informer ${this.name} stopped before it synced`));
    await Promise.allSettled(this.loops);
  }

  /** Hooks for tests and diagnostics: hold the watches, then resume (optionally from a given resourceVersion). */
  readonly testing = {
    pause: (): void => {
      for (const s of this.streams) {
        if (s.gate) continue;
        s.gate = new Promise<void>((r) => (s.openGate = r));
        s.abort?.abort(new RestartSignal('closed'));
      }
    },
    resume: (opts: { resourceVersion?: string } = {}): void => {
      for (const s of this.streams) {
        if (opts.resourceVersion) s.rv = opts.resourceVersion;
        const open = s.openGate;
        s.gate = undefined;
        s.openGate = undefined;
        open?.();
      }
    },
    resourceVersions: (): (string | undefined)[] => this.streams.map((s) => s.rv),
  };

  // ---- the supervisor ----

  private async supervise(s: Stream): Promise<void> {
    let failures = 0;
    let consecutiveGone = 0;
    while (!this.stopped) {
      if (s.gate) await s.gate;
      if (this.stopped) break;
      try {
        if (s.needList || s.rv === undefined) {
          await this.relist(s);
          failures = 0;
        }
        const began = Date.now();
        await this.watch(s);
        // A clean end is the server-side timeout: rewatch from the last resourceVersion straight away.
        if (Date.now() - began > 1000) failures = 0;
        consecutiveGone = 0;
        this.opts.onRestart?.('closed');
      } catch (err) {
        if (this.stopped) break;
        if (err instanceof RestartSignal) {
          const signal = err;
          if (signal.reason !== 'closed') this.opts.onRestart?.(signal.reason);
          continue;
        }
        if (err instanceof KubeApiError && err.status === 410) {
          this.opts.onRestart?.('gone');
          this.log?.info({ namespace: s.namespace }, 'resourceVersion too old (410 Gone); relisting');
          s.needList = true;
          // A relist normally cures 410; if it keeps coming back, back off rather than hammer the apiserver.
          if (++consecutiveGone > 3) await this.sleep(this.backoff(++failures));
          continue;
        }
        failures++;
        // A kube-apiserver answers 429 "storage is (re)initializing" until its watch cache of a resource is ready
        // (at its start, or just after a CRD is installed): expected, and the retry cures it, so no warning and no
        // error restart (ByokInformerRestarts counts those).
        const warming = warmingUp(err);
        this.opts.onRestart?.(warming ? 'warming' : 'error');
        const delay = this.backoff(failures);
        const detail = {
          namespace: s.namespace,
          err: err instanceof Error ? err.message : String(err),
          retryInMs: delay,
        };
        if (warming) this.log?.info(detail, 'the apiserver is still filling its watch cache; retrying');
        else this.log?.warn(detail, 'list/watch failed; retrying');
        await this.sleep(delay);
      }
    }
  }

  private backoff(failures: number): number {
    const initial = this.opts.backoffInitialMs ?? 200;
    const max = this.opts.backoffMaxMs ?? 30_000;
    const base = Math.min(max, initial * 2 ** Math.min(failures - 1, 20));
    return Math.round(base * (0.8 + Math.random() * 0.4));
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t);
        this.sleepers.delete(done);
        resolve();
      };
      const t = setTimeout(done, ms);
      this.sleepers.add(done);
    });
  }

  private async relist(s: Stream): Promise<void> {
    const path = namespacedPath(this.opts.path, s.namespace);
    const items: T[] = [];
    let cont: string | undefined;
    let rv: string | undefined;
    do {
      const query: Query = {
        limit: this.opts.pageSize ?? 500,
        continue: cont,
        labelSelector: this.opts.labelSelector,
        fieldSelector: this.opts.fieldSelector,
      };
      const page = await this.client.request<ListResponse<T>>('GET', path, { query });
      const kind = page.kind?.replace(/List$/, '');
      for (const item of page.items ?? []) {
        // List items come without apiVersion/kind; restore them so cached objects look like watched ones.
        // Transformed as they arrive, so a large list never holds every object's bulky parts at once.
        items.push(
          this.transformed({ ...item, apiVersion: item.apiVersion ?? page.apiVersion, kind: item.kind ?? kind }),
        );
      }
      cont = page.metadata?.continue || undefined;
      rv = page.metadata?.resourceVersion;
    } while (cont);

    const seen = new Set<string>();
    for (const item of items) {
      seen.add(namespacedName(nsOf(item), nameOf(item)));
      this.upsert(item, 'list');
    }
    // Anything cached in this stream's scope that the list no longer has was deleted while we were not
    // watching: emit the delete now. Objects observed from our own writes after the list began are kept.
    const scope = s.namespace !== undefined ? [this.objects.get(s.namespace)] : [...this.objects.values()];
    for (const byName of scope) {
      for (const obj of Array.from(byName?.values() ?? [])) {
        if (seen.has(namespacedName(nsOf(obj), nameOf(obj)))) continue;
        if (rv && rvNewer(rvOf(obj), rv)) continue;
        this.remove(obj);
      }
    }
    s.rv = rv;
    s.needList = false;
    if (!s.synced) {
      s.synced = true;
      if (this.hasSynced()) for (const w of this.syncWaiters.splice(0)) w.resolve();
    }
    this.log?.debug({ namespace: s.namespace, count: items.length, resourceVersion: rv }, 'listed');
  }

  private async watch(s: Stream): Promise<void> {
    const ac = new AbortController();
    s.abort = ac;
    s.lastActivity = Date.now();
    const timeout = this.opts.watchTimeoutSeconds ?? 300;
    const query: Query = {
      watch: 'true',
      resourceVersion: s.rv,
      allowWatchBookmarks: 'true',
      timeoutSeconds: Math.floor(timeout * (1 + Math.random())),
      labelSelector: this.opts.labelSelector,
      fieldSelector: this.opts.fieldSelector,
    };
    try {
      if (s.gate || this.stopped) throw new RestartSignal('closed');
      await this.client.stream(
        namespacedPath(this.opts.path, s.namespace),
        query,
        (ev) => this.onWatchEvent(s, ev as WatchEvent),
        ac.signal,
      );
    } catch (err) {
      // Our own aborts (watchdog, resync, pause, stop) surface as whatever the socket threw; report the intent.
      if (ac.signal.aborted && ac.signal.reason instanceof RestartSignal) throw ac.signal.reason;
      throw err;
    } finally {
      s.abort = undefined;
    }
  }

  private onWatchEvent(s: Stream, ev: WatchEvent): void {
    s.lastActivity = Date.now();
    const obj = ev.object;
    switch (ev.type) {
      case 'ERROR': {
        const code = obj.code ?? 500;
        throw new KubeApiError(code, obj, `watch ${this.name}`);
      }
      case 'BOOKMARK':
        break;
      case 'ADDED':
      case 'MODIFIED':
        this.upsert(obj as T, 'watch');
        break;
      case 'DELETED': {
        const ns = nsOf(obj);
        const name = nameOf(obj);
        this.tombstones.delete(namespacedName(ns, name));
        const cached = this.get(ns, name);
        // A newer object (recreated and observed from a write) must not be removed by an older delete.
        if (cached && !rvNewer(rvOf(cached), rvOf(obj))) this.remove(cached, this.transformed(obj as T));
        break;
      }
    }
    const rv = rvOf(obj);
    if (rv) s.rv = rv;
  }

  // ---- cache mutation ----

  private upsert(input: T, source: 'watch' | 'list' | 'observe'): void {
    const obj = this.transformed(input);
    const ns = nsOf(obj);
    const name = nameOf(obj);
    const key = namespacedName(ns, name);
    const tomb = this.tombstones.get(key);
    if (tomb && !rvNewer(rvOf(obj), tomb.rv)) return;
    if (tomb) this.tombstones.delete(key);
    const old = this.get(ns, name);
    if (old) {
      const oldRv = rvOf(old);
      const newRv = rvOf(obj);
      if (oldRv === newRv) return;
      // Never go backwards: an observed write may be ahead of the watch.
      if (source !== 'list' || /^\d+$/.test(oldRv ?? '')) {
        if (!rvNewer(newRv, oldRv)) return;
      }
    }
    let byName = this.objects.get(ns);
    if (!byName) {
      byName = new Map();
      this.objects.set(ns, byName);
    }
    byName.set(name, obj);
    this.reindex(key, obj, old);
    if (old) this.emit('update', obj, old);
    else this.emit('add', obj);
  }

  private transformed(obj: T): T {
    return this.opts.transform ? (this.opts.transform(obj) as T) : obj;
  }

  private remove(cached: T, finalState?: T): void {
    const ns = nsOf(cached);
    const name = nameOf(cached);
    const byName = this.objects.get(ns);
    if (!byName?.delete(name)) return;
    if (byName.size === 0) this.objects.delete(ns);
    this.unindex(namespacedName(ns, name), cached);
    this.emit('delete', finalState ?? cached);
  }

  private indexOne(entry: { fn: IndexFn<T>; values: Map<string, IndexEntry> }, key: string, obj: T): void {
    for (const v of entry.fn(obj)) {
      const have = entry.values.get(v);
      if (have === undefined) entry.values.set(v, key);
      else if (typeof have !== 'string') have.add(key);
      else if (have !== key) entry.values.set(v, new Set([have, key]));
    }
  }

  /** Index functions are pure, so the old object's values are recomputed instead of kept per object. */
  private reindex(key: string, obj: T, old: T | undefined): void {
    if (old) this.unindex(key, old);
    for (const entry of this.indexes.values()) this.indexOne(entry, key, obj);
  }

  private unindex(key: string, old: T): void {
    for (const entry of this.indexes.values()) {
      for (const v of entry.fn(old)) {
        const have = entry.values.get(v);
        if (have === key) entry.values.delete(v);
        else if (have !== undefined && typeof have !== 'string') {
          have.delete(key);
          if (have.size === 1) entry.values.set(v, have.values().next().value!);
          else if (have.size === 0) entry.values.delete(v);
        }
      }
    }
  }

  private emit(event: 'add' | 'delete', obj: T): void;
  private emit(event: 'update', obj: T, old: T): void;
  private emit(event: 'add' | 'update' | 'delete', obj: T, old?: T): void {
    const list = this.handlers[event] as ((o: T, old?: T) => void)[];
    for (const fn of list) {
      try {
        fn(obj, old);
      } catch (err) {
        this.log?.error({ err: err instanceof Error ? err.message : String(err), event }, 'informer handler threw');
      }
    }
  }
}

export function createInformer<T extends KubernetesObject>(opts: InformerOptions): SupervisedInformer<T> {
  return new SupervisedInformer<T>(opts);
}
