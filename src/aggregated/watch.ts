// Watch events of one resource, driven by its storage's change notifications (the read model's). resourceVersions
// are the backing objects' (etcd revisions), so a client can resume from the last object it saw. A bounded buffer
// of recent events serves `?watch=true&resourceVersion=<rv>`; older versions get 410 Expired, as from the apiserver.
import type { Change, ChangeSource } from './handlers/resource.ts';

export interface HubEvent<E> {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  entry: E;
  /** The resourceVersion the event carries. */
  rv: string;
  /** The highest resourceVersion this replica had seen once this event arrived. */
  maxAfter: bigint;
}

const toBig = (rv: string | undefined): bigint => (rv !== undefined && /^\d+$/.test(rv) ? BigInt(rv) : 0n);

export class ExpiredError extends Error {}

export class WatchHub<E> {
  private readonly buffer: HubEvent<E>[] = [];
  private readonly capacity: number;
  private readonly listeners = new Set<(e: HubEvent<E>) => void>();
  private maxRv = 0n;
  /** maxAfter of the newest event dropped from the buffer: a resume from before it cannot be served. */
  private droppedUpTo = -1n;
  private readonly unsubscribe: () => void;

  constructor(source: ChangeSource<E>, capacity = 2048) {
    this.capacity = capacity;
    for (const e of source.entries()) this.maxRv = bigMax(this.maxRv, toBig(source.rvOf(e)));
    this.unsubscribe = source.subscribe((c) => this.push(c));
  }

  close(): void {
    this.unsubscribe();
    this.listeners.clear();
  }

  /** The list resourceVersion: everything this replica has seen. */
  currentRv(): string {
    return String(this.maxRv);
  }

  private push(c: Change<E>): void {
    let rv = toBig(c.rv);
    // An own delete is observed with the last known object: give it a version after everything seen so far.
    if (c.type === 'DELETED' && rv <= this.maxRv) rv = this.maxRv + 1n;
    this.maxRv = bigMax(this.maxRv, rv);
    const ev: HubEvent<E> = { type: c.type, entry: c.entry, rv: String(rv), maxAfter: this.maxRv };
    this.buffer.push(ev);
    if (this.buffer.length > this.capacity) this.droppedUpTo = (this.buffer.shift() as HubEvent<E>).maxAfter;
    for (const l of this.listeners) l(ev);
  }

  /**
   * Subscribes from a resourceVersion: the buffered events that arrived after this replica first reached `rv`,
   * then live events. Ordering is by arrival, not by number: an own write observed ahead of the watch stream
   * makes versions arrive out of order, and a resume may then repeat an event (harmless), never skip one.
   */
  subscribe(fromRv: string, listener: (e: HubEvent<E>) => void): { replay: HubEvent<E>[]; stop: () => void } {
    const from = toBig(fromRv);
    if (from < this.droppedUpTo)
      throw new ExpiredError(`too old resource version: ${fromRv} (${String(this.droppedUpTo)})`);
    const idx = this.buffer.findIndex((e) => e.maxAfter >= from);
    const replay = idx < 0 ? [] : this.buffer.slice(this.buffer[idx]?.maxAfter === from ? idx + 1 : idx);
    this.listeners.add(listener);
    return { replay, stop: () => this.listeners.delete(listener) };
  }
}

function bigMax(a: bigint, b: bigint): bigint {
  return a > b ? a : b;
}
