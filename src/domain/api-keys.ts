// Whether a gateway API key is live. One definition for the reconciler, the compiler and the REST API, so a
// filter never resolves in one place and not in another.

/** Prefixes of generated keys, so a leaked key is recognisable by secret scanners, and a key sent to the wrong door is told so. */
export const MANAGEMENT_KEY_PREFIX = 'sk-byok-mgmt-v1-';
export const GATEWAY_KEY_PREFIX = 'sk-byok-gw-v1-';

export interface ApiKeyState {
  disabled?: boolean;
  /** RFC 3339; absent or null = never expires. */
  expiresAt?: string | null;
}

/** Live = not disabled and not expired. An expiry that cannot be parsed counts as expired: fail closed. */
export function isApiKeyLive(key: ApiKeyState, nowMs: number): boolean {
  if (key.disabled === true) return false;
  if (key.expiresAt === undefined || key.expiresAt === null) return true;
  const expires = Date.parse(key.expiresAt);
  return !Number.isNaN(expires) && expires > nowMs;
}

/**
 * A gateway-key hash as every lookup compares it. The doors admit only lowercase hex (the CRD pattern, the REST
 * filters); lookups lower it all the same, so a respelling that slipped past a door is the same hash, never a
 * second holder of it.
 */
export function normalizeKeyHash(hash: string): string {
  return hash.toLowerCase();
}

/** Every hash a key names: its current one and, after a rotation, its previous one (normalized). */
export function hashesNamed(key: { spec?: { hash?: string; previousHash?: string } }): string[] {
  const out = key.spec?.hash ? [normalizeKeyHash(key.spec.hash)] : [];
  if (key.spec?.previousHash) out.push(normalizeKeyHash(key.spec.previousHash));
  return out;
}
