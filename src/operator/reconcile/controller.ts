// What each reconciler declares to the operator, as controller-runtime's For/Watches/Reconcile do: the kind it
// reconciles (its informer and its work queue), the informer events that wake it, and its reconcile. Events only
// enqueue keys ("namespace/name"); every reconcile reads the caches.
import type { KubernetesObject } from '@kubernetes/client-node';
import type { SupervisedInformer } from '../../kube/informer.ts';
import type { ResourceInformers } from '../../kube/resources.ts';
import type { ReconcileResult } from '../workqueue.ts';
import { generationChanged } from './objects.ts';

/** The reconciled kinds, named as their informers; each has one work queue. */
export type ReconciledKind = 'credentials' | 'workspaces' | 'guardrails' | 'apiKeys' | 'accounts';

/** Adds a key to a work queue. */
export type Enqueue = (key: string) => void;

export interface Controller {
  /** The kind it reconciles: the informer its keys name and the queue they go on. */
  for: ReconciledKind;
  /** Registers the handlers that decide which events wake this reconciler; they enqueue keys of its kind. */
  watch(informers: ResourceInformers, enqueue: Enqueue): void;
  reconcile(key: string): Promise<ReconcileResult>;
}

/**
 * `changed` on add, on an update that moves the generation (a spec change or the start of deletion; status-only
 * updates do not), and on delete unless `deleted` is given.
 */
export function onSpecChange<T extends KubernetesObject>(
  informer: SupervisedInformer<T>,
  changed: (obj: T, old?: T) => void,
  deleted: (obj: T) => void = changed,
): void {
  informer.on('add', (o) => changed(o));
  informer.on('update', (o, old) => {
    if (generationChanged(o, old)) changed(o, old);
  });
  informer.on('delete', (o) => deleted(o));
}
