// Turns one attempt into an upstream HTTP request. The payload's shape module (domain/payloads/) says where it goes and
// how it authenticates; this edge does the I/O that needs: SigV4 signing and the service-account token exchange. The
// payload lives only in this call's locals; the only thing
// kept is a Vertex access token (until its expiry), keyed by who proved possession of the key that obtained it: the
// owner (account and credential, or the platform's shared key) and a digest of the whole payload, private key
// included. Public fields (client_email, private_key_id, token_uri) never key it: anyone can copy them.
import { createHash, sign } from 'node:crypto';
import { type Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { ProviderPayload, UpstreamAuthPlan, VertexPayload } from '../domain/index.ts';
import { shapeOfPayload } from '../domain/payloads.ts';
import type { UpstreamSpec } from './catalog.ts';

export interface UpstreamRequest {
  url: URL;
  headers: Record<string, string>;
  body: string;
  /** The URL came from the tenant's payload (an Azure endpoint_url): it goes through the egress-checked agent. */
  tenantUrl?: true;
}

/** Why an attempt could not even be sent (a configuration problem of this credential or endpoint). */
export class UpstreamSetupError extends Error {
  /** The HTTP status of a refused token exchange (400 invalid_grant, 401, 403, 429, 5xx), when there was one. */
  readonly status: number | undefined;
  constructor(message: string, status?: number) {
    super(message);
    this.name = 'UpstreamSetupError';
    this.status = status;
  }
}

/** Whose credential an upstream call authenticates with: a tenant's BYOK credential, or the platform's shared key. */
export type AuthOwner =
  | { kind: 'credential'; account: string; credentialId: string }
  | { kind: 'shared'; provider: string };

const VERTEX_SCOPE = 'https://www.googleapis.com/auth/cloud-platform';
/** A token answer is a few hundred bytes; anything past this is not one. */
const MAX_TOKEN_RESPONSE_BYTES = 64 * 1024;
const TOKEN_EXCHANGE_TIMEOUT_MS = 10_000;

const ownerKey = (owner: AuthOwner) =>
  owner.kind === 'credential' ? `credential\n${owner.account}\n${owner.credentialId}` : `shared\n${owner.provider}`;

/** sha256 over the owner and the whole payload (the private key included): possession, not identity, keys a token. */
function tokenCacheKey(owner: AuthOwner, payload: VertexPayload): string {
  return createHash('sha256').update(ownerKey(owner)).update('\n').update(JSON.stringify(payload)).digest('hex');
}

const b64url = (v: string | Buffer) => Buffer.from(v).toString('base64url');

/**
 * The OAuth 2.0 JWT-bearer exchange (RFC 7523) of a service-account key at the document's own token_uri, done here
 * rather than by a library so that it never follows a redirect (a 3xx is a refusal), reads a bounded answer, goes
 * through the gateway's agent (the egress policy's checks) and reports failures without upstream text.
 */
function exchangeServiceAccountKey(
  payload: VertexPayload,
  agent: HttpsAgent | undefined,
  now: number,
): Promise<{ token: string; expiresAt: number }> {
  const sa = payload.serviceAccount;
  let url: URL;
  try {
    url = new URL(sa.token_uri);
  } catch {
    return Promise.reject(new UpstreamSetupError('the token_uri is not a URL'));
  }
  if (url.protocol !== 'https:') return Promise.reject(new UpstreamSetupError('the token_uri must be https'));
  const iat = Math.floor(now / 1000);
  const header = b64url(JSON.stringify({ alg: 'RS256', typ: 'JWT', kid: sa.private_key_id }));
  const claims = b64url(
    JSON.stringify({ iss: sa.client_email, scope: VERTEX_SCOPE, aud: sa.token_uri, iat, exp: iat + 3600 }),
  );
  let signature: string;
  try {
    signature = b64url(sign('RSA-SHA256', Buffer.from(`${header}.${claims}`), sa.private_key));
  } catch {
    return Promise.reject(new UpstreamSetupError('the service account private key cannot sign'));
  }
  const body = new URLSearchParams({
    grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer',
    assertion: `${header}.${claims}.${signature}`,
  }).toString();
  return new Promise((resolve, reject) => {
    const req = httpsRequest(url, {
      method: 'POST',
      ...(agent ? { agent } : {}),
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        'content-length': Buffer.byteLength(body),
        accept: 'application/json',
      },
      timeout: TOKEN_EXCHANGE_TIMEOUT_MS,
    });
    req.once('timeout', () => req.destroy(new UpstreamSetupError('token exchange timed out')));
    req.once('error', (err) =>
      reject(
        err instanceof UpstreamSetupError ? err : new UpstreamSetupError('token exchange failed: upstream unreachable'),
      ),
    );
    req.once('response', (res) => {
      const status = res.statusCode ?? 0;
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_TOKEN_RESPONSE_BYTES) {
          res.destroy();
          reject(new UpstreamSetupError('token exchange failed: the answer is too large', status));
          return;
        }
        chunks.push(c);
      });
      res.once('error', () => reject(new UpstreamSetupError('token exchange failed: upstream unreachable')));
      res.once('end', () => {
        // A redirect is never followed (it could lead to plain http or into the pod's network): it is a refusal.
        if (status < 200 || status >= 300)
          return reject(new UpstreamSetupError(`token exchange refused (HTTP ${status})`, status));
        let answer: { access_token?: unknown; expires_in?: unknown };
        try {
          answer = JSON.parse(Buffer.concat(chunks).toString('utf8')) as typeof answer;
        } catch {
          return reject(new UpstreamSetupError('token exchange failed: the answer is not JSON', status));
        }
        if (
          typeof answer?.access_token !== 'string' ||
          answer.access_token === '' ||
          /[\s\0]/.test(answer.access_token)
        ) {
          return reject(new UpstreamSetupError('the token endpoint returned no access token', status));
        }
        const ttl =
          typeof answer.expires_in === 'number' && Number.isFinite(answer.expires_in) && answer.expires_in > 0
            ? Math.min(answer.expires_in, 86_400)
            : 3600;
        // Refresh a minute early so a token never expires in flight.
        resolve({ token: answer.access_token, expiresAt: now + ttl * 1000 - 60_000 });
      });
    });
    req.end(body);
  });
}

/** Chat URLs by base URL: a URL per request was ~350 bytes of garbage. Bounded: tenants' Azure resources vary it. */
const chatUrls = new Map<string, URL>();
const chatUrl = (base: string): URL => {
  let url = chatUrls.get(base);
  if (!url) {
    if (chatUrls.size >= 1024) chatUrls.clear();
    url = new URL(`${base}/chat/completions`);
    chatUrls.set(base, url);
  }
  // Shared: callers that change a URL copy it first (modelsUrl does).
  return url;
};

/** The provider's models list next to its chat completions URL (query, e.g. Azure's api-version, kept). */
const modelsUrl = (chat: URL): URL => {
  const u = new URL(chat);
  u.pathname = u.pathname.replace(/\/chat\/completions$/, '/models');
  return u;
};

/** The cheapest authenticated call a probe makes: a GET of the models list. */
export interface ProbeRequest {
  url: URL;
  headers: Record<string, string>;
  tenantUrl?: true;
}

export interface UpstreamAuth {
  /**
   * Builds the request for `payload` (a decrypted BYOK payload or a shared key) against the endpoint `spec`.
   * `body` is the client's request without `model`; the upstream model name is set here.
   */
  prepare(
    owner: AuthOwner,
    payload: ProviderPayload,
    spec: UpstreamSpec,
    modelSlug: string,
    body: Record<string, unknown>,
  ): Promise<UpstreamRequest>;
  /**
   * The cheapest authenticated call for an idle-credential probe: the models list (bearer keys, Azure, Bedrock keys;
   * SigV4-signed for Bedrock IAM), or null for Vertex, where a fresh token exchange is the check (it throws on refusal).
   */
  probe(
    owner: AuthOwner,
    payload: ProviderPayload,
    spec: UpstreamSpec,
    modelSlug: string,
  ): Promise<ProbeRequest | null>;
}

interface CachedToken {
  token: string;
  expiresAt: number;
}

export function createUpstreamAuth(opts: { now?: () => number; agent?: HttpsAgent } = {}): UpstreamAuth {
  const now = opts.now ?? Date.now;
  const tokens = new Map<string, CachedToken>();
  const inflight = new Map<string, Promise<CachedToken>>();

  const vertexToken = async (owner: AuthOwner, payload: VertexPayload, fresh = false): Promise<string> => {
    const cacheKey = tokenCacheKey(owner, payload);
    if (fresh) tokens.delete(cacheKey);
    const hit = tokens.get(cacheKey);
    if (hit && hit.expiresAt > now()) return hit.token;
    let pending = inflight.get(cacheKey);
    if (!pending) {
      pending = exchangeServiceAccountKey(payload, opts.agent, now())
        .then((entry) => {
          // Expired entries of rotated keys go as new ones come: the map holds live tokens only.
          for (const [k, t] of tokens) if (t.expiresAt <= now()) tokens.delete(k);
          tokens.set(cacheKey, entry);
          return entry;
        })
        .finally(() => inflight.delete(cacheKey));
      inflight.set(cacheKey, pending);
    }
    return (await pending).token;
  };

  /** The request head of one planned attempt: its URL and the headers that authenticate it. */
  const head = async (
    owner: AuthOwner,
    payload: ProviderPayload,
    spec: UpstreamSpec,
    modelSlug: string,
    body: Record<string, unknown>,
    probe: boolean,
  ) => {
    const plan = shapeOfPayload(payload).upstream(payload, spec, modelSlug);
    if ('problem' in plan) throw new UpstreamSetupError(plan.problem);
    const chat = 'full' in plan.url ? new URL(plan.url.full) : chatUrl(plan.url.chat);
    const url = probe ? modelsUrl(chat) : chat;
    const text = probe ? undefined : JSON.stringify({ ...body, model: plan.model });
    const headers = await authHeaders(owner, payload, plan.auth, probe ? 'GET' : 'POST', url, text, probe);
    return { url, headers, text, tenantUrl: plan.tenantUrl };
  };

  const authHeaders = async (
    owner: AuthOwner,
    payload: ProviderPayload,
    auth: UpstreamAuthPlan,
    method: 'GET' | 'POST',
    url: URL,
    body: string | undefined,
    fresh: boolean,
  ): Promise<Record<string, string>> => {
    switch (auth.kind) {
      case 'header':
        return { [auth.name]: auth.value };
      case 'aws-sigv4':
        return signAwsRequest(auth, method, url, body);
      case 'google-service-account':
        if (payload.kind !== 'vertex')
          throw new UpstreamSetupError('a service-account token needs a service-account key');
        return { authorization: `Bearer ${await vertexToken(owner, payload, fresh)}` };
    }
  };

  return {
    async probe(owner, payload, spec, modelSlug): Promise<ProbeRequest | null> {
      // For a service-account key a fresh token exchange is the check (it throws on refusal); no call follows.
      if (payload.kind === 'vertex') {
        await vertexToken(owner, payload, true);
        return null;
      }
      const { url, headers, tenantUrl } = await head(owner, payload, spec, modelSlug, {}, true);
      return { url, headers, ...(tenantUrl ? { tenantUrl } : {}) };
    },
    async prepare(owner, payload, spec, modelSlug, body): Promise<UpstreamRequest> {
      const { url, headers, text, tenantUrl } = await head(owner, payload, spec, modelSlug, body, false);
      return { url, headers, body: text ?? '', ...(tenantUrl ? { tenantUrl } : {}) };
    },
  };
}

/** The SigV4 headers of one call with AWS access keys (a POST carries its JSON body, which the signature covers). */
async function signAwsRequest(
  auth: Extract<UpstreamAuthPlan, { kind: 'aws-sigv4' }>,
  method: 'GET' | 'POST',
  url: URL,
  body?: string,
): Promise<Record<string, string>> {
  // Loaded on the first AWS key's call: about 1 MB of heap that a gateway without one never holds.
  const [{ SignatureV4 }, { Sha256 }] = await Promise.all([
    import('@smithy/signature-v4'),
    import('@aws-crypto/sha256-js'),
  ]);
  const signer = new SignatureV4({
    service: auth.service,
    region: auth.region,
    credentials: { accessKeyId: auth.accessKeyId, secretAccessKey: auth.secretAccessKey },
    sha256: Sha256,
  });
  const query: Record<string, string> = {};
  url.searchParams.forEach((v, k) => (query[k] = v));
  const signed = await signer.sign({
    method,
    protocol: url.protocol,
    hostname: url.hostname,
    ...(url.port ? { port: Number(url.port) } : {}),
    path: url.pathname,
    query,
    headers: body === undefined ? { host: url.host } : { host: url.host, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body }),
  });
  return { ...(signed.headers as Record<string, string>) };
}

/** File name of a provider's shared key in the shared-keys directory: `/` in a slug becomes `__` (Secret keys allow no `/`). */
export function sharedKeyFileName(provider: string): string {
  return provider.replaceAll('/', '__');
}
