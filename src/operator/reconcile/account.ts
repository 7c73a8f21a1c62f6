// Account: gather (the namespace's account election, the pipeline's quarantine) → evaluate (Ready, Compiled) →
// write. The compile pipeline reports quarantines here; the bookkeeping of which namespaces are held back
// lives in this reconciler.
import type { KubernetesObject } from '@kubernetes/client-node';
import { electAccount } from '../../compiler/elect.ts';
import type { ResourceInformers } from '../../kube/resources.ts';
import { EventReason, ConditionReason as R, ConditionType as T } from '../../schema/conditions.ts';
import type { Quarantine } from '../compile/pipeline.ts';
import { buildConditions, type CatalogCondition, type Condition, readyFrom } from '../conditions.ts';
import type { ReconcileResult } from '../workqueue.ts';
import { baseStatus, namespacedName, splitKey } from './objects.ts';
import type { StatusWriter } from './status-writer.ts';

/** Credentials that carry a quarantine Event when the namespace has no Account object. */
export const QUARANTINE_EVENT_FANOUT = 20;

export interface AccountFacts {
  name: string;
  /** The namespace's elected Account (the oldest), if any. */
  winner: string | undefined;
  /** The pipeline's quarantine of this namespace, if any. */
  quarantine: Pick<Quarantine, 'message'> | undefined;
}

export interface AccountEvaluation {
  ready: CatalogCondition<'Ready'>;
  /** Compiled is shown only while quarantined: otherwise the compile pipeline, not this reconcile, knows when
   *  the routing is written (see docs/compiler.md, "Quarantine"). */
  compiled: CatalogCondition<'Compiled'>[];
}

/** A conflicting Account is not compiled at all, so the quarantine is not its business. */
export function evaluateAccount(f: AccountFacts): AccountEvaluation {
  if (f.winner !== undefined && f.winner !== f.name) {
    return {
      ready: {
        type: T.Ready,
        status: 'False',
        reason: R.Conflicting,
        message: `Account "${f.winner}" already defines this namespace's account (exactly one per namespace; oldest wins)`,
      },
      compiled: [],
    };
  }
  if (f.quarantine) {
    const compiled: CatalogCondition<'Compiled'>[] = [
      { type: T.Compiled, status: 'False', reason: R.Quarantined, message: f.quarantine.message },
    ];
    return { ready: readyFrom(compiled, 'the account is valid'), compiled };
  }
  return { ready: { type: T.Ready, status: 'True', reason: R.Ready, message: 'the account is valid' }, compiled: [] };
}

export interface AccountReconcilerDeps {
  informers: ResourceInformers;
  writer: StatusWriter;
  enqueueAccount: (key: string) => void;
}

export class AccountReconciler {
  private readonly quarantines = new Map<string, Quarantine>();

  private readonly deps: AccountReconcilerDeps;

  constructor(deps: AccountReconcilerDeps) {
    this.deps = deps;
  }

  /** Called by the compile pipeline when an account is quarantined (q) or released (undefined). */
  setQuarantine(ns: string, q: Quarantine | undefined): void {
    if (q) this.quarantines.set(ns, q);
    else if (!this.quarantines.delete(ns)) return;
    const { informers, writer } = this.deps;
    const accounts = informers.accounts.list(ns);
    for (const a of accounts) this.deps.enqueueAccount(namespacedName(a));
    // The Account object is where the owner looks; a namespace without one gets the Event on its credentials.
    const { winner } = electAccount(accounts);
    const targets: KubernetesObject[] = winner
      ? [winner]
      : informers.credentials.list(ns).slice(0, QUARANTINE_EVENT_FANOUT);
    for (const t of targets) {
      // An Account gets its Warning from reconcile (Ready=False, reason Quarantined), with the condition.
      if (q && !winner) writer.warn(t, EventReason.Quarantined, q.message);
      else if (!q) writer.normal(t, EventReason.QuarantineLifted, "the account's routing is written again");
    }
  }

  async reconcile(key: string): Promise<ReconcileResult> {
    const [ns, name] = splitKey(key);
    const { informers, writer } = this.deps;
    const a = informers.accounts.get(ns, name);
    if (!a || a.metadata.deletionTimestamp) return;
    const winner = electAccount(informers.accounts.list(ns)).winner?.metadata.name;
    const conflicting = winner !== undefined && winner !== name;
    const { ready, compiled } = evaluateAccount({
      name,
      winner,
      quarantine: conflicting ? undefined : this.quarantines.get(ns),
    });
    const status = {
      ...baseStatus('Account', a),
      conditions: buildConditions(
        a.status?.conditions as Condition[] | undefined,
        [ready, ...compiled],
        a.metadata.generation,
      ),
    };
    await writer.write('Account', a, status, informers.accounts);
    if (ready.status !== 'True') writer.warn(a, ready.reason, ready.message);
  }
}
