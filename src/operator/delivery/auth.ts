// Who may open the delivery stream: a gateway pod presenting a projected ServiceAccount token with the stream's own
// audience, checked with a TokenReview and accepted only for the ServiceAccounts the operator was given. A review is
// cached (by the token's digest, never the token) until the token expires, at most `maxCacheMs`; a refusal for a
// few seconds, so a pod with a bad token cannot make the operator post a review per request.
import { sha256Hex } from '../../contract/routing.ts';
import type { KubeClient } from '../../kube/client.ts';

export interface StreamIdentity {
  /** `system:serviceaccount:<namespace>:<name>`. */
  username: string;
  /** The pod the token is bound to, when the kubelet projected it. */
  pod: string | undefined;
}

export type StreamAuth = { ok: true; who: StreamIdentity } | { ok: false; status: 401 | 403; reason: string };

export interface StreamAuthOptions {
  client: Pick<KubeClient, 'request'>;
  audience: string;
  /** `<namespace>/<name>` of each gateway ServiceAccount allowed. */
  serviceAccounts: readonly string[];
  maxCacheMs?: number;
  refusalCacheMs?: number;
  maxEntries?: number;
  now?: () => number;
}

interface Review {
  status?: {
    authenticated?: boolean;
    audiences?: string[];
    user?: { username?: string; extra?: Record<string, string[]> };
    error?: string;
  };
}

/** The `exp` claim of a JWT, in ms; undefined when the token is not a JWT (the review still decides). */
function expiryOf(token: string): number | undefined {
  const payload = token.split('.')[1];
  if (!payload) return undefined;
  try {
    const exp = (JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { exp?: unknown }).exp;
    return typeof exp === 'number' && Number.isFinite(exp) ? exp * 1000 : undefined;
  } catch {
    return undefined;
  }
}

export function createStreamAuth(opts: StreamAuthOptions): {
  check(authorization: string | undefined): Promise<StreamAuth>;
  size(): number;
} {
  const allowed = new Set(opts.serviceAccounts.map((sa) => `system:serviceaccount:${sa.replace('/', ':')}`));
  const now = opts.now ?? Date.now;
  const maxCacheMs = opts.maxCacheMs ?? 10 * 60_000;
  const refusalCacheMs = opts.refusalCacheMs ?? 5_000;
  const maxEntries = opts.maxEntries ?? 10_000;
  const cache = new Map<string, { until: number; result: StreamAuth }>();

  const review = async (token: string): Promise<StreamAuth> => {
    const r = await opts.client.request<Review>('POST', '/apis/authentication.k8s.io/v1/tokenreviews', {
      body: {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenReview',
        spec: { token, audiences: [opts.audience] },
      },
    });
    const s = r.status;
    if (s?.authenticated !== true || !s.user?.username)
      return { ok: false, status: 401, reason: 'the token was not accepted by the TokenReview' };
    if (!(s.audiences ?? []).includes(opts.audience))
      return { ok: false, status: 401, reason: `the token is not for the audience ${opts.audience}` };
    if (!allowed.has(s.user.username))
      return { ok: false, status: 403, reason: `${s.user.username} is not a gateway ServiceAccount` };
    return {
      ok: true,
      who: { username: s.user.username, pod: s.user.extra?.['authentication.kubernetes.io/pod-name']?.[0] },
    };
  };

  return {
    async check(authorization) {
      const m = typeof authorization === 'string' ? /^Bearer ([^\s]+)$/.exec(authorization) : null;
      if (!m) return { ok: false, status: 401, reason: 'no bearer token' };
      const token = m[1]!;
      const key = sha256Hex(token);
      const t = now();
      const hit = cache.get(key);
      if (hit && hit.until > t) return hit.result;
      const result = await review(token);
      const exp = expiryOf(token);
      const until = result.ok ? Math.min(t + maxCacheMs, exp ?? t + 60_000) : t + refusalCacheMs;
      if (cache.size >= maxEntries)
        for (const [k, v] of cache) if (v.until <= t || cache.size >= maxEntries) cache.delete(k);
      cache.set(key, { until, result });
      return result;
    },
    size: () => cache.size,
  };
}
