// Collects API-managed key Secrets that no BYOKCredential references: left by a crash between the Secret create
// and the credential create, by a write whose outcome was unknown (timeout), or by a failed cleanup.
import type { V1Secret } from '@kubernetes/client-node';
import { KubeApiError } from '../kube/client.ts';
import { CREDENTIAL_SECRET_LABEL } from '../kube/resources.ts';
import type { Backend } from './backend.ts';
import { MANAGED_BY_API, MANAGED_BY_LABEL } from './mapping.ts';
import type { ApiState } from './read-model.ts';

export const ORPHAN_SELECTOR = `${MANAGED_BY_LABEL}=${MANAGED_BY_API},${CREDENTIAL_SECRET_LABEL}=true`;
/** Longer than any write in flight (creates and rotations take well under the 10 s backend timeout). */
export const DEFAULT_ORPHAN_GRACE_MS = 10 * 60_000;

export interface OrphanSweepOptions {
  backend: Backend;
  state: ApiState;
  /** Only these namespaces; all when absent. */
  namespaces?: readonly string[];
  graceMs?: number;
  now?: number;
}

export interface OrphanSweepResult {
  scanned: number;
  deleted: string[];
}

/**
 * One sweep. A Secret is deleted only when it is older than the grace period and no credential in the read
 * model references it; the delete carries uid and resourceVersion preconditions, so a Secret changed since it
 * was listed (or recreated under the same name) survives. Safe to run on every replica at once.
 */
export async function sweepOrphanSecrets(opts: OrphanSweepOptions): Promise<OrphanSweepResult> {
  const grace = opts.graceMs ?? DEFAULT_ORPHAN_GRACE_MS;
  const now = opts.now ?? Date.now();
  const lists: V1Secret[][] = opts.namespaces
    ? await Promise.all(opts.namespaces.map((ns) => opts.backend.listSecrets(ns, ORPHAN_SELECTOR)))
    : [await opts.backend.listSecrets(undefined, ORPHAN_SELECTOR)];
  const secrets = lists.flat();
  const referenced = new Map<string, Set<string>>();
  const deleted: string[] = [];
  for (const s of secrets) {
    const ns = s.metadata?.namespace ?? '';
    const name = s.metadata?.name ?? '';
    const created = Date.parse(String(s.metadata?.creationTimestamp ?? ''));
    if (Number.isNaN(created) || now - created < grace) continue;
    let refs = referenced.get(ns);
    if (!refs) {
      refs = opts.state.referencedSecrets(ns);
      referenced.set(ns, refs);
    }
    if (refs.has(name)) continue;
    try {
      await opts.backend.deleteSecret(ns, name, { uid: s.metadata?.uid, resourceVersion: s.metadata?.resourceVersion });
      deleted.push(`${ns}/${name}`);
    } catch (err) {
      // 404: another replica got there first; 409: the Secret changed since the list, look again next sweep.
      if (!(err instanceof KubeApiError && (err.status === 404 || err.status === 409))) throw err;
    }
  }
  return { scanned: secrets.length, deleted };
}

export interface OrphanCollector {
  stop(): void;
}

/** Sweeps every graceMs/2 (at most every 5 min), jittered so replicas spread out; only while `ready()`. */
export function startOrphanCollector(
  opts: Omit<OrphanSweepOptions, 'now'> & {
    ready: () => boolean;
    onResult: (r: OrphanSweepResult) => void;
    onError: (err: unknown) => void;
  },
): OrphanCollector {
  const grace = opts.graceMs ?? DEFAULT_ORPHAN_GRACE_MS;
  const period = Math.max(1000, Math.min(grace / 2, 5 * 60_000));
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(run, period * (0.75 + Math.random() * 0.5));
    timer.unref();
  };
  const run = () => {
    if (!opts.ready()) return schedule();
    sweepOrphanSecrets(opts).then(opts.onResult, opts.onError).finally(schedule);
  };
  schedule();
  return {
    stop: () => {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
  };
}
