// Quarantine: accounts whose part of a shard or bundle the apiserver refuses for its content are held back (their
// last good state, or nothing) so every other account in that object is still written. This class holds the
// quarantined, retrying and last-good state; finding which account a refusal stems from (a dry run) is the
// pipeline's, so this part does no I/O.
import type { Logger } from 'pino';
import { KubeApiError } from '../../kube/client.ts';
import type { Quarantine } from './types.ts';

/** A write the apiserver refuses for its content: retrying the same bytes cannot succeed. */
export function isRefusal(err: unknown): err is KubeApiError {
  return err instanceof KubeApiError && (err.status === 400 || err.status === 413 || err.status === 422);
}

/** The apiserver's message without quoted values (field errors can quote the refused value). */
export function refusalMessage(err: KubeApiError): string {
  const text = (err.body?.message ?? '').replace(/"(?:[^"\\]|\\.)*"/g, '"…"').replace(/\s+/g, ' ');
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
}

type Held = Quarantine & { refused: string };

const stripRefused = (q: Held): Quarantine => {
  const { refused: _refused, ...rest } = q;
  return rest;
};

/** `E` is the pipeline's account entry; `digest` says what it was compiled from. */
export class QuarantineBook<E> {
  /** Quarantined accounts, with the digest of the input that was refused (retried only when it changes). */
  private readonly held = new Map<string, Held>();
  /** Quarantined accounts whose input changed since: released once a write including them lands. */
  private readonly retrying = new Set<string>();
  /** Each account's entry as of the last write that included it: what a quarantined account keeps. */
  private readonly lastGood = new Map<string, E>();

  private readonly digest: (entry: E) => string;
  private readonly log: Pick<Logger, 'info' | 'warn'>;
  private readonly notify: ((namespace: string, quarantine: Quarantine | undefined) => void) | undefined;

  constructor(
    digest: (entry: E) => string,
    log: Pick<Logger, 'info' | 'warn'>,
    notify?: (namespace: string, quarantine: Quarantine | undefined) => void,
  ) {
    this.digest = digest;
    this.log = log;
    this.notify = notify;
  }

  get size(): number {
    return this.held.size;
  }

  /**
   * At compile: whether an account's new input (its digest) is the one that was refused, so it stays held back.
   * A changed input of a quarantined account is tried again.
   */
  holdsBack(ns: string, inputDigest: string): boolean {
    const q = this.held.get(ns);
    if (q?.refused === inputDigest) return true;
    if (q) this.retrying.add(ns);
    return false;
  }

  /** Whether this entry of the account is the one already refused (no need to look at it again). */
  refused(ns: string, entry: E): boolean {
    return this.held.get(ns)?.refused === this.digest(entry);
  }

  /**
   * The account's `entry` was refused on its own in `objectName`: quarantine it. `keep` is given what the account
   * keeps in routing: its last good entry when that differs from the refused one, else undefined (left out).
   */
  hold(
    ns: string,
    entry: E,
    kind: 'ConfigMap' | 'Secret',
    objectName: string,
    alone: KubeApiError,
    keep: (good: E | undefined) => void,
  ): void {
    const candidate = this.lastGood.get(ns);
    const good = candidate && this.digest(candidate) !== this.digest(entry) ? candidate : undefined;
    this.retrying.delete(ns);
    const what = kind === 'ConfigMap' ? 'routing shard ConfigMap' : 'credential bundle Secret';
    const q: Held = {
      kind,
      status: alone.status,
      reason: alone.reason ?? String(alone.status),
      message: `the apiserver refused this account's part of ${what} ${objectName} (${alone.status} ${alone.reason ?? ''}: ${refusalMessage(alone)}); ${good ? 'the gateway keeps its last good routing' : 'it is left out of routing'} until its resources change`,
      keptLastGood: good !== undefined,
      refused: this.digest(entry),
    };
    keep(good);
    const was = this.held.get(ns);
    this.held.set(ns, q);
    this.log.warn(
      { namespace: ns, kind, object: objectName, status: alone.status, reason: q.reason, keptLastGood: q.keptLastGood },
      'account quarantined: its routing was refused by the apiserver',
    );
    if (was?.message !== q.message) this.notify?.(ns, stripRefused(q));
  }

  /**
   * After a successful write of the accounts in `work`: quarantined accounts that left, or were retried with a
   * changed input, are released; the written ones become last good.
   */
  settle(work: ReadonlySet<string>, live: (ns: string) => boolean, current: (ns: string) => E | undefined): void {
    for (const [ns, q] of this.held) {
      const entry = current(ns);
      const released = !live(ns) || (this.retrying.has(ns) && entry !== undefined && this.digest(entry) !== q.refused);
      if (released) {
        this.held.delete(ns);
        this.retrying.delete(ns);
        this.log.info({ namespace: ns }, 'account released from quarantine');
        this.notify?.(ns, undefined);
      }
    }
    for (const ns of work) {
      const entry = current(ns);
      if (entry && !this.held.has(ns)) this.lastGood.set(ns, entry);
      else if (!live(ns)) this.lastGood.delete(ns);
    }
  }

  /** The quarantined accounts, without the refused digest. */
  snapshot(): ReadonlyMap<string, Quarantine> {
    return new Map([...this.held].map(([ns, q]) => [ns, stripRefused(q)]));
  }
}
