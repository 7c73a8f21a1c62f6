// The only place a payload is read: it is reduced at once to the facts routing needs, by the payload's own shape
// module (domain/payloads/). Keys, secret access keys and private keys stay behind.
import { type CredentialFacts, type ProviderPayload, shapeOfPayload } from '../domain/payloads.ts';

export function payloadFacts(payload: ProviderPayload): CredentialFacts {
  return shapeOfPayload(payload).facts(payload);
}
