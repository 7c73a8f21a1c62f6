// Decrypts a credential's payload on use from the mounted bundle Secrets, with keys from the mounted key Secret.
// The keyring is cached per key-volume generation, and parsed envelopes per bundle-volume generation, which saves
// two file-system calls per request on the gateway's hot path. `open` also keeps what a reader made of the plaintext
// (the gateway's parsed payload) beside its envelope, so an envelope is decrypted once per generation, not once per
// request: the keyring that opens every envelope is in this process's memory either way (docs/gateway.md,
// "Speed"). A new generation or a re-sealed envelope is a new object and opens afresh.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  type BundleEnvelope,
  BundleError,
  type Keyring,
  keyringFromEntries,
  openEnvelope,
  parseEnvelope,
} from '../contract/envelope.ts';
import type { EgressAllowList, PayloadResult, ProviderPayload, ProviderSlug } from '../domain/index.ts';
import { validatePayload } from '../domain/payloads.ts';
import { type RoutingConfig, resolveGeneration } from './load.ts';

/** The parsers' key for "no egress exceptions". */
const NO_EGRESS = Object.freeze({});

const CREDENTIAL_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export function readKeyring(keyDir: string): Keyring {
  const gen = resolveGeneration(keyDir);
  const entries = new Map<string, Buffer>();
  for (const name of readdirSync(gen)) {
    if (name.startsWith('..')) continue;
    entries.set(name, readFileSync(join(gen, name)));
  }
  return keyringFromEntries(entries);
}

/** A credential's plaintext does not parse for its provider. The message names the credential, never the payload. */
export class CredentialPayloadError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CredentialPayloadError';
  }
}

export interface CredentialPayloadOptions {
  /** Egress exceptions the payload's URLs are checked against (default none). */
  egress?: EgressAllowList;
  /** Provider to parse for; default the credential's provider in the routing config. */
  provider?: ProviderSlug;
}

export interface CredentialDecryptor {
  decrypt(config: RoutingConfig, credentialId: string): string;
  /**
   * The credential's parsed and validated payload, decrypted and parsed once per mounted envelope (see `open`).
   * Throws CredentialPayloadError when it does not parse, BundleError when it cannot be found or opened.
   */
  payload(config: RoutingConfig, credentialId: string, options?: CredentialPayloadOptions): ProviderPayload;
  /**
   * `read(plaintext)` of a credential, kept with its envelope while that envelope's generation is mounted (per reader:
   * pass the same function each time). Uncached where envelopes are (a plain directory, rewritten in place).
   */
  open<T>(config: RoutingConfig, credentialId: string, read: (plaintext: string) => T): T;
  /**
   * The bundle volume's generation as of now, re-resolved whatever `generationCheckMs` says: every call after this one
   * opens envelopes from it or a later one. A status report built from it never claims a version requests do not see.
   */
  bundleGeneration(): string;
}

export interface DecryptorOptions {
  bundleDir: string;
  keyDir: string;
  /**
   * Re-resolve the volumes' `..data` generation at most this often (default 0: on every call). A gateway sets ~100 ms
   * to save two readlink calls per request; a missing envelope or key always forces a fresh look.
   */
  generationCheckMs?: number;
}

export function createCredentialDecryptor(opts: DecryptorOptions): CredentialDecryptor {
  const checkMs = opts.generationCheckMs ?? 0;
  const slots = { bundle: { gen: '', at: -Infinity }, key: { gen: '', at: -Infinity } };
  const generation = (which: 'bundle' | 'key', force: boolean): string => {
    const slot = slots[which];
    const now = checkMs > 0 ? Date.now() : 0;
    if (force || checkMs <= 0 || now - slot.at >= checkMs) {
      slot.gen = resolveGeneration(which === 'bundle' ? opts.bundleDir : opts.keyDir);
      slot.at = now;
    }
    return slot.gen;
  };
  let cached: { gen: string; ring: Keyring } | undefined;
  let envelopes: { gen: string; byId: Map<string, BundleEnvelope> } | undefined;
  const keys = (forceReload: boolean): Keyring => {
    const gen = generation('key', forceReload);
    if (!cached || forceReload || cached.gen !== gen) cached = { gen, ring: readKeyring(opts.keyDir) };
    return cached.ring;
  };
  const envelopeOf = (credentialId: string, force: boolean): BundleEnvelope | undefined => {
    const gen = generation('bundle', force);
    if (!envelopes || envelopes.gen !== gen) envelopes = { gen, byId: new Map() };
    let envelope = envelopes.byId.get(credentialId);
    if (!envelope) {
      const path = join(gen, credentialId);
      if (!existsSync(path)) return undefined;
      envelope = parseEnvelope(readFileSync(path, 'utf8'));
      // Only a kubelet volume has immutable generations; a plain directory may be rewritten in place.
      if (gen !== opts.bundleDir) envelopes.byId.set(credentialId, envelope);
    }
    return envelope;
  };
  const locate = (config: RoutingConfig, credentialId: string) => {
    const found = config.credential(credentialId);
    if (!found || !CREDENTIAL_ID.test(credentialId))
      throw new BundleError('not-found', `credential ${credentialId} is not in the routing config`);
    const envelope = envelopeOf(credentialId, false) ?? (checkMs > 0 ? envelopeOf(credentialId, true) : undefined);
    if (!envelope) throw new BundleError('not-found', `no bundle entry for credential ${credentialId} yet`);
    return { envelope, expected: { namespace: found.account.namespace, credentialId } };
  };
  /** The envelope that opened (a fresh one when the cached generation predated a re-seal), and its plaintext. */
  const openLocated = ({
    envelope,
    expected,
  }: ReturnType<typeof locate>): { envelope: BundleEnvelope; plaintext: string } => {
    let ring = keys(false);
    // A rotated key can reach this pod after envelopes sealed with it: re-read the key volume once.
    if (!ring.keys.has(envelope.kid)) ring = keys(true);
    try {
      return { envelope, plaintext: openEnvelope(ring.keys, envelope, expected) };
    } catch (err) {
      // A cached generation may predate a re-seal: look again once before failing.
      if (checkMs <= 0) throw err;
      const fresh = envelopeOf(expected.credentialId, true);
      if (!fresh || fresh === envelope) throw err;
      return { envelope: fresh, plaintext: openEnvelope(keys(true).keys, fresh, expected) };
    }
  };
  /** What readers made of an envelope's plaintext, under the routing config that bound it to its namespace. */
  const readings = new WeakMap<
    BundleEnvelope,
    { config: RoutingConfig; byReader: Map<(plaintext: string) => unknown, unknown> }
  >();
  /** One reader per egress policy and provider, so `open` keeps one parsed payload per envelope for each. */
  const parsers = new WeakMap<
    EgressAllowList | typeof NO_EGRESS,
    Map<ProviderSlug, (plaintext: string) => PayloadResult>
  >();
  const parserFor = (provider: ProviderSlug, egress: EgressAllowList | undefined) => {
    const policy = egress ?? NO_EGRESS;
    let byProvider = parsers.get(policy);
    if (!byProvider) parsers.set(policy, (byProvider = new Map()));
    let parse = byProvider.get(provider);
    if (!parse)
      byProvider.set(
        provider,
        (parse = (plaintext: string) => validatePayload(provider, plaintext, egress ? { egress } : {})),
      );
    return parse;
  };
  function open<T>(config: RoutingConfig, credentialId: string, read: (plaintext: string) => T): T {
    const located = locate(config, credentialId);
    const kept = readings.get(located.envelope);
    if (kept?.config === config && kept.byReader.has(read)) return kept.byReader.get(read) as T;
    const { envelope, plaintext } = openLocated(located);
    const value = read(plaintext);
    if (envelopes?.byId.get(credentialId) === envelope) {
      let k = readings.get(envelope);
      if (k?.config !== config) readings.set(envelope, (k = { config, byReader: new Map() }));
      k.byReader.set(read, value);
    }
    return value;
  }
  return {
    decrypt: (config, credentialId) => openLocated(locate(config, credentialId)).plaintext,
    open,
    bundleGeneration: () => generation('bundle', true),
    payload(config, credentialId, options = {}) {
      const provider = options.provider ?? config.credential(credentialId)?.credential.provider;
      if (provider === undefined)
        throw new BundleError('not-found', `credential ${credentialId} is not in the routing config`);
      const parsed = open(config, credentialId, parserFor(provider, options.egress));
      if (!parsed.ok)
        throw new CredentialPayloadError(
          `the payload of credential ${credentialId} does not parse for provider ${provider}`,
        );
      return parsed.payload;
    },
  };
}
