// Loads the compiled routing config from a mounted directory (a projected volume of the byok-routing-*
// ConfigMaps), verifying every checksum. Reads through the `..data` link kubelet maintains, resolved once,
// so one load never mixes files from two generations.
import { existsSync, readFileSync, readlinkSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import {
  bucketOf,
  INDEX_KEY,
  indexVersion,
  isRoutingIndex,
  type RoutingIndex,
  type ShardDocument,
  sha256Hex,
} from '../contract/routing.ts';
import { normalizeKeyHash } from '../domain/api-keys.ts';
import type { CompiledAccount, CompiledApiKey, CompiledCredential } from '../domain/compiled.ts';

export type RoutingConfigErrorCode = 'missing' | 'incomplete' | 'checksum' | 'corrupt';

export class RoutingConfigError extends Error {
  readonly code: RoutingConfigErrorCode;
  constructor(code: RoutingConfigErrorCode, message: string) {
    super(message);
    this.name = 'RoutingConfigError';
    this.code = code;
  }
}

export interface RoutingConfig {
  /** The index version (sha256 of the index body). */
  version: string;
  index: RoutingIndex;
  /** By namespace. */
  accounts: ReadonlyMap<string, CompiledAccount>;
  /** Where the files were read from (the resolved `..<timestamp>` directory under kubelet). */
  source: string;
  credential(credentialId: string): { account: CompiledAccount; credential: CompiledCredential } | undefined;
  /** The one account that holds `hash`; undefined when none does, or when more than one claims it (contested). */
  apiKey(hash: string): { account: CompiledAccount; key: CompiledApiKey } | undefined;
  /** Whether the loaded config carries `hash` more than once (two accounts, e.g. while shards race): refused in all. */
  apiKeyContested(hash: string): boolean;
  /** How many hashes are contested. */
  contestedApiKeys: number;
}

/** The directory a load should read: kubelet's current `..data` generation, or `dir` itself when not a kubelet volume. */
export function resolveGeneration(dir: string): string {
  const link = join(dir, '..data');
  try {
    const target = readlinkSync(link);
    return isAbsolute(target) ? target : join(dir, target);
  } catch {
    return dir;
  }
}

function readPart(dir: string, key: string): Buffer {
  const path = join(dir, key);
  if (!existsSync(path)) throw new RoutingConfigError('incomplete', `shard file ${key} is missing`);
  return readFileSync(path);
}

export function loadRoutingConfig(dir: string): RoutingConfig {
  const gen = resolveGeneration(dir);
  const indexPath = join(gen, INDEX_KEY);
  if (!existsSync(indexPath)) throw new RoutingConfigError('missing', `no ${INDEX_KEY} in ${dir}`);
  let index: unknown;
  try {
    index = JSON.parse(readFileSync(indexPath, 'utf8'));
  } catch {
    throw new RoutingConfigError('corrupt', 'index is not valid JSON');
  }
  if (!isRoutingIndex(index)) throw new RoutingConfigError('corrupt', 'index has an unknown format');
  if (indexVersion(index) !== index.version)
    throw new RoutingConfigError('checksum', 'index version does not match its content');

  const accounts = new Map<string, CompiledAccount>();
  for (const shard of index.shards) {
    const chunks: Buffer[] = [];
    for (const part of shard.parts) {
      const data = readPart(gen, part.key);
      if (data.length !== part.bytes || sha256Hex(data) !== part.sha256) {
        throw new RoutingConfigError('checksum', `shard file ${part.key} does not match the index checksum`);
      }
      chunks.push(data);
    }
    const payload = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
    if (sha256Hex(payload) !== shard.sha256)
      throw new RoutingConfigError('checksum', `shard ${shard.bucket} does not match the index checksum`);
    let doc: ShardDocument;
    try {
      const raw = shard.encoding === 'gzip' ? gunzipSync(payload) : payload;
      doc = JSON.parse(raw.toString('utf8')) as ShardDocument;
    } catch {
      throw new RoutingConfigError('corrupt', `shard ${shard.bucket} cannot be decoded`);
    }
    if (doc.bucket !== shard.bucket || !Array.isArray(doc.accounts) || doc.accounts.length !== shard.accounts) {
      throw new RoutingConfigError('corrupt', `shard ${shard.bucket} content does not match the index`);
    }
    for (const account of doc.accounts) {
      if (bucketOf(account.namespace, index.buckets) !== shard.bucket)
        throw new RoutingConfigError('corrupt', `account ${account.namespace} is in the wrong shard`);
      accounts.set(account.namespace, account);
    }
  }
  return buildConfig(index, accounts, gen);
}

function buildConfig(index: RoutingIndex, accounts: Map<string, CompiledAccount>, source: string): RoutingConfig {
  const credentials = new Map<string, { account: CompiledAccount; credential: CompiledCredential }>();
  // null: the hash appears more than once. The operator compiles a hash into one account only (its oldest holder);
  // a config that still carries it twice is never settled by order here: the key is refused in every account.
  const keys = new Map<string, { account: CompiledAccount; key: CompiledApiKey } | null>();
  for (const ns of [...accounts.keys()].sort()) {
    const account = accounts.get(ns)!;
    for (const credential of account.credentials) credentials.set(credential.id, { account, credential });
    for (const key of account.apiKeys) {
      const hash = normalizeKeyHash(key.hash);
      keys.set(hash, keys.has(hash) ? null : { account, key });
    }
  }
  let contested = 0;
  for (const v of keys.values()) if (v === null) contested++;
  return {
    version: index.version,
    index,
    accounts,
    source,
    contestedApiKeys: contested,
    credential: (id) => credentials.get(id),
    apiKey: (hash) => keys.get(normalizeKeyHash(hash)) ?? undefined,
    apiKeyContested: (hash) => keys.get(normalizeKeyHash(hash)) === null,
  };
}
