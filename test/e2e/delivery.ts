// What a user waits on, timed on the real kubelet: a key rotation (secretRef switched → Delivered=True, and → the
// first upstream request that carries the new key) under a steady trickle of chat completions, and a new gateway key
// (Delivered=True → the statuses of its first calls). Timings are figures, never pass/fail; what is asserted is the
// outcome: every request answered 200, and every request sent after Delivered carries the new key.
import { createHash, randomBytes } from 'node:crypto';
import { sleep } from '../support/until.ts';
import type { Upstreams } from '../support/upstreams.ts';
import { type Api, conditionTrueFor } from './api.ts';

export interface RotationFigure {
  toDeliveredSeconds: number;
  toNewKeySeconds: number;
}

/** Sends chat completions, each tagged so that the upstream's view of it (the key it carried) is matched to it. */
export interface Load {
  /** Calls `seen(at)` the first time the upstream sees `key`. */
  expect(key: string, seen: (at: number) => void): void;
  /** Requests started after `since` whose upstream request carried another key than `key`. */
  staleAfter(since: number, key: string): { checked: number; stale: number };
  /** Statuses other than 200 so far, by status. */
  failures(): Record<string, number>;
  sent(): number;
  stop(): Promise<void>;
}

export type Chat = (apiKey: string, content: string) => Promise<number>;

export function startLoad(chat: Chat, apiKey: string, up: Upstreams, opts: { workers: number; pauseMs: number }): Load {
  const started = new Map<number, number>();
  const keyOf = new Map<number, string>();
  const failures: Record<string, number> = {};
  const waiting = new Map<string, (at: number) => void>();
  let n = 0;
  let running = true;
  const listener = (hit: { auth: string }, body: string) => {
    const tag = /e2e-load-(\d+)/.exec(body)?.[1];
    if (tag) keyOf.set(Number(tag), hit.auth);
    const cb = waiting.get(hit.auth);
    if (cb) {
      waiting.delete(hit.auth);
      cb(Date.now());
    }
  };
  up.hitListeners.add(listener);
  const worker = async () => {
    while (running) {
      const id = ++n;
      started.set(id, Date.now());
      const status = await chat(apiKey, `e2e-load-${id}`).catch(() => 0);
      if (status !== 200) failures[String(status)] = (failures[String(status)] ?? 0) + 1;
      await sleep(opts.pauseMs);
    }
  };
  const workers = Array.from({ length: opts.workers }, () => worker());
  return {
    expect: (key, seen) => void waiting.set(key, seen),
    staleAfter: (since, key) => {
      let checked = 0;
      let stale = 0;
      for (const [id, at] of started) {
        const seenKey = keyOf.get(id);
        if (at <= since || seenKey === undefined) continue;
        checked++;
        if (seenKey !== key) stale++;
      }
      return { checked, stale };
    },
    failures: () => ({ ...failures }),
    sent: () => n,
    stop: async () => {
      running = false;
      await Promise.all(workers);
      up.hitListeners.delete(listener);
    },
  };
}

export interface RotationTarget {
  api: Api;
  namespace: string;
  credential: string;
  /** The Secret the credential names now. */
  currentSecret: string;
}

/**
 * One rotation as the runbook does it: a new Secret, the credential's secretRef switched to it (the moment timed from),
 * Delivered=True for that generation, then the old Secret deleted. Waits until the new key was seen upstream and
 * a second more of traffic, then checks that nothing sent after Delivered used the old key.
 */
export async function rotate(
  target: RotationTarget,
  load: Load,
  label: string,
  timeoutMs: number,
): Promise<RotationFigure & { secret: string; checked: number }> {
  const { api, namespace, credential } = target;
  const secret = `${credential}-${label}`;
  const key = `sk-e2e-${label}-${randomBytes(8).toString('hex')}`;
  await api.call('POST', `/api/v1/namespaces/${namespace}/secrets`, {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: secret },
    stringData: { key },
  });
  let newKeyAt: number | undefined;
  load.expect(key, (at) => (newKeyAt = at));
  const credentials = `/apis/byok.gateway.dev/v1alpha1/namespaces/${namespace}/byokcredentials`;
  const t0 = Date.now();
  const patched = await api.call(
    'PATCH',
    `${credentials}/${credential}`,
    { spec: { secretRef: { name: secret } } },
    'application/merge-patch+json',
  );
  const generation = patched.metadata.generation ?? 0;
  const delivered = await api.watchUntil(
    credentials,
    credential,
    patched.metadata.resourceVersion ?? '0',
    (o) => conditionTrueFor(o, 'Delivered', generation),
    timeoutMs,
  );
  const deadline = Date.now() + timeoutMs;
  while (newKeyAt === undefined && Date.now() < deadline) await sleep(50);
  if (newKeyAt === undefined)
    throw new Error(
      `rotation ${label}: Delivered after ${delivered.at - t0} ms, but no upstream request carried the new key`,
    );
  await sleep(1000);
  const { checked, stale } = load.staleAfter(delivered.at, key);
  if (stale > 0)
    throw new Error(
      `rotation ${label}: ${stale} of ${checked} requests sent after Delivered still carried the old key`,
    );
  await api.call('DELETE', `/api/v1/namespaces/${namespace}/secrets/${target.currentSecret}`);
  target.currentSecret = secret;
  return { toDeliveredSeconds: (delivered.at - t0) / 1000, toNewKeySeconds: (newKeyAt - t0) / 1000, secret, checked };
}

/** A new GatewayAPIKey: created, Delivered=True, then `calls` calls at once with it. Returns their statuses. */
export async function newGatewayKey(
  api: Api,
  namespace: string,
  name: string,
  chat: Chat,
  calls: number,
  timeoutMs: number,
): Promise<{ toDeliveredSeconds: number; statuses: number[] }> {
  const secret = `sk-e2e-gateway-${randomBytes(12).toString('hex')}`;
  const hash = createHash('sha256').update(secret).digest('hex');
  const keys = `/apis/byok.gateway.dev/v1alpha1/namespaces/${namespace}/gatewayapikeys`;
  const t0 = Date.now();
  const created = await api.call('POST', keys, {
    apiVersion: 'byok.gateway.dev/v1alpha1',
    kind: 'GatewayAPIKey',
    metadata: { name },
    spec: { hash },
  });
  const delivered = await api.watchUntil(
    keys,
    name,
    created.metadata.resourceVersion ?? '0',
    (o) => conditionTrueFor(o, 'Delivered', created.metadata.generation ?? 1),
    timeoutMs,
  );
  const statuses = await Promise.all(
    Array.from({ length: calls }, (_, i) => chat(secret, `e2e-new-key-${name}-${i}`).catch(() => 0)),
  );
  return { toDeliveredSeconds: (delivered.at - t0) / 1000, statuses };
}

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

export function summary(values: number[]): { p50: number; p99: number; worst: number } {
  const r = (x: number) => Math.round(x * 1000) / 1000;
  return { p50: r(percentile(values, 50)), p99: r(percentile(values, 99)), worst: r(Math.max(...values)) };
}
