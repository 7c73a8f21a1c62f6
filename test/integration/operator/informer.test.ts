// The supervised informer against the real apiserver: events, read-your-writes, a real 410 Gone relist that
// must not lose a delete, and the staleness watchdog.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { CoreV1Api, type V1ConfigMap } from '@kubernetes/client-node';
import {
  createApplier,
  crPath,
  type RestartReason,
  SupervisedInformer,
  stripBulkyMetadata,
} from '../../../src/kube/index.ts';
import type { Guardrail } from '../../../src/schema/generated/types.ts';
import { API_VERSION } from '../../../src/schema/resources.ts';
import { crApi, createTestNamespace, testKubeConfig } from '../../support/kube.ts';
import { sleep, until } from '../../support/until.ts';

describe('SupervisedInformer', () => {
  const kc = testKubeConfig();
  const core = kc.makeApiClient(CoreV1Api);
  let ns = '';
  let informer: SupervisedInformer<V1ConfigMap>;
  const events: string[] = [];
  const restarts: RestartReason[] = [];

  beforeAll(async () => {
    ns = await createTestNamespace('informer');
    await core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name: 'before', labels: { app: 't' } }, data: { a: '1' } },
    });
    informer = new SupervisedInformer<V1ConfigMap>({
      kubeConfig: kc,
      path: '/api/v1/configmaps',
      namespaces: [ns],
      labelSelector: 'app=t',
      name: 'configmaps',
      staleSeconds: 2,
      backoffInitialMs: 50,
      onRestart: (r) => restarts.push(r),
    });
    informer.addIndex('a', (cm) => (cm.data?.a ? [cm.data.a] : []));
    informer.on('add', (o) => events.push(`add:${o.metadata?.name}`));
    informer.on('update', (o) => events.push(`update:${o.metadata?.name}`));
    informer.on('delete', (o) => events.push(`delete:${o.metadata?.name}`));
    await informer.start();
  });
  afterAll(async () => {
    await informer.stop();
  });

  test('initial list, then watch events, indexes', async () => {
    expect(informer.hasSynced()).toBe(true);
    expect(events).toContain('add:before');
    expect(informer.get(ns, 'before')?.apiVersion).toBe('v1');
    expect(informer.get(ns, 'before')?.kind).toBe('ConfigMap');
    await core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name: 'after', labels: { app: 't' } }, data: { a: '2' } },
    });
    await until('add:after', () => events.includes('add:after'));
    expect(informer.byIndex('a', '2').map((o) => o.metadata?.name)).toEqual(['after']);
    expect(informer.size()).toBe(informer.list().length);
    expect(informer.size()).toBeGreaterThanOrEqual(2);
    expect(informer.hasNamespace(ns)).toBe(true);
    expect(informer.hasNamespace(`${ns}-none`)).toBe(false);
    await core.patchNamespacedConfigMap({
      namespace: ns,
      name: 'after',
      body: [{ op: 'replace', path: '/data/a', value: '3' }],
    });
    await until('update:after', () => events.includes('update:after'));
    expect(informer.byIndex('a', '2')).toEqual([]);
    expect(informer.byIndex('a', '3').map((o) => o.metadata?.name)).toEqual(['after']);
    await core.deleteNamespacedConfigMap({ namespace: ns, name: 'after' });
    await until('delete:after', () => events.includes('delete:after'));
    expect(informer.get(ns, 'after')).toBeUndefined();
    expect(informer.list(ns).map((o) => o.metadata?.name)).toEqual(['before']);
    expect(informer.size()).toBe(informer.list().length);
  });

  test('observe() gives read-your-writes and the later watch event is not a second update', async () => {
    const applier = createApplier(kc);
    const written = await applier.apply<V1ConfigMap>({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'ryw', namespace: ns, labels: { app: 't' } },
      data: { a: 'ryw' },
    });
    informer.observe(written);
    expect(informer.get(ns, 'ryw')?.data?.a).toBe('ryw');
    await sleep(500);
    expect(events.filter((e) => e.endsWith(':ryw'))).toEqual(['add:ryw']);
    informer.observeDeleted(ns, 'ryw');
    expect(informer.get(ns, 'ryw')).toBeUndefined();
    await applier.delete('v1', 'ConfigMap', ns, 'ryw');
    await sleep(300);
    // The watch may have delivered the ADDED (older than our delete): the tombstone keeps it out.
    expect(informer.get(ns, 'ryw')).toBeUndefined();
  });

  test('410 Gone relists and synthesises the delete that happened while not watching', async () => {
    // A custom resource: its watch cache was initialised when the CRD was installed, so resourceVersion 1 is
    // older than anything it holds and the apiserver answers with a real 410 "too old resource version".
    const guardrails = crApi('guardrails', ns);
    const seen: string[] = [];
    const reasons: RestartReason[] = [];
    const gi = new SupervisedInformer<Guardrail>({
      kubeConfig: kc,
      path: crPath('guardrails'),
      namespaces: [ns],
      name: 'guardrails',
      backoffInitialMs: 50,
      onRestart: (r) => reasons.push(r),
    });
    gi.on('add', (o) => seen.push(`add:${o.metadata?.name}`));
    gi.on('delete', (o) => seen.push(`delete:${o.metadata?.name}`));
    try {
      await guardrails.create({ apiVersion: API_VERSION, kind: 'Guardrail', metadata: { name: 'doomed' }, spec: {} });
      await gi.start();
      expect(seen).toEqual(['add:doomed']);
      gi.testing.pause();
      await guardrails.delete('doomed');
      await guardrails.create({ apiVersion: API_VERSION, kind: 'Guardrail', metadata: { name: 'born' }, spec: {} });
      await sleep(200);
      expect(gi.get(ns, 'doomed')).toBeDefined();
      gi.testing.resume({ resourceVersion: '1' });
      await until('delete:doomed', () => seen.includes('delete:doomed'));
      await until('add:born', () => seen.includes('add:born'));
      expect(reasons).toContain('gone');
      expect(gi.get(ns, 'doomed')).toBeUndefined();
      expect(gi.list(ns).map((g) => g.metadata?.name)).toEqual(['born']);
    } finally {
      await gi.stop();
    }
  });

  test('a transform (stripBulkyMetadata) keeps managedFields out of the cache for listed, watched and observed objects', async () => {
    await core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name: 'tf-listed', labels: { app: 'tf' } }, data: { a: '1' } },
    });
    const ti = new SupervisedInformer<V1ConfigMap>({
      kubeConfig: kc,
      path: '/api/v1/configmaps',
      namespaces: [ns],
      labelSelector: 'app=tf',
      name: 'transformed',
      transform: stripBulkyMetadata,
    });
    const handed: V1ConfigMap[] = [];
    ti.on('add', (o) => handed.push(o));
    ti.on('update', (o) => handed.push(o));
    try {
      await ti.start();
      await core.createNamespacedConfigMap({
        namespace: ns,
        body: { metadata: { name: 'tf-watched', labels: { app: 'tf' } }, data: { a: '2' } },
      });
      await until('tf-watched', () => ti.get(ns, 'tf-watched') !== undefined);
      const written = await createApplier(kc).apply<V1ConfigMap>({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'tf-observed', namespace: ns, labels: { app: 'tf' } },
        data: { a: '3' },
      });
      expect(written.metadata?.managedFields?.length).toBeGreaterThan(0);
      ti.observe(written);
      // The caller's object is left alone.
      expect(written.metadata?.managedFields?.length).toBeGreaterThan(0);
      for (const name of ['tf-listed', 'tf-watched', 'tf-observed']) {
        const cached = ti.get(ns, name);
        expect(cached?.metadata?.resourceVersion).toBeDefined();
        expect(cached?.metadata?.managedFields).toBeUndefined();
        expect(cached?.data?.a).toBeDefined();
      }
      expect(handed.length).toBeGreaterThanOrEqual(3);
      for (const o of handed) expect(o.metadata?.managedFields).toBeUndefined();
    } finally {
      await ti.stop();
    }
  });

  test('the staleness watchdog restarts a quiet watch, and events still flow afterwards', async () => {
    await until('a stale restart', () => restarts.includes('stale'), 8000);
    await core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name: 'late', labels: { app: 't' } }, data: { a: 'l' } },
    });
    await until('add:late', () => events.includes('add:late'));
  });
});
