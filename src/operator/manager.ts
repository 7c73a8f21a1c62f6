// The operator's components started from one list, as controller-runtime's manager does. Components marked
// everyReplica (the endpoints, the informers, the resync timer) start on every replica, in list order, before the
// campaign for the lead; the others (the reconcilers, the status writers, the compile pipeline) start in list order
// on taking the lead and stop in list order on losing it. Leadership transitions are serialised, since stopping is
// async. Shutdown gives up the lead, then closes the leader's components in order and the replica's in reverse.
import type { Logger } from 'pino';
import type { Gauge } from 'prom-client';
import type { KubeAccess } from '../kube/kubeconfig.ts';
import { type LeaderElectionConfig, LeaderElector } from './leader.ts';

export interface Component {
  name: string;
  /** Runs on every replica, from start to shutdown, instead of only while leading. */
  everyReplica?: boolean;
  /** On every replica: awaited before the campaign. On the leader: on each taking of the lead, not awaited. */
  start(): void | Promise<void>;
  /** On losing the lead (leader components); a later lead starts it again. */
  stop?(): Promise<void>;
  /** Once, on shutdown or when the start fails. */
  close?(): Promise<void>;
}

export class Manager {
  private readonly log: Logger;
  private readonly leaderStatus: Gauge<'name'>;
  private readonly lease: { name: string };
  private readonly components: Component[] = [];
  private isLeading = false;
  private transition: Promise<void> = Promise.resolve();
  private elector: LeaderElector | undefined;
  private stopping: Promise<void> | undefined;

  constructor(deps: { log: Logger; leaderStatus: Gauge<'name'>; leaseName: string }) {
    this.log = deps.log;
    this.leaderStatus = deps.leaderStatus;
    this.lease = { name: deps.leaseName };
    this.leaderStatus.set(this.lease, 0);
  }

  /** Whether this replica leads: what fences every write. */
  get leading(): boolean {
    return this.isLeading;
  }

  add(...components: (Component | undefined)[]): void {
    for (const c of components) if (c) this.components.push(c);
  }

  /**
   * Starts the every-replica components (a failure closes all components and rethrows), then campaigns for the
   * lease, or leads at once without leader election.
   */
  async start(campaign?: { kubeConfig: KubeAccess; lease: LeaderElectionConfig }): Promise<void> {
    for (const c of this.replica()) {
      try {
        await c.start();
      } catch (err) {
        await this.closeAll();
        throw err;
      }
    }
    if (!campaign) {
      this.lead();
      return;
    }
    this.elector = new LeaderElector(
      campaign.kubeConfig,
      campaign.lease,
      {
        onStartedLeading: () => this.lead(),
        onStoppedLeading: () => this.unlead(),
        onNewLeader: (id) => this.log.info({ leader: id }, 'leader observed'),
      },
      this.log,
    );
    this.elector.start();
  }

  /** Resolves once the leadership transitions asked for so far are done. */
  settled(): Promise<void> {
    return this.transition;
  }

  /** Graceful stop, once; releases the lease unless releaseLease is false (a crash, in tests). */
  stop(opts: { releaseLease?: boolean } = {}): Promise<void> {
    this.stopping ??= (async () => {
      this.log.info('stopping');
      if (this.elector) await this.elector.stop({ release: opts.releaseLease ?? true });
      else if (this.isLeading) this.unlead();
      await this.transition;
      await this.closeAll();
      this.log.info('stopped');
    })();
    return this.stopping;
  }

  private lead(): void {
    this.transition = this.transition.then(async () => {
      this.isLeading = true;
      this.leaderStatus.set(this.lease, 1);
      for (const c of this.leader()) {
        // A leader component's start is not awaited (the compile pipeline's first run is long): its failure is logged.
        c.start()?.catch((err: unknown) =>
          this.log.error({ err: err instanceof Error ? err.message : String(err) }, `${c.name} failed to start`),
        );
      }
    });
  }

  private unlead(): void {
    this.transition = this.transition.then(async () => {
      this.isLeading = false;
      this.leaderStatus.set(this.lease, 0);
      for (const c of this.leader()) await c.stop?.();
    });
  }

  private async closeAll(): Promise<void> {
    for (const c of [...this.leader(), ...this.replica().reverse()]) await c.close?.();
  }

  private replica(): Component[] {
    return this.components.filter((c) => c.everyReplica);
  }

  private leader(): Component[] {
    return this.components.filter((c) => !c.everyReplica);
  }
}
