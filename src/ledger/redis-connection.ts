// The Redis ledger's own connection: node-redis (@redis/client), chosen over ioredis because it costs the
// gateway about half the CPU per script call and keeps a fraction of the bytes past a scavenge (bench/redis-client.ts;
// figures in docs/ledger.md, "Cost per request"). What the spend gate relies on, kept: no offline queue (a call while
// disconnected fails at once), a per-command timeout, reconnect with capped backoff, scripts sent by EVALSHA and
// sent whole again on NOSCRIPT (a restarted Redis has an empty script cache). Failures are the caller's to map to
// LedgerUnavailableError.
import { type CommandParser, createClient, defineScript } from '@redis/client';
import { RATE_ADMIT_SCRIPT, RATE_SETTLE_SCRIPT } from './rate-scripts.ts';
import {
  ADD_SCRIPT,
  FORGET_SCRIPT,
  RELEASE_SCRIPT,
  RESERVE_SCRIPT,
  RESTORE_SCRIPT,
  RUN_ID_SCRIPT,
} from './redis-scripts.ts';

/** A script call: KEYS, then ARGV (numbers go as their decimal text, as ioredis sends them). */
export function scriptOf(lua: string) {
  return defineScript({
    SCRIPT: lua,
    parseCommand(parser: CommandParser, keys: readonly string[], args: readonly (string | number)[]) {
      parser.push(String(keys.length));
      for (const k of keys) parser.pushKey(k);
      for (const a of args) parser.push(typeof a === 'string' ? a : String(a));
    },
    transformReply: (reply: unknown) => reply,
  });
}

const SCRIPTS = {
  add: scriptOf(ADD_SCRIPT),
  reserve: scriptOf(RESERVE_SCRIPT),
  release: scriptOf(RELEASE_SCRIPT),
  restore: scriptOf(RESTORE_SCRIPT),
  runId: scriptOf(RUN_ID_SCRIPT),
  forget: scriptOf(FORGET_SCRIPT),
  rateAdmit: scriptOf(RATE_ADMIT_SCRIPT),
  rateSettle: scriptOf(RATE_SETTLE_SCRIPT),
};
export type LedgerScript = keyof typeof SCRIPTS;

export interface LedgerConnection {
  run(script: LedgerScript, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown>;
  mget(keys: readonly string[]): Promise<(string | null)[]>;
  /** Called when the connection is lost and when a new one is ready: per-connection facts (the run_id) lapse. */
  onReconnect(listener: () => void): void;
  close(): Promise<void>;
}

export interface LedgerConnectionOptions {
  url: string;
  commandTimeoutMs: number;
  /** How long openLedgerConnection waits for the first connection; it returns either way (calls fail until then). */
  connectWaitMs: number;
}

/** A call that got no answer within the command timeout. */
export class CommandTimeoutError extends Error {
  constructor(ms: number) {
    super(`ledger Redis command timed out after ${ms} ms`);
    this.name = 'CommandTimeoutError';
  }
}

interface Waiting {
  at: number;
  settled: boolean;
  reject(err: Error): void;
}

/** What a passed slot holds until the list is cut: nothing of the call it held. */
const PASSED: Waiting = { at: 0, settled: true, reject: () => {} };

/**
 * The command timeout, over the whole call (node-redis's own `timeout` only covers a command not yet written to the
 * socket, so a stalled Redis would hold every call for as long as it stalls). Every call has the same timeout, so
 * deadlines come in order: one timer, set for the oldest call still waiting, instead of one per call. A call that
 * timed out still gets its answer later (it may have run); the answer is dropped.
 */
class Deadlines {
  private readonly waiting: Waiting[] = [];
  private head = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly ms: number;

  constructor(ms: number) {
    this.ms = ms;
  }

  within<T>(call: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const entry = { at: Date.now() + this.ms, settled: false, reject };
      this.waiting.push(entry);
      this.timer ??= setTimeout(this.expire, this.ms);
      call.then(
        (value) => {
          entry.settled = true;
          this.passSettled();
          resolve(value);
        },
        (err: unknown) => {
          entry.settled = true;
          this.passSettled();
          reject(err instanceof Error ? err : new Error(String(err)));
        },
      );
    });
  }

  /**
   * One connection answers in order, so the call that settles is nearly always the oldest: passing it at once (and
   * clearing its slot) lets each entry die young; an entry kept until the timer would live past a scavenge.
   */
  private passSettled(): void {
    while (this.head < this.waiting.length && this.waiting[this.head]!.settled) this.waiting[this.head++] = PASSED;
    if (this.head === this.waiting.length) {
      this.waiting.length = 0;
      this.head = 0;
    } else if (this.head >= 64 && this.head * 2 >= this.waiting.length) {
      this.waiting.splice(0, this.head);
      this.head = 0;
    }
  }

  private readonly expire = (): void => {
    this.timer = undefined;
    const now = Date.now();
    while (this.head < this.waiting.length) {
      const entry = this.waiting[this.head]!;
      if (!entry.settled && entry.at > now) break;
      this.waiting[this.head++] = PASSED;
      if (!entry.settled) {
        entry.settled = true;
        entry.reject(new CommandTimeoutError(this.ms));
      }
    }
    this.passSettled();
    if (this.head < this.waiting.length)
      this.timer = setTimeout(this.expire, Math.max(1, this.waiting[this.head]!.at - now));
  };

  /** Stops the timer (the connection is closing: node-redis settles every call under way). */
  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}

/** Reconnect backoff: 50 ms doubling up to 2 s, for ever (the ledger comes back by itself when Redis does). */
const backoff = (retries: number) => Math.min(50 * 2 ** Math.min(retries, 6), 2000);

export async function openLedgerConnection(opts: LedgerConnectionOptions): Promise<LedgerConnection> {
  const client = createClient({
    url: opts.url,
    disableOfflineQueue: true,
    // No node-redis timeout (its default is 5 s): it covers only unwritten commands, and costs an AbortSignal with a
    // timer per command that outlives the call; Deadlines times the whole call instead.
    commandOptions: { timeout: 0 },
    socket: { connectTimeout: 2000, reconnectStrategy: backoff },
    scripts: SCRIPTS,
  });
  // An 'error' on every failed reconnect; the spend gate reports outages through its own metrics.
  client.on('error', () => {});
  const connected = client.connect().then(
    () => true,
    () => false,
  );
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([connected, new Promise((r) => (timer = setTimeout(r, opts.connectWaitMs)))]);
  clearTimeout(timer);
  const scripted = client as unknown as Record<
    LedgerScript,
    (keys: readonly string[], args: readonly (string | number)[]) => Promise<unknown>
  >;
  const deadlines = new Deadlines(opts.commandTimeoutMs);
  return {
    run: (script, keys, args) => deadlines.within(scripted[script](keys, args)),
    mget: (keys) => deadlines.within(client.mGet(keys as string[])),
    onReconnect(listener) {
      // 'error': the socket failed (node-redis then rejects every call under way); 'ready': a new socket is up.
      for (const event of ['error', 'reconnecting', 'end', 'ready'] as const) client.on(event, listener);
    },
    async close() {
      deadlines.stop();
      if (!client.isOpen) return;
      // Nothing to finish on a socket that is not up (a reconnect loop): stop it at once.
      if (!client.isReady) return client.destroy();
      try {
        await client.close();
      } catch {
        client.destroy();
      }
    },
  };
}
