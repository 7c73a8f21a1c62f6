// Cached upstream auth is keyed by who proved possession of the key, and token exchanges never follow
// a redirect. Against the loopback HTTPS upstream, whose token endpoint verifies every JWT assertion
// against the registered public key, as Google's does.

import { generateKeyPairSync } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { Agent } from 'node:https';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { type ProviderPayload, parseEgressAllowList, validatePayload } from '../../../src/domain/index.ts';
import { parseCatalog, type UpstreamSpec } from '../../../src/gateway/catalog.ts';
import { type AuthOwner, createUpstreamAuth, UpstreamSetupError } from '../../../src/gateway/upstream.ts';
import { publicKeyOf, startUpstreams, type Upstreams } from '../../support/upstreams.ts';

const keyPair = () =>
  generateKeyPairSync('rsa', {
    modulusLength: 2048,
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });

describe('upstream auth caches and token exchanges', () => {
  let up: Upstreams;
  let spec: UpstreamSpec;
  let agent: Agent;
  let plain: Server;
  let plainHits = 0;
  const victim = keyPair();
  const attacker = keyPair();
  const EMAIL = 'victim-sa@victim-project.iam.gserviceaccount.com';

  const document = (privateKey: string, tokenPath = '/token', project = 'victim-project') => {
    const parsed = validatePayload(
      'google-vertex',
      JSON.stringify({
        type: 'service_account',
        project_id: project,
        private_key_id: 'b0b0b0b0b0b0b0b0',
        private_key: privateKey,
        client_email: EMAIL,
        client_id: '42',
        auth_uri: 'https://accounts.google.com/o/oauth2/auth',
        token_uri: `${up.base}${tokenPath}`,
        auth_provider_x509_cert_url: 'https://www.googleapis.com/oauth2/v1/certs',
        client_x509_cert_url: 'https://www.googleapis.com/robot/v1/metadata/x509/victim',
        region: 'us-central1',
      }),
      { egress: parseEgressAllowList(['127.0.0.1/32']) },
    );
    if (!parsed.ok) throw new Error(JSON.stringify(parsed.errors));
    return parsed.payload as ProviderPayload;
  };
  const victimOwner: AuthOwner = { kind: 'credential', account: 'tenant-b', credentialId: 'cred-b' };
  const attackerOwner: AuthOwner = { kind: 'credential', account: 'tenant-a', credentialId: 'cred-a' };

  beforeAll(async () => {
    up = await startUpstreams();
    up.vertexKeys.set(EMAIL, publicKeyOf(victim.privateKey));
    agent = new Agent({ ca: up.caPem });
    spec = parseCatalog(
      JSON.stringify({
        format: 'byok-gateway-catalog/v1',
        models: [
          {
            model: 'google/gemini-2.5-pro',
            endpoints: [
              {
                id: 'google-vertex',
                provider: 'google-vertex',
                pricing: { kind: 'per-request', usdPerRequest: '0.01' },
                upstream: { baseUrl: `${up.base}/vertex/v1/projects/{project}/locations/{location}/endpoints/openapi` },
              },
            ],
          },
        ],
      }),
    ).upstream('google/gemini-2.5-pro', 'google-vertex')!;
    plain = createServer((req, res) => {
      plainHits++;
      req.resume();
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ access_token: 'ya29.from-plain-http', expires_in: 3600 }));
    });
    await new Promise<void>((r) => plain.listen(0, '127.0.0.1', r));
  });

  afterAll(async () => {
    agent.destroy();
    await up.close();
    await new Promise<void>((r) => plain.close(() => r()));
  });

  test("a tenant copying another tenant's public service-account fields with its own key never rides its token", async () => {
    const auth = createUpstreamAuth({ agent });
    // The victim's request exchanges its key and caches the token.
    const victimRequest = await auth.prepare(
      victimOwner,
      document(victim.privateKey),
      spec,
      'google/gemini-2.5-pro',
      {},
    );
    expect(victimRequest.headers.authorization).toMatch(/^Bearer ya29\.test-\d+$/);
    const exchanges = up.tokenExchanges;
    // Same client_email, private_key_id and token_uri, the attacker's own private key: its own exchange, refused.
    await expect(
      auth.prepare(attackerOwner, document(attacker.privateKey), spec, 'google/gemini-2.5-pro', {}),
    ).rejects.toMatchObject({ name: 'UpstreamSetupError', status: 400 });
    // Even with the victim's exact document in another account or credential, possession is proven again, never shared.
    const copied = await auth.prepare(attackerOwner, document(victim.privateKey), spec, 'google/gemini-2.5-pro', {});
    expect(copied.headers.authorization).not.toBe(victimRequest.headers.authorization);
    expect(up.tokenExchanges).toBe(exchanges + 1);
    // The victim's own next request still uses its cached token: no new exchange.
    const again = await auth.prepare(victimOwner, document(victim.privateKey), spec, 'google/gemini-2.5-pro', {});
    expect(again.headers.authorization).toBe(victimRequest.headers.authorization);
    expect(up.tokenExchanges).toBe(exchanges + 1);
    // A project_id pointed elsewhere with the same key is a different payload: a different cache entry.
    await auth.prepare(
      victimOwner,
      document(victim.privateKey, '/token', 'other-project'),
      spec,
      'google/gemini-2.5-pro',
      {},
    );
    expect(up.tokenExchanges).toBe(exchanges + 2);
  });

  test('a token endpoint that redirects (here to plain http on loopback) is refused, never followed', async () => {
    up.tokenRedirectTo = `http://127.0.0.1:${(plain.address() as AddressInfo).port}/token`;
    const auth = createUpstreamAuth({ agent });
    const err = await auth
      .prepare(victimOwner, document(victim.privateKey, '/token-redirect'), spec, 'google/gemini-2.5-pro', {})
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UpstreamSetupError);
    expect(err).toMatchObject({ status: 307, message: 'token exchange refused (HTTP 307)' });
    expect(plainHits).toBe(0);
    // A redirect to the right place is not followed either: the exchange counter does not move.
    up.tokenRedirectTo = undefined;
    const before = up.tokenExchanges;
    await expect(
      auth.prepare(victimOwner, document(victim.privateKey, '/token-redirect'), spec, 'google/gemini-2.5-pro', {}),
    ).rejects.toMatchObject({ status: 307 });
    expect(up.tokenExchanges).toBe(before);
  });

  test('transport failures of a token exchange carry no network detail', async () => {
    const auth = createUpstreamAuth({ agent });
    const closed = document(victim.privateKey);
    const payload = {
      ...closed,
      serviceAccount: {
        ...(closed as unknown as { serviceAccount: Record<string, string> }).serviceAccount,
        token_uri: 'https://127.0.0.1:9/token',
      },
    } as ProviderPayload;
    await expect(auth.prepare(victimOwner, payload, spec, 'google/gemini-2.5-pro', {})).rejects.toMatchObject({
      message: 'token exchange failed: upstream unreachable',
    });
  });
});
