// The gateway as the CLI wires it with the embedded spend ledger, on the projected files of a test's operator, with the
// loopback upstreams reachable (egress allows 127.0.0.1): what the metering tests start and stop the same way.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { openGatewaySpendGate } from '../../src/cli/gateway-ledger.ts';
import { parseEgressAllowList } from '../../src/domain/egress.ts';
import type { GenerationRecord } from '../../src/gateway/generations.ts';
import {
  createGatewayMetrics,
  type GatewayMetrics,
  type RunningGateway,
  startGateway,
} from '../../src/gateway/index.ts';
import type { Projector } from '../../src/kube/projector.ts';
import type { LedgerSpendGate } from '../../src/ledger/spend-gate.ts';
import { loadRoutingConfig, type RoutingConfig } from '../../src/sdk/index.ts';
import { type CapturedOperator } from './operator.ts';
import { until } from './until.ts';
import type { Upstreams } from './upstreams.ts';

export const LOOPBACK_ALLOWED = parseEgressAllowList(['127.0.0.1/32']);

/** A test's files: the projected routing config, bundles and key, the shared keys, and its catalog. */
export function gatewayDirs(prefix: string) {
  const root = mkdtempSync(join(tmpdir(), prefix));
  return {
    root,
    config: join(root, 'routing'),
    bundles: join(root, 'bundles'),
    key: join(root, 'key'),
    shared: join(root, 'shared'),
    catalog: join(root, 'catalog.json'),
  };
}
export type GatewayDirs = ReturnType<typeof gatewayDirs>;

export interface MeteredGateway {
  gw: RunningGateway;
  gate: LedgerSpendGate;
  metrics: GatewayMetrics;
  /** The generation record of `id` once the ledger has answered (charged/fee set). */
  settled(apiKeyHash: string, id: string): Promise<GenerationRecord>;
  close(): Promise<void>;
}

export async function startMeteredGateway(dirs: GatewayDirs, up: Upstreams): Promise<MeteredGateway> {
  const metrics = createGatewayMetrics({ defaultMetrics: false });
  const log = pino({ level: 'silent' });
  const gate = await openGatewaySpendGate({ registry: metrics.registry, logger: log });
  const gw = await startGateway({
    configDir: dirs.config,
    bundleDir: dirs.bundles,
    keyDir: dirs.key,
    catalogFile: dirs.catalog,
    sharedKeysDir: dirs.shared,
    host: '127.0.0.1',
    port: 0,
    upstreamCaPem: up.caPem,
    spendGate: gate,
    metrics,
    pollMs: 100,
    egress: LOOPBACK_ALLOWED,
    logger: log,
  });
  return {
    gw,
    gate,
    metrics,
    settled: (apiKeyHash, id) =>
      until(
        `the settled record of ${id}`,
        async () => {
          const g = gw.generations.get(id, apiKeyHash);
          return g && g.charged_micros !== null ? g : undefined;
        },
        20_000,
        20,
      ),
    close: async () => {
      await gw.close();
      await gate.close();
    },
  };
}

/** Waits until the projected routing config says `ready` of its accounts (the operator compiled what the test made). */
export function projected(
  projector: Projector,
  dirs: GatewayDirs,
  what: string,
  ready: (accounts: RoutingConfig['accounts']) => boolean,
): Promise<true> {
  return until(
    what,
    async () => {
      await projector.sync();
      try {
        return ready(loadRoutingConfig(dirs.config).accounts);
      } catch {
        return false;
      }
    },
    30_000,
    200,
  );
}

/** Stops what a test started, last first, and removes its files. */
export async function stopAll(
  parts: {
    stack?: MeteredGateway | undefined;
    projector?: Projector | undefined;
    run?: CapturedOperator | undefined;
    up?: Upstreams | undefined;
  },
  dirs: GatewayDirs,
): Promise<void> {
  await parts.stack?.close();
  await parts.projector?.stop();
  await parts.run?.op.stop();
  await parts.up?.close();
  rmSync(dirs.root, { recursive: true, force: true });
}
