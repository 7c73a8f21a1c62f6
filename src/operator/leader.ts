// Leader election on a coordination.k8s.io/v1 Lease, following client-go's leaderelection package:
//  - a candidate takes the lease when it is free (no holder) or when the holder has not renewed it for
//    leaseDuration, measured on OUR clock from when we last saw the record change (no clock-skew trust);
//  - the leader renews every retryPeriod and gives up leadership if it could not renew for renewDeadline
//    (renewDeadline < leaseDuration, so it stops writing before anyone else may take over);
//  - on graceful shutdown the leader releases the lease (empty holder), so a successor takes over at once.
// Updates carry the resourceVersion we read, so two candidates can never both win the same round.

import type { Logger } from 'pino';
import { FIELD_MANAGER } from '../kube/apply.ts';
import { KubeApiError, type KubeClient, kubeClient, objectPath } from '../kube/client.ts';
import type { KubeAccess } from '../kube/kubeconfig.ts';
import { childLogger } from './logger.ts';

export interface LeaderElectionConfig {
  leaseName: string;
  leaseNamespace: string;
  identity: string;
  leaseDurationSeconds: number;
  renewDeadlineSeconds: number;
  retryPeriodSeconds: number;
}

export const LEASE_DEFAULTS = { leaseDurationSeconds: 15, renewDeadlineSeconds: 10, retryPeriodSeconds: 2 } as const;

interface LeaseSpec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}
interface Lease {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; namespace: string; resourceVersion?: string };
  spec?: LeaseSpec;
}

export interface LeaderCallbacks {
  onStartedLeading: () => void;
  onStoppedLeading: () => void;
  onNewLeader?: (identity: string) => void;
}

const microTime = (d = new Date()) => d.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');

export class LeaderElector {
  private readonly cfg: LeaderElectionConfig;
  private readonly client: KubeClient;
  private readonly log: Logger | undefined;
  private readonly cb: LeaderCallbacks;
  private leader = false;
  private stopped = false;
  private loop: Promise<void> | undefined;
  private observed: { holder: string; renewTime: string; rv: string | undefined } | undefined;
  private observedAt = 0;
  private lastRenew = 0;
  private wakeSleep: (() => void) | undefined;
  private lastSeenLeader = '';

  constructor(kubeConfig: KubeAccess, cfg: LeaderElectionConfig, cb: LeaderCallbacks, logger?: Logger) {
    this.cfg = cfg;
    this.client = kubeClient(kubeConfig);
    this.cb = cb;
    this.log =
      logger &&
      childLogger(logger, {
        component: 'leader-election',
        lease: `${cfg.leaseNamespace}/${cfg.leaseName}`,
        identity: cfg.identity,
      });
  }

  isLeader(): boolean {
    return this.leader;
  }

  start(): void {
    if (!this.loop) this.loop = this.run();
  }

  /** Stops campaigning; when leading, stops leading and (unless `release` is false) frees the lease. */
  async stop(opts: { release?: boolean } = {}): Promise<void> {
    this.stopped = true;
    this.wakeSleep?.();
    await this.loop;
    if (this.leader) {
      this.setLeader(false);
      if (opts.release ?? true) await this.release();
    }
  }

  private setLeader(v: boolean): void {
    if (this.leader === v) return;
    this.leader = v;
    if (v) {
      this.log?.info('became leader');
      this.cb.onStartedLeading();
    } else {
      this.log?.warn('stopped leading');
      this.cb.onStoppedLeading();
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.wakeSleep = undefined;
        resolve();
      }, ms);
      this.wakeSleep = () => {
        clearTimeout(t);
        this.wakeSleep = undefined;
        resolve();
      };
    });
  }

  private async run(): Promise<void> {
    const retryMs = this.cfg.retryPeriodSeconds * 1000;
    while (!this.stopped) {
      let ok = false;
      try {
        ok = await this.tryAcquireOrRenew();
      } catch (err) {
        this.log?.warn({ err: err instanceof Error ? err.message : String(err) }, 'lease update failed');
      }
      if (this.stopped) break;
      const now = Date.now();
      if (ok) {
        this.lastRenew = now;
        this.setLeader(true);
      } else if (this.leader && now - this.lastRenew > this.cfg.renewDeadlineSeconds * 1000) {
        this.setLeader(false);
      }
      // Leaders renew on the retry period; candidates poll with a little jitter (client-go's JitterFactor 1.2).
      await this.sleep(this.leader ? retryMs : retryMs * (1 + Math.random() * 0.2));
    }
  }

  private path(): string {
    return objectPath('coordination.k8s.io/v1', 'Lease', this.cfg.leaseNamespace, this.cfg.leaseName);
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const now = new Date();
    const timeoutMs = Math.max(1000, this.cfg.renewDeadlineSeconds * 1000 - 500);
    let lease: Lease | undefined;
    try {
      lease = await this.client.request<Lease>('GET', this.path(), { timeoutMs });
    } catch (err) {
      if (!(err instanceof KubeApiError && err.status === 404)) throw err;
    }
    const mine: LeaseSpec = {
      holderIdentity: this.cfg.identity,
      leaseDurationSeconds: this.cfg.leaseDurationSeconds,
      acquireTime: microTime(now),
      renewTime: microTime(now),
      leaseTransitions: 0,
    };
    if (!lease) {
      try {
        const created = await this.client.request<Lease>(
          'POST',
          objectPath('coordination.k8s.io/v1', 'Lease', this.cfg.leaseNamespace, '').replace(/\/$/, ''),
          {
            query: { fieldManager: FIELD_MANAGER },
            body: {
              apiVersion: 'coordination.k8s.io/v1',
              kind: 'Lease',
              metadata: { name: this.cfg.leaseName, namespace: this.cfg.leaseNamespace },
              spec: mine,
            },
            timeoutMs,
          },
        );
        this.remember(created);
        return true;
      } catch (err) {
        if (err instanceof KubeApiError && err.status === 409) return false;
        throw err;
      }
    }
    const spec = lease.spec ?? {};
    this.remember(lease);
    const holder = spec.holderIdentity ?? '';
    if (holder && holder !== this.lastSeenLeader) {
      this.lastSeenLeader = holder;
      this.cb.onNewLeader?.(holder);
    }
    const duration = (spec.leaseDurationSeconds ?? this.cfg.leaseDurationSeconds) * 1000;
    if (holder && holder !== this.cfg.identity && this.observedAt + duration > now.getTime()) return false;
    const next: LeaseSpec =
      holder === this.cfg.identity
        ? {
            ...spec,
            ...mine,
            acquireTime: spec.acquireTime ?? mine.acquireTime,
            leaseTransitions: spec.leaseTransitions ?? 0,
          }
        : { ...mine, leaseTransitions: (spec.leaseTransitions ?? 0) + 1 };
    try {
      // Server-Side Apply with the resourceVersion we read as a precondition: a concurrent winner makes this 409.
      const updated = await this.client.request<Lease>('PATCH', this.path(), {
        query: { fieldManager: FIELD_MANAGER, force: true },
        contentType: 'application/apply-patch+yaml',
        body: {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: {
            name: this.cfg.leaseName,
            namespace: this.cfg.leaseNamespace,
            resourceVersion: lease.metadata.resourceVersion,
          },
          spec: next,
        },
        timeoutMs,
      });
      this.remember(updated);
      return true;
    } catch (err) {
      if (err instanceof KubeApiError && err.status === 409) return false;
      throw err;
    }
  }

  private remember(lease: Lease): void {
    const rec = {
      holder: lease.spec?.holderIdentity ?? '',
      renewTime: lease.spec?.renewTime ?? '',
      rv: lease.metadata.resourceVersion,
    };
    if (!this.observed || this.observed.holder !== rec.holder || this.observed.renewTime !== rec.renewTime)
      this.observedAt = Date.now();
    this.observed = rec;
  }

  private async release(): Promise<void> {
    try {
      const lease = await this.client.request<Lease>('GET', this.path(), { timeoutMs: 3000 });
      if (lease.spec?.holderIdentity !== this.cfg.identity) return;
      const now = microTime();
      // A merge patch (not apply): clearing a field our own earlier Update-operation set is not possible by omission in SSA.
      await this.client.request('PATCH', this.path(), {
        query: { fieldManager: FIELD_MANAGER },
        contentType: 'application/merge-patch+json',
        body: {
          metadata: { resourceVersion: lease.metadata.resourceVersion },
          spec: { holderIdentity: null, leaseDurationSeconds: 1, acquireTime: now, renewTime: now },
        },
        timeoutMs: 3000,
      });
      this.log?.info('released lease');
    } catch (err) {
      this.log?.warn({ err: err instanceof Error ? err.message : String(err) }, 'could not release lease');
    }
  }
}
