// Runs the full operator in its own process so the benchmark can read its peak RSS (VmHWM) cleanly.
// argv: <kubeconfig> <routingNamespace>. Prints "ready" once started; stops on SIGTERM.
// BENCH_DIAG=<file>: every 500 ms append a JSON line (memory, cache sizes, queue/reconcile counters) to <file>.
// BENCH_MEMORY=1 (with --expose-gc): on SIGUSR2 print "memory <json>", the per-structure heap breakdown
// (bench/lib/memory-breakdown.ts).
import { appendFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { getHeapSpaceStatistics, getHeapStatistics, writeHeapSnapshot } from 'node:v8';
import pino from 'pino';
import { loadKubeConfig } from '../../src/kube/kubeconfig.ts';
import { startOperator } from '../../src/operator/run.ts';
import { memoryBreakdown } from './memory-breakdown.ts';
import { procStatusMB } from './proc.ts';

const [kubeconfigPath, routingNamespace] = process.argv.slice(2);
if (!kubeconfigPath || !routingNamespace) throw new Error('usage: operator-child.ts <kubeconfig> <routingNamespace>');

const t0 = performance.now();
const operator = await startOperator({
  kubeConfig: loadKubeConfig(kubeconfigPath),
  routingNamespace,
  httpPort: 0,
  httpHost: '127.0.0.1',
  logger: pino({ level: process.env.BENCH_LOG_LEVEL ?? 'warn' }),
  ...(process.env.BENCH_NO_COMPILE ? { compile: { enabled: false } } : {}),
  ...(process.env.BENCH_CRED_CONCURRENCY
    ? { concurrency: { credentials: Number(process.env.BENCH_CRED_CONCURRENCY) } }
    : {}),
});
process.stdout.write('ready\n');

const diag = process.env.BENCH_DIAG;
if (diag) {
  const metric = async (name: string) => (await operator.registry.getSingleMetric(name)?.get())?.values ?? [];
  const c0 = operator.informers.credentials.list()[0];
  const s0 = operator.informers.secrets.list()[0];
  appendFileSync(diag, `${JSON.stringify({ sampleCredential: c0, sampleSecret: s0 })}\n`);
  let sampled = false;
  let snapshotTaken = false;
  // The sampler must not weigh on what it measures: no list() of 100k objects every 500 ms (that alone was
  // ~2.5 MB/s of garbage at 100k credentials).
  const first = () => operator.informers.credentials.get(c0?.metadata?.namespace ?? '', c0?.metadata?.name ?? '');
  // Compile runs that took long or wrote much, with what they did (which run a slow change waited for).
  operator.pipeline?.onCompiled((r) => {
    if (r.durationMs < 500 && r.shardWrites + r.bundleWrites < 20) return;
    appendFileSync(
      diag,
      `${JSON.stringify({ compile: { t: +((performance.now() - t0) / 1000).toFixed(1), ms: Math.round(r.durationMs), accounts: r.accounts.length, shardWrites: r.shardWrites, bundleWrites: r.bundleWrites, deleted: r.deleted } })}\n`,
    );
  });
  const lag = monitorEventLoopDelay({ resolution: 10 });
  lag.enable();
  const timer = setInterval(() => {
    if (!sampled && first()?.status) {
      sampled = true;
      appendFileSync(diag, `${JSON.stringify({ sampleCredentialAfter: first() })}\n`);
    }
    void (async () => {
      const mu = process.memoryUsage();
      const hs = getHeapStatistics();
      const inf = operator.informers;
      const reconciles = (await metric('controller_runtime_reconcile_total'))
        .filter((v) => v.labels.controller === 'byokcredential')
        .reduce((s, v) => s + v.value, 0);
      const depth = (await metric('workqueue_depth')).find((v) => v.labels.name === 'byokcredential')?.value;
      const work = (await metric('controller_runtime_reconcile_time_seconds')).filter(
        (v) => v.labels.controller === 'byokcredential',
      );
      const workSum = work.find((v) => (v as { metricName?: string }).metricName?.endsWith('_sum'))?.value;
      const secretReads = (await metric('byok_secret_direct_reads_total')).reduce((s, v) => s + v.value, 0);
      const cmWrites = (await metric('byok_configmap_writes_total')).reduce((s, v) => s + v.value, 0);
      const mb = (n: number) => +(n / 1048576).toFixed(1);
      const spaces = Object.fromEntries(
        getHeapSpaceStatistics()
          .filter((x) => x.space_size > 1048576)
          .map((x) => [x.space_name.replace(/_space$/, ''), `${mb(x.space_used_size)}/${mb(x.space_size)}`]),
      );
      if (process.env.BENCH_HEAPSNAPSHOT && reconciles >= 10000 && !snapshotTaken) {
        snapshotTaken = true;
        writeHeapSnapshot(process.env.BENCH_HEAPSNAPSHOT);
      }
      appendFileSync(
        diag,
        `${JSON.stringify({
          t: +((performance.now() - t0) / 1000).toFixed(1),
          rss: mb(mu.rss),
          heapUsed: mb(mu.heapUsed),
          heapTotal: mb(mu.heapTotal),
          external: mb(mu.external),
          arrayBuffers: mb(mu.arrayBuffers),
          heapLimit: mb(hs.heap_size_limit),
          // V8's own malloc (zones, GC worklists) and the RSS split: file-backed pages (the node binary) vs anonymous.
          v8Malloced: mb(hs.malloced_memory),
          v8PeakMalloced: mb(hs.peak_malloced_memory),
          rssAnon: +procStatusMB('self', 'RssAnon').toFixed(1),
          rssFile: +procStatusMB('self', 'RssFile').toFixed(1),
          creds: inf.credentials.size(),
          secrets: inf.secrets.size(),
          // Event-loop delay since the previous sample (ms): how long a timer or an I/O callback had to wait.
          loopLagMaxMs: +(lag.max / 1e6).toFixed(1),
          loopLagP99Ms: +(lag.percentile(99) / 1e6).toFixed(1),
          reconciles,
          depth,
          workSumS: workSum !== undefined ? +workSum.toFixed(1) : undefined,
          secretReads,
          cmWrites,
          cpuUserS: +(process.cpuUsage().user / 1e6).toFixed(1),
          spaces,
        })}\n`,
      );
      lag.reset();
    })();
  }, 500);
  timer.unref();
}

if (process.env.BENCH_MEMORY) {
  process.on('SIGUSR2', () => {
    process.stdout.write(`memory ${JSON.stringify(memoryBreakdown(operator.informers))}\n`);
  });
}

process.on('SIGTERM', () => {
  void operator.stop().finally(() => process.exit(0));
});
