// The delivery stream between the operator and gateway pods (docs/operator.md, "Delivery stream"): what it carries,
// how each object is signed, which objects a pod lacks, and the pod-side rule that applies a batch. Node built-ins
// and this folder only: the SDK's stream client and the operator's server both import it.
//
// What travels is exactly what the compile pipeline writes: each routing ConfigMap (the index, the shards) and each
// credential bundle Secret, as its files (the keys a projected volume would show) with a per-object version, the
// object's resourceVersion (an etcd revision: the same on every operator replica, and higher after every write).
// Every object is signed with HMAC-SHA256 under a key derived (HKDF) from the bundle data key the pod already
// mounts, so a pod applies only what holds that key, and it never applies a version at or below the one it holds.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { parseUntrustedJson } from '../domain/json.ts';
import { canonicalJson } from './canonical-json.ts';
import { derivedKey, type Keyring } from './envelope.ts';
import { sha256Hex } from './routing.ts';

export const DELIVERY_FORMAT = 'byok-delivery/v1';
export const DELIVERY_STREAM_PATH = '/delivery/v1/stream';
export const DELIVERY_ACK_PATH = '/delivery/v1/ack';
/** The audience of the projected ServiceAccount token a gateway presents (its own: no other API accepts it). */
export const DEFAULT_DELIVERY_AUDIENCE = 'byok-delivery';
/** The longest line either side reads: one object (an apiserver object is at most ~1.5 MiB) in base64 and JSON. */
export const MAX_DELIVERY_LINE_BYTES = 4 * 1024 * 1024;
/** The longest request body (hello or ack). */
export const MAX_DELIVERY_REQUEST_BYTES = 1024 * 1024;

export type DeliveryKind = 'ConfigMap' | 'Secret';

/** One routing ConfigMap or bundle Secret as it travels. */
export interface DeliveryObject {
  type: 'object';
  kind: DeliveryKind;
  name: string;
  /** The object's resourceVersion: decimal digits, compared as a number. */
  version: string;
  /** filesDigest(files). */
  digest: string;
  /** File name -> base64 content, as the projected volume would show it. */
  files: Record<string, string>;
  /** Bundle key id whose derived key signed it. */
  kid: string;
  sig: string;
}

/** An object the operator saw deleted, at the last version it had. */
export interface DeliveryRemoval {
  type: 'removed';
  kind: DeliveryKind;
  name: string;
  version: string;
  kid: string;
  sig: string;
}

/** Ends a batch: the pod applies what came since the last commit at once, then acknowledges `batch`. */
export interface DeliveryCommit {
  type: 'commit';
  batch: number;
}

export type DeliveryLine = DeliveryObject | DeliveryRemoval | DeliveryCommit | { type: 'ping' };

/** What a pod holds, sent when it (re)connects: it receives only what is newer. */
export interface DeliveryHello {
  format: typeof DELIVERY_FORMAT;
  /** A random id per gateway process. */
  instance: string;
  held: { kind: DeliveryKind; name: string; version: string }[];
}

export interface DeliveryAck {
  format: typeof DELIVERY_FORMAT;
  instance: string;
  batch: number;
  result: 'loaded' | 'refused';
  /** Why a batch was refused (ours, never tenant text or key material). */
  reason?: string;
  /** The routing index version the pod serves after the batch. */
  routingVersion: string | null;
}

export class DeliveryError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DeliveryError';
  }
}

const VERSION = /^[1-9][0-9]{0,39}$/;
const NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
// A file name in a projected volume: never `..data` nor another kubelet entry, never a path.
const FILE = /^[A-Za-z0-9_][-A-Za-z0-9_.]{0,252}$/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** A file name a delivered object may carry: a projected-volume entry, never a kubelet `..` entry, a path or `__proto__`. */
export function isDeliveryFileName(name: string): boolean {
  return FILE.test(name) && name !== '__proto__';
}

export const objectKey = (kind: DeliveryKind, name: string): string => `${kind}/${name}`;

/** Sign of a - b for two versions (decimal digit strings without leading zeros). */
export function compareVersions(a: string, b: string): number {
  if (a.length !== b.length) return a.length < b.length ? -1 : 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

export function filesDigest(files: Readonly<Record<string, string>>): string {
  return sha256Hex(canonicalJson(files));
}

const signingKey = (dataKey: Buffer): Buffer => derivedKey(dataKey, 'byok-delivery-sign/v1');

type Subject = { kind: DeliveryKind; name: string; version: string; digest: string };

function mac(key: Buffer, s: Subject): Buffer {
  return createHmac('sha256', signingKey(key))
    .update(canonicalJson({ f: DELIVERY_FORMAT, kind: s.kind, name: s.name, version: s.version, digest: s.digest }))
    .digest();
}

/** Signs under the keyring's active key. A removal signs an empty digest. */
export function signSubject(ring: Keyring, s: Subject): { kid: string; sig: string } {
  const key = ring.keys.get(ring.active);
  if (!key) throw new DeliveryError(`active key id ${ring.active} has no key`);
  return { kid: ring.active, sig: mac(key, s).toString('base64') };
}

/** Undefined when the signature holds; otherwise why not. */
export function signatureProblem(
  keys: ReadonlyMap<string, Buffer>,
  s: Subject & { kid: string; sig: string },
): string | undefined {
  const key = keys.get(s.kid);
  if (!key) return `signed with key id ${s.kid}, which this pod does not hold`;
  const given = Buffer.from(s.sig, 'base64');
  const want = mac(key, s);
  return given.length === want.length && timingSafeEqual(given, want) ? undefined : 'the signature does not verify';
}

/**
 * What a pod holding `held` (key -> version) lacks: the current objects newer than what it holds (or not held), and
 * the held objects this replica saw deleted at or after the held version. An object held at a newer version than
 * this replica's cache (a pod that moved from a fresher replica) is left alone, and so is one this replica never saw.
 */
export function deltaFor(
  held: ReadonlyMap<string, string>,
  current: ReadonlyMap<string, { version: string }>,
  tombstones: ReadonlyMap<string, string>,
): { send: string[]; remove: string[] } {
  const send: string[] = [];
  const remove: string[] = [];
  for (const [key, { version }] of current) {
    const have = held.get(key);
    if (have === undefined || compareVersions(version, have) > 0) send.push(key);
  }
  for (const [key, have] of held) {
    if (current.has(key)) continue;
    const gone = tombstones.get(key);
    if (gone !== undefined && compareVersions(gone, have) >= 0) remove.push(key);
  }
  return { send, remove };
}

/** One line of the stream, checked field by field. */
export function parseDeliveryLine(text: string): DeliveryLine {
  let v: unknown;
  try {
    v = parseUntrustedJson(text);
  } catch {
    throw new DeliveryError('a stream line is not JSON');
  }
  const o = v as Record<string, unknown> | null;
  if (!o || typeof o !== 'object') throw new DeliveryError('a stream line is not an object');
  if (o.type === 'ping') return { type: 'ping' };
  if (o.type === 'commit') {
    if (!Number.isSafeInteger(o.batch)) throw new DeliveryError('a commit has no batch number');
    return { type: 'commit', batch: o.batch as number };
  }
  if (o.type !== 'object' && o.type !== 'removed') throw new DeliveryError('a stream line has an unknown type');
  if (o.kind !== 'ConfigMap' && o.kind !== 'Secret') throw new DeliveryError('an object has an unknown kind');
  if (typeof o.name !== 'string' || !NAME.test(o.name)) throw new DeliveryError('an object has an invalid name');
  if (typeof o.version !== 'string' || !VERSION.test(o.version))
    throw new DeliveryError('an object has an invalid version');
  if (typeof o.kid !== 'string' || typeof o.sig !== 'string') throw new DeliveryError('an object is not signed');
  const head = { kind: o.kind, name: o.name, version: o.version, kid: o.kid, sig: o.sig } as const;
  if (o.type === 'removed') return { type: 'removed', ...head };
  if (typeof o.digest !== 'string' || !o.files || typeof o.files !== 'object' || Array.isArray(o.files))
    throw new DeliveryError('an object has no files');
  const files: Record<string, string> = {};
  for (const [name, content] of Object.entries(o.files as Record<string, unknown>)) {
    if (!isDeliveryFileName(name)) throw new DeliveryError('an object has an invalid file name');
    if (typeof content !== 'string' || !BASE64.test(content))
      throw new DeliveryError('an object has a file that is not base64');
    files[name] = content;
  }
  return { type: 'object', ...head, digest: o.digest, files };
}

export interface HeldObject {
  kind: DeliveryKind;
  name: string;
  version: string;
  digest: string;
  files: Record<string, string>;
}

/**
 * What a pod holds from the stream, and the one rule that changes it: a verified object newer than the held one.
 * Pure state: the client decides when to write it out and what to acknowledge.
 */
export class DeliveryState {
  private readonly objects = new Map<string, HeldObject>();

  /** Applies one object or removal; a refusal (the reason) leaves the state as it was. */
  apply(item: DeliveryObject | DeliveryRemoval, keys: ReadonlyMap<string, Buffer>): string | undefined {
    const key = objectKey(item.kind, item.name);
    const have = this.objects.get(key);
    const digest = item.type === 'object' ? filesDigest(item.files) : '';
    if (item.type === 'object' && digest !== item.digest) return `${key}: the files do not match the digest`;
    const bad = signatureProblem(keys, {
      kind: item.kind,
      name: item.name,
      version: item.version,
      digest,
      kid: item.kid,
      sig: item.sig,
    });
    if (bad) return `${key}: ${bad}`;
    if (item.type === 'removed') {
      if (have && compareVersions(item.version, have.version) < 0)
        return `${key}: a removal older than the held version ${have.version}`;
      this.objects.delete(key);
      return undefined;
    }
    if (have) {
      const order = compareVersions(item.version, have.version);
      if (order < 0) return `${key}: version ${item.version} is older than the held ${have.version} (never backwards)`;
      if (order === 0)
        return have.digest === digest ? undefined : `${key}: different content at the held version ${have.version}`;
    }
    this.objects.set(key, { kind: item.kind, name: item.name, version: item.version, digest, files: item.files });
    return undefined;
  }

  held(): DeliveryHello['held'] {
    return [...this.objects.values()].map(({ kind, name, version }) => ({ kind, name, version }));
  }

  get size(): number {
    return this.objects.size;
  }

  /** The files of one volume (ConfigMaps: routing; Secrets: bundles), decoded, objects in name order. */
  files(kind: DeliveryKind): Record<string, Buffer> {
    const out: Record<string, Buffer> = {};
    const held = [...this.objects.values()].filter((o) => o.kind === kind).sort((a, b) => (a.name < b.name ? -1 : 1));
    for (const o of held) for (const [name, b64] of Object.entries(o.files)) out[name] = Buffer.from(b64, 'base64');
    return out;
  }
}

/**
 * Splits a byte stream into lines ending in LF, CRLF or a lone CR (empty lines are dropped: the protocol has none),
 * with constant work per byte and one line buffered at most: a line longer than `maxBytes` is an error, not a growing
 * buffer.
 */
export class LineSplitter {
  private parts: Buffer[] = [];
  private length = 0;
  private readonly maxBytes: number;
  private readonly onLine: (line: Buffer) => void;

  constructor(onLine: (line: Buffer) => void, maxBytes = MAX_DELIVERY_LINE_BYTES) {
    this.onLine = onLine;
    this.maxBytes = maxBytes;
  }

  push(chunk: Buffer): void {
    let start = 0;
    for (let i = 0; i < chunk.length; i++) {
      const c = chunk[i]!;
      if (c !== 0x0a && c !== 0x0d) continue;
      // CR, LF and CRLF all end a line; the empty line between a CR and its LF (even across chunks) is dropped below.
      this.take(chunk.subarray(start, i));
      this.flush();
      start = i + 1;
    }
    if (start < chunk.length) this.take(chunk.subarray(start));
  }

  /** Bytes of an unfinished line held now. */
  get pending(): number {
    return this.length;
  }

  private take(piece: Buffer): void {
    if (piece.length === 0) return;
    this.length += piece.length;
    if (this.length > this.maxBytes) throw new DeliveryError(`a stream line is longer than ${this.maxBytes} bytes`);
    this.parts.push(piece);
  }

  private flush(): void {
    const line = this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts, this.length);
    this.parts = [];
    this.length = 0;
    if (line.length > 0) this.onLine(line);
  }
}
