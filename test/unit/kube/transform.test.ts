import { describe, expect, test } from '@jest/globals';
import type { V1Secret } from '@kubernetes/client-node';
import { LAST_APPLIED_ANNOTATION, stripBulkyMetadata } from '../../../src/kube/index.ts';

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
      managedFields: [{ manager: 'kubectl', operation: 'Apply', fieldsType: 'FieldsV1', fieldsV1: { 'f:data': { 'f:key': {} } } }],
    },
    data: { key: 'c2VjcmV0' },
  });

  test('drops managedFields and the last-applied annotation, keeps everything else', () => {
    const input = secret();
    const out = stripBulkyMetadata(input);
    expect(out.metadata).toEqual({ name: 's', namespace: 'ns', resourceVersion: '42', uid: 'u', labels: { a: 'b' }, annotations: { keep: 'me' } });
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
