// Spend faults (a gateway killed, Redis down) with real gateway processes and a real redis-server, without and with the spend
// journal, in one run: kill -9 under load with Redis up; kill -9 during a Redis outage (Redis back, gateway
// restarted); a Redis outage of `outageSeconds` (default 60) under load. Served = responses whose body arrived in
// full; lost = served generation ids Redis never recorded; counted twice = BYOK list cost past one request per
// recorded id. Starts its own control plane (the operator compiles the account once). Prints one JSON object.
// Run: node scripts/bootstrap.mjs --control-plane -- node bench/ledger-faults.ts [outageSeconds] [lanes]

import { setTimeout as sleep } from 'node:timers/promises';
import { startControlPlane } from '../src/controlplane/control-plane.ts';
import { installCrds } from '../src/controlplane/install-crds.ts';

const outageSeconds = Number(process.argv[2] ?? '60');
const lanes = Number(process.argv[3] ?? '8');

const cp = await startControlPlane();
try {
  await installCrds(cp.kubeconfigPath);
  process.env.BYOK_TEST_KUBECONFIG = cp.kubeconfigPath;
  // Loaded after the kubeconfig is set: the harness is the integration tests' (test/support/gateway-fleet.ts).
  const { journalDir, kill9, load, redisDown, settle, startSpendStack, stopGateway } = await import(
    '../test/support/gateway-fleet.ts'
  );
  const stack = await startSpendStack('bench-faults');
  const results: Record<string, unknown> = {};
  try {
    for (const journaled of [false, true]) {
      const tag = journaled ? 'journal' : 'no journal';
      const dir = (name: string) => (journaled ? journalDir(stack, `${name}`) : undefined);
      // A gateway without a journal never gets its lost records back: a short wait settles the figure.
      const wait = journaled ? 60_000 : 10_000;

      let gw = await stack.gateway(dir('kill-up'));
      let traffic = load(gw, lanes);
      await sleep(5000);
      await kill9(gw);
      await traffic.stop();
      let restarted = await stack.gateway(dir('kill-up'));
      results[`kill -9, Redis up (${tag})`] = await settle(stack.redis.url, traffic.served, wait);
      await stopGateway(restarted);

      gw = await stack.gateway(dir('kill-outage'));
      traffic = load(gw, lanes);
      await sleep(1000);
      await redisDown(stack.redis);
      await sleep(10_000);
      await kill9(gw);
      await traffic.stop();
      await stack.redis.start();
      restarted = await stack.gateway(dir('kill-outage'));
      results[`kill -9 during a 10 s Redis outage (${tag})`] = await settle(stack.redis.url, traffic.served, wait);
      await stopGateway(restarted);

      gw = await stack.gateway(dir('outage'));
      traffic = load(gw, lanes);
      await sleep(1000);
      await redisDown(stack.redis);
      const started = Date.now();
      const servedBefore = traffic.served.length;
      await sleep(outageSeconds * 1000);
      const outageRate = Math.round((traffic.served.length - servedBefore) / ((Date.now() - started) / 1000));
      await stack.redis.start();
      const back = Date.now();
      await sleep(2000);
      await traffic.stop();
      const r = await settle(stack.redis.url, traffic.served, journaled ? 120_000 : 20_000);
      results[`${outageSeconds} s Redis outage under load (${tag})`] = {
        ...r,
        servedPerSecondDuringOutage: outageRate,
        settledSecondsAfterRedisBack: Math.round((Date.now() - back) / 100) / 10,
      };
      await stopGateway(gw);
      process.stderr.write(`[ledger-faults] ${tag}: ${JSON.stringify(results)}\n`);
    }
  } finally {
    await stack.close();
  }
  process.stdout.write(
    `${JSON.stringify({ what: 'spend faults with real gateway processes and redis-server, without and with the spend journal (fsync batch)', lanes, outageSeconds, results })}\n`,
  );
} finally {
  await cp.stop();
}
