// Watch events for byokkeys, driven by the read model's change notifications. resourceVersions are the backing
// BYOKCredentials' (etcd revisions), so a client can resume from the last object it saw. A bounded buffer of
// recent events serves `?watch=true&resourceVersion=<rv>`; older versions get 410 Expired, as from the apiserver.
import type { ApiState, CredentialChange, CredentialEntry } from '../service/state.ts';

export interface HubEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  entry: CredentialEntry;
  /** The resourceVersion the event carries. */
  rv: string;
  /** The highest resourceVersion this replica had seen once this event arrived. */
  maxAfter: bigint;
}

const toBig = (rv: string | undefined): bigint => (rv !== undefined && /^\d+$/.test(rv) ? BigInt(rv) : 0n);

export class ExpiredError extends Error {}

export class WatchHub {
  private readonly buffer: HubEvent[] = [];
  private readonly capacity: number;
  private readonly listeners = new Set<(e: HubEvent) => void>();
  private maxRv = 0n;
  /** maxAfter of the newest event dropped from the buffer: a resume from before it cannot be served. */
  private droppedUpTo = -1n;
  private readonly unsubscribe: () => void;

  constructor(state: ApiState, capacity = 2048) {
    this.capacity = capacity;
    for (const e of state.allCredentials()) this.maxRv = bigMax(this.maxRv, toBig(e.obj.metadata.resourceVersion));
    this.unsubscribe = state.onCredentialChange((c) => this.push(c));
  }

  close(): void {
    this.unsubscribe();
    this.listeners.clear();
  }

  /** The list resourceVersion: everything this replica has seen. */
  currentRv(): string {
    return String(this.maxRv);
  }

  private push(c: CredentialChange): void {
    let rv = toBig(c.obj.metadata.resourceVersion);
    // An own delete is observed with the last known object: give it a version after everything seen so far.
    if (c.type === 'DELETED' && rv <= this.maxRv) rv = this.maxRv + 1n;
    this.maxRv = bigMax(this.maxRv, rv);
    const ev: HubEvent = { type: c.type, entry: c.entry, rv: String(rv), maxAfter: this.maxRv };
    this.buffer.push(ev);
    if (this.buffer.length > this.capacity) this.droppedUpTo = (this.buffer.shift() as HubEvent).maxAfter;
    for (const l of this.listeners) l(ev);
  }

  /**
   * Subscribes from a resourceVersion: the buffered events that arrived after this replica first reached `rv`,
   * then live events. Ordering is by arrival, not by number: an own write observed ahead of the watch stream
   * makes versions arrive out of order, and a resume may then repeat an event (harmless), never skip one.
   */
  subscribe(fromRv: string, listener: (e: HubEvent) => void): { replay: HubEvent[]; stop: () => void } {
    const from = toBig(fromRv);
    if (from < this.droppedUpTo) throw new ExpiredError(`too old resource version: ${fromRv} (${String(this.droppedUpTo)})`);
    const idx = this.buffer.findIndex((e) => e.maxAfter >= from);
    const replay = idx < 0 ? [] : this.buffer.slice(this.buffer[idx]?.maxAfter === from ? idx + 1 : idx);
    this.listeners.add(listener);
    return { replay, stop: () => this.listeners.delete(listener) };
  }
}

function bigMax(a: bigint, b: bigint): bigint {
  return a > b ? a : b;
}
