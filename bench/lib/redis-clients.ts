// The ledger's script calls through each Redis client bench/redis-client.ts compares, each set up with the ledger's
// semantics: no offline queue (fail fast while disconnected), a per-command timeout, reconnect with capped backoff,
// scripts sent by EVALSHA and loaded again on NOSCRIPT.
import { createClient } from '@redis/client';
import { Redis as IoRedis } from 'ioredis';
import { Redis as IoValkey } from 'iovalkey';
import { openLedgerConnection, scriptOf } from '../../src/ledger/redis-connection.ts';
import {
  ADD_SCRIPT,
  RELEASE_SCRIPT,
  RESERVE_SCRIPT,
  RESTORE_SCRIPT,
  RUN_ID_SCRIPT,
} from '../../src/ledger/redis-scripts.ts';

/** The admission script as it was before the run_id was cached: read by INFO in Lua on every call. */
export const RESERVE_SCRIPT_WITH_INFO = (() => {
  const check = `if KEYS[1] ~= '' and redis.call('GET', KEYS[1]) ~= ARGV[5] then return {-1} end`;
  if (!RESERVE_SCRIPT.includes(check) || !RESERVE_SCRIPT.includes('local a = 6'))
    throw new Error('RESERVE_SCRIPT changed: update RESERVE_SCRIPT_WITH_INFO');
  // ARGV[5] (the run_id) stays in place and is ignored, so both take the same arguments.
  return RESERVE_SCRIPT.replace(
    check,
    `local runid = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')\nif KEYS[1] ~= '' and redis.call('GET', KEYS[1]) ~= runid then return {-1} end`,
  );
})();

export const LEDGER_SCRIPTS = {
  add: ADD_SCRIPT,
  reserve: RESERVE_SCRIPT,
  reserveInfo: RESERVE_SCRIPT_WITH_INFO,
  release: RELEASE_SCRIPT,
  restore: RESTORE_SCRIPT,
  runId: RUN_ID_SCRIPT,
} as const;
export type ScriptName = keyof typeof LEDGER_SCRIPTS;

export interface LedgerScriptClient {
  run(script: ScriptName, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown>;
  info(section: string): Promise<string>;
  close(): Promise<void>;
}

const backoff = (times: number) => Math.min(50 * 2 ** Math.min(times, 6), 2000);

type Scripted = Record<string, (numKeys: number, ...args: (string | number)[]) => Promise<unknown>>;

async function ioredisLike(
  Client: typeof IoRedis | typeof IoValkey,
  url: string,
  commandTimeout: number,
  enableAutoPipelining = false,
): Promise<LedgerScriptClient> {
  // iovalkey is ioredis's fork with the same API; its types differ only in name.
  const client = new (Client as typeof IoRedis)(url, {
    enableAutoPipelining,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout,
    connectTimeout: 2000,
    retryStrategy: backoff,
    lazyConnect: false,
  });
  client.on('error', () => {});
  for (const [name, lua] of Object.entries(LEDGER_SCRIPTS)) client.defineCommand(name, { lua });
  await new Promise<void>((resolve) => (client.status === 'ready' ? resolve() : client.once('ready', () => resolve())));
  const scripted = client as unknown as Scripted;
  return {
    run: (script, keys, args) => scripted[script]!(keys.length, ...keys, ...args),
    info: (section) => client.info(section),
    close: async () => void (await client.quit()),
  };
}

async function nodeRedis(url: string, commandTimeout: number): Promise<LedgerScriptClient> {
  const scripts = Object.fromEntries(
    Object.entries(LEDGER_SCRIPTS).map(([name, lua]) => [name, scriptOf(lua)]),
  ) as Record<ScriptName, ReturnType<typeof scriptOf>>;
  const client = createClient({
    url,
    disableOfflineQueue: true,
    commandOptions: { timeout: commandTimeout },
    socket: { connectTimeout: 2000, reconnectStrategy: backoff },
    scripts,
  });
  client.on('error', () => {});
  await client.connect();
  const scripted = client as unknown as Record<
    ScriptName,
    (keys: readonly string[], args: readonly (string | number)[]) => Promise<unknown>
  >;
  return {
    run: (script, keys, args) => scripted[script](keys, args),
    info: (section) => client.info(section),
    close: async () => void (await client.close()),
  };
}

/** The ledger's own connection (src/ledger/redis-connection.ts: node-redis with one deadline timer); its scripts only. */
async function ledgerConnection(url: string, commandTimeoutMs: number): Promise<LedgerScriptClient> {
  const c = await openLedgerConnection({ url, commandTimeoutMs, connectWaitMs: 5000 });
  const info = await nodeRedis(url, commandTimeoutMs);
  return {
    run: (script, keys, args) => (script === 'reserveInfo' ? info.run(script, keys, args) : c.run(script, keys, args)),
    info: (section) => info.info(section),
    close: async () => {
      await c.close();
      await info.close();
    },
  };
}

export async function createLedgerScriptClient(
  name: 'ioredis' | 'ioredis-autopipelining' | 'iovalkey' | 'node-redis' | 'ledger',
  url: string,
  opts: { commandTimeoutMs: number },
): Promise<LedgerScriptClient> {
  if (name === 'ioredis') return ioredisLike(IoRedis, url, opts.commandTimeoutMs);
  if (name === 'ioredis-autopipelining') return ioredisLike(IoRedis, url, opts.commandTimeoutMs, true);
  if (name === 'iovalkey') return ioredisLike(IoValkey, url, opts.commandTimeoutMs);
  if (name === 'ledger') return ledgerConnection(url, opts.commandTimeoutMs);
  return nodeRedis(url, opts.commandTimeoutMs);
}
