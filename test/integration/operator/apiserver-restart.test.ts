// The apiserver goes away mid-run and comes back (same etcd): the operator's informers recover on their own
// and it converges on changes made after the restart, without being restarted itself. Uses a private control
// plane so the other suites are not disturbed.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { type ControlPlane, startControlPlane } from '../../../src/controlplane/control-plane.ts';
import { installCrds } from '../../../src/controlplane/install-crds.ts';
import { maskLabel } from '../../../src/domain/index.ts';
import { GROUP, VERSION } from '../../../src/schema/resources.ts';
import { account, credential, withProvider, withSecret } from '../../support/builders.ts';
import {
  type CapturedOperator,
  cond,
  metricsText,
  metricValue,
  type Obj,
  startTestOperator,
} from '../../support/operator.ts';
import { until } from '../../support/until.ts';

describe('apiserver restart', () => {
  let cp: ControlPlane;
  let kc: KubeConfig;
  let run: CapturedOperator;
  const ns = 'restart-account';
  const measured: Record<string, number> = {};

  beforeAll(async () => {
    cp = await startControlPlane();
    await installCrds(cp.kubeconfigPath);
    kc = new KubeConfig();
    kc.loadFromFile(cp.kubeconfigPath);
    const core = kc.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: ns } } });
    await core.createNamespace({ body: { metadata: { name: 'restart-routing' } } });
    // Its own control plane: the Account through this kubeconfig (the operator routes only namespaces with one).
    await kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: ns,
      plural: 'accounts',
      body: account(ns),
    });
    run = await startTestOperator(kc, { routingNamespace: 'restart-routing', watchNamespaces: [ns], staleSeconds: 10 });
  }, 120_000);
  afterAll(async () => {
    await run?.op.stop();
    await cp?.stop();
    process.stderr.write(`[restart measurements] ${JSON.stringify(measured)}\n`);
  });

  test('recovers and converges after kube-apiserver restarts', async () => {
    const core = kc.makeApiClient(CoreV1Api);
    const custom = kc.makeApiClient(CustomObjectsApi);
    const base = { group: GROUP, version: VERSION, namespace: ns, plural: 'byokcredentials' };
    const get = async (name: string) => (await custom.getNamespacedCustomObject({ ...base, name })) as Obj;
    const readyWith = (name: string, label: string) =>
      until(
        `${name} Ready with ${label}`,
        async () => {
          const o = await get(name);
          return cond(o, 'Ready')?.status === 'True' && o.status?.label === label ? o : undefined;
        },
        30_000,
        100,
      );

    await core.createNamespacedSecret({
      namespace: ns,
      body: { metadata: { name: 'k1' }, stringData: { key: 'gsk_before_restart_0123456789' } },
    });
    await custom.createNamespacedCustomObject({
      ...base,
      body: credential('c1', withProvider('groq'), withSecret('k1')),
    });
    await readyWith('c1', maskLabel('groq', 'gsk_before_restart_0123456789'));

    const t0 = Date.now();
    await cp.restartApiServer();
    measured.restartMs = Date.now() - t0;

    // Changes after the restart: a rotation of a watched Secret and a brand-new credential.
    const t1 = Date.now();
    await core.patchNamespacedSecret({
      namespace: ns,
      name: 'k1',
      body: [
        { op: 'replace', path: '/data/key', value: Buffer.from('gsk_after_restart_9876543210').toString('base64') },
      ],
    });
    await core.createNamespacedSecret({
      namespace: ns,
      body: { metadata: { name: 'k2' }, stringData: { key: 'gsk_second_key_0123456789' } },
    });
    await custom.createNamespacedCustomObject({
      ...base,
      body: credential('c2', withProvider('groq'), withSecret('k2')),
    });
    await readyWith('c1', maskLabel('groq', 'gsk_after_restart_9876543210'));
    await readyWith('c2', maskLabel('groq', 'gsk_second_key_0123456789'));
    measured.convergeAfterRestartMs = Date.now() - t1;
    expect((await fetch(`${run.op.httpAddress}/readyz`)).status).toBe(200);
    const restarts = metricValue(await metricsText(run.op), 'byok_informer_watch_restarts_total', {});
    expect(restarts).toBeGreaterThan(0);
  }, 90_000);
});
