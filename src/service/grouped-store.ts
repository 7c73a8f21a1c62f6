// The read model's per-kind maps: values by group (an account namespace, or an index value such as a key hash),
// then by name. One class instead of a hand-written Map<string, Map<string, T>> per kind.

export class GroupedStore<T> {
  private readonly groups = new Map<string, Map<string, T>>();

  /** Stores `value`; returns the value it replaced, if any. */
  set(group: string, name: string, value: T): T | undefined {
    let members = this.groups.get(group);
    if (!members) this.groups.set(group, (members = new Map()));
    const old = members.get(name);
    members.set(name, value);
    return old;
  }

  /** Removes one value; returns it. A group goes with its last value, so deleted accounts leave nothing behind. */
  delete(group: string, name: string): T | undefined {
    const members = this.groups.get(group);
    const old = members?.get(name);
    if (!members || old === undefined) return undefined;
    members.delete(name);
    if (members.size === 0) this.groups.delete(group);
    return old;
  }

  get(group: string, name: string): T | undefined {
    return this.groups.get(group)?.get(name);
  }

  /** The values of one group, in insertion order (empty for an unknown group). */
  values(group: string): Iterable<T> {
    return this.groups.get(group)?.values() ?? [];
  }
}
