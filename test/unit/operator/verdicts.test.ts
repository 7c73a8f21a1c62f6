import { describe, expect, it } from '@jest/globals';
import type { V1Secret } from '@kubernetes/client-node';
import { VerdictStore, type StoredVerdict } from '../../../src/operator/state.ts';

const secret = (payload: string, rv: string): V1Secret => ({ metadata: { name: 's', namespace: 'ns', resourceVersion: rv }, data: { key: Buffer.from(payload).toString('base64') } });
const verdict = (s: V1Secret | undefined, extra: Partial<StoredVerdict> = {}): StoredVerdict => ({
  valid: s !== undefined,
  sortOrder: 0,
  label: 'sk-...abcd',
  ...(s ? { payloadSecret: s, payloadKey: 'key' } : {}),
  generation: 1,
  secretResourceVersion: s?.metadata?.resourceVersion,
  ...extra,
});

describe('verdict store', () => {
  it('reports a change only when something the compiler uses changed; the payload is compared by content', () => {
    const store = new VerdictStore();
    const first = secret('sk-one', '1');
    expect(store.set('ns', 'c', verdict(first))).toBe(true);
    // The same Secret object again (a resync).
    expect(store.set('ns', 'c', verdict(first))).toBe(false);
    // A new Secret object (relisted, or a label added) with the same payload: nothing to recompile.
    expect(store.set('ns', 'c', verdict(secret('sk-one', '2')))).toBe(false);
    // A new payload.
    expect(store.set('ns', 'c', verdict(secret('sk-two', '3')))).toBe(true);
    // The same payload under another key of the Secret is the same payload.
    const twoKeys: V1Secret = { ...secret('sk-two', '4'), data: { key: Buffer.from('sk-two').toString('base64'), other: Buffer.from('sk-two').toString('base64') } };
    expect(store.set('ns', 'c', verdict(twoKeys, { payloadKey: 'other' }))).toBe(false);
    // Invalid: no payload.
    expect(store.set('ns', 'c', verdict(undefined))).toBe(true);
    expect(store.set('ns', 'c', verdict(undefined))).toBe(false);
    expect(store.set('ns', 'c', verdict(first, { sortOrder: 3 }))).toBe(true);
    expect(store.get('ns', 'c')?.payloadSecret).toBe(first);
    expect(store.size()).toBe(1);
  });
});
