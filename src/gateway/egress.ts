// The connect-time half of the egress policy (src/domain/egress.ts): an HTTPS agent for tenant-supplied URLs whose
// DNS lookup refuses a name that resolves to a forbidden address, so a name that passed validation cannot be pointed
// at the pod's network later (DNS rebinding). IP literals never reach a lookup; they are checked with the payload.
import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions } from 'node:dns';
import { Agent as HttpsAgent, type AgentOptions } from 'node:https';
import type { LookupFunction } from 'node:net';
import { resolvedAddressProblem, type EgressAllowList } from '../domain/egress.ts';

/** Raised by the lookup; the request path reports it to the tenant as `upstream unreachable`, like any transport error. */
export class EgressDeniedError extends Error {
  readonly code = 'EGRESS_DENIED';
  constructor(message: string) {
    super(message);
    this.name = 'EgressDeniedError';
  }
}

export function egressLookup(allow: EgressAllowList): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...(options as object), all: true } as LookupAllOptions, (err, addresses: LookupAddress[]) => {
      if (err) return callback(err, '', 0);
      const refused = addresses.find((a) => resolvedAddressProblem(hostname, a.address, allow) !== null);
      if (refused || addresses.length === 0) {
        const why = refused ? resolvedAddressProblem(hostname, refused.address, allow) : 'no address';
        return callback(new EgressDeniedError(`egress to ${hostname} refused: it resolves to a ${why} address`), '', 0);
      }
      if ((options as { all?: boolean }).all) (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
      else callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
}

/** The agent every tenant-supplied URL goes through (Azure deployments, Vertex token exchanges). */
export function tenantHttpsAgent(allow: EgressAllowList, options: AgentOptions): HttpsAgent {
  return new HttpsAgent({ ...options, lookup: egressLookup(allow) });
}
