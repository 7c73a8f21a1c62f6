// Front-proxy trust: only a client certificate from the request-header CA, for client auth, with an allowed CN.

import { X509Certificate } from 'node:crypto';
import type { DetailedPeerCertificate } from 'node:tls';
import { describe, expect, test } from '@jest/globals';
import {
  FRONT_PROXY_RECHECK_MS,
  frontProxyVerdict,
  type RequestHeaderConfig,
  userFromHeaders,
} from '../../../src/aggregated/auth.ts';
import { createCertificateAuthority } from '../../../src/controlplane/pki.ts';

function peer(certPem: string): DetailedPeerCertificate {
  const c = new X509Certificate(certPem);
  return { raw: c.raw, fingerprint256: c.fingerprint256 } as unknown as DetailedPeerCertificate;
}

describe('front-proxy authentication', () => {
  test('trusts the request-header CA with an allowed CN only', async () => {
    const frontProxyCa = await createCertificateAuthority('front-proxy-ca');
    const otherCa = await createCertificateAuthority('cluster-ca');
    const config: RequestHeaderConfig = {
      clientCaPem: frontProxyCa.certPem,
      allowedNames: ['front-proxy-client'],
      usernameHeaders: ['x-remote-user'],
      uidHeaders: ['x-remote-uid'],
      groupHeaders: ['x-remote-group'],
      extraHeaderPrefixes: ['x-remote-extra-'],
    };
    const good = await frontProxyCa.issue({ commonName: 'front-proxy-client', usage: 'client' });
    const wrongName = await frontProxyCa.issue({ commonName: 'someone-else', usage: 'client' });
    const serverUsage = await frontProxyCa.issue({ commonName: 'front-proxy-client', usage: 'server' });
    const wrongCa = await otherCa.issue({ commonName: 'front-proxy-client', usage: 'client' });
    expect(frontProxyVerdict(peer(good.certPem), config).verdict).toBe(true);
    expect(frontProxyVerdict(peer(wrongName.certPem), config).verdict).toBe(false);
    expect(frontProxyVerdict(peer(serverUsage.certPem), config).verdict).toBe(false);
    expect(frontProxyVerdict(peer(wrongCa.certPem), config).verdict).toBe(false);
    expect(frontProxyVerdict(undefined, config).verdict).toBe(false);
    expect(frontProxyVerdict(peer(wrongName.certPem), { ...config, allowedNames: [] }).verdict).toBe(true);
    // A verdict is kept per connection until it may change: a minute at most, never past the chain's first expiry.
    const now = Date.now();
    expect(frontProxyVerdict(peer(good.certPem), config, now)).toEqual({
      verdict: true,
      until: now + FRONT_PROXY_RECHECK_MS,
    });
    // The chain's first expiry: the CA and the leaf were made at different instants, so either may end first.
    const expiry = Math.min(
      Date.parse(new X509Certificate(good.certPem).validTo),
      Date.parse(new X509Certificate(frontProxyCa.certPem).validTo),
    );
    expect(frontProxyVerdict(peer(good.certPem), config, expiry - 1_000)).toEqual({ verdict: true, until: expiry });
    expect(frontProxyVerdict(peer(good.certPem), config, expiry + 1_000).verdict).toBe(false);
    expect(frontProxyVerdict(peer(wrongCa.certPem), config, now)).toEqual({
      verdict: false,
      until: now + FRONT_PROXY_RECHECK_MS,
    });
  });

  test('reads user, uid, every group header and unescaped extras', () => {
    const config: RequestHeaderConfig = {
      clientCaPem: '',
      allowedNames: [],
      usernameHeaders: ['x-remote-user'],
      uidHeaders: ['x-remote-uid'],
      groupHeaders: ['x-remote-group'],
      extraHeaderPrefixes: ['x-remote-extra-'],
    };
    const user = userFromHeaders(
      {
        'x-remote-user': ['alice'],
        'x-remote-uid': ['u1'],
        'x-remote-group': ['a, b', 'c'],
        'x-remote-extra-scopes%2fread': ['x'],
      },
      config,
    );
    expect(user).toEqual({ username: 'alice', uid: 'u1', groups: ['a, b', 'c'], extra: { 'scopes/read': ['x'] } });
    expect(userFromHeaders({}, config)).toBeUndefined();
  });
});
