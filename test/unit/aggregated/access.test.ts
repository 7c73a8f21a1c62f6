// Route declarations of the aggregated API: a route that declares no access, or a resource route the
// authorizer could not judge exactly, is refused when it is registered; the review's attributes come from the
// router's params and nothing else.
import { describe, expect, test } from '@jest/globals';
import Fastify from 'fastify';
import {
  access,
  attributesOf,
  checkRouteDeclaration,
  escapedSlashesAsSeparators,
  isWatch,
  resourceAccess,
  verbOf,
} from '../../../src/aggregated/access.ts';

const P = '/apis/api.byok.gateway.dev/v1';

describe('route declarations', () => {
  test('every route declares its access, checked as it is registered', async () => {
    const app = Fastify();
    app.addHook('onRoute', (route) => checkRouteDeclaration(route));
    app.get('/healthz', access({ kind: 'public' }), async () => 'ok');
    app.get(`${P}/namespaces/:ns/byokkeys/:name`, resourceAccess('byokkeys'), async () => 'ok');
    expect(() => app.get(`${P}/namespaces/:ns/byokkeys/:name/status`, async () => 'ok')).toThrow(/declares no access/);
    await app.close();
  });

  test.each([
    ['a resource route of another shape', `${P}/namespaces/:ns/byokkeys/:name/status`, resourceAccess('byokkeys')],
    ['a resource route naming another resource', `${P}/namespaces/:ns/byok`, resourceAccess('byokkeys')],
    ['a wildcard resource route', `${P}/*`, resourceAccess('byokkeys')],
    ['discovery under the group version', `${P}/namespaces/:ns/byokkeys`, access({ kind: 'discovery' })],
    ['a public route with params', '/debug/:thing', access({ kind: 'public' })],
    ['a public route under the group version', `${P}/anything`, access({ kind: 'public' })],
  ])('refuses %s', (_what, url, options) => {
    expect(() => checkRouteDeclaration({ method: 'GET', url, config: options.config })).toThrow(/aggregated API route/);
  });

  test.each([
    [`${P}/byokkeys`, resourceAccess('byokkeys')],
    [`${P}/namespaces/:ns/byok/:name`, resourceAccess('byok')],
    [P, access({ kind: 'discovery' })],
    ['/openapi/v2', access({ kind: 'discovery' })],
  ])('accepts %s', (url, options) => {
    expect(() => checkRouteDeclaration({ method: 'GET', url, config: options.config })).not.toThrow();
  });
});

describe('review attributes', () => {
  test('come from the params the router matched', () => {
    expect(attributesOf({ method: 'DELETE', params: { ns: 'acme', name: 'k-1' }, query: {} }, 'byokkeys')).toEqual({
      namespace: 'acme',
      verb: 'delete',
      group: 'api.byok.gateway.dev',
      version: 'v1',
      resource: 'byokkeys',
      name: 'k-1',
    });
    expect(attributesOf({ method: 'GET', params: {}, query: { watch: '1' } }, 'byokkeys')).toEqual({
      verb: 'watch',
      group: 'api.byok.gateway.dev',
      version: 'v1',
      resource: 'byokkeys',
    });
  });

  test.each([
    ['an empty namespace', { ns: '' }],
    ['a decoded separator', { ns: 'acme/../other' }],
    ['dots', { ns: '..' }],
    ['upper case', { ns: 'ACME' }],
    ['a matrix parameter', { ns: 'acme;x=1' }],
    ['a name without a namespace', { name: 'k-1' }],
    ['a bad name', { ns: 'acme', name: 'a/b' }],
    ['an unknown param', { ns: 'acme', other: 'x' }],
    ['a non-string param', { ns: ['acme'] }],
  ])('are refused for %s', (_what, params) => {
    expect(attributesOf({ method: 'GET', params, query: {} }, 'byokkeys')).toBeUndefined();
  });

  test('verbs as the apiserver names them; watch has one spelling for the authorizer and the handler', () => {
    expect(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'].map((m) => verbOf(m, true, false))).toEqual([
      'get',
      'get',
      'create',
      'update',
      'patch',
      'delete',
    ]);
    expect([verbOf('GET', false, true), verbOf('DELETE', false, false), verbOf('GET', false, false)]).toEqual([
      'watch',
      'deletecollection',
      'list',
    ]);
    expect([
      isWatch({ watch: 'true' }),
      isWatch({ watch: '1' }),
      isWatch({ watch: 'True' }),
      isWatch({ watch: ['true', 'false'] }),
      isWatch(undefined),
    ]).toEqual([true, true, false, false, false]);
  });
});

describe('escaped slashes', () => {
  test('are separators in the path, as the kube-apiserver reads them; the query is left alone', () => {
    expect(
      escapedSlashesAsSeparators('/apis%2fapi.byok.gateway.dev/v1/namespaces/a%2F..%2Fb/byokkeys?labelSelector=a%2Fb'),
    ).toBe('/apis/api.byok.gateway.dev/v1/namespaces/a/../b/byokkeys?labelSelector=a%2Fb');
    expect(escapedSlashesAsSeparators('/apis/api.byok.gateway.dev/v1/byokkeys')).toBe(
      '/apis/api.byok.gateway.dev/v1/byokkeys',
    );
    expect(escapedSlashesAsSeparators('/x%252F')).toBe('/x%252F');
  });
});
