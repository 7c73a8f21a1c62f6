// Who may call which route of the aggregated API. Every route declares its access when it is registered (public,
// discovery, or a resource), and the decision is made on the route the router matched and the params it parsed,
// never on a second parse of the raw URL: a percent-escape the router decodes (`v%31`, `%61pis`) reaches the same
// declaration as the plain spelling, so it gets the same SubjectAccessReview. A route that declares
// nothing cannot be registered, and a resource route must have the one URL shape the authorizer understands.

import type { TLSSocket } from 'node:tls';
import type { FastifyInstance, FastifyRequest, RouteOptions } from 'fastify';
import type { Logger } from 'pino';
import type { DelegatedAuth, ResourceAttributes, UserInfo } from './auth.ts';
import { AGG_GROUP, AGG_PREFIX, AGG_VERSION } from './group.ts';
import { StatusError } from './status.ts';

export type RouteAccess =
  /** Health probes: no identity needed (the kubelet calls them). */
  | { readonly kind: 'public' }
  /** Discovery and OpenAPI: any authenticated user, like the apiserver's system:discovery. */
  | { readonly kind: 'discovery' }
  /** A resource under the group version: a SubjectAccessReview for the matched verb, namespace and name. */
  | { readonly kind: 'resource'; readonly resource: string };

declare module 'fastify' {
  interface FastifyContextConfig {
    access?: RouteAccess;
  }
  interface FastifyRequest {
    kubeUser: UserInfo | undefined;
  }
}

/** Route options that declare a route's access: `app.get(url, access({ kind: 'discovery' }), handler)`. */
export const access = (a: RouteAccess): { config: { access: RouteAccess } } => ({ config: { access: a } });
export const resourceAccess = (resource: string) => access({ kind: 'resource', resource });

/** The one spelling of "this list is a watch", shared by the authorizer (verb) and the handler (what it serves). */
export const isWatch = (query: unknown): boolean => {
  const w = (query as Record<string, unknown> | null | undefined)?.watch;
  return w === 'true' || w === '1';
};

/** The path with every `%2F` read as `/`, as the kube-apiserver reads it; the query is left as it is. */
export function escapedSlashesAsSeparators(url: string): string {
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  return path.includes('%') ? `${path.replace(/%2f/gi, '/')}${q === -1 ? '' : url.slice(q)}` : url;
}

/** A namespace is a DNS-1123 label; an object name here is a DNS-1123 subdomain (our ids are UUIDs). */
const NAMESPACE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const OBJECT_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/i;

/** The URL shapes a resource route may have: cluster list, namespaced collection, namespaced object. */
function resourceShapes(resource: string): string[] {
  return [
    `${AGG_PREFIX}/${resource}`,
    `${AGG_PREFIX}/namespaces/:ns/${resource}`,
    `${AGG_PREFIX}/namespaces/:ns/${resource}/:name`,
  ];
}

/** Refuses, at registration, a route the authorizer could not judge exactly (deny by default, decided at boot). */
export function checkRouteDeclaration(route: Pick<RouteOptions, 'url' | 'method' | 'config'>): void {
  const declared = (route.config as { access?: RouteAccess } | undefined)?.access;
  const where = `${String(route.method)} ${route.url}`;
  if (!declared) throw new Error(`aggregated API route ${where} declares no access`);
  if (declared.kind === 'resource') {
    if (!resourceShapes(declared.resource).includes(route.url ?? ''))
      throw new Error(`aggregated API route ${where} is not a resource URL of ${declared.resource}`);
    return;
  }
  // Only resource routes may take params or sit under the group version: nothing else there escapes a review.
  if (
    (route.url ?? '').includes(':') ||
    (route.url ?? '').includes('*') ||
    (route.url ?? '').startsWith(`${AGG_PREFIX}/`)
  ) {
    throw new Error(
      `aggregated API route ${where} is under the group version or takes params but is declared ${declared.kind}`,
    );
  }
}

export function verbOf(method: string, named: boolean, watch: boolean): string {
  switch (method) {
    case 'GET':
    case 'HEAD':
      if (named) return 'get';
      return watch ? 'watch' : 'list';
    case 'POST':
      return 'create';
    case 'PUT':
      return 'update';
    case 'PATCH':
      return 'patch';
    case 'DELETE':
      // On the collection path: `deletecollection`, a verb of its own in RBAC, as for built-in resources.
      return named ? 'delete' : 'deletecollection';
    default:
      return method.toLowerCase();
  }
}

const notFound = (req: FastifyRequest) =>
  new StatusError(
    404,
    'NotFound',
    `the server could not find the requested resource (${req.method} ${(req.url.split('?')[0] ?? '').slice(0, 200)})`,
  );

/** The resource attributes of a matched resource route, from the router's params; undefined when they are not valid names. */
export function attributesOf(
  req: Pick<FastifyRequest, 'method' | 'params' | 'query'>,
  resource: string,
): ResourceAttributes | undefined {
  const { ns, name, ...other } = (req.params ?? {}) as Record<string, unknown>;
  if (Object.keys(other).length > 0) return undefined;
  if (ns !== undefined && (typeof ns !== 'string' || !NAMESPACE.test(ns))) return undefined;
  if (name !== undefined && (typeof name !== 'string' || !OBJECT_NAME.test(name) || ns === undefined)) return undefined;
  return {
    ...(ns !== undefined ? { namespace: ns } : {}),
    verb: verbOf(req.method, name !== undefined, isWatch(req.query)),
    group: AGG_GROUP,
    version: AGG_VERSION,
    resource,
    ...(name !== undefined ? { name } : {}),
  };
}

/**
 * Installs the filter chain: every route must declare its access (checked as it is registered), every request but a
 * public route's is authenticated, and a resource route's request is authorized on its matched params. A matched
 * route without a declaration (none can be registered) is refused; an unmatched path falls through to the 404.
 */
export function installAccessControl(app: FastifyInstance, deps: { auth: DelegatedAuth; log: Logger }): void {
  const { auth, log } = deps;
  app.decorateRequest('kubeUser', undefined);
  app.addHook('onRoute', (route) => checkRouteDeclaration(route));
  app.addHook('onRequest', async (req) => {
    const declared = req.is404 ? undefined : req.routeOptions.config.access;
    if (declared?.kind === 'public') return;
    const path = (req.url.split('?')[0] ?? '').slice(0, 200);
    const result = await auth.authenticate(req.raw.socket as TLSSocket, req.headers, req.raw.headersDistinct);
    if (!result.ok) {
      log.info({ method: req.method, path, reason: result.reason }, 'unauthenticated request');
      throw new StatusError(401, 'Unauthorized', 'Unauthorized');
    }
    req.kubeUser = result.user;
    if (req.is404 || declared?.kind === 'discovery') return;
    if (declared?.kind !== 'resource') throw new StatusError(403, 'Forbidden', 'this route declares no access');
    const attrs = attributesOf(req, declared.resource);
    // Names the apiserver could never have authorized (empty, escaped separators, dots) are not resources at all.
    if (!attrs) throw notFound(req);
    const decision = await auth.authorize(result.user, attrs);
    if (!decision.allowed) {
      const where = attrs.namespace !== undefined ? ` in the namespace "${attrs.namespace}"` : ' at the cluster scope';
      throw new StatusError(
        403,
        'Forbidden',
        `${attrs.resource}.${AGG_GROUP}${attrs.name ? ` "${attrs.name}"` : ''} is forbidden: User "${result.user.username}" cannot ${attrs.verb} resource "${attrs.resource}" in API group "${AGG_GROUP}"${where}`,
        { ...(attrs.name ? { name: attrs.name } : {}), group: AGG_GROUP, kind: attrs.resource },
      );
    }
  });
}
