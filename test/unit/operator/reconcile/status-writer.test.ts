// The status writer without a cluster: an applier and an event recorder that record what they are asked to do.
import { describe, expect, test } from '@jest/globals';
import type { KubernetesObject } from '@kubernetes/client-node';
import pino from 'pino';
import type { Applier } from '../../../../src/kube/apply.ts';
import { KubeApiError } from '../../../../src/kube/client.ts';
import type { EventRecorder } from '../../../../src/kube/events.ts';
import {
  EventTokenBucket,
  STATUS_WRITE_EVENT_INTERVAL_MS,
  STATUS_WRITE_FAILURES_BEFORE_EVENT,
  StatusWriter,
} from '../../../../src/operator/reconcile/status-writer.ts';

type Obj = KubernetesObject & { status?: object };
interface Recorded {
  type: string;
  reason: string;
  note: string;
}

function harness(opts: { fail?: () => unknown; now?: () => number; bucket?: EventTokenBucket } = {}) {
  const applied: { kind: string; name: string; status: object }[] = [];
  const events: Recorded[] = [];
  const logs: { level: string; msg: string }[] = [];
  const applier = {
    async applyStatus<T>(kind: string, _ns: string, name: string, status: object): Promise<T> {
      const err = opts.fail?.();
      if (err) throw err;
      applied.push({ kind, name, status });
      return { metadata: { name, namespace: 'team' }, status } as T;
    },
  } as unknown as Applier;
  const recorder: EventRecorder = {
    async record(_obj, type, reason, note) {
      events.push({ type, reason, note });
    },
  } as EventRecorder;
  const log = pino(
    { level: 'info' },
    { write: (line: string) => void logs.push(JSON.parse(line) as { level: string; msg: string }) },
  );
  const observed: Obj[] = [];
  const writer = new StatusWriter({
    applier,
    events: recorder,
    log,
    ...(opts.now ? { now: opts.now } : {}),
    ...(opts.bucket ? { normalEvents: opts.bucket } : {}),
  });
  return { writer, applied, events, logs, observed, informer: { observe: (o: Obj) => void observed.push(o) } };
}

const ready = (status: 'True' | 'False', reason = status === 'True' ? 'Ready' : 'SecretNotFound') => ({
  conditions: [{ type: 'Ready', status, reason, message: `m-${reason}`, lastTransitionTime: '2024-01-01T00:00:00Z' }],
});
const obj = (name: string, status?: object): Obj => ({
  apiVersion: 'byok.gateway.dev/v1alpha1',
  kind: 'Workspace',
  metadata: { name, namespace: 'team' },
  ...(status ? { status } : {}),
});

describe('StatusWriter', () => {
  test('an unchanged status is not written; a changed one is applied and fed back to the informer', async () => {
    const h = harness();
    await h.writer.write('Workspace', obj('w', ready('True')), ready('True'), h.informer);
    expect(h.applied).toEqual([]);
    await h.writer.write('Workspace', obj('w', ready('False')), ready('True'), h.informer);
    expect(h.applied).toHaveLength(1);
    expect(h.observed).toHaveLength(1);
  });

  test('the health and spend parts owned by other writers do not count as a difference', async () => {
    const h = harness();
    const stored = {
      conditions: [
        ...ready('True').conditions,
        {
          type: 'UpstreamHealthy',
          status: 'True',
          reason: 'Serving',
          message: '',
          lastTransitionTime: '2024-01-01T00:00:00Z',
        },
      ],
      lastUsedTime: '2024-01-01T00:00:00Z',
    };
    await h.writer.write('BYOKCredential', obj('c', stored), ready('True'), h.informer);
    expect(h.applied).toEqual([]);
  });

  test('Ready transitions: logged, a fall from True at warn, becoming Ready gives a Normal Ready Event', async () => {
    const h = harness();
    await h.writer.write('Workspace', obj('w', ready('True')), ready('False'), h.informer);
    await h.writer.write('Workspace', obj('w', ready('False')), ready('True'), h.informer);
    await h.writer.write('Workspace', obj('new'), ready('False'), h.informer);
    expect(h.logs.map((l) => l.msg)).toEqual([
      'Workspace is no longer Ready',
      'Workspace Ready is True',
      'Workspace Ready is False',
    ]);
    expect(h.logs.map((l) => l.level)).toEqual([40, 30, 30]);
    expect(h.events).toEqual([{ type: 'Normal', reason: 'Ready', note: 'm-Ready' }]);
  });

  test('Normal Ready Events are throttled by the token bucket; Warnings are not', async () => {
    let t = 0;
    const h = harness({ bucket: new EventTokenBucket(2, 1, () => t) });
    for (let i = 0; i < 5; i++) await h.writer.write('Workspace', obj(`w${i}`), ready('True'), h.informer);
    expect(h.events).toHaveLength(2);
    t = 1000;
    await h.writer.write('Workspace', obj('later'), ready('True'), h.informer);
    expect(h.events).toHaveLength(3);
    for (let i = 0; i < 5; i++) h.writer.warn(obj(`w${i}`), 'SecretNotFound', 'missing');
    expect(h.events.filter((e) => e.type === 'Warning')).toHaveLength(5);
  });

  test('a deleted object (404) is not an error and records nothing', async () => {
    const h = harness({ fail: () => new KubeApiError(404, { reason: 'NotFound' } as never, 'apply') });
    await expect(h.writer.write('Workspace', obj('gone'), ready('True'), h.informer)).resolves.toBeUndefined();
    expect(h.events).toEqual([]);
  });

  test('failing writes: a StatusWriteFailed Warning after 3 in a row, status and reason only, at most every 10 minutes', async () => {
    let now = 0;
    let failing = true;
    const h = harness({
      now: () => now,
      fail: () =>
        failing
          ? new KubeApiError(
              422,
              { reason: 'Invalid', message: 'spec.x: Invalid value: "sk-secret"' } as never,
              'apply',
            )
          : undefined,
    });
    const attempt = () => h.writer.write('Workspace', obj('w'), ready('True'), h.informer).catch((e: unknown) => e);
    for (let i = 1; i < STATUS_WRITE_FAILURES_BEFORE_EVENT; i++) await attempt();
    expect(h.events).toEqual([]);
    expect(await attempt()).toBeInstanceOf(KubeApiError);
    expect(h.events).toEqual([
      {
        type: 'Warning',
        reason: 'StatusWriteFailed',
        note: "the operator could not write this object's status 3 times in a row (422 Invalid); retrying with backoff",
      },
    ]);
    await attempt();
    expect(h.events).toHaveLength(1);
    now += STATUS_WRITE_EVENT_INTERVAL_MS;
    await attempt();
    expect(h.events).toHaveLength(2);
    // A success resets the count.
    failing = false;
    await attempt();
    failing = true;
    now += STATUS_WRITE_EVENT_INTERVAL_MS;
    await attempt();
    expect(h.events.filter((e) => e.reason === 'StatusWriteFailed')).toHaveLength(2);
  });
});

describe('EventTokenBucket', () => {
  test('a burst, then the refill rate', () => {
    let t = 0;
    const b = new EventTokenBucket(25, 2, () => t);
    expect(Array.from({ length: 30 }, () => b.take()).filter(Boolean)).toHaveLength(25);
    t = 500;
    expect(b.take()).toBe(true);
    expect(b.take()).toBe(false);
    t = 60_000;
    expect(Array.from({ length: 30 }, () => b.take()).filter(Boolean)).toHaveLength(25);
  });
});
