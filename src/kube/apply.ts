// Server-Side Apply with one fixed field manager. Everything the operator writes goes through here, so field
// ownership is visible in managedFields and the operator can never clobber spec it does not own: it only ever
// applies status (status subresource) or the metadata/data of objects it creates itself.
import type { KubernetesObject } from '@kubernetes/client-node';
import { API_VERSION } from '../schema/resources.ts';
import { type KubeClient, kubeClient, objectPath } from './client.ts';
import type { KubeAccess } from './kubeconfig.ts';

export const FIELD_MANAGER = 'byok-operator';
const APPLY_CONTENT_TYPE = 'application/apply-patch+yaml';

export interface ApplyOptions {
  /** Write the status subresource. */
  subresource?: 'status';
  /** Take ownership of fields another manager owns (default true: we only apply fields that are ours). */
  force?: boolean;
  /** Server-side dry run: the apiserver validates and admits the object but stores nothing. */
  dryRun?: boolean;
  signal?: AbortSignal;
}

export class NotAllowedToWriteError extends Error {
  constructor(what: string) {
    super(`refusing to write ${what}: this instance may not write (not the leader)`);
    this.name = 'NotAllowedToWriteError';
  }
}

export interface Applier {
  readonly fieldManager: string;
  /** Applies a (partial) object: apiVersion, kind, metadata.name/namespace and the fields we own. */
  apply<T extends KubernetesObject>(obj: T, opts?: ApplyOptions): Promise<T>;
  /**
   * Applies like apply() without reading the object back: for large objects nothing caches (routing shards,
   * credential bundles), where parsing the echoed object cost more than the write (a bundle is ~900 keys).
   */
  write(obj: KubernetesObject, opts?: ApplyOptions): Promise<void>;
  /** Applies status of one of our custom resources; `status` is the complete set of status fields we own. */
  applyStatus<T extends KubernetesObject>(kind: string, namespace: string, name: string, status: object): Promise<T>;
  /** Deletes an object (404 counts as success). */
  delete(apiVersion: string, kind: string, namespace: string | undefined, name: string): Promise<void>;
}

export interface ApplierOptions {
  fieldManager?: string;
  /** Fencing: checked before every write, e.g. "am I still the leader". */
  canWrite?: () => boolean;
  /** Called with every object a write returned, e.g. to feed an informer (read-your-writes). */
  onWritten?: (obj: KubernetesObject) => void;
}

export function createApplier(kubeConfig: KubeAccess, options: ApplierOptions = {}): Applier {
  const client: KubeClient = kubeClient(kubeConfig);
  const fieldManager = options.fieldManager ?? FIELD_MANAGER;
  const guard = (what: string) => {
    if (options.canWrite && !options.canWrite()) throw new NotAllowedToWriteError(what);
  };
  const send = <T>(obj: KubernetesObject, opts: ApplyOptions, discardBody: boolean): Promise<T> => {
    const { apiVersion, kind } = obj;
    const name = obj.metadata?.name;
    if (!apiVersion || !kind || !name) throw new Error('apply needs apiVersion, kind and metadata.name');
    const path = objectPath(apiVersion, kind, obj.metadata?.namespace, name, opts.subresource);
    guard(`${kind} ${obj.metadata?.namespace ?? ''}/${name}`);
    return client.request<T>('PATCH', path, {
      query: { fieldManager, force: opts.force ?? true, ...(opts.dryRun ? { dryRun: 'All' } : {}) },
      body: obj,
      contentType: APPLY_CONTENT_TYPE,
      ...(opts.signal ? { signal: opts.signal } : {}),
      discardBody,
    });
  };
  const applier: Applier = {
    fieldManager,
    async apply<T extends KubernetesObject>(obj: T, opts: ApplyOptions = {}): Promise<T> {
      const out = await send<T>(obj, opts, false);
      if (!opts.dryRun) options.onWritten?.(out);
      return out;
    },
    async write(obj: KubernetesObject, opts: ApplyOptions = {}): Promise<void> {
      await send(obj, opts, true);
    },
    applyStatus<T extends KubernetesObject>(kind: string, namespace: string, name: string, status: object): Promise<T> {
      return applier.apply<T>(
        { apiVersion: API_VERSION, kind, metadata: { name, namespace }, status } as unknown as T,
        { subresource: 'status' },
      );
    },
    async delete(apiVersion: string, kind: string, namespace: string | undefined, name: string): Promise<void> {
      guard(`delete ${kind} ${namespace ?? ''}/${name}`);
      try {
        await client.request('DELETE', objectPath(apiVersion, kind, namespace, name));
      } catch (err) {
        if ((err as { status?: number }).status !== 404) throw err;
      }
    },
  };
  return applier;
}
