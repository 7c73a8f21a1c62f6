// The gateway's side of the delivery stream (docs/gateway.md, "Delivery stream"): connects to the operator with the
// pod's projected ServiceAccount token (re-read on every connect: the kubelet rotates it), says what it holds, applies
// each committed batch through the one rule of contract/delivery.ts (signed, newer, never backwards), writes what it
// holds into two directories in kubelet's volume layout (read by a second SDK watcher) and acknowledges the batch.
// Reconnects with capped, jittered backoff; a ping at least every `idleMs` or the connection is dropped.
import { readFileSync } from 'node:fs';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { kubeletWrite } from '../contract/atomic-dir.ts';
import {
  DELIVERY_ACK_PATH,
  DELIVERY_FORMAT,
  DELIVERY_STREAM_PATH,
  type DeliveryAck,
  type DeliveryHello,
  type DeliveryKind,
  type DeliveryObject,
  type DeliveryRemoval,
  DeliveryState,
  LineSplitter,
  parseDeliveryLine,
} from '../contract/delivery.ts';
import { readKeyring } from '../sdk/index.ts';

export interface DeliveryStreamOptions {
  /** Base URL of the operator's delivery stream, e.g. http://byok-operator-delivery.byok-system:8443. */
  url: string;
  tokenFile: string;
  /** The mounted bundle key volume: the signing key is derived from it. */
  keyDir: string;
  /** Writable directory; what the stream delivered is kept in `routing/` and `bundles/` below it. */
  dir: string;
  /** This gateway process's id (the status report's `instance`). */
  instance: string;
  /** Loads what was just written; the routing version now served, or why it was refused. */
  load: () => { routingVersion: string | null; problem?: string };
  /** Connected or not (the gateway falls back to the mount while not). */
  onConnection?: (connected: boolean) => void;
  /** Each batch's outcome once loaded (before the acknowledgement leaves): metrics and the status report. */
  onBatch?: (outcome: { batch: number; result: DeliveryAck['result']; objects: number; reason?: string }) => void;
  log?: Logger;
  /** Drop a connection that sent nothing (not even a ping) for this long (default 45 s). */
  idleMs?: number;
  backoffMinMs?: number;
  backoffMaxMs?: number;
  /** How often a pod without a mounted bundle key looks for it before connecting (default 500 ms). */
  keyPollMs?: number;
}

export interface DeliveryStream {
  readonly routingDir: string;
  readonly bundleDir: string;
  connected(): boolean;
  /** Batches applied since start. */
  batches(): number;
  close(): void;
}

type Item = DeliveryObject | DeliveryRemoval;

function hasKey(keyDir: string): boolean {
  try {
    readKeyring(keyDir);
    return true;
  } catch {
    return false;
  }
}

export function startDeliveryStream(opts: DeliveryStreamOptions): DeliveryStream {
  const routingDir = join(opts.dir, 'routing');
  const bundleDir = join(opts.dir, 'bundles');
  const state = new DeliveryState();
  const base = new URL(opts.url);
  const send = base.protocol === 'https:' ? httpsRequest : httpRequest;
  let live = false;
  let closed = false;
  let failures = 0;
  /** Refused batches in a row: each drops the stream, and the next connect waits longer. */
  let refusedInARow = 0;
  let applied = 0;
  let current: IncomingMessage | undefined;
  let retry: NodeJS.Timeout | undefined;

  const setLive = (v: boolean) => {
    if (live === v) return;
    live = v;
    opts.onConnection?.(v);
  };
  const token = () => readFileSync(opts.tokenFile, 'utf8').trim();

  const post = (path: string, body: unknown, onResponse: (res: IncomingMessage) => void) => {
    const payload = JSON.stringify(body);
    const req = send(
      new URL(path, base),
      {
        method: 'POST',
        headers: {
          authorization: `Bearer ${token()}`,
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(payload)),
        },
      },
      onResponse,
    );
    req.on('error', (err) => {
      if (path === DELIVERY_STREAM_PATH) reconnectLater(err.message);
    });
    req.end(payload);
    return req;
  };

  const ack = (a: Omit<DeliveryAck, 'format' | 'instance'>) => {
    try {
      post(DELIVERY_ACK_PATH, { format: DELIVERY_FORMAT, instance: opts.instance, ...a }, (res) => res.resume());
    } catch (err) {
      opts.log?.debug({ err: (err as Error).message }, 'delivery acknowledgement not sent');
    }
  };

  /** Applies a committed batch, writes the changed volumes, loads them and acknowledges. */
  const commit = (batch: number, items: Item[]) => {
    let problem: string | undefined;
    const touched = new Set<DeliveryKind>();
    try {
      const keys = readKeyring(opts.keyDir).keys;
      for (const item of items) {
        const refused = state.apply(item, keys);
        if (refused) problem ??= refused;
        else touched.add(item.kind);
      }
    } catch (err) {
      // The code only: the reason travels into Events (a file path or parser text has no place there).
      problem = `the mounted bundle key could not be read (${(err as { code?: string }).code ?? 'invalid'})`;
    }
    if (touched.has('ConfigMap') || (applied === 0 && state.size > 0))
      kubeletWrite(routingDir, state.files('ConfigMap'));
    if (touched.has('Secret') || (applied === 0 && state.size > 0)) kubeletWrite(bundleDir, state.files('Secret'));
    const loaded = opts.load();
    problem ??= loaded.problem;
    applied++;
    opts.onBatch?.({
      batch,
      result: problem ? 'refused' : 'loaded',
      objects: items.length,
      ...(problem ? { reason: problem } : {}),
    });
    if (problem) opts.log?.warn({ batch, reason: problem }, 'delivery batch refused in part; keeping what verified');
    ack({
      batch,
      result: problem ? 'refused' : 'loaded',
      ...(problem ? { reason: problem } : {}),
      routingVersion: loaded.routingVersion,
    });
    // The operator counts what it sent as held. After a refusal, reconnect (with backoff) so the hello says what this
    // pod really holds and the refused objects come again: they load once the cause is gone (a new key mounted).
    if (problem) {
      refusedInARow++;
      current?.destroy();
    } else refusedInARow = 0;
  };

  const reconnectLater = (why: string) => {
    current = undefined;
    setLive(false);
    if (closed || retry) return;
    failures++;
    const tries = Math.max(failures, refusedInARow);
    const ceiling = Math.min(opts.backoffMaxMs ?? 5000, (opts.backoffMinMs ?? 250) * 2 ** Math.min(tries - 1, 10));
    const delay = ceiling / 2 + Math.random() * (ceiling / 2);
    opts.log?.info(
      { why, retryMs: Math.round(delay) },
      'delivery stream down; serving the mounted config until it is back',
    );
    retry = setTimeout(() => {
      retry = undefined;
      connect();
    }, delay);
    retry.unref?.();
  };

  const onStream = (res: IncomingMessage) => {
    if (res.statusCode !== 200) {
      res.resume();
      return reconnectLater(`the operator answered ${res.statusCode}`);
    }
    current = res;
    failures = 0;
    setLive(true);
    let items: Item[] = [];
    let idle: NodeJS.Timeout | undefined;
    const touch = () => {
      if (idle) clearTimeout(idle);
      idle = setTimeout(
        () => res.destroy(new Error('no line from the operator within the idle time')),
        opts.idleMs ?? 45_000,
      );
      idle.unref?.();
    };
    const splitter = new LineSplitter((line) => {
      const l = parseDeliveryLine(line.toString('utf8'));
      if (l.type === 'object' || l.type === 'removed') items.push(l);
      else if (l.type === 'commit') {
        const batch = items;
        items = [];
        commit(l.batch, batch);
      }
    });
    touch();
    res.on('data', (chunk: Buffer) => {
      touch();
      try {
        splitter.push(chunk);
      } catch (err) {
        res.destroy(err as Error);
      }
    });
    res.on('close', () => {
      if (idle) clearTimeout(idle);
      reconnectLater(res.errored?.message ?? 'the operator closed the stream');
    });
  };

  let keyMissingLogged = false;
  const connect = () => {
    if (closed) return;
    // Nothing on the stream verifies without the bundle key: while its volume is empty (a fresh install whose key the
    // kubelet has not mounted yet), wait for it here instead of fetching batches only to refuse them.
    if (!hasKey(opts.keyDir)) {
      if (!keyMissingLogged) opts.log?.info('no bundle key mounted yet; the delivery stream connects once it is');
      keyMissingLogged = true;
      retry = setTimeout(() => {
        retry = undefined;
        connect();
      }, opts.keyPollMs ?? 500);
      retry.unref?.();
      return;
    }
    try {
      const hello: DeliveryHello = { format: DELIVERY_FORMAT, instance: opts.instance, held: state.held() };
      post(DELIVERY_STREAM_PATH, hello, onStream);
    } catch (err) {
      reconnectLater((err as Error).message);
    }
  };

  connect();
  return {
    routingDir,
    bundleDir,
    connected: () => live,
    batches: () => applied,
    close() {
      closed = true;
      if (retry) clearTimeout(retry);
      current?.destroy();
    },
  };
}
