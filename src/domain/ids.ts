// Public ids are UUIDv5 of "namespace/name" under a per-kind namespace UUID, so an id survives
// GitOps delete-and-recreate and cluster restore, and any replica computes the same id offline.
import { v5 as uuidv5 } from 'uuid';

const ROOT = '6f2d6c1e-4c56-5b0e-9d8c-2a7b0c3e1f40';

export type IdentifiedKind = 'BYOKCredential' | 'Workspace' | 'Guardrail' | 'GatewayAPIKey' | 'Account';

const kindNamespaces = new Map<IdentifiedKind, string>();

function kindNamespace(kind: IdentifiedKind): string {
  let ns = kindNamespaces.get(kind);
  if (!ns) {
    ns = uuidv5(`byok.gateway.dev/${kind}`, ROOT);
    kindNamespaces.set(kind, ns);
  }
  return ns;
}

export function publicId(kind: IdentifiedKind, namespace: string, name: string): string {
  return uuidv5(`${namespace}/${name}`, kindNamespace(kind));
}
