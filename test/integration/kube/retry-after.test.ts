// The kube client waits out the apiserver's 429 with Retry-After, as client-go does. A CRD's storage, with its watch
// cache, is made on the first request for the CRD, and a list the cache must answer (resourceVersion=0) is refused
// with 429 "storage is (re)initializing" and Retry-After: 1 until the cache has filled. A command whose first read was
// such a list failed with that 429 on a fresh cluster (`bundle-key activate`).
import { randomBytes } from 'node:crypto';
import { type RequestOptions, request } from 'node:https';
import { afterAll, describe, expect, test } from '@jest/globals';
import { kubeClient, retryAfterMs } from '../../../src/kube/client.ts';
import { testKubeConfig, untilEstablished } from '../../support/kube.ts';

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
  await untilEstablished([name]);
  return `/apis/${group}/v1/probes`;
}

/** One GET as the admin, with no retry: its status and Retry-After. */
async function rawGet(path: string): Promise<{ status: number | undefined; retryAfter: string | undefined }> {
  const kc = testKubeConfig();
  const options: RequestOptions = {};
  await kc.applyToHTTPSOptions(options);
  return new Promise((resolve, reject) => {
    request(new URL(`${kc.getCurrentCluster()!.server}${path}`), { ...options, method: 'GET' }, (res) => {
      res.resume();
      const header = res.headers['retry-after'];
      resolve({ status: res.statusCode, retryAfter: Array.isArray(header) ? header[0] : header });
    })
      .on('error', reject)
      .end();
  });
}

describe("the apiserver's 429 with Retry-After", () => {
  afterAll(async () => {
    for (const name of made) await admin().request('DELETE', `${CRDS}/${name}`);
  });

  test('the first cached list of a new CRD is refused with a Retry-After; through the client it is answered', async () => {
    // Without the client: what the apiserver does, the condition the client's wait is for.
    const refused = await rawGet(`${await freshCrd()}?resourceVersion=0`);
    expect(refused.status).toBe(429);
    expect(retryAfterMs(refused.retryAfter)).toBeGreaterThan(0);

    // The same first list of another new CRD through the client: it waits as asked and gets the list.
    const list = await admin().request<{ kind: string; items: unknown[] }>(
      'GET',
      `${await freshCrd()}?resourceVersion=0`,
    );
    expect(list).toMatchObject({ kind: 'ProbeList', items: [] });
  });
});
