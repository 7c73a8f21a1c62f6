// Deterministic object names: every export of the same input writes the same names, so a re-export is an update.
// Names are DNS-1123 labels (at most 63 characters), readable where they can be and hashed where they must be.
import { createHash } from 'node:crypto';
import type { ExportTarget } from './types.ts';

export const shortHash = (text: string, length = 10): string => createHash('sha256').update(text).digest('hex').slice(0, length);

/** `openai/gpt-5` -> `openai-gpt-5`: lowercase, only [a-z0-9-], no leading or trailing dash. */
export function slugify(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '');
}

/**
 * A readable label from parts, at most 63 characters: when the readable form is longer, it is cut and a hash of
 * the full form keeps it unique.
 */
export function objectName(...parts: string[]): string {
  const full = parts.map(slugify).filter(Boolean).join('-');
  if (full.length <= 63) return full;
  const hash = shortHash(full, 8);
  return `${full.slice(0, 63 - hash.length - 1).replace(/-+$/, '')}-${hash}`;
}

/**
 * The name of an object that belongs to one account: readable parts plus a hash of the parts as a tuple. Joined by
 * dashes alone, tenant-chosen namespaces and names could meet (`team-a` + `b-c` and `team-a-b` + `c`) and one
 * tenant's export would overwrite another's policy; the hash keeps them apart.
 */
export function tenantName(...parts: string[]): string {
  return objectName(...parts, shortHash(JSON.stringify(parts), 6));
}

const TARGET_SUFFIX: Record<ExportTarget, string> = { 'envoy-ai-gateway': 'eaig', agentgateway: 'agw' };

/**
 * The Secret a target reads a credential from, in the target's own shape. Hashed from the credential's
 * namespace/name only, so it never changes with the payload and reveals nothing of it.
 */
export function derivedSecretName(target: ExportTarget, namespace: string, name: string, part?: string): string {
  return `byok-${shortHash(`${namespace}/${name}${part ? `#${part}` : ''}`, 20)}-${TARGET_SUFFIX[target]}`;
}

/** The derived Secret of one credential (or of one of its parts): its name and how the report names its source. */
export function credentialSecret(target: ExportTarget, namespace: string, name: string, part?: string): { name: string; source: string; credential: string; part?: string } {
  const credential = `${namespace}/${name}`;
  return { name: derivedSecretName(target, namespace, name, part), source: part ? `${credential} (${part})` : credential, credential, ...(part ? { part } : {}) };
}

/** The platform's own key for a provider's shared capacity, in the target's shape (the platform provides it). */
export function sharedSecretName(target: ExportTarget, provider: string): string {
  return objectName('byok-shared', provider, TARGET_SUFFIX[target]);
}
