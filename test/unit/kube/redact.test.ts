import { describe, expect, test } from '@jest/globals';
import { namespacedPath, objectPath, redactText, rvNewer } from '../../../src/kube/index.ts';

describe('redactText', () => {
  test('scrubs literal secrets and key-shaped strings, keeps hashes and ids readable', () => {
    const hash = 'a'.repeat(64);
    const id = '6f2d6c1e-4c56-5b0e-9d8c-2a7b0c3e1f40';
    const out = redactText(`bad key sk-or-v1-abcdefghijklmnop and ${hash} ${id} CANARYzzzz9`, ['CANARYzzzz9']);
    expect(out).not.toContain('abcdefghijklmnop');
    expect(out).not.toContain('CANARY');
    expect(out).toContain(hash);
    expect(out).toContain(id);
  });
  test('scrubs PEM blocks and long base64 runs', () => {
    expect(redactText('-----BEGIN PRIVATE KEY-----\nMIIEv\n-----END PRIVATE KEY-----')).toBe('[REDACTED]');
    expect(redactText('x QWxhZGRpbjpvcGVuIHNlc2FtZQ9876543210abcdef y')).toBe('x [REDACTED] y');
  });
});

describe('resource versions and paths', () => {
  test('rvNewer compares numerically', () => {
    expect(rvNewer('10', '9')).toBe(true);
    expect(rvNewer('9', '10')).toBe(false);
    expect(rvNewer('9', '9')).toBe(false);
    expect(rvNewer('9', undefined)).toBe(true);
    expect(rvNewer(undefined, '9')).toBe(false);
  });
  test('paths', () => {
    expect(namespacedPath('/api/v1/secrets', 'a')).toBe('/api/v1/namespaces/a/secrets');
    expect(namespacedPath('/apis/byok.gateway.dev/v1alpha1/workspaces', undefined)).toBe(
      '/apis/byok.gateway.dev/v1alpha1/workspaces',
    );
    expect(objectPath('byok.gateway.dev/v1alpha1', 'BYOKCredential', 'n', 'c', 'status')).toBe(
      '/apis/byok.gateway.dev/v1alpha1/namespaces/n/byokcredentials/c/status',
    );
    expect(objectPath('coordination.k8s.io/v1', 'Lease', 'n', 'l')).toBe(
      '/apis/coordination.k8s.io/v1/namespaces/n/leases/l',
    );
  });
});
