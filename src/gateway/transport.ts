// The gateway's upstream HTTP client: node:http keep-alive agents per kind of URL. Catalog URLs are the operator's and
// trusted: plain keep-alive agents. URLs from a tenant's payload (an Azure endpoint_url) go through the node:https agent
// that applies the egress policy to every resolved address at connect time (docs/gateway.md, "Egress policy"). Neither
// follows redirects. Not undici's pool: it allocated less per request, but part of every request it served survived
// scavenges into the old generation, and the GC threads' work per request was many times what it is with these agents
// (bench/gateway-gc.ts; docs/perf/gateway-speed.md, "Allocation and GC").
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { getCACertificates } from 'node:tls';
import type { EgressAllowList } from '../domain/egress.ts';
import type { AttemptTimer } from './attempts.ts';
import { tenantHttpsAgent } from './egress.ts';
import type { UpstreamRequest } from './upstream.ts';
import type { UpstreamResponse } from './upstream-body.ts';

export class UpstreamTransport {
  /** The egress-checked agent, also used by the Vertex token exchange. */
  readonly tenantAgent: HttpsAgent;
  private readonly httpAgent: HttpAgent;
  private readonly httpsAgent: HttpsAgent;

  constructor(opts: { egress: EgressAllowList; upstreamCaPem?: string | undefined }) {
    const tls = {
      keepAlive: true,
      maxSockets: 1024,
      ...(opts.upstreamCaPem ? { ca: [...getCACertificates('default'), opts.upstreamCaPem] } : {}),
    };
    this.httpAgent = new HttpAgent({ keepAlive: true, maxSockets: 1024 });
    this.httpsAgent = new HttpsAgent(tls);
    this.tenantAgent = tenantHttpsAgent(opts.egress, tls);
  }

  /** POSTs one upstream request; resolves with the response head. The deadline is the timer's. */
  send(req: UpstreamRequest, timer: AttemptTimer): Promise<UpstreamResponse> {
    return new Promise((resolve, reject) => {
      const agent = this.agentFor(req);
      const url = req.url;
      const r = (url.protocol === 'https:' ? httpsRequest : httpRequest)({
        protocol: url.protocol,
        // An IPv6 literal comes bracketed in a URL, bare in a connect option.
        hostname: url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname,
        port: url.port,
        path: `${url.pathname}${url.search}`,
        method: 'POST',
        agent,
        headers: headerList(req),
      });
      timer.attach(r);
      // `on`: 'response' comes once anyway, and an 'error' after the promise settled must still find a listener.
      r.on('response', resolve);
      r.on('error', reject);
      r.end(req.body);
    });
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
      const r = (req.url.protocol === 'https:' ? httpsRequest : httpRequest)(req.url, {
        method: 'GET',
        agent,
        headers: { ...req.headers, accept: 'application/json' },
        timeout: timeoutMs,
      });
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

const FIXED_HEADERS = new Set(['content-type', 'content-length', 'accept']);

/**
 * A POST's headers as [name, value, ...]: node:http then writes them as given instead of storing each through
 * setHeader (about 2 KB less garbage per request). Given that way, Host is not added for us: it is the URL's (a
 * SigV4 signature brings its own, which is kept as signed).
 */
function headerList(req: UpstreamRequest): string[] {
  const list: string[] = [];
  let host = false;
  for (const name in req.headers) {
    // Names are compared as HTTP does (a signer may spell Host so).
    const lower = name.toLowerCase();
    if (FIXED_HEADERS.has(lower)) continue;
    if (lower === 'host') host = true;
    list.push(name, req.headers[name]!);
  }
  if (!host) list.push('host', req.url.host);
  list.push(
    'content-type',
    'application/json',
    'content-length',
    String(Buffer.byteLength(req.body)),
    'accept',
    'application/json, text/event-stream',
  );
  return list;
}
