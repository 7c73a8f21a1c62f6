// The egress policy for tenant URLs: every forbidden address class, in every spelling the URL parser
// accepts, refused unless allow-listed; public hosts pass.
import { describe, expect, test } from '@jest/globals';
import {
  parseEgressAllowList,
  resolvedAddressProblem,
  urlEgressProblem,
  validatePayload,
} from '../../../src/domain/index.ts';

const url = (host: string) => `https://${host}:8443/openai/deployments/d/chat/completions?api-version=2024-10-21`;

describe('egress policy', () => {
  test.each([
    ['127.0.0.1', 'loopback'],
    ['2130706433', 'loopback'],
    ['0177.0.0.1', 'loopback'],
    ['0x7f000001', 'loopback'],
    ['127.1', 'loopback'],
    ['localhost', 'loopback'],
    ['localhost.', 'loopback'],
    ['api.localhost', 'loopback'],
    ['[::1]', 'loopback'],
    ['[::ffff:127.0.0.1]', 'loopback'],
    ['[::ffff:7f00:1]', 'loopback'],
    ['[64:ff9b::7f00:1]', 'loopback'],
    ['0.0.0.0', 'unspecified'],
    ['[::]', 'unspecified'],
    ['10.0.0.5', 'private'],
    ['172.16.3.4', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['[fd00:ec2::254]', 'private'],
    ['100.64.0.1', 'carrier-grade NAT'],
    ['169.254.169.254', 'link-local'],
    ['[fe80::1]', 'link-local'],
    ['224.0.0.1', 'multicast'],
    ['[ff02::1]', 'multicast'],
    ['metadata.google.internal', 'metadata'],
    ['kubernetes', 'single-label'],
    ['kubernetes.default.svc', 'cluster-internal'],
    ['api.default.svc.cluster.local', 'cluster-internal'],
    ['printer.local', 'cluster-internal'],
  ])('%s is refused (%s)', (host, why) => {
    const problem = urlEgressProblem(url(host));
    expect(problem).toContain('must not point at a');
    expect(problem).toContain(why);
  });

  // IPv6 forms that carry an IPv4 address are judged by it; names keep their verdict whatever the dots.
  test.each([
    ['[::127.0.0.1]', 'loopback (IPv4-compatible)'],
    ['[::ffff:0:127.0.0.1]', 'loopback (IPv4-translated)'],
    ['[2002:7f00:1::]', 'loopback (6to4)'],
    ['[2002:a9fe:a9fe::1]', 'link-local (cloud metadata) (6to4)'],
    ['[2001:0:4136:e378:8000:63bf:80ff:fffe]', 'loopback (Teredo)'],
    ['[2001:0:a00:1::1]', 'private (Teredo)'],
    ['[64:ff9b:1::7f00:1]', 'NAT64 local-use'],
    ['[64:ff9b:1:7f00:1::]', 'NAT64 local-use'],
    ['[fec0::1]', 'site-local'],
    ['[100::1]', 'discard-only'],
    ['[2001:db8::1]', 'documentation'],
    ['[3fff::1]', 'documentation'],
    ['192.0.2.1', 'documentation'],
    ['198.51.100.7', 'documentation'],
    ['203.0.113.7', 'documentation'],
    ['[4000::1]', 'outside global unicast'],
    ['[::1:0:0:1]', 'outside global unicast'],
    ['localhost..', 'loopback'],
    ['LOCALHOST...', 'loopback'],
    ['metadata.google.internal..', 'metadata'],
    ['kubernetes..', 'single-label'],
    ['127.0.0.1..', 'loopback'],
    ['0x7f.1..', 'loopback'],
    ['%6c%6fcalhost', 'loopback'],
    ['\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54', 'loopback'],
    ['\uff11\uff12\uff17\u30020.0.1', 'loopback'],
  ])('%s is refused (%s)', (host, why) => {
    expect(urlEgressProblem(url(host))).toContain(why);
  });

  test('a URL the policy cannot read is refused, not waved through (an IPv6 zone id makes it unparseable)', () => {
    expect(urlEgressProblem(url('[fe80::1%25eth0]'))).toMatch(/egress policy can read/);
  });

  test.each([
    '[::ffff:8.8.8.8]',
    '[2002:808:808::1]',
    '[64:ff9b::808:808]',
    '[2001:0:808:808:0:0:f7f7:f7f7]',
    'example.com..',
  ])('%s passes (a public IPv4 inside)', (host) => {
    expect(urlEgressProblem(url(host))).toBeNull();
  });

  test.each([
    ['203.0.113.7/', /prefix length/],
    ['fd00::1/', /prefix length/],
    ['1.2.3.4/08', /prefix length/],
    ['10.0.0.0/+8', /prefix length/],
    ['10.0.0.0/8.0', /prefix length/],
    ['10.0.0.0/ 8', /prefix length/],
    ['10.0.0.0/0x8', /prefix length/],
    ['10.0.0.0/-0', /prefix length/],
    ['10.0.0.0/8/8', /prefix length/],
    ['fd00::/129', /prefix length/],
    ['10.1.2.3/8', /beyond its \/8 prefix: write the network address, 10\.0\.0\.0\/8/],
    ['fd00::1/8', /fd00:0:0:0:0:0:0:0\/8/],
    ['fe80::1%eth0', /zone id/],
    ['010.0.0.1', /dotted decimal/],
    ['10.1', /dotted decimal/],
    ['0x0a000001', /dotted decimal/],
    ['/8', /neither/],
    ['[10.0.0.1]', /neither/],
    ['..', /not a host name/],
  ])('the allow-list refuses %s', (entry, message) => {
    expect(() => parseEgressAllowList([entry])).toThrow(message);
  });

  test('an allow-listed IPv4 range does not cover the IPv6 forms that embed it (list those too)', () => {
    const allow = parseEgressAllowList(['10.0.0.0/8', 'localhost.']);
    expect(urlEgressProblem(url('10.1.2.3'), allow)).toBeNull();
    expect(urlEgressProblem(url('[::ffff:10.1.2.3]'), allow)).toContain('private (IPv4-mapped)');
    expect(urlEgressProblem(url('[::ffff:10.1.2.3]'), parseEgressAllowList(['::ffff:10.0.0.0/104']))).toBeNull();
    expect(urlEgressProblem(url('localhost..'), allow)).toBeNull();
  });

  test.each([
    'example.openai.azure.com',
    'oauth2.googleapis.com',
    '8.8.8.8',
    '172.32.0.1',
    '[2001:4860:4860::8888]',
    '11.0.0.1',
  ])('%s passes', (host) => {
    expect(urlEgressProblem(url(host))).toBeNull();
  });

  test('an operator allow-list lets exactly what it names through', () => {
    const allow = parseEgressAllowList(['127.0.0.1/32', 'fd00::/8', 'localhost', '10.1.0.0/16, internal.example']);
    expect(urlEgressProblem(url('127.0.0.1'), allow)).toBeNull();
    expect(urlEgressProblem(url('127.0.0.2'), allow)).not.toBeNull();
    expect(urlEgressProblem(url('[fd12::1]'), allow)).toBeNull();
    expect(urlEgressProblem(url('localhost'), allow)).toBeNull();
    expect(urlEgressProblem(url('10.1.200.3'), allow)).toBeNull();
    expect(urlEgressProblem(url('10.2.0.1'), allow)).not.toBeNull();
    // An allow-listed name is trusted as it resolves; any other name is checked on every address.
    expect(resolvedAddressProblem('internal.example', '10.9.9.9', allow)).toBeNull();
    expect(resolvedAddressProblem('rebound.example.com', '127.0.0.1', parseEgressAllowList([]))).toBe('loopback');
    expect(resolvedAddressProblem('rebound.example.com', '::ffff:169.254.169.254', parseEgressAllowList([]))).toContain(
      'link-local',
    );
    expect(() => parseEgressAllowList(['10.0.0.0/33'])).toThrow(/prefix/);
    expect(() => parseEgressAllowList(['not a host!'])).toThrow(/neither/);
  });

  test('both payload fields a tenant points us at are checked: an Azure endpoint_url and a Vertex token_uri', () => {
    const azure = validatePayload(
      'azure',
      JSON.stringify([
        { api_key: 'k', model_slug: 'openai/gpt-4o', endpoint_url: url('169.254.169.254'), model_id: 'd' },
      ]),
    );
    expect(azure).toMatchObject({
      ok: false,
      errors: [{ field: '[0].endpoint_url', message: expect.stringContaining('link-local') }],
    });
    const doc = {
      type: 'service_account',
      project_id: 'proj-egress-1',
      private_key_id: 'abcdef0123456789',
      private_key: '-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n',
      client_email: 'x@p.iam.gserviceaccount.com',
      client_id: '1',
      auth_uri: 'https://accounts.google.com/o/oauth2/auth',
      token_uri: 'https://[::1]:9/token',
      auth_provider_x509_cert_url: 'https://www.googleapis.com/oauth2/v1/certs',
      client_x509_cert_url: 'https://www.googleapis.com/robot/v1/metadata/x509/x',
    };
    expect(validatePayload('google-vertex', JSON.stringify(doc))).toMatchObject({
      ok: false,
      errors: [{ field: 'token_uri', message: expect.stringContaining('loopback') }],
    });
    expect(validatePayload('google-vertex', JSON.stringify(doc), { egress: parseEgressAllowList(['::1']) }).ok).toBe(
      true,
    );
  });
});
