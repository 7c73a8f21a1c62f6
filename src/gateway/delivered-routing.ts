// Which routing config a gateway with the delivery stream serves: the mount stays the floor. The pod starts from its
// mounted volumes, switches to what the stream delivered once a batch loads, and keeps that while the stream is down
// until the mount moves (the kubelet swapped in a newer generation since the stream dropped): the mount then wins, so
// an operator outage never freezes a pod on what it last streamed, and a short drop never sends it back to an older
// mount. Two SDK watchers (mount and stream) run side by side; this picks one per call.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { Counter, Gauge } from 'prom-client';
import type { DeliveryReport, GatewayStatusReport } from '../contract/gateway-status.ts';
import { type RoutingConfig, type RoutingConfigWatcher, resolveGeneration, watchRoutingConfig } from '../sdk/index.ts';
import { type DeliveryStream, startDeliveryStream } from './delivery-stream.ts';
import { bundleInventory } from './health.ts';
import type { GatewayMetrics } from './metrics.ts';

export type RoutingSource = 'mount' | 'stream';

/** The pure rule: which source to serve, from the stream's connection and the reloads seen. */
export class SourceRule {
  private up = false;
  private mountMovedWhileDown = false;

  connection(up: boolean): void {
    this.up = up;
  }

  mountReloaded(): void {
    if (!this.up) this.mountMovedWhileDown = true;
  }

  streamLoaded(): void {
    this.mountMovedWhileDown = false;
  }

  pick(streamHasConfig: boolean): RoutingSource {
    // After the mount moved, a reconnect alone is not enough: the stream's next batch must load first.
    return streamHasConfig && !this.mountMovedWhileDown ? 'stream' : 'mount';
  }
}

/** One RoutingConfigWatcher over two: every call goes to the source the rule picks. */
export function switchingWatcher(
  mount: RoutingConfigWatcher,
  stream: RoutingConfigWatcher,
  rule: SourceRule,
): RoutingConfigWatcher & { source(): RoutingSource } {
  const pick = () => (rule.pick(stream.current() !== undefined) === 'stream' ? stream : mount);
  return {
    source: () => (pick() === stream ? 'stream' : 'mount'),
    current: (): RoutingConfig | undefined => pick().current(),
    reload: () => {
      const a = mount.reload();
      const b = stream.reload();
      return a || b;
    },
    decryptCredential: (id) => pick().decryptCredential(id),
    openCredential: (id, read) => pick().openCredential(id, read),
    credentialPayload: (id, options) => pick().credentialPayload(id, options),
    planFor: (request, catalog, now) => pick().planFor(request, catalog, now),
    bundleGeneration: () => pick().bundleGeneration(),
    close: () => {
      mount.close();
      stream.close();
    },
  };
}

/**
 * The pod's delivery sequence: it moves whenever what the pod serves may have changed (a stream batch loaded or
 * refused, a reload of either source, the stream going up or down), and a held status request waits on it, so the
 * operator's leader learns of an acknowledgement the moment it happens.
 */
export class DeliveryTracker {
  private seq = 0;
  private lastBatch: DeliveryReport['lastBatch'];
  private readonly waiters = new Set<() => void>();
  private stream: DeliveryReport['stream'];
  private closing = false;

  constructor(stream: DeliveryReport['stream']) {
    this.stream = stream;
  }

  moved(): void {
    this.seq++;
    for (const wake of this.waiters) wake();
  }

  batch(outcome: NonNullable<DeliveryReport['lastBatch']>): void {
    this.lastBatch = outcome;
    this.moved();
  }

  connection(up: boolean): void {
    this.stream = up ? 'connected' : 'down';
    this.moved();
  }

  report(): DeliveryReport {
    return { seq: this.seq, stream: this.stream, ...(this.lastBatch ? { lastBatch: this.lastBatch } : {}) };
  }

  /** Resolves once the sequence is past `after`, after `ms`, or on close(), whichever comes first. */
  waitPast(after: number, ms: number): Promise<void> {
    if (this.seq > after || this.closing) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(wake);
        resolve();
      };
      const wake = () => {
        if (this.seq > after || this.closing) done();
      };
      const timer = setTimeout(done, ms);
      this.waiters.add(wake);
    });
  }

  /** Releases every held request (the gateway is shutting down). */
  close(): void {
    this.closing = true;
    for (const wake of this.waiters) wake();
  }
}

export interface GatewayRoutingOptions {
  configDir: string;
  bundleDir: string;
  keyDir: string;
  pollMs?: number;
  /** The operator's delivery stream; absent: the mount alone, as before. */
  deliveryStream?: { url: string; tokenFile: string; dir: string };
  instance: string;
  log: Logger | undefined;
  metrics: GatewayMetrics;
  /** The config served changed (another version, or the other source). */
  onServed: (config: RoutingConfig) => void;
}

export interface GatewayRouting {
  routing: RoutingConfigWatcher;
  /** The bundle envelopes of the source served, for the status report. */
  inventory: () => GatewayStatusReport['bundle'];
  source(): RoutingSource;
  stream: DeliveryStream | undefined;
  delivery: DeliveryTracker;
  close(): void;
}

/** The gateway's routing: the mounted volumes, and the delivery stream beside them when configured. */
export function openGatewayRouting(o: GatewayRoutingOptions): GatewayRouting {
  const { log, metrics } = o;
  let served: RoutingConfig | undefined;
  let routing: (RoutingConfigWatcher & { source(): RoutingSource }) | undefined;
  let streamProblem: string | undefined;
  const rule = new SourceRule();
  const tracker = new DeliveryTracker(o.deliveryStream ? 'down' : 'off');
  const servedChanged = () => {
    const now = routing?.current();
    if (now === undefined || now === served) return;
    served = now;
    o.onServed(now);
    tracker.moved();
  };
  // A rotation often moves only the bundle volume (the routing index stays the same), which the SDK watcher does not
  // report: the mount's two generations are watched here, so the rule and the tracker see every move of the mount.
  const mountGeneration = () => `${resolveGeneration(o.configDir)}|${resolveGeneration(o.bundleDir)}`;
  let lastMount = mountGeneration();
  const mountPoll = setInterval(() => {
    const g = mountGeneration();
    if (g === lastMount) return;
    lastMount = g;
    rule.mountReloaded();
    servedChanged();
    tracker.moved();
  }, o.pollMs ?? 1000);
  mountPoll.unref?.();
  const watcher = (configDir: string, bundleDir: string, from: RoutingSource) =>
    watchRoutingConfig({
      configDir,
      bundleDir,
      keyDir: o.keyDir,
      ...(o.pollMs !== undefined ? { pollMs: o.pollMs } : {}),
      // Saves two readlink calls per attempt; a missing envelope or key still forces a fresh look.
      generationCheckMs: 100,
      onReload: (config) => {
        metrics.reloads.inc({ what: 'routing', result: 'ok' });
        log?.info({ version: config.version, accounts: config.accounts.size, from }, 'routing config loaded');
        // A count only: the hashes are public, but which accounts claim one is not this log's to spread.
        if (config.contestedApiKeys > 0)
          log?.warn(
            { version: config.version, contestedApiKeys: config.contestedApiKeys, from },
            'routing config carries gateway-key hashes in more than one account: those keys are refused until one account holds each',
          );
        if (from === 'mount') rule.mountReloaded();
        else streamProblem = undefined;
        servedChanged();
      },
      onError: (err, failure) => {
        const code = (err as { code?: string }).code;
        // The code only: the reason travels into Events on Accounts, and the loader's text may name other accounts.
        if (from === 'stream') streamProblem = `the delivered routing config does not load (${code ?? 'error'})`;
        // A half-projected config is normal while kubelet swaps the volume: counted apart, so only a real rejection alerts.
        if (failure === 'pending') {
          metrics.reloads.inc({ what: 'routing', result: 'pending' });
          log?.info(
            { code, err: err.message, from },
            'routing config not fully projected yet; keeping the last good one',
          );
          return;
        }
        metrics.reloads.inc({ what: 'routing', result: 'error' });
        log?.warn({ code, err: err.message, from }, 'routing config rejected; keeping the last good one');
      },
    });
  const mount = watcher(o.configDir, o.bundleDir, 'mount');
  const mountInventory = bundleInventory(o.bundleDir, o.keyDir, () => mount.bundleGeneration());
  if (!o.deliveryStream) {
    routing = Object.assign(mount, { source: (): RoutingSource => 'mount' });
    servedChanged();
    return {
      routing,
      inventory: mountInventory,
      source: () => 'mount',
      stream: undefined,
      delivery: tracker,
      close: () => {
        clearInterval(mountPoll);
        tracker.close();
        mount.close();
      },
    };
  }
  const ds = o.deliveryStream;
  const connected = new Gauge({
    name: 'byok_gateway_delivery_stream_connected',
    help: "1 while this pod is connected to the operator's delivery stream.",
    registers: [metrics.registry],
  });
  const batches = new Counter({
    name: 'byok_gateway_delivery_stream_batches_total',
    help: 'Delivery stream batches applied, by result (loaded, refused).',
    labelNames: ['result'],
    registers: [metrics.registry],
  });
  const streamDirs = { routing: join(ds.dir, 'routing'), bundles: join(ds.dir, 'bundles') };
  mkdirSync(streamDirs.routing, { recursive: true });
  mkdirSync(streamDirs.bundles, { recursive: true });
  const streamed = watcher(streamDirs.routing, streamDirs.bundles, 'stream');
  const streamInventory = bundleInventory(streamDirs.bundles, o.keyDir, () => streamed.bundleGeneration());
  routing = switchingWatcher(mount, streamed, rule);
  const stream = startDeliveryStream({
    url: ds.url,
    tokenFile: ds.tokenFile,
    keyDir: o.keyDir,
    dir: ds.dir,
    instance: o.instance,
    ...(log ? { log } : {}),
    load: () => {
      streamProblem = undefined;
      streamed.reload();
      if (streamProblem) return { routingVersion: routing!.current()?.version ?? null, problem: streamProblem };
      if (streamed.current()) rule.streamLoaded();
      servedChanged();
      return { routingVersion: routing!.current()?.version ?? null };
    },
    onConnection: (up) => {
      connected.set(up ? 1 : 0);
      rule.connection(up);
      servedChanged();
      tracker.connection(up);
    },
    onBatch: ({ batch, result, reason }) => {
      batches.inc({ result });
      tracker.batch({ batch, result, ...(reason !== undefined ? { reason } : {}) });
    },
  });
  servedChanged();
  const both = routing;
  return {
    routing: both,
    inventory: () => (both.source() === 'stream' ? streamInventory() : mountInventory()),
    source: () => both.source(),
    stream,
    delivery: tracker,
    close: () => {
      clearInterval(mountPoll);
      tracker.close();
      stream.close();
      both.close();
    },
  };
}
