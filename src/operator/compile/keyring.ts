// The bundle keyring as the pipeline holds it: read from the key Secret (created when absent), re-read at most every
// reloadMs before a run, and also on a timer of its own, so a key activation reseals every account with nothing
// else changing.
import type { Logger } from 'pino';
import type { Keyring } from '../../contract/envelope.ts';
import { ensureBundleKey } from './bundle-key.ts';
import type { RoutingStore } from './store.ts';

export interface BundleKeyringOptions {
  store: RoutingStore;
  namespace: string;
  secretName: string;
  /** Re-read the Secret at most this often before a run. */
  reloadMs: number;
  /** Read it on this timer too. */
  pollMs: number;
  log: Pick<Logger, 'info' | 'warn'>;
  /** The active key changed: every account must be resealed. */
  onRotated: () => void;
}

export class BundleKeyring {
  private ring: Keyring | undefined;
  private readAt = 0;
  private poll: NodeJS.Timeout | undefined;

  private readonly opts: BundleKeyringOptions;

  constructor(opts: BundleKeyringOptions) {
    this.opts = opts;
  }

  /** The keyring as last read; refresh() must have succeeded once. */
  get current(): Keyring {
    if (!this.ring) throw new Error('bundle keyring read before refresh()');
    return this.ring;
  }

  /** Reads the key Secret unless it was read within reloadMs (`force`: read it anyway). */
  async refresh(force = false): Promise<void> {
    if (force) this.readAt = 0;
    if (this.ring && Date.now() - this.readAt < this.opts.reloadMs) return;
    const next = await ensureBundleKey(this.opts.store, this.opts.namespace, this.opts.secretName);
    if (this.ring && next.active !== this.ring.active) {
      this.opts.log.info({ keyId: next.active }, 'bundle key rotated: resealing all credential bundles');
      this.opts.onRotated();
    }
    this.ring = next;
    this.readAt = Date.now();
  }

  /**
   * A rotation must reseal even when nothing else changes: compile runs only start when something is dirty, so the
   * key Secret is also read on its own timer (one GET per pollMs; a watch would cost a long-lived connection per
   * replica for a Secret that changes a few times a year). A poll is skipped unless `idle()`; `after` runs after
   * each successful read.
   */
  startPolling(idle: () => boolean, after: () => void): void {
    this.stopPolling();
    this.poll = setInterval(() => void this.pollOnce(idle, after), this.opts.pollMs);
    this.poll.unref?.();
  }

  stopPolling(): void {
    if (this.poll) clearInterval(this.poll);
    this.poll = undefined;
  }

  private async pollOnce(idle: () => boolean, after: () => void): Promise<void> {
    if (!idle()) return;
    try {
      await this.refresh(true);
      after();
    } catch (err) {
      this.opts.log.warn(
        { err: err instanceof Error ? err.message : String(err) },
        'reading the bundle key Secret failed; retrying on the next poll',
      );
    }
  }
}
