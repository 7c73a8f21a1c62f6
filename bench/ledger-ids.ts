// Bytes per id (V8 heap and ArrayBuffers) the embedded ledger remembers for exactly-once (docs/ledger.md, "Exactly once": 20 to 40 minutes
// of ids, 1.2 to 2.4 million at 1,000 requests/s). Each measurement runs in a fresh child with --expose-gc: the heap
// (and ArrayBuffer memory) after a full GC, before and after N records through addNow, as the spend gate writes them (ids in the gateway's
// generation-id shape, every other request also a `<id>:fee` write), divided by the ids the ledger then holds. The id
// strings are made per request and dropped, so the ledger is what keeps them, as in a gateway once its generation
// records are evicted. With --baseline <other checkout>/src/ledger/embedded.ts, that build is measured in the same
// run, the two alternating, and the ratios are printed.
// The time per write is printed too, as a check that the smaller form costs no speed (a wall time: noisy).
//
//   node scripts/bootstrap.mjs -- node bench/ledger-ids.ts [--requests 300000] [--rounds 3] [--baseline <path>]
//
// Prints one JSON document on stdout.
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { getHeapStatistics } from 'node:v8';
import type { EmbeddedLedger, EmbeddedLedgerOptions } from '../src/ledger/embedded.ts';
import { median } from './lib/stats.ts';

const here = dirname(fileURLToPath(import.meta.url));
const arg = (name: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
};

interface ChildResult {
  ids: number;
  bytesPerId: number;
  heapMB: number;
  /** Wall time per addNow call in the measured loop, the id's own string included. */
  nsPerWrite: number;
}

async function child(modulePath: string, requests: number): Promise<ChildResult> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run with --expose-gc');
  const { createEmbeddedLedger } = (await import(pathToFileURL(modulePath).href)) as {
    createEmbeddedLedger: (o?: EmbeddedLedgerOptions) => EmbeddedLedger;
  };
  const at = Date.UTC(2026, 10, 29, 10, 0, 0);
  const ledger = createEmbeddedLedger({ now: () => at });
  // The V8 heap and the ArrayBuffers outside it (typed arrays keep their elements there).
  const used = () => {
    gc();
    gc();
    return getHeapStatistics().used_heap_size + process.memoryUsage().arrayBuffers;
  };
  const prefix = `gen-${randomUUID().slice(0, 24)}`;
  const expiresAt = at + 86_400_000;
  const spend = { key: 'byok:{acct-bench}:ws:default:2026-11-29:spend', by: 1234, expiresAt };
  const fee = { key: 'byok:{acct-bench}:acct:2026-11:fee', by: 60, expiresAt };
  // Warm: the maps and the code exist before the first heap reading.
  for (let i = 0; i < 1000; i++) ledger.addNow!([spend], undefined, `warm-${i}`);
  const before = used();
  const idsBefore = ledger.idCount();
  const t0 = performance.now();
  for (let i = 0; i < requests; i++) {
    const id = `${prefix}${i.toString(16).padStart(12, '0')}`;
    ledger.addNow!([spend], undefined, id);
    if (i % 2 === 0) ledger.addNow!([fee], undefined, `${id}:fee`);
  }
  const elapsed = performance.now() - t0;
  const after = used();
  const ids = ledger.idCount() - idsBefore;
  await ledger.close();
  return {
    ids,
    bytesPerId: Math.round(((after - before) / ids) * 10) / 10,
    heapMB: Math.round(after / 1048576),
    nsPerWrite: Math.round((elapsed * 1e6) / ids),
  };
}

function measure(modulePath: string, requests: number): ChildResult {
  const out = spawnSync(
    process.execPath,
    ['--expose-gc', fileURLToPath(import.meta.url), '--child', modulePath, '--requests', String(requests)],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] },
  );
  if (out.status !== 0) throw new Error(`child for ${modulePath} failed (${out.status})`);
  return JSON.parse(out.stdout) as ChildResult;
}

if (process.argv.includes('--child')) {
  process.stdout.write(JSON.stringify(await child(arg('child')!, Number(arg('requests')))));
} else {
  const requests = Number(arg('requests') ?? 300_000);
  const rounds = Number(arg('rounds') ?? 3);
  const current = join(here, '..', 'src', 'ledger', 'embedded.ts');
  const baseline = arg('baseline') ? resolve(arg('baseline')!) : undefined;
  const runs: Record<string, ChildResult[]> = { current: [], ...(baseline ? { baseline: [] } : {}) };
  for (let r = 0; r < rounds; r++) {
    process.stderr.write(`[bench] round ${r + 1}/${rounds}\n`);
    runs.current!.push(measure(current, requests));
    if (baseline) runs.baseline!.push(measure(baseline, requests));
  }
  const summary = (list: ChildResult[]) => {
    const bytes = median(list.map((x) => x.bytesPerId));
    return {
      ids: list[0]!.ids,
      ns_per_write: median(list.map((x) => x.nsPerWrite)),
      bytes_per_id: bytes,
      bytes_per_id_range: [Math.min(...list.map((x) => x.bytesPerId)), Math.max(...list.map((x) => x.bytesPerId))],
      // 20 to 40 minutes of ids at 1,000 requests/s, 1.5 ids per request (every other one with a fee).
      mb_at_1000_rps: [Math.round((1.2e6 * 1.5 * bytes) / 1048576), Math.round((2.4e6 * 1.5 * bytes) / 1048576)],
    };
  };
  const result: Record<string, unknown> = {
    bench: 'ledger-ids',
    date: new Date().toISOString(),
    node: process.version,
    requests,
    rounds,
    current: summary(runs.current!),
    runs,
  };
  if (baseline) {
    result.baseline = { module: baseline, ...summary(runs.baseline!) };
    result.ns_per_write_ratio =
      Math.round(
        (median(runs.current!.map((x) => x.nsPerWrite)) / median(runs.baseline!.map((x) => x.nsPerWrite))) * 100,
      ) / 100;
    result.ratio_current_to_baseline =
      Math.round(
        (median(runs.current!.map((x) => x.bytesPerId)) / median(runs.baseline!.map((x) => x.bytesPerId))) * 100,
      ) / 100;
  }
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
}
