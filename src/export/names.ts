// Deterministic object names: every export of the same input writes the same names, so a re-export is an update.
// Names are DNS-1123 labels (at most 63 characters), readable where they can be and hashed where they must be.
//
// Whatever a tenant chooses (its namespace, credential names, an Azure host) reaches a name only through
// `tenantName`: a readable prefix for people, then 130 bits of a digest of the exact parts as a tuple. The prefix is
// not injective (`team` + `a-x` and `team-a` + `x` read alike); the digest is, for every feasible search, so no
// tenant can name another account's object or a shared one by choosing its inputs.
import { hash } from 'node:crypto';
import type { ExportTarget } from './types.ts';

// One-shot hashes: an export names thousands of objects, and a Hash object per name cost more than the digest.
export const shortHash = (text: string, length = 10): string => hash('sha256', text, 'hex').slice(0, length);

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';
/** Characters of a name's digest: 26 base32 characters are 130 bits, beyond any collision search. */
export const DIGEST_CHARS = 26;

/** The first 130 bits of sha256(text) in lower-case base32 (letters and 2-7: DNS-safe). */
export function digestLabel(text: string): string {
  const bytes = hash('sha256', text, 'buffer');
  let out = '';
  for (let i = 0; i < DIGEST_CHARS; i++) {
    const bit = i * 5;
    const pair = (bytes[bit >> 3]! << 8) | (bytes[(bit >> 3) + 1] ?? 0);
    out += BASE32[(pair >> (11 - (bit & 7))) & 31];
  }
  return out;
}

/** The full sha256 of a name's parts as a tuple: what a shared object's identity annotation holds. */
export const partsDigest = (parts: readonly string[]): string => hash('sha256', JSON.stringify(parts), 'hex');

/** `openai/gpt-5` -> `openai-gpt-5`: lowercase, only [a-z0-9-], no leading or trailing dash. */
export function slugify(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '');
}

/**
 * A readable label from parts the platform controls (catalog models, provider slugs), at most 63 characters: when
 * the readable form is longer, it is cut and a hash of the full form keeps it unique. Never for tenant input.
 */
export function objectName(...parts: string[]): string {
  const full = parts.map(slugify).filter(Boolean).join('-');
  if (full.length <= 63) return full;
  const hash = shortHash(full, 8);
  return `${full.slice(0, 63 - hash.length - 1).replace(/-+$/, '')}-${hash}`;
}

/**
 * The name of an object whose parts a tenant chooses or can learn: a readable prefix, cut to fit, and the 130-bit
 * digest of the parts as a tuple (JSON of the array: `["team","a-x"]` and `["team-a","x"]` differ). Injective for
 * every feasible input, whatever the prefix reads.
 */
export function tenantName(...parts: string[]): string {
  const digest = digestLabel(JSON.stringify(parts));
  const readable = parts
    .map(slugify)
    .filter(Boolean)
    .join('-')
    .slice(0, 63 - DIGEST_CHARS - 1)
    .replace(/-+$/, '');
  return readable === '' ? digest : `${readable}-${digest}`;
}

const TARGET_SUFFIX: Record<ExportTarget, string> = { 'envoy-ai-gateway': 'eaig', agentgateway: 'agw' };

/**
 * The Secret a target reads a credential from, in the target's own shape. Hashed from the credential's
 * namespace/name only (a namespace has no `/`, so the text is injective), 128 bits, so it never changes with the
 * payload, reveals nothing of it, and no other credential's name reaches it.
 */
export function derivedSecretName(target: ExportTarget, namespace: string, name: string, part?: string): string {
  return `byok-${shortHash(`${namespace}/${name}${part ? `#${part}` : ''}`, 32)}-${TARGET_SUFFIX[target]}`;
}

/** The derived Secret of one credential (or of one of its parts): its name and how the report names its source. */
export function credentialSecret(
  target: ExportTarget,
  namespace: string,
  name: string,
  part?: string,
): { name: string; source: string; credential: string; part?: string } {
  const credential = `${namespace}/${name}`;
  return {
    name: derivedSecretName(target, namespace, name, part),
    source: part ? `${credential} (${part})` : credential,
    credential,
    ...(part ? { part } : {}),
  };
}

/** The platform's own key for a provider's shared capacity, in the target's shape (the platform provides it). */
export function sharedSecretName(target: ExportTarget, provider: string): string {
  return objectName('byok-shared', provider, TARGET_SUFFIX[target]);
}

/** The identity of an exported object within one target: its apiVersion, kind and name. */
export const targetObjectKey = (o: { apiVersion: string; kind: string; metadata: { name: string } }): string =>
  `${o.apiVersion}|${o.kind}|${o.metadata.name}`;
