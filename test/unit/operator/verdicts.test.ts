import { describe, expect, it } from '@jest/globals';
import type { V1Secret } from '@kubernetes/client-node';
import type { ResourceInformers } from '../../../src/kube/resources.ts';
import { createAccountStateSource, type StoredVerdict, VerdictStore } from '../../../src/operator/verdicts.ts';
import { credential, inNamespace, withMetadata, withSecret } from '../../support/builders.ts';

const secret = (payload: string, rv: string): V1Secret => ({
  metadata: { name: 's', namespace: 'ns', resourceVersion: rv },
  data: { key: Buffer.from(payload).toString('base64') },
});
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
    const twoKeys: V1Secret = {
      ...secret('sk-two', '4'),
      data: { key: Buffer.from('sk-two').toString('base64'), other: Buffer.from('sk-two').toString('base64') },
    };
    expect(store.set('ns', 'c', verdict(twoKeys, { payloadKey: 'other' }))).toBe(false);
    // Invalid: no payload.
    expect(store.set('ns', 'c', verdict(undefined))).toBe(true);
    expect(store.set('ns', 'c', verdict(undefined))).toBe(false);
    expect(store.set('ns', 'c', verdict(first, { sortOrder: 3 }))).toBe(true);
    expect(store.get('ns', 'c')?.payloadSecret).toBe(first);
    expect(store.size()).toBe(1);
  });
});

describe('account state source', () => {
  // The four calls the source makes on an informer, over a list.
  const cache = <T extends { metadata?: { namespace?: string; name?: string } }>(objects: T[]) => ({
    namespaces: () => [...new Set(objects.map((o) => o.metadata?.namespace ?? ''))],
    hasNamespace: (ns: string) => objects.some((o) => o.metadata?.namespace === ns),
    list: (ns: string) => objects.filter((o) => o.metadata?.namespace === ns),
    get: (ns: string, name: string) => objects.find((o) => o.metadata?.namespace === ns && o.metadata?.name === name),
  });
  const cred = credential('c', inNamespace('ns'), withMetadata({ generation: 1 }), withSecret('s', 'key'));

  it('decodes a payload once, on first read; the budget view carries no credentials', () => {
    const s = secret('sk-lazy', '1');
    let reads = 0;
    const data = s.data!;
    // Counts reads of the Secret's base64 value, i.e. decodes.
    s.data = Object.defineProperty({}, 'key', { enumerable: true, get: () => (reads++, data.key) });
    const store = new VerdictStore();
    store.set('ns', 'c', verdict(s));
    const informers = {
      accounts: cache([]),
      credentials: cache([cred]),
      workspaces: cache([]),
      guardrails: cache([]),
      apiKeys: cache([]),
      secrets: cache([s]),
    };
    const source = createAccountStateSource(informers as unknown as ResourceInformers, store);
    const snap = source.snapshot('ns');
    expect(reads).toBe(0);
    expect(snap.credentials[0]?.verdict.payload).toBe('sk-lazy');
    expect(snap.credentials[0]?.verdict.payload).toBe('sk-lazy');
    expect(reads).toBe(1);
    const view = source.budgetView('ns');
    expect(view).not.toHaveProperty('credentials');
    expect(view).toMatchObject({ namespace: 'ns', workspaces: [], guardrails: [], apiKeys: [] });
    expect(reads).toBe(1);
  });
});
