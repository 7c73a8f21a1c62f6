// Credential bundle envelopes: AES-256-GCM under a data key named by a key id. Node built-ins only, because
// gateway pods (the SDK) open what the operator seals.
//
// The IV is synthetic: HMAC(ivKey, aad || payload) truncated to 96 bits, with ivKey derived from the data key
// by HKDF. Same key + same (namespace, credential, payload) => the same envelope, so recompiling (or a new
// leader) does not rewrite every bundle Secret; a different payload gets a different IV (except with
// negligible HMAC-collision probability), which is what GCM needs.
import {
  createCipheriv,
  createDecipheriv,
  createHmac,
  createSecretKey,
  hkdfSync,
  type KeyObject,
  randomBytes,
} from 'node:crypto';
import { sha256Hex } from './routing.ts';

export const ENVELOPE_VERSION = 1;
export const KEY_BYTES = 32;
/** Secret data key naming the active key id. */
export const ACTIVE_KEY_ENTRY = 'active';
export const DEFAULT_BUNDLE_KEY_SECRET = 'byok-bundle-key';
const KEY_ID_PATTERN = /^[A-Za-z0-9][-A-Za-z0-9_.]{0,62}$/;

export interface BundleEnvelope {
  v: 1;
  alg: 'A256GCM';
  /** Id of the data key that sealed this payload. */
  kid: string;
  /** Account namespace and credential public id; both are bound into the AAD. */
  ns: string;
  id: string;
  /** base64 */
  iv: string;
  tag: string;
  ct: string;
}

export interface Keyring {
  active: string;
  keys: ReadonlyMap<string, Buffer>;
}

export class BundleError extends Error {
  readonly code: 'unknown-key' | 'bad-envelope' | 'auth-failed' | 'bad-keyring' | 'not-found';
  constructor(code: BundleError['code'], message: string) {
    super(message);
    this.name = 'BundleError';
    this.code = code;
  }
}

export function aad(namespace: string, credentialId: string): Buffer {
  return Buffer.from(`byok-bundle/v1\n${namespace}\n${credentialId}`, 'utf8');
}

const derived = new Map<string, WeakMap<Buffer, Buffer>>();
/** A 32-byte key derived from a data key by HKDF-SHA256 for one purpose (`info`), computed once per data key. */
export function derivedKey(key: Buffer, info: string): Buffer {
  let byKey = derived.get(info);
  if (!byKey) {
    byKey = new WeakMap();
    derived.set(info, byKey);
  }
  let k = byKey.get(key);
  if (!k) {
    k = Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), info, 32));
    byKey.set(key, k);
  }
  return k;
}

const ivKey = (key: Buffer): Buffer => derivedKey(key, 'byok-bundle-iv');

// A raw Buffer key makes every cipher call convert it, and Node's KeyObject brand check on a Buffer throws and
// catches internally (tens of µs per call); a KeyObject per data key, created once, skips both.
const keyObjects = new WeakMap<Buffer, KeyObject>();
function keyObject(key: Buffer): KeyObject {
  let k = keyObjects.get(key);
  if (!k) {
    k = createSecretKey(key);
    keyObjects.set(key, k);
  }
  return k;
}

export function sealPayload(
  keyring: Keyring,
  namespace: string,
  credentialId: string,
  payload: string,
): BundleEnvelope {
  const key = keyring.keys.get(keyring.active);
  if (!key) throw new BundleError('unknown-key', `active key id ${keyring.active} has no key`);
  const additional = aad(namespace, credentialId);
  const plain = Buffer.from(payload, 'utf8');
  const iv = createHmac('sha256', ivKey(key))
    .update(additional)
    .update(Buffer.from([0]))
    .update(plain)
    .digest()
    .subarray(0, 12);
  const cipher = createCipheriv('aes-256-gcm', keyObject(key), iv);
  cipher.setAAD(additional);
  const ct = Buffer.concat([cipher.update(plain), cipher.final()]);
  return {
    v: 1,
    alg: 'A256GCM',
    kid: keyring.active,
    ns: namespace,
    id: credentialId,
    iv: iv.toString('base64'),
    tag: cipher.getAuthTag().toString('base64'),
    ct: ct.toString('base64'),
  };
}

export function parseEnvelope(text: string): BundleEnvelope {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new BundleError('bad-envelope', 'envelope is not JSON');
  }
  const e = value as Partial<BundleEnvelope> | null;
  if (
    !e ||
    e.v !== ENVELOPE_VERSION ||
    e.alg !== 'A256GCM' ||
    typeof e.kid !== 'string' ||
    typeof e.ns !== 'string' ||
    typeof e.id !== 'string' ||
    typeof e.iv !== 'string' ||
    typeof e.tag !== 'string' ||
    typeof e.ct !== 'string'
  ) {
    throw new BundleError('bad-envelope', 'envelope has missing or invalid fields');
  }
  return e as BundleEnvelope;
}

/** Decrypts; `expected` pins the namespace and credential so an envelope cannot be replayed under another id. */
export function openEnvelope(
  keys: ReadonlyMap<string, Buffer>,
  envelope: BundleEnvelope,
  expected: { namespace: string; credentialId: string },
): string {
  const key = keys.get(envelope.kid);
  if (!key) throw new BundleError('unknown-key', `no data key with id ${envelope.kid}`);
  if (envelope.ns !== expected.namespace || envelope.id !== expected.credentialId) {
    throw new BundleError('auth-failed', 'envelope belongs to another credential');
  }
  try {
    const decipher = createDecipheriv('aes-256-gcm', keyObject(key), Buffer.from(envelope.iv, 'base64'));
    decipher.setAAD(aad(expected.namespace, expected.credentialId));
    decipher.setAuthTag(Buffer.from(envelope.tag, 'base64'));
    return Buffer.concat([decipher.update(Buffer.from(envelope.ct, 'base64')), decipher.final()]).toString('utf8');
  } catch {
    throw new BundleError('auth-failed', 'envelope failed authentication');
  }
}

export function isKeyId(value: string): boolean {
  return KEY_ID_PATTERN.test(value) && value !== ACTIVE_KEY_ENTRY;
}

/**
 * Keyring from the key Secret's entries (decoded bytes, as mounted files or Secret data):
 * `active` names the key id; every other entry of exactly 32 bytes is a key. Old keys stay so old envelopes open.
 */
export function keyringFromEntries(entries: ReadonlyMap<string, Buffer>): Keyring {
  const activeRaw = entries.get(ACTIVE_KEY_ENTRY);
  if (!activeRaw) throw new BundleError('bad-keyring', `key Secret has no "${ACTIVE_KEY_ENTRY}" entry`);
  const active = activeRaw.toString('utf8').trim();
  const keys = new Map<string, Buffer>();
  for (const [name, value] of entries) {
    if (name !== ACTIVE_KEY_ENTRY && isKeyId(name) && value.length === KEY_BYTES) keys.set(name, value);
  }
  if (!keys.has(active)) throw new BundleError('bad-keyring', `active key id ${active} has no 32-byte key`);
  return { active, keys };
}

export function newKeyId(now: Date = new Date()): string {
  const stamp = now
    .toISOString()
    .replace(/[-:TZ]/g, '')
    .slice(0, 14);
  return `k${stamp}-${randomBytes(3).toString('hex')}`;
}

export function newDataKey(): Buffer {
  return randomBytes(KEY_BYTES);
}

/**
 * The version of one credential's sealed state: a digest of its envelope text (payload, namespace, id and the key id
 * that sealed it). The compile pipeline and gateway pods compute it the same way, so the operator can count which pods
 * hold a credential's current payload (delivery). Sealing is deterministic, so the same input keeps its version.
 */
export function envelopeVersion(envelope: string | Uint8Array): string {
  return sha256Hex(envelope).slice(0, 16);
}
