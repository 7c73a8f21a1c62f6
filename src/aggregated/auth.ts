// Delegated authentication and authorization, the way an aggregated apiserver does it:
//  - requests proxied by the kube-aggregator carry X-Remote-* headers, trusted only when the TLS client certificate
//    chains to the request-header CA of kube-system/extension-apiserver-authentication and its CN is allowed;
//  - a bearer token sent directly is checked with a TokenReview;
//  - every resource request is checked with a SubjectAccessReview, cached briefly.
import { X509Certificate } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { DetailedPeerCertificate, TLSSocket } from 'node:tls';
import { sha256Hex } from '../contract/routing.ts';
import type { KubeClient } from '../kube/client.ts';

export interface UserInfo {
  username: string;
  uid?: string;
  groups: string[];
  extra: Record<string, string[]>;
}

export interface RequestHeaderConfig {
  /** PEM of the CAs that sign the front-proxy client certificate. */
  clientCaPem: string;
  /** Empty: any CN signed by the CA. */
  allowedNames: string[];
  usernameHeaders: string[];
  uidHeaders: string[];
  groupHeaders: string[];
  extraHeaderPrefixes: string[];
}

const CLIENT_AUTH_EKU = '1.3.6.1.5.5.7.3.2';

function jsonList(v: string | undefined, dflt: string[]): string[] {
  if (v === undefined || v === '') return dflt;
  try {
    const parsed = JSON.parse(v) as unknown;
    return Array.isArray(parsed) ? parsed.map(String) : dflt;
  } catch {
    return dflt;
  }
}

/** Reads kube-system/extension-apiserver-authentication (needs the extension-apiserver-authentication-reader Role). */
export async function loadRequestHeaderConfig(client: KubeClient): Promise<RequestHeaderConfig | undefined> {
  const cm = await client.request<{ data?: Record<string, string> }>(
    'GET',
    '/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication',
  );
  const d = cm.data ?? {};
  const ca = d['requestheader-client-ca-file'];
  if (!ca) return undefined;
  return {
    clientCaPem: ca,
    allowedNames: jsonList(d['requestheader-allowed-names'], []),
    usernameHeaders: jsonList(d['requestheader-username-headers'], ['X-Remote-User']).map((h) => h.toLowerCase()),
    uidHeaders: jsonList(d['requestheader-uid-headers'], ['X-Remote-Uid']).map((h) => h.toLowerCase()),
    groupHeaders: jsonList(d['requestheader-group-headers'], ['X-Remote-Group']).map((h) => h.toLowerCase()),
    extraHeaderPrefixes: jsonList(d['requestheader-extra-headers-prefix'], ['X-Remote-Extra-']).map((h) =>
      h.toLowerCase(),
    ),
  };
}

function splitPem(pem: string): X509Certificate[] {
  return (pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []).map(
    (p) => new X509Certificate(p),
  );
}

// The roots of a config, parsed once: a config object is replaced, never changed, when the ConfigMap moves.
const parsedRoots = new WeakMap<RequestHeaderConfig, X509Certificate[]>();
function rootsOf(config: RequestHeaderConfig): X509Certificate[] {
  let roots = parsedRoots.get(config);
  if (!roots) parsedRoots.set(config, (roots = splitPem(config.clientCaPem)));
  return roots;
}

function valid(c: X509Certificate, now: number): boolean {
  return Date.parse(c.validFrom) <= now && now <= Date.parse(c.validTo);
}

function commonName(c: X509Certificate): string | undefined {
  return /(?:^|\n)CN=([^\n]*)/.exec(c.subject)?.[1];
}

/** How long a verdict stands at most: a certificate that is not yet valid, or a config, may change within it. */
export const FRONT_PROXY_RECHECK_MS = 60_000;

export interface FrontProxyVerdict {
  verdict: boolean;
  /** Until when (epoch ms) the verdict holds for the same peer and config: a minute, or the chain's first expiry. */
  until: number;
}

/**
 * Whether the peer's certificate chain ends at one of the request-header CAs, with client-auth usage, and the
 * leaf's CN is allowed. Checked here rather than by the TLS layer, which may trust other CAs too.
 */
export function frontProxyVerdict(
  peer: DetailedPeerCertificate | undefined,
  config: RequestHeaderConfig,
  now = Date.now(),
): FrontProxyVerdict {
  const refused = { verdict: false, until: now + FRONT_PROXY_RECHECK_MS };
  if (!peer?.raw) return refused;
  const chain: X509Certificate[] = [];
  let cur: DetailedPeerCertificate | undefined = peer;
  const seen = new Set<string>();
  while (cur?.raw && !seen.has(cur.fingerprint256)) {
    seen.add(cur.fingerprint256);
    chain.push(new X509Certificate(cur.raw));
    cur = cur.issuerCertificate;
  }
  const leaf = chain[0];
  if (!leaf || !valid(leaf, now) || leaf.ca) return refused;
  const eku = leaf.keyUsage;
  if (eku !== undefined && eku.length > 0 && !eku.includes(CLIENT_AUTH_EKU)) return refused;
  if (config.allowedNames.length > 0 && !config.allowedNames.includes(commonName(leaf) ?? '')) return refused;
  // Walk up through presented intermediates until one of the roots signed the current certificate.
  const trusted = (path: X509Certificate[]): FrontProxyVerdict => ({
    verdict: true,
    until: Math.min(now + FRONT_PROXY_RECHECK_MS, ...path.map((c) => Date.parse(c.validTo))),
  });
  const path = [leaf];
  let child = leaf;
  for (let i = 0; i < 5; i++) {
    for (const root of rootsOf(config))
      if (valid(root, now) && child.checkIssued(root) && child.verify(root.publicKey)) return trusted([...path, root]);
    const next = chain.find(
      (c) => c !== child && c.ca && valid(c, now) && child.checkIssued(c) && child.verify(c.publicKey),
    );
    if (!next) return refused;
    path.push(next);
    child = next;
  }
  return refused;
}

function headerValues(headers: IncomingHttpHeaders | NodeJS.Dict<string[]>, name: string): string[] {
  const v = headers[name];
  if (v === undefined) return [];
  return Array.isArray(v) ? v : [v];
}

/** The user the aggregator asserts. Node joins repeated headers with ", ", so groups come from headersDistinct. */
export function userFromHeaders(distinct: NodeJS.Dict<string[]>, config: RequestHeaderConfig): UserInfo | undefined {
  const username = config.usernameHeaders
    .map((h) => headerValues(distinct, h)[0])
    .find((v) => v !== undefined && v !== '');
  if (!username) return undefined;
  const uid = config.uidHeaders.map((h) => headerValues(distinct, h)[0]).find((v) => v !== undefined && v !== '');
  const groups = config.groupHeaders.flatMap((h) => headerValues(distinct, h));
  // Keys come from header names: a null-prototype object, so `X-Remote-Extra-__proto__` is just a key.
  const extra: Record<string, string[]> = Object.create(null) as Record<string, string[]>;
  for (const [name, values] of Object.entries(distinct)) {
    const prefix = config.extraHeaderPrefixes.find((p) => name.startsWith(p));
    if (!prefix || !values) continue;
    const key = decodeURIComponent(name.slice(prefix.length)).toLowerCase();
    extra[key] = [...(Object.hasOwn(extra, key) ? extra[key]! : []), ...values];
  }
  return { username, ...(uid !== undefined ? { uid } : {}), groups, extra };
}

/** Every header name the front proxy may set: stripped from requests that are not from the front proxy. */
export function isIdentityHeader(name: string, config: RequestHeaderConfig): boolean {
  const n = name.toLowerCase();
  return (
    [...config.usernameHeaders, ...config.uidHeaders, ...config.groupHeaders].includes(n) ||
    config.extraHeaderPrefixes.some((p) => n.startsWith(p))
  );
}

class TtlCache<V> {
  private readonly entries = new Map<string, { value: V; expires: number }>();
  private readonly max: number;
  constructor(max: number) {
    this.max = max;
  }
  get(key: string): V | undefined {
    const e = this.entries.get(key);
    if (!e) return undefined;
    if (e.expires < Date.now()) {
      this.entries.delete(key);
      return undefined;
    }
    return e.value;
  }
  set(key: string, value: V, ttlMs: number): void {
    if (this.entries.size >= this.max) this.entries.delete(this.entries.keys().next().value as string);
    this.entries.set(key, { value, expires: Date.now() + ttlMs });
  }
}

export interface AuthOptions {
  client: KubeClient;
  requestHeader: RequestHeaderConfig | undefined;
  /**
   * Accept a bearer token sent straight to this server (checked with a TokenReview). Off by default: the server is
   * reached through the kube-apiserver, which authenticates and authorizes first; a client that calls the Service
   * directly opts in with --aggregated-accept-tokens (docs/aggregated-api.md, "Authentication and authorization").
   */
  acceptBearerTokens?: boolean;
  /** TTLs like the apiserver's webhook defaults, shorter. */
  tokenTtlMs?: number;
  allowTtlMs?: number;
  denyTtlMs?: number;
}

export type AuthResult = { ok: true; user: UserInfo; via: 'front-proxy' | 'token' } | { ok: false; reason: string };

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

export interface ResourceAttributes {
  namespace?: string;
  verb: string;
  group: string;
  version: string;
  resource: string;
  name?: string;
}

export class DelegatedAuth {
  private readonly o: AuthOptions;
  private readonly tokens = new TtlCache<UserInfo | null>(4096);
  private readonly decisions = new TtlCache<{ allowed: boolean; reason: string }>(8192);
  // A connection's peer certificate is fixed for its life, and the aggregator keeps its connections open: the chain
  // is checked once per connection (again after FRONT_PROXY_RECHECK_MS, at its first expiry, or with a new config),
  // not on every request.
  private readonly frontProxy = new WeakMap<TLSSocket, FrontProxyVerdict & { config: RequestHeaderConfig }>();

  constructor(o: AuthOptions) {
    this.o = o;
  }

  get requestHeader(): RequestHeaderConfig | undefined {
    return this.o.requestHeader;
  }

  setRequestHeader(config: RequestHeaderConfig): void {
    this.o.requestHeader = config;
  }

  private fromFrontProxy(socket: TLSSocket, config: RequestHeaderConfig): boolean {
    const now = Date.now();
    const known = this.frontProxy.get(socket);
    if (known?.config === config && now < known.until) return known.verdict;
    const checked = frontProxyVerdict(socket.getPeerCertificate(true), config, now);
    this.frontProxy.set(socket, { ...checked, config });
    return checked.verdict;
  }

  async authenticate(
    socket: TLSSocket,
    headers: IncomingHttpHeaders,
    distinct: NodeJS.Dict<string[]>,
  ): Promise<AuthResult> {
    const rh = this.o.requestHeader;
    if (rh && this.fromFrontProxy(socket, rh)) {
      const user = userFromHeaders(distinct, rh);
      if (user) return { ok: true, user, via: 'front-proxy' };
    }
    const m = typeof headers.authorization === 'string' ? BEARER.exec(headers.authorization) : null;
    if (m) {
      if (this.o.acceptBearerTokens !== true)
        return {
          ok: false,
          reason:
            'a bearer token sent directly is refused (this server is reached through the kube-apiserver; --aggregated-accept-tokens allows direct tokens)',
        };
      const user = await this.reviewToken(m[1] as string);
      if (user) return { ok: true, user, via: 'token' };
      return { ok: false, reason: 'the bearer token was not accepted by the TokenReview' };
    }
    return { ok: false, reason: 'no front-proxy client certificate and no bearer token' };
  }

  private async reviewToken(token: string): Promise<UserInfo | undefined> {
    const cacheKey = sha256Hex(token);
    const cached = this.tokens.get(cacheKey);
    if (cached !== undefined) return cached ?? undefined;
    const review = await this.o.client.request<{
      status?: {
        authenticated?: boolean;
        user?: { username?: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> };
      };
    }>('POST', '/apis/authentication.k8s.io/v1/tokenreviews', {
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token } },
    });
    const u = review.status?.user;
    const user: UserInfo | null =
      review.status?.authenticated === true && u?.username
        ? { username: u.username, ...(u.uid ? { uid: u.uid } : {}), groups: u.groups ?? [], extra: u.extra ?? {} }
        : null;
    this.tokens.set(cacheKey, user, user ? (this.o.tokenTtlMs ?? 10_000) : 2_000);
    return user ?? undefined;
  }

  /** SubjectAccessReview, cached per (user, attributes). system:masters is allowed without a review, as upstream. */
  async authorize(user: UserInfo, attrs: ResourceAttributes): Promise<{ allowed: boolean; reason: string }> {
    if (user.groups.includes('system:masters')) return { allowed: true, reason: 'system:masters' };
    const key = JSON.stringify([user.username, user.uid ?? '', [...user.groups].sort(), user.extra, attrs]);
    const cached = this.decisions.get(key);
    if (cached) return cached;
    const sar = await this.o.client.request<{ status?: { allowed?: boolean; denied?: boolean; reason?: string } }>(
      'POST',
      '/apis/authorization.k8s.io/v1/subjectaccessreviews',
      {
        body: {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SubjectAccessReview',
          spec: {
            user: user.username,
            ...(user.uid ? { uid: user.uid } : {}),
            groups: user.groups,
            extra: user.extra,
            resourceAttributes: attrs,
          },
        },
      },
    );
    const decision = {
      allowed: sar.status?.allowed === true && sar.status.denied !== true,
      reason: sar.status?.reason ?? '',
    };
    this.decisions.set(key, decision, decision.allowed ? (this.o.allowTtlMs ?? 10_000) : (this.o.denyTtlMs ?? 5_000));
    return decision;
  }
}
