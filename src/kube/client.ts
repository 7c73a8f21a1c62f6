// The Kubernetes edge shared by the operator and the REST API server: a small raw HTTP client over a
// kubeconfig (./kubeconfig.ts). We talk to the apiserver directly (node:https with the kubeconfig's TLS and
// auth) instead of through client-node's generated clients for list/watch/apply, because the informer needs
// full control over timeouts, aborts and streaming, and the generated clients hide the status code on watch
// failures.

import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest, type RequestOptions } from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';
import { yamlSafeJson } from '../domain/text.ts';
import type { KubeAccess } from './kubeconfig.ts';

/** metav1.Status as the apiserver returns it on failures. */
export interface KubeStatus {
  kind?: string;
  status?: string;
  message?: string;
  reason?: string;
  code?: number;
  details?: unknown;
}

export class KubeApiError extends Error {
  readonly status: number;
  readonly reason: string | undefined;
  readonly body: KubeStatus | undefined;
  constructor(status: number, body: KubeStatus | undefined, what: string) {
    super(`${what}: ${status} ${body?.reason ?? ''} ${body?.message ?? ''}`.trim());
    this.name = 'KubeApiError';
    this.status = status;
    this.reason = body?.reason;
    this.body = body;
  }
}

export function isNotFound(err: unknown): boolean {
  return err instanceof KubeApiError && err.status === 404;
}
export function isConflict(err: unknown): boolean {
  return err instanceof KubeApiError && err.status === 409;
}
export function isGone(err: unknown): boolean {
  return err instanceof KubeApiError && err.status === 410;
}

export type Query = Record<string, string | number | boolean | undefined>;

export interface RequestOpts {
  query?: Query;
  body?: unknown;
  contentType?: string;
  signal?: AbortSignal;
  timeoutMs?: number;
  /** A successful response's body is read and dropped, not parsed (the result is undefined). Errors still are. */
  discardBody?: boolean;
}

/**
 * The apiserver decodes apply-patch bodies as YAML, which refuses C1 controls, DEL and U+2028/2029 even inside
 * quoted strings; JSON.stringify leaves them raw. Any tenant text in such a body (a display name, a compiled
 * shard) would then make the whole write fail, so these bodies are always escaped.
 */
export function serializeBody(body: unknown, contentType: string | undefined): string {
  return contentType !== undefined && /yaml/i.test(contentType) ? yamlSafeJson(body) : JSON.stringify(body);
}

// Credentials from exec plugins and projected service-account tokens rotate, so TLS/auth options are
// refreshed periodically rather than computed once.
const AUTH_REFRESH_MS = 60_000;

// A 429 with Retry-After is the apiserver asking for the same request again later (a watch cache still filling
// after its CRD was installed, priority and fairness shedding load); client-go retries it the same way. Past this
// long since the first attempt, the 429 is the answer.
const RETRY_AFTER_BUDGET_MS = 10_000;

/** Retry-After in delay-seconds, as the apiserver sends it; undefined when absent or in another form. */
export function retryAfterMs(header: string | string[] | undefined): number | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined || !/^\d{1,6}$/.test(value.trim())) return undefined;
  return Number(value.trim()) * 1000;
}

export class KubeClient {
  readonly kubeConfig: KubeAccess;
  private readonly base: URL;
  private readonly agent: HttpsAgent | HttpAgent;
  private auth: { opts: RequestOptions; at: number } | undefined;

  constructor(kubeConfig: KubeAccess) {
    this.kubeConfig = kubeConfig;
    const cluster = kubeConfig.getCurrentCluster();
    if (!cluster) throw new Error('no current cluster in kubeconfig');
    this.base = new URL(cluster.server);
    this.agent =
      this.base.protocol === 'http:'
        ? new HttpAgent({ keepAlive: true, maxSockets: 64 })
        : new HttpsAgent({ keepAlive: true, maxSockets: 64 });
  }

  private async authOptions(): Promise<RequestOptions> {
    if (this.auth && Date.now() - this.auth.at < AUTH_REFRESH_MS) return this.auth.opts;
    const opts: RequestOptions = {};
    await this.kubeConfig.applyToHTTPSOptions(opts);
    delete opts.agent; // our keep-alive pool is used instead
    this.auth = { opts, at: Date.now() };
    return opts;
  }

  url(path: string, query?: Query): URL {
    const prefix = this.base.pathname.replace(/\/$/, '');
    const url = new URL(this.base.origin + prefix + path);
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    return url;
  }

  private async open(method: string, path: string, opts: RequestOpts): Promise<IncomingMessage> {
    const auth = await this.authOptions();
    const url = this.url(path, opts.query);
    const payload =
      opts.body === undefined
        ? undefined
        : typeof opts.body === 'string'
          ? opts.body
          : serializeBody(opts.body, opts.contentType);
    const headers: Record<string, string> = {
      Accept: 'application/json',
      ...(auth.headers as Record<string, string> | undefined),
    };
    if (payload !== undefined) {
      headers['Content-Type'] = opts.contentType ?? 'application/json';
      headers['Content-Length'] = String(Buffer.byteLength(payload));
    }
    const request = url.protocol === 'http:' ? httpRequest : httpsRequest;
    return new Promise<IncomingMessage>((resolve, reject) => {
      const req = request(
        url,
        { ...auth, method, headers, agent: this.agent, ...(opts.signal ? { signal: opts.signal } : {}) },
        resolve,
      );
      if (opts.timeoutMs)
        req.setTimeout(opts.timeoutMs, () =>
          req.destroy(new Error(`${method} ${path} timed out after ${opts.timeoutMs} ms`)),
        );
      req.on('error', reject);
      req.end(payload);
    });
  }

  /** One JSON request; non-2xx responses throw KubeApiError carrying the apiserver's Status. */
  async request<T>(method: string, path: string, opts: RequestOpts = {}): Promise<T> {
    const res = await this.openWithRetryAfter(method, path, { timeoutMs: 30_000, ...opts });
    const status = res.statusCode ?? 0;
    const ok = status >= 200 && status < 300;
    if (ok && opts.discardBody) {
      for await (const _chunk of res);
      return undefined as T;
    }
    // Decoded chunk by chunk, so a list page is not also held as Buffers and then copied once more by
    // Buffer.concat.
    res.setEncoding('utf8');
    let text = '';
    for await (const chunk of res) text += chunk as string;
    if (!ok) {
      let body: KubeStatus | undefined;
      try {
        body = JSON.parse(text) as KubeStatus;
      } catch {
        body = { message: text.slice(0, 200) };
      }
      throw new KubeApiError(status, body, `${method} ${path}`);
    }
    return (text ? JSON.parse(text) : undefined) as T;
  }

  /**
   * open(), again after the wait a 429 asks for, while the time since the first attempt stays within
   * RETRY_AFTER_BUDGET_MS and the request's own timeout (the REST door's writes promise an answer within theirs).
   */
  private async openWithRetryAfter(method: string, path: string, opts: RequestOpts): Promise<IncomingMessage> {
    const started = Date.now();
    const budget = Math.min(RETRY_AFTER_BUDGET_MS, opts.timeoutMs ?? RETRY_AFTER_BUDGET_MS);
    for (;;) {
      const res = await this.open(method, path, opts);
      const wait = res.statusCode === 429 ? retryAfterMs(res.headers['retry-after']) : undefined;
      // "Retry-After: 0" still waits a little: the budget then bounds the attempts too.
      const delay = wait === undefined ? undefined : Math.max(wait, 100);
      if (delay === undefined || Date.now() - started + delay > budget || opts.signal?.aborted) return res;
      res.resume();
      await sleep(delay, undefined, opts.signal ? { signal: opts.signal } : {});
    }
  }

  /**
   * A streaming watch: calls onEvent for each JSON line and resolves when the server ends the stream.
   * Rejects on transport errors and on a non-200 response (KubeApiError).
   */
  async stream(path: string, query: Query, onEvent: (event: unknown) => void, signal: AbortSignal): Promise<void> {
    const res = await this.open('GET', path, { query, signal });
    const status = res.statusCode ?? 0;
    if (status !== 200) {
      const chunks: Buffer[] = [];
      for await (const chunk of res) chunks.push(chunk as Buffer);
      let body: KubeStatus | undefined;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as KubeStatus;
      } catch {
        body = undefined;
      }
      throw new KubeApiError(status, body, `WATCH ${path}`);
    }
    res.setEncoding('utf8');
    let buffered = '';
    for await (const chunk of res) {
      buffered += chunk as string;
      let nl: number;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, nl).trim();
        buffered = buffered.slice(nl + 1);
        if (line) onEvent(JSON.parse(line));
      }
    }
    if (signal.aborted) throw signal.reason instanceof Error ? signal.reason : new Error('watch aborted');
  }

  close(): void {
    this.agent.destroy();
  }
}

/** Path helpers. Cluster-wide collection path → namespaced one: /apis/g/v/plural → /apis/g/v/namespaces/ns/plural. */
export function namespacedPath(collectionPath: string, namespace: string | undefined): string {
  if (!namespace) return collectionPath;
  const i = collectionPath.lastIndexOf('/');
  return `${collectionPath.slice(0, i)}/namespaces/${encodeURIComponent(namespace)}${collectionPath.slice(i)}`;
}

export interface KindInfo {
  /** e.g. '/apis/byok.gateway.dev/v1alpha1/byokcredentials' or '/api/v1/secrets' */
  collectionPath: string;
  namespaced: boolean;
}

const CORE_PLURALS: Record<string, string> = {
  Secret: 'secrets',
  ConfigMap: 'configmaps',
  Event: 'events',
  Lease: 'leases',
  Namespace: 'namespaces',
};

/** Resolves the collection path for an apiVersion+kind; our CRDs and the few core kinds we write. */
export function kindInfo(apiVersion: string, kind: string, plural?: string): KindInfo {
  const p = plural ?? CRD_PLURALS[kind] ?? CORE_PLURALS[kind] ?? `${kind.toLowerCase()}s`;
  const prefix = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
  return { collectionPath: `${prefix}/${p}`, namespaced: kind !== 'Namespace' };
}

const CRD_PLURALS: Record<string, string> = {
  BYOKCredential: 'byokcredentials',
  Workspace: 'workspaces',
  Guardrail: 'guardrails',
  GatewayAPIKey: 'gatewayapikeys',
  Account: 'accounts',
};

export function objectPath(
  apiVersion: string,
  kind: string,
  namespace: string | undefined,
  name: string,
  subresource?: string,
): string {
  const info = kindInfo(apiVersion, kind);
  return `${namespacedPath(info.collectionPath, info.namespaced ? namespace : undefined)}/${encodeURIComponent(name)}${subresource ? `/${subresource}` : ''}`;
}

const clients = new WeakMap<KubeAccess, KubeClient>();
/** One shared client (and connection pool) per KubeConfig object. */
export function kubeClient(kc: KubeAccess): KubeClient {
  let c = clients.get(kc);
  if (!c) {
    c = new KubeClient(kc);
    clients.set(kc, c);
  }
  return c;
}
