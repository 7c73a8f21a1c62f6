// The compile pipeline's per-run layout cost at 10,000 accounts x 10 credentials: each run
// changes one account, then lays out the shards and bundles and builds the objects, with warm caches as in the
// pipeline. Baseline in the same process: laying out every account from scratch on every run (what each run did
// before accounts were kept placed). Prints one JSON object. Run: node bench/layout.ts [runs]
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { getHeapStatistics } from 'node:v8';
import {
  type BundleAccount,
  type BundleLayout,
  type BundlePart,
  bundlesFromLayout,
  incrementalBundleLayout,
  layoutBundles,
  sealAccount,
} from '../src/bundle/bundle.ts';
import {
  type EncodedBucket,
  incrementalShardLayout,
  layoutSerialized,
  type SerializedAccount,
  type ShardLayout,
  shardFromLayout,
} from '../src/compiler/shard.ts';
import { namespaceHash, sha256Hex } from '../src/contract/routing.ts';

// Allocation is read off the heap size, so no scavenge may run during a measurement: re-run with a young
// generation larger than what the runs allocate.
const YOUNG = '--max-semi-space-size=512';
if (!process.execArgv.includes(YOUNG)) {
  const child = spawnSync(
    process.execPath,
    [YOUNG, '--min-semi-space-size=512', ...process.execArgv, import.meta.filename, ...process.argv.slice(2)],
    { stdio: 'inherit' },
  );
  process.exit(child.status ?? 1);
}

const ACCOUNTS = 10_000;
const CREDS = 10;
const RUNS = Number(process.argv[2] ?? '20');
const ring = { active: 'k1', keys: new Map([['k1', randomBytes(32)]]) };

const namespaceOf = (i: number) => `bench-a${String(i).padStart(5, '0')}`;
function serialized(i: number, version: number): SerializedAccount {
  const namespace = namespaceOf(i);
  const json = JSON.stringify({
    namespace,
    version,
    credentials: Array.from({ length: CREDS }, (_, c) => ({
      id: `${namespace}-${c}`,
      provider: 'openai',
      label: 'sk-b...xxxx',
      pad: 'y'.repeat(300),
    })),
  });
  return { namespace, json, sha256: sha256Hex(json), bytes: Buffer.byteLength(json), hash: namespaceHash(namespace) };
}
const shardAccounts = Array.from({ length: ACCOUNTS }, (_, i) => serialized(i, 0));
const bundleAccounts: BundleAccount[] = shardAccounts.map((s, i) =>
  sealAccount(
    ring,
    s.namespace,
    Array.from({ length: CREDS }, (_, c) => ({ id: `id-${i}-${c}`, payload: `sk-${i}-${c}-${'x'.repeat(40)}` })),
  ),
);

interface Mode {
  set(i: number, account: SerializedAccount): void;
  layouts(
    shardBuckets: number | undefined,
    bundleBuckets: number | undefined,
  ): { shards: ShardLayout; bundles: BundleLayout };
}

function fromScratch(): Mode {
  const shards = [...shardAccounts];
  return {
    set: (i, account) => void (shards[i] = account),
    layouts: (sb, bb) => ({
      shards: layoutSerialized(shards, { previousBuckets: sb }),
      bundles: layoutBundles(bundleAccounts, { previousBuckets: bb }),
    }),
  };
}

function keptPlaced(): Mode {
  const shards = incrementalShardLayout();
  const bundles = incrementalBundleLayout();
  shardAccounts.forEach((a) => shards.set(a.namespace, a));
  bundleAccounts.forEach((a) => bundles.set(a.namespace, a));
  return {
    set: (_i, account) => shards.set(account.namespace, account),
    layouts: (sb, bb) => ({ shards: shards.layout(sb), bundles: bundles.layout(bb) }),
  };
}

function measure(mode: Mode): { msPerRun: number; allocatedMBPerRun: number; objects: number; finalState: string } {
  const shardCache = new Map<string, EncodedBucket>();
  const bundleCache = new Map<string, BundlePart[]>();
  let shardBuckets: number | undefined;
  let bundleBuckets: number | undefined;
  let version = 1;
  let objects = 0;
  let finalState = '';
  const run = () => {
    const i = (version * 7919) % ACCOUNTS;
    mode.set(i, serialized(i, version++));
    const { shards, bundles } = mode.layouts(shardBuckets, bundleBuckets);
    const shardSet = shardFromLayout(shards, { cache: shardCache });
    const bundleSet = bundlesFromLayout(bundles, { cache: bundleCache });
    shardBuckets = shardSet.index.buckets;
    bundleBuckets = bundleSet.buckets;
    objects = shardSet.shards.length + bundleSet.objects.length;
    finalState = sha256Hex(
      [shardSet.index.version, ...bundleSet.objects.map((o) => `${o.name}:${o.sha256}`)].join('\n'),
    );
  };
  for (let w = 0; w < 5; w++) run();
  globalThis.gc?.();
  const heapBefore = getHeapStatistics().used_heap_size;
  const t0 = performance.now();
  for (let r = 0; r < RUNS; r++) run();
  const ms = (performance.now() - t0) / RUNS;
  const mb = (getHeapStatistics().used_heap_size - heapBefore) / RUNS / 2 ** 20;
  return { msPerRun: +ms.toFixed(2), allocatedMBPerRun: +mb.toFixed(2), objects, finalState };
}

const baseline = measure(fromScratch());
const kept = measure(keptPlaced());
process.stdout.write(
  `${JSON.stringify(
    {
      benchmark: 'layout',
      config: { accounts: ACCOUNTS, credentialsPerAccount: CREDS, runs: RUNS, changedAccountsPerRun: 1 },
      baselineFromScratch: baseline,
      keptPlaced: kept,
      ratio: {
        time: +(kept.msPerRun / baseline.msPerRun).toFixed(3),
        allocated: +(kept.allocatedMBPerRun / baseline.allocatedMBPerRun).toFixed(3),
      },
      // The same changes in the same order: both must end with the same index version and bundle digests.
      sameResult: kept.finalState === baseline.finalState,
    },
    null,
    2,
  )}\n`,
);
