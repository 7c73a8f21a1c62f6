// Shared writes are immune to tenant text: every Server-Side Apply body (sent as application/apply-patch+yaml and
// decoded by the apiserver as YAML) is YAML-safe JSON, so C1 controls, DEL, U+2028/2029 and noncharacters
// round-trip exactly through ConfigMap data and through a status subresource. The raw form is refused by the
// same apiserver, which proves the escaping is what makes the difference.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { CoreV1Api, type KubernetesObject, type V1ConfigMap } from '@kubernetes/client-node';
import { createApplier } from '../../../src/kube/apply.ts';
import { KubeApiError, kubeClient } from '../../../src/kube/client.ts';
import { SAFE_TEXT } from '../../../src/schema/resources.ts';
import { createTestNamespace, kubectl, testKubeConfig } from '../../support/kube.ts';

const kc = testKubeConfig();
// Everything YAML refuses or mangles inside a quoted string, plus ordinary non-ASCII text.
const TRICKY = 'a\u0096b\u0085c\u007fd\u2028e\u2029f\ufffeg\uffffh-é-日本-🙂';

describe('YAML-safe apply bodies', () => {
  let ns = '';
  beforeAll(async () => {
    ns = await createTestNamespace('integ-ssa');
  });
  afterAll(() => kubeClient(kc).close());

  test('ConfigMap data with C1/DEL/U+2028/noncharacters round-trips exactly through Server-Side Apply', async () => {
    const applier = createApplier(kc, { fieldManager: 'integrity-test' });
    await applier.apply({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'tricky', namespace: ns },
      data: { v: TRICKY, [`k`]: JSON.stringify({ name: TRICKY }) },
    } as V1ConfigMap);
    const back = await kc.makeApiClient(CoreV1Api).readNamespacedConfigMap({ namespace: ns, name: 'tricky' });
    expect(back.data?.v).toBe(TRICKY);
    expect(JSON.parse(back.data?.k ?? '{}')).toEqual({ name: TRICKY });
  });

  test('write() applies the same YAML-safe body without reading the object back, and still reports refusals', async () => {
    const applier = createApplier(kc, { fieldManager: 'integrity-test' });
    const written = await applier.write({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'tricky-write', namespace: ns },
      data: { v: TRICKY },
    } as V1ConfigMap);
    expect(written).toBeUndefined();
    const back = await kc.makeApiClient(CoreV1Api).readNamespacedConfigMap({ namespace: ns, name: 'tricky-write' });
    expect(back.data?.v).toBe(TRICKY);
    // The same SSA semantics: a field no longer applied by this manager is removed.
    await applier.write({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'tricky-write', namespace: ns },
      binaryData: { b: 'AAE=' },
    } as V1ConfigMap);
    const after = await kc.makeApiClient(CoreV1Api).readNamespacedConfigMap({ namespace: ns, name: 'tricky-write' });
    expect(after.data).toBeUndefined();
    expect(after.binaryData).toEqual({ b: 'AAE=' });
    const refused = await applier
      .write({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'Not_A_Name', namespace: ns },
        data: {},
      } as V1ConfigMap)
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(refused).toBeInstanceOf(KubeApiError);
    expect((refused as KubeApiError).status).toBe(422);
    expect((refused as KubeApiError).body?.reason).toBe('Invalid');
  });

  test('the unescaped body is what the apiserver refuses (the defect this guards against)', async () => {
    const raw = JSON.stringify({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'tricky-raw', namespace: ns },
      data: { v: TRICKY },
    });
    const err = await kubeClient(kc)
      .request('PATCH', `/api/v1/namespaces/${ns}/configmaps/tricky-raw`, {
        query: { fieldManager: 'integrity-test', force: true },
        body: raw,
        contentType: 'application/apply-patch+yaml',
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(KubeApiError);
    expect((err as KubeApiError).status).toBe(400);
  });

  test('a status subresource with the same text round-trips exactly', async () => {
    // A Namespace's status, not one of ours: a stored C1 anywhere breaks `kubectl get -o yaml` for that kind (kubectl
    // re-reads its JSON as YAML), and the doors test in parallel runs `kubectl get byok-all -A -o yaml`.
    const applier = createApplier(kc, { fieldManager: 'integrity-test' });
    await applier.apply(
      {
        apiVersion: 'v1',
        kind: 'Namespace',
        metadata: { name: ns },
        status: { conditions: [{ type: 'IntegrityTest', status: 'False', reason: 'Test', message: TRICKY }] },
      } as KubernetesObject,
      { subresource: 'status' },
    );
    const back = await kc.makeApiClient(CoreV1Api).readNamespace({ name: ns });
    expect(back.status?.conditions?.find((c) => c.type === 'IntegrityTest')?.message).toBe(TRICKY);
    // That is why both doors refuse such text: stored raw, it breaks kubectl's YAML output for every reader.
    await expect(kubectl('get', 'namespace', ns, '-o', 'yaml')).rejects.toThrow(/control characters/);
  });

  test('the committed CRD files (with literal non-ASCII bounds in their text patterns) are read back by Go YAML', async () => {
    const out = await kubectl('apply', '--dry-run=server', '-f', 'crds/', '-o', 'json');
    const parsed = JSON.parse(out) as {
      items?: {
        spec: {
          versions: {
            schema: {
              openAPIV3Schema: { properties: { spec: { properties: { displayName?: { pattern?: string } } } } };
            };
          }[];
        };
      }[];
    };
    const patterns = (parsed.items ?? []).map(
      (c) => c.spec.versions[0]?.schema.openAPIV3Schema.properties.spec.properties.displayName?.pattern,
    );
    expect(patterns.length).toBe(5);
    for (const p of patterns) expect(p).toBe(SAFE_TEXT);
  });
});
