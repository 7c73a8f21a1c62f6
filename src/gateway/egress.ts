// The connect-time half of the egress policy (src/domain/egress.ts): an HTTPS agent for tenant-supplied URLs that
// judges every address before a socket is opened to it, with the domain's one judge (`resolvedAddressProblem`).
// Names: its DNS lookup refuses a name that resolves to a forbidden address, so a name that passed validation cannot
// be pointed at the pod's network later (DNS rebinding). IP literals: net.connect skips the lookup for them, so the
// agent's createConnection judges the literal itself (a payload stored under a wider policy, or an IPv6 spelling
// validation did not know, gets no pass).
import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions } from 'node:dns';
import type { ClientRequestArgs } from 'node:http';
import { type AgentOptions, Agent as HttpsAgent } from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import type { Duplex } from 'node:stream';
import { type EgressAllowList, parseIp, resolvedAddressProblem } from '../domain/egress.ts';

/** Raised by the lookup or the agent; the request path reports it to the tenant as `upstream unreachable`, like any transport error. */
export class EgressDeniedError extends Error {
  readonly code = 'EGRESS_DENIED';
  constructor(message: string) {
    super(message);
    this.name = 'EgressDeniedError';
  }
}

/** The resolver the lookup asks (node:dns by default; a test passes a rebinding one). */
export type Resolver = (
  hostname: string,
  options: LookupAllOptions,
  callback: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

export function egressLookup(allow: EgressAllowList, resolve: Resolver = dnsLookup): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname, { ...(options as object), all: true } as LookupAllOptions, (err, addresses) => {
      if (err) return callback(err, '', 0);
      const refused = addresses.find((a) => resolvedAddressProblem(hostname, a.address, allow) !== null);
      if (refused || addresses.length === 0) {
        const why = refused
          ? `it resolves to a ${resolvedAddressProblem(hostname, refused.address, allow)} address`
          : 'it resolves to no address';
        return callback(new EgressDeniedError(`egress to ${hostname} refused: ${why}`), '', 0);
      }
      if ((options as { all?: boolean }).all)
        (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
      else callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
}

/**
 * Why the agent refuses to open a socket to `host` before any lookup, or null. An IP literal (anything net.connect
 * would take as one, or the policy reads as one) is judged as the address it is; a name is left to the lookup.
 */
export function literalHostProblem(host: string, allow: EgressAllowList): string | null {
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  if (isIP(bare) === 0 && parseIp(bare) === null) return null;
  return resolvedAddressProblem(bare, bare, allow);
}

/** An HTTPS agent whose every socket is checked: literals here, names in the lookup. */
class TenantHttpsAgent extends HttpsAgent {
  readonly #allow: EgressAllowList;

  constructor(allow: EgressAllowList, options: AgentOptions) {
    super({ ...options, lookup: egressLookup(allow) });
    this.#allow = allow;
  }

  override createConnection(
    options: ClientRequestArgs,
    callback?: (err: Error | null, stream: Duplex) => void,
  ): Duplex | null | undefined {
    // node:http sets `host` from the URL's hostname, brackets removed; net.connect's default is localhost (a name).
    const host = options.host ?? 'localhost';
    const why = literalHostProblem(host, this.#allow);
    if (why === null) return super.createConnection(options, callback);
    const err = new EgressDeniedError(`egress to ${host} refused: it is a ${why} address`);
    // The agent's own callback turns this into the request's 'error' (documented for custom agents).
    if (callback) {
      callback(err, undefined as unknown as Duplex);
      return undefined;
    }
    throw err;
  }
}

/** The agent every tenant-supplied URL goes through (Azure deployments, Vertex token exchanges). */
export function tenantHttpsAgent(allow: EgressAllowList, options: AgentOptions): HttpsAgent {
  return new TenantHttpsAgent(allow, options);
}
