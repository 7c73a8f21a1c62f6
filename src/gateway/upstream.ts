// Turns one attempt into an upstream HTTP request: the URL (catalog base URL, regional and per-payload variants) and
// the authentication of every payload shape of spec 2.4. The payload lives only in this call's locals; the only thing
// kept is a Vertex access token (until its expiry), keyed by a hash of the service account's identity.
import { createHash } from 'node:crypto';
import { Sha256 } from '@aws-crypto/sha256-js';
import { SignatureV4 } from '@smithy/signature-v4';
import { JWT } from 'google-auth-library';
import { azureDeploymentFor, type ProviderPayload, type VertexPayload } from '../domain/index.ts';
import type { UpstreamSpec } from './catalog.ts';

export interface UpstreamRequest {
  url: URL;
  headers: Record<string, string>;
  body: string;
}

/** Why an attempt could not even be sent (a configuration problem of this credential or endpoint). */
export class UpstreamSetupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UpstreamSetupError';
  }
}

const GOOGLE_TOKEN_URL = 'https://oauth2.googleapis.com/token';
const VERTEX_SCOPE = 'https://www.googleapis.com/auth/cloud-platform';

function fill(template: string, values: Record<string, string>): string {
  return template.replace(/\{([a-z_]+)\}/g, (whole, name: string) => values[name] ?? whole);
}

const chatUrl = (base: string) => new URL(`${base}/chat/completions`);

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
}

export interface UpstreamAuth {
  /**
   * Builds the request for `payload` (a decrypted BYOK payload or a shared key) against the endpoint `spec`.
   * `body` is the client's request without `model`; the upstream model name is set here.
   */
  prepare(payload: ProviderPayload, spec: UpstreamSpec, modelSlug: string, body: Record<string, unknown>): Promise<UpstreamRequest>;
  /**
   * The cheapest authenticated call for an idle-credential probe: the models list (bearer keys, Azure, Bedrock keys;
   * SigV4-signed for Bedrock IAM), or null for Vertex, where a fresh token exchange is the check (it throws on refusal).
   */
  probe(payload: ProviderPayload, spec: UpstreamSpec, modelSlug: string): Promise<ProbeRequest | null>;
}

interface CachedToken {
  token: string;
  expiresAt: number;
}

export function createUpstreamAuth(opts: { now?: () => number } = {}): UpstreamAuth {
  const now = opts.now ?? Date.now;
  const tokens = new Map<string, CachedToken>();
  const inflight = new Map<string, Promise<CachedToken>>();

  const vertexToken = async (payload: VertexPayload, fresh = false): Promise<string> => {
    const sa = payload.serviceAccount;
    // Keyed by identity and key id, never by key material: a rotated key (new private_key_id) gets a new token.
    const cacheKey = createHash('sha256').update(`${sa.client_email}\n${sa.private_key_id}\n${sa.token_uri}`).digest('hex');
    if (fresh) tokens.delete(cacheKey);
    const hit = tokens.get(cacheKey);
    if (hit && hit.expiresAt > now()) return hit.token;
    let pending = inflight.get(cacheKey);
    if (!pending) {
      pending = (async () => {
        const jwt = new JWT({ email: sa.client_email, key: sa.private_key, keyId: sa.private_key_id, scopes: [VERTEX_SCOPE] });
        // google-auth-library signs and exchanges the assertion; the exchange goes to the document's own token_uri.
        jwt.transporter.interceptors.request.add({
          resolved: async (config) => {
            if (String(config.url) === GOOGLE_TOKEN_URL) config.url = new URL(sa.token_uri);
            return config;
          },
        });
        const credentials = await jwt.authorize();
        if (!credentials.access_token) throw new UpstreamSetupError('the token endpoint returned no access token');
        // Refresh a minute early so a token never expires in flight.
        const expiresAt = (credentials.expiry_date ?? now() + 3_600_000) - 60_000;
        const entry = { token: credentials.access_token, expiresAt };
        tokens.set(cacheKey, entry);
        return entry;
      })().finally(() => inflight.delete(cacheKey));
      inflight.set(cacheKey, pending);
    }
    return (await pending).token;
  };

  const self: UpstreamAuth = {
    async probe(payload, spec, modelSlug): Promise<ProbeRequest | null> {
      if (payload.kind === 'vertex') {
        await vertexToken(payload, true);
        return null;
      }
      if (payload.kind === 'bedrock-iam') {
        const url = modelsUrl(chatUrl(fill(spec.baseUrl, { region: payload.region })));
        const signer = new SignatureV4({ service: 'bedrock', region: payload.region, credentials: { accessKeyId: payload.accessKeyId, secretAccessKey: payload.secretAccessKey }, sha256: Sha256 });
        const query: Record<string, string> = {};
        url.searchParams.forEach((v, k) => (query[k] = v));
        const signed = await signer.sign({ method: 'GET', protocol: url.protocol, hostname: url.hostname, ...(url.port ? { port: Number(url.port) } : {}), path: url.pathname, query, headers: { host: url.host } });
        return { url, headers: { ...(signed.headers as Record<string, string>) } };
      }
      const prepared = await self.prepare(payload, spec, modelSlug, {});
      return { url: modelsUrl(prepared.url), headers: prepared.headers };
    },
    async prepare(payload, spec, modelSlug, body): Promise<UpstreamRequest> {
      const json = (model: string) => JSON.stringify({ ...body, model });
      switch (payload.kind) {
        case 'api-key':
          return { url: chatUrl(spec.baseUrl), headers: { authorization: `Bearer ${payload.apiKey}` }, body: json(spec.model) };
        case 'api-key-region': {
          const base = spec.regionalBaseUrls[payload.region];
          if (base === undefined) throw new UpstreamSetupError(`the catalog has no base URL for region ${payload.region} of this endpoint`);
          return { url: chatUrl(base.replace(/\/+$/, '')), headers: { authorization: `Bearer ${payload.apiKey}` }, body: json(spec.model) };
        }
        case 'azure': {
          const entry = azureDeploymentFor(payload, modelSlug);
          if (entry === null) throw new UpstreamSetupError(`no Azure deployment or resource config serves ${modelSlug}`);
          if (entry.type === 'deployment') {
            return { url: new URL(entry.endpoint_url), headers: { 'api-key': entry.api_key }, body: json(entry.model_id) };
          }
          const template = entry.resource_type === 'ai_foundry' ? spec.azureFoundryUrl : spec.azureOpenAiUrl;
          return { url: chatUrl(fill(template, { resource_name: entry.resource_name })), headers: { 'api-key': entry.api_key }, body: json(spec.model) };
        }
        case 'bedrock-key':
          return {
            url: chatUrl(fill(spec.baseUrl, { region: spec.defaultRegion })),
            headers: { authorization: `Bearer ${payload.apiKey}` },
            body: json(spec.model),
          };
        case 'bedrock-iam': {
          const url = chatUrl(fill(spec.baseUrl, { region: payload.region }));
          const text = json(spec.model);
          const signer = new SignatureV4({
            service: 'bedrock',
            region: payload.region,
            credentials: { accessKeyId: payload.accessKeyId, secretAccessKey: payload.secretAccessKey },
            sha256: Sha256,
          });
          const query: Record<string, string> = {};
          url.searchParams.forEach((v, k) => (query[k] = v));
          const signed = await signer.sign({
            method: 'POST',
            protocol: url.protocol,
            hostname: url.hostname,
            ...(url.port ? { port: Number(url.port) } : {}),
            path: url.pathname,
            query,
            headers: { host: url.host, 'content-type': 'application/json' },
            body: text,
          });
          return { url, headers: { ...(signed.headers as Record<string, string>) }, body: text };
        }
        case 'vertex': {
          const location = payload.region;
          const base = fill(spec.baseUrl, {
            project: payload.projectId,
            location,
            location_prefix: location === 'global' ? '' : `${location}-`,
            region: location,
          });
          const token = await vertexToken(payload);
          return { url: chatUrl(base), headers: { authorization: `Bearer ${token}` }, body: json(spec.model) };
        }
      }
    },
  };
  return self;
}

/** File name of a provider's shared key in the shared-keys directory: `/` in a slug becomes `__` (Secret keys allow no `/`). */
export function sharedKeyFileName(provider: string): string {
  return provider.replaceAll('/', '__');
}
