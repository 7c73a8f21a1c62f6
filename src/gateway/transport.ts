// The gateway's upstream HTTP client: keep-alive pools per kind of URL. Catalog URLs are the operator's and trusted:
// undici's pool (about 40 µs of CPU less per request than node:http's client, docs/gateway.md "Performance").
// URLs from a tenant's payload (an Azure endpoint_url) go through the node:https agent that applies the egress policy
// to every resolved address at connect time (docs/gateway.md, "Egress policy"). Neither follows redirects.
import { EventEmitter } from 'node:events';
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { getCACertificates } from 'node:tls';
import type { EgressAllowList } from '../domain/egress.ts';
import { Agent as UndiciAgent } from 'undici';
import type { AttemptTimer } from './attempts.ts';
import { tenantHttpsAgent } from './egress.ts';
import type { UpstreamResponse } from './upstream-body.ts';
import type { UpstreamRequest } from './upstream.ts';

export class UpstreamTransport {
  /** The egress-checked agent, also used by the Vertex token exchange. */
  readonly tenantAgent: HttpsAgent;
  private readonly httpAgent: HttpAgent;
  private readonly httpsAgent: HttpsAgent;
  private readonly pool: UndiciAgent;

  constructor(opts: { egress: EgressAllowList; upstreamCaPem?: string | undefined }) {
    this.pool = new UndiciAgent({ connections: 1024, keepAliveTimeout: 60_000, ...(opts.upstreamCaPem ? { connect: { ca: [...getCACertificates('default'), opts.upstreamCaPem] } } : {}) });
    const tls = { keepAlive: true, maxSockets: 1024, ...(opts.upstreamCaPem ? { ca: [...getCACertificates('default'), opts.upstreamCaPem] } : {}) };
    this.httpAgent = new HttpAgent({ keepAlive: true, maxSockets: 1024 });
    this.httpsAgent = new HttpsAgent(tls);
    this.tenantAgent = tenantHttpsAgent(opts.egress, tls);
  }

  /** POSTs one upstream request; resolves with the response head. The deadline is the timer's. */
  send(req: UpstreamRequest, timer: AttemptTimer): Promise<UpstreamResponse> {
    if (!req.tenantUrl) return this.sendPooled(req, timer);
    return new Promise((resolve, reject) => {
      const agent = this.agentFor(req);
      const r = (req.url.protocol === 'https:' ? httpsRequest : httpRequest)(req.url, {
        method: 'POST',
        agent,
        headers: { ...req.headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(req.body), accept: 'application/json, text/event-stream' },
      });
      timer.attach(r);
      r.once('response', resolve);
      r.once('error', reject);
      r.end(req.body);
    });
  }

  private async sendPooled(req: UpstreamRequest, timer: AttemptTimer): Promise<UpstreamResponse> {
    // The timer aborts through an emitter: undici accepts one, and it costs no AbortController per request.
    const signal = new EventEmitter();
    timer.attach({ destroy: () => signal.emit('abort') });
    const { statusCode, body } = await this.pool.request({
      origin: req.url.origin,
      path: `${req.url.pathname}${req.url.search}`,
      method: 'POST',
      headers: { ...req.headers, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: req.body,
      signal,
    });
    return Object.assign(body, { statusCode });
  }

  /** A GET whose body is discarded (the probe's models list): its status, or null when none came in time. */
  status(req: Omit<UpstreamRequest, 'body'>, timeoutMs: number): Promise<number | null> {
    return new Promise<number | null>((resolve) => {
      let agent: HttpAgent | HttpsAgent;
      try {
        agent = this.agentFor(req);
      } catch {
        resolve(null);
        return;
      }
      const r = (req.url.protocol === 'https:' ? httpsRequest : httpRequest)(req.url, { method: 'GET', agent, headers: { ...req.headers, accept: 'application/json' }, timeout: timeoutMs });
      r.once('response', (res) => {
        res.resume();
        res.once('end', () => resolve(res.statusCode ?? null));
        res.once('error', () => resolve(res.statusCode ?? null));
      });
      r.once('timeout', () => r.destroy(new Error('timeout')));
      r.once('error', () => resolve(null));
      r.end();
    });
  }

  close(): void {
    void this.pool.destroy();
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
    this.tenantAgent.destroy();
  }

  private agentFor(req: Pick<UpstreamRequest, 'url' | 'tenantUrl'>): HttpAgent | HttpsAgent {
    // A tenant's URL is https or nothing (validatePayload says so too): plain http has no egress-checked agent.
    if (req.tenantUrl) {
      if (req.url.protocol !== 'https:') throw new Error('a tenant URL must be https');
      return this.tenantAgent;
    }
    return req.url.protocol === 'https:' ? this.httpsAgent : this.httpAgent;
  }
}
