// The kube client waits out the apiserver's 429 with Retry-After, as client-go does. A CRD's first list that its
// watch cache must answer (resourceVersion=0) is refused with 429 "storage is (re)initializing" and Retry-After: 1
// while that cache fills; a command whose first read was such a list failed with it on a fresh cluster
// (`bundle-key activate`). On a quiet machine every new CRD's first such list was refused (6 of 6); on a busy one the
// cache may be ready first. Either way the client's list must be answered: without the wait, this test fails
// whenever the apiserver refuses, as cli.test.ts does when it runs first on its worker.
import { randomBytes } from 'node:crypto';
import { type RequestOptions, request } from 'node:https';
import { afterAll, describe, expect, test } from '@jest/globals';
import { kubeClient } from '../../../src/kube/client.ts';
import { testKubeConfig } from '../../support/kube.ts';
import { until } from '../../support/until.ts';

const CRDS = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';
const admin = () => kubeClient(testKubeConfig());
const made: string[] = [];

/** A namespaced CRD of its own group, served and established: the path of its objects, asked for by no one yet. */
async function freshCrd(): Promise<string> {
  const group = `retry${randomBytes(4).toString('hex')}.test.byok.dev`;
  const name = `probes.${group}`;
  await admin().request('POST', CRDS, {
    body: {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name },
      spec: {
        group,
        scope: 'Namespaced',
        names: { plural: 'probes', singular: 'probe', kind: 'Probe', listKind: 'ProbeList' },
        versions: [
          {
            name: 'v1',
            served: true,
            storage: true,
            schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
          },
        ],
      },
    },
  });
  made.push(name);
  // Served once its group's discovery answers: asked without the client, and of the discovery only, so the list
  // below is the first request for the CRD's objects, as soon after they are served as can be.
  await until('the new CRD served', async () => (await rawStatus(`/apis/${group}/v1`)) === 200, 30_000, 20);
  return `/apis/${group}/v1/probes`;
}

/** The status of one GET as the admin, without the client (and so without its retry). */
async function rawStatus(path: string): Promise<number | undefined> {
  const kc = testKubeConfig();
  const options: RequestOptions = {};
  await kc.applyToHTTPSOptions(options);
  return new Promise((resolve, reject) => {
    request(new URL(`${kc.getCurrentCluster()!.server}${path}`), { ...options, method: 'GET' }, (res) => {
      res.resume();
      resolve(res.statusCode);
    })
      .on('error', reject)
      .end();
  });
}

describe("the apiserver's 429 with Retry-After", () => {
  afterAll(async () => {
    for (const name of made) await admin().request('DELETE', `${CRDS}/${name}`);
  });

  test('the first cached list of a new CRD is answered through the client, refused or not on the first try', async () => {
    for (let round = 0; round < 3; round++) {
      const list = await admin().request<{ kind: string; items: unknown[] }>(
        'GET',
        `${await freshCrd()}?resourceVersion=0`,
      );
      expect(list).toMatchObject({ kind: 'ProbeList', items: [] });
    }
  });
});
