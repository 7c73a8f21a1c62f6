// Delivery marks of the account cache (src/operator/compile/accounts.ts): a credential's delivery
// version moves with its envelope and with its compiled routing entry, and nothing else.
import { describe, expect, test } from '@jest/globals';
import type { CompiledCredential } from '../../../../src/domain/compiled.ts';
import { deliveryVersion, routingMarks } from '../../../../src/operator/compile/accounts.ts';
import { cred as domainCred } from '../../../support/fixtures/domain.ts';

const cred = (id: string, over: Partial<CompiledCredential> = {}): CompiledCredential => domainCred(id, 'openai', over);

describe('routing marks', () => {
  test('an unchanged entry keeps its mark (and its run); a changed or new one gets the current run', () => {
    const first = routingMarks([cred('a'), cred('b')], ['a', 'b'], undefined, 3);
    expect(first.get('a')!.since).toBe(3);
    const next = routingMarks(
      [cred('a'), cred('b', { allowedModels: ['openai/gpt-4o'] }), cred('c')],
      ['a', 'b', 'c'],
      first,
      9,
    );
    expect(next.get('a')).toBe(first.get('a'));
    expect(next.get('b')!.since).toBe(9);
    expect(next.get('b')!.digest).not.toBe(first.get('b')!.digest);
    expect(next.get('c')!.since).toBe(9);
  });

  const changes: [string, Partial<CompiledCredential>][] = [
    ['allowedModels', { allowedModels: ['openai/gpt-4o'] }],
    ['disabled', { disabled: true }],
    ['isFallback', { isFallback: true }],
    ['sortOrder', { sortOrder: 2 }],
  ];
  test.each(changes)('%s moves the delivery version; the same entry and envelope keep it', (_field, change) => {
    const before = routingMarks([cred('a')], ['a'], undefined, 1).get('a')!;
    const after = routingMarks([cred('a', change)], ['a'], undefined, 1).get('a')!;
    const again = routingMarks([cred('a')], ['a'], undefined, 5).get('a')!;
    expect(deliveryVersion('env1', after)).not.toBe(deliveryVersion('env1', before));
    expect(deliveryVersion('env1', again)).toBe(deliveryVersion('env1', before));
    expect(deliveryVersion('env2', before)).not.toBe(deliveryVersion('env1', before));
    expect(deliveryVersion('env1', before)).toMatch(/^[0-9a-f]{16}$/);
  });
});
