import { describe, expect, test } from '@jest/globals';
import type { V1Secret } from '@kubernetes/client-node';
import {
  compactForCache,
  LAST_APPLIED_ANNOTATION,
  StringInterner,
  stripBulkyMetadata,
} from '../../../src/kube/index.ts';
import type { BYOKCredential } from '../../../src/schema/generated/types.ts';
import { credential as credentialOf, inNamespace, withMetadata, withStatus } from '../../support/builders.ts';

describe('stripBulkyMetadata (informer cache transform)', () => {
  const secret = (): V1Secret => ({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: 's',
      namespace: 'ns',
      resourceVersion: '42',
      uid: 'u',
      labels: { a: 'b' },
      annotations: { [LAST_APPLIED_ANNOTATION]: '{"data":{"key":"c2VjcmV0"}}', keep: 'me' },
      managedFields: [
        { manager: 'kubectl', operation: 'Apply', fieldsType: 'FieldsV1', fieldsV1: { 'f:data': { 'f:key': {} } } },
      ],
    },
    data: { key: 'c2VjcmV0' },
  });

  test('drops managedFields and the last-applied annotation, keeps everything else', () => {
    const input = secret();
    const out = stripBulkyMetadata(input);
    expect(out.metadata).toEqual({
      name: 's',
      namespace: 'ns',
      resourceVersion: '42',
      uid: 'u',
      labels: { a: 'b' },
      annotations: { keep: 'me' },
    });
    expect(out.data).toEqual({ key: 'c2VjcmV0' });
    expect(out.apiVersion).toBe('v1');
    expect(out.kind).toBe('Secret');
  });

  test('does not modify its argument', () => {
    const input = secret();
    const before = JSON.stringify(input);
    stripBulkyMetadata(input);
    expect(JSON.stringify(input)).toBe(before);
  });

  test('removes an annotations map left empty; returns objects with nothing to strip unchanged', () => {
    const only = secret();
    only.metadata!.annotations = { [LAST_APPLIED_ANNOTATION]: '{}' };
    expect(stripBulkyMetadata(only).metadata).not.toHaveProperty('annotations');
    const clean: V1Secret = { metadata: { name: 'c', namespace: 'ns', annotations: { x: 'y' } } };
    expect(stripBulkyMetadata(clean)).toBe(clean);
  });
});

describe("compactForCache (the operator informers' default transform)", () => {
  const credential = (name: string): BYOKCredential =>
    credentialOf(
      name,
      inNamespace(['acct', 'one'].join('-')),
      withMetadata({
        resourceVersion: '7',
        creationTimestamp: '2026-01-01T00:00:00Z' as unknown as Date,
        managedFields: [{ manager: 'byok-operator' }],
      }),
      withStatus<BYOKCredential>({
        createdAt: ['2026-01-01', 'T00:00:00Z'].join(''),
        conditions: [
          {
            type: 'Ready',
            status: 'True',
            reason: 'Ready',
            message: ['the credential', 'is valid'].join(' '),
            lastTransitionTime: '2026-01-02T00:00:00Z',
            observedGeneration: 1,
          },
        ],
      }),
    );

  test('keeps every value (minus what stripBulkyMetadata drops) and does not modify its argument', () => {
    // Sharing one copy of a string is invisible to readers (the heap effect is measured by
    // bench/lib/memory-breakdown.ts); what must hold is that every object reads exactly as before.
    for (const name of ['a', 'b', 'c']) {
      const input = credential(name);
      const before = JSON.stringify(input);
      const out = compactForCache(input);
      expect(JSON.stringify(input)).toBe(before);
      const { managedFields: _dropped, ...meta } = input.metadata!;
      expect(out).toEqual({ ...input, metadata: meta });
      expect(out.status!.conditions).not.toBe(input.status!.conditions);
    }
  });

  test('equal condition lists and label sets become one frozen object shared by every cached copy', () => {
    const [a, b] = ['a', 'b'].map((name) => compactForCache(credential(name)));
    expect(a!.status!.conditions).toBe(b!.status!.conditions);
    expect(Object.isFrozen(a!.status!.conditions) && Object.isFrozen(a!.status!.conditions![0])).toBe(true);
    // Shared, so a reader that tried to change it would throw instead of changing another object.
    expect(() => (a!.status!.conditions![0]!.message = 'changed')).toThrow(TypeError);
    const other = credential('c');
    other.status!.conditions![0]!.lastTransitionTime = '2026-01-03T00:00:00Z';
    expect(compactForCache(other).status!.conditions).not.toBe(a!.status!.conditions);
    const secret = (n: string) =>
      compactForCache({
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: n, namespace: 'acct-one', labels: { 'byok.gateway.dev/credential-secret': 'true' } },
        type: 'Opaque',
      } as V1Secret);
    expect(secret('x').metadata!.labels).toBe(secret('y').metadata!.labels);
    expect(secret('x').metadata!.labels).toEqual({ 'byok.gateway.dev/credential-secret': 'true' });
  });

  test('a Secret keeps everything but its uid; a credential keeps its uid', () => {
    const input = {
      apiVersion: 'v1',
      kind: 'Secret',
      type: 'Opaque',
      metadata: { name: 'openai-key', namespace: 'acct-one', uid: 'u-1', resourceVersion: '9' },
      data: { key: 'c2stMQ==' },
    } as V1Secret;
    const out = compactForCache(input);
    expect(out).toEqual({ ...input, metadata: { name: 'openai-key', namespace: 'acct-one', resourceVersion: '9' } });
    expect(input.metadata!.uid).toBe('u-1');
    const cred = credential('a');
    cred.metadata!.uid = 'u-2';
    expect(compactForCache(cred).metadata!.uid).toBe('u-2');
  });

  test('the interner is bounded and stays correct after it starts over', () => {
    const interner = new StringInterner(2);
    expect(interner.intern('x')).toBe('x');
    expect(interner.intern('y')).toBe('y');
    expect(interner.intern('z')).toBe('z');
    expect(interner.intern('x')).toBe('x');
    expect(interner.intern(undefined)).toBeUndefined();
  });
});
