// What one ledger script call costs the gateway's process, per Redis client: bytes allocated, bytes that
// survive a scavenge and bytes promoted to the old generation per call, and CPU per call, for EVALSHA of the ledger's
// real scripts (src/ledger/redis-scripts.ts) against a real redis-server (test/support/redis.ts). Each client runs in
// a child of its own with the image's gateway heap flags and --expose-gc; the child brackets the measured window with
// V8's --trace-gc-nvp (as bench/gateway-gc.ts does) and the parent sums its lines. Redis's own time per call comes
// from INFO commandstats. Clients: ioredis (with and without auto-pipelining), iovalkey, node-redis (@redis/client) as
// each library offers it, 'ledger' (the ledger's own connection, src/ledger/redis-connection.ts: node-redis with one
// deadline timer for the command timeout), and 'none' (the bench's own cost: building each call's keys and arguments).
// Ops:
//   - add5: one record batch of 5 BYOK requests (what bench:peers's 1k/s sends per 5 ms window), ids fresh;
//   - add10: the same at a 10 ms window (a larger batch);
//   - add1: a batch of one record;
//   - reserve: a reservation on one budget (2 counted keys, a hold set), the account validated;
//   - reserve-info: the same with the run_id read by INFO in Lua (the script before the run_id was cached), for comparison;
//
//   node bench/redis-client.ts [--calls 20000] [--in-flight 8] [--clients ioredis,iovalkey,node-redis] [--ops add5,add1,reserve,reserve-info]
//
// Prints one JSON document on stdout.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import v8 from 'node:v8';
import { type AddCall, encodeAddBatch } from '../src/ledger/redis-scripts.ts';
import { startRedis } from '../test/support/redis.ts';
import {
  createLedgerScriptClient,
  LEDGER_SCRIPTS,
  type LedgerScriptClient,
  type ScriptName,
} from './lib/redis-clients.ts';
import { GATEWAY_NODE_OPTIONS } from './lib/runtime-flags.ts';

const self = fileURLToPath(import.meta.url);
const CLIENTS = ['none', 'ioredis', 'ioredis-autopipelining', 'iovalkey', 'node-redis', 'ledger'] as const;
type ClientName = (typeof CLIENTS)[number];
const OPS = ['add5', 'add10', 'add1', 'reserve', 'reserve-info'] as const;
type Op = (typeof OPS)[number];

interface GcLine {
  kind: string;
  allocated: number;
  survived: number;
  promoted: number;
}

function parseNvp(line: string): GcLine | null {
  if (!line.includes(' gc=')) return null;
  const f = new Map<string, string>();
  for (const m of line.matchAll(/([a-z_.]+)=([^\s]+)/g)) f.set(m[1]!, m[2]!);
  return {
    kind: f.get('gc') ?? '?',
    allocated: Number(f.get('allocated') ?? 0),
    survived: Number(f.get('new_space_survived') ?? 0),
    promoted: Number(f.get('promoted') ?? 0),
  };
}

const ACCOUNT = 'bench-acct';
const PREFIX = `byok:ledger:{${ACCOUNT}}`;
const VALIDATED = `${PREFIX}:validated`;

/** The keys and arguments of one call of `op` (`n` makes its ids unique). */
function callOf(
  op: Op,
  n: number,
  now: number,
  runId: string,
): { script: ScriptName; keys: string[]; args: (string | number)[] } {
  const period = Math.floor(now / 1_200_000);
  const ids = [`${PREFIX}:ids:${period}`, `${PREFIX}:ids:${period - 1}`];
  if (op === 'reserve' || op === 'reserve-info') {
    const id = `gen-${n}-0000-0000-0000-000000000000`;
    const keys = [
      VALIDATED,
      ...ids,
      `${PREFIX}:ws:main:d2026-11-26:holds`,
      `${PREFIX}:ws:main:d2026-11-26:nonbyok`,
      `${PREFIX}:ws:main:d2026-11-26:byok`,
    ];
    // Each hold lapses 1 ms after it is made, so the hold set stays as small as a real budget's.
    return {
      script: op === 'reserve' ? 'reserve' : 'reserveInfo',
      keys,
      args: [now, now + 1, id, 1, runId, 1e15, 5000, 2],
    };
  }
  const batch = op === 'add10' ? 10 : op === 'add5' ? 5 : 1;
  const day = now + 86_400_000;
  const calls: AddCall[] = [];
  for (let i = 0; i < batch; i++) {
    const increments = [{ key: `${PREFIX}:acct:m2026-11:byok_list`, by: 132, expiresAt: day }];
    for (const w of ['d2026-11-26', 'w2026-11-23', 'm2026-11', 'life'])
      increments.push({ key: `${PREFIX}:ws:main:${w}:byok`, by: 132, expiresAt: w === 'life' ? 0 : day });
    calls.push({ id: `gen-${n}-${i}-000-0000-000000000000`, increments, settle: undefined });
  }
  // The ledger's own encoding (src/ledger/redis-scripts.ts): each key once per batch.
  const { keys, args } = encodeAddBatch(calls, {
    current: ids[0]!,
    previous: ids[1]!,
    expiresAt: (period + 2) * 1_200_000,
  });
  return { script: 'add', keys, args };
}

type Gc = (opts?: { type: 'minor' | 'major'; execution?: 'sync' }) => void;

/** The measured child: warm up, then `calls` calls with `inFlight` outstanding at a time, traced. */
async function child(client: ClientName, op: Op, url: string, calls: number, inFlight: number): Promise<void> {
  const gc = (globalThis as { gc?: Gc }).gc!;
  // 'none': the bench's own cost (building each call's keys and arguments, the loop), what every client's figures include.
  const c: LedgerScriptClient =
    client === 'none'
      ? { run: () => Promise.resolve('none'), info: () => Promise.resolve(''), close: () => Promise.resolve() }
      : await createLedgerScriptClient(client, url, { commandTimeoutMs: 1000 });
  // What RedisLedger does once per connection: the run_id of the process its scripts run in.
  const runId = String(await c.run('runId', [], []));
  let n = 0;
  const run = async (count: number) => {
    let next = 0;
    const worker = async () => {
      while (next < count) {
        next++;
        const call = callOf(op, n++, Date.now(), runId);
        await c.run(call.script, call.keys, call.args);
      }
    };
    await Promise.all(Array.from({ length: inFlight }, worker));
  };
  await run(Math.min(5000, calls));
  gc({ type: 'major', execution: 'sync' });
  v8.setFlagsFromString('--trace-gc-nvp');
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await run(calls);
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  gc({ type: 'minor', execution: 'sync' });
  v8.setFlagsFromString('--no-trace-gc-nvp');
  await c.close();
  process.send!({ cpuUs: cpu.user + cpu.system, wallMs }, () => process.exit(0));
}

async function serverUsec(url: string): Promise<Map<string, { calls: number; usec: number }>> {
  const c = await createLedgerScriptClient('ioredis', url, { commandTimeoutMs: 5000 });
  const text = await c.info('commandstats');
  await c.close();
  const out = new Map<string, { calls: number; usec: number }>();
  for (const m of text.matchAll(/cmdstat_(\w+):calls=(\d+),usec=(\d+)/g))
    out.set(m[1]!, { calls: Number(m[2]), usec: Number(m[3]) });
  return out;
}

const round = (v: number, d = 0) => Math.round(v * 10 ** d) / 10 ** d;

async function measure(url: string, client: ClientName, op: Op, calls: number, inFlight: number) {
  const before = await serverUsec(url);
  const execArgv = [...GATEWAY_NODE_OPTIONS.split(/\s+/).filter(Boolean), '--expose-gc'];
  const p = fork(self, ['--child', client, op, url, String(calls), String(inFlight)], {
    execArgv,
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
  });
  let stdout = '';
  p.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
  const reply = await new Promise<{ cpuUs: number; wallMs: number }>((resolve, reject) => {
    p.once('message', (m) => resolve(m as { cpuUs: number; wallMs: number }));
    p.once('exit', (code) => reject(new Error(`${client} ${op}: child exited ${code}`)));
  });
  await new Promise((r) => (p.exitCode === null ? p.once('exit', r) : r(null)));
  const after = await serverUsec(url);
  const lines = stdout
    .split('\n')
    .map(parseNvp)
    .filter((l): l is GcLine => l !== null);
  const sum = (f: (l: GcLine) => number) => lines.reduce((a, l) => a + f(l), 0);
  const scavenges = lines.filter((l) => l.kind === 's');
  const ev = (m: Map<string, { calls: number; usec: number }>) => {
    let calls = 0;
    let usec = 0;
    for (const [name, s] of m) {
      if (name !== 'evalsha' && name !== 'eval') continue;
      calls += s.calls;
      usec += s.usec;
    }
    return { calls, usec };
  };
  const e0 = ev(before);
  const e1 = ev(after);
  const totalCalls = calls + Math.min(5000, calls);
  return {
    allocated_bytes: round(sum((l) => l.allocated) / calls),
    survived_bytes: round(scavenges.reduce((a, l) => a + l.survived, 0) / calls),
    promoted_bytes: round(scavenges.reduce((a, l) => a + l.promoted, 0) / calls),
    cpu_us: round(reply.cpuUs / calls, 1),
    calls_per_s: round((calls / reply.wallMs) * 1000),
    redis_us_per_call: e1.calls > e0.calls ? round((e1.usec - e0.usec) / (e1.calls - e0.calls), 1) : null,
    redis_calls_per_call: round((e1.calls - e0.calls) / totalCalls, 3),
    scavenges: scavenges.length,
    mark_compacts: lines.length - scavenges.length,
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      calls: { type: 'string', default: '20000' },
      'in-flight': { type: 'string', default: '8' },
      clients: { type: 'string', default: CLIENTS.join(',') },
      ops: { type: 'string', default: OPS.join(',') },
      repeat: { type: 'string', default: '1' },
    },
  });
  const clients = values.clients.split(',') as ClientName[];
  const ops = values.ops.split(',') as Op[];
  for (const c of clients) if (!CLIENTS.includes(c)) throw new Error(`unknown client ${c}: ${CLIENTS.join(', ')}`);
  for (const o of ops) if (!OPS.includes(o)) throw new Error(`unknown op ${o}: ${OPS.join(', ')}`);
  const calls = Number(values.calls);
  const inFlight = Number(values['in-flight']);
  const redis = await startRedis();
  const results: Record<string, Record<string, unknown[]>> = {};
  try {
    // The account is validated for this Redis process (what the operator's spend pass does), so reservations pass.
    const admin = await createLedgerScriptClient('ioredis', redis.url, { commandTimeoutMs: 5000 });
    await admin.run('restore', [VALIDATED], []);
    if (String(await admin.run('runId', [], [])) !== (await admin.info('server')).match(/run_id:(\w+)/)?.[1])
      throw new Error('RUN_ID_SCRIPT disagrees with INFO');
    await admin.close();
    // Interleaved: each client measured once per repeat, in turn, so a busy machine weighs on all alike.
    for (let r = 0; r < Number(values.repeat); r++) {
      for (const op of ops) {
        for (const client of clients) {
          process.stderr.write(`[redis-client] ${op} ${client} (${r + 1})\n`);
          ((results[op] ??= {})[client] ??= []).push(await measure(redis.url, client, op, calls, inFlight));
        }
      }
    }
  } finally {
    await redis.stop();
  }
  process.stdout.write(
    `${JSON.stringify({ bench: 'redis-client', node: process.version, flags: GATEWAY_NODE_OPTIONS, calls, in_flight: inFlight, scripts: Object.keys(LEDGER_SCRIPTS), per_call: results }, null, 2)}\n`,
  );
}

if (process.argv[2] === '--child')
  await child(
    process.argv[3] as ClientName,
    process.argv[4] as Op,
    process.argv[5]!,
    Number(process.argv[6]),
    Number(process.argv[7]),
  );
else await main();
