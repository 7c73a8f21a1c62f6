// The operator's own kubeconfig loader against the real kube-apiserver: the identity the apiserver sees
// (SelfSubjectReview) for a client certificate, a projected-style token file and an exec plugin.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, test } from '@jest/globals';
import { parse, stringify } from 'yaml';
import { KubeClient } from '../../../src/kube/client.ts';
import { Kubeconfig } from '../../../src/kube/kubeconfig.ts';
import { createTestNamespace, testKubeconfigPath } from '../../support/kube.ts';

interface Review {
  status: { userInfo: { username: string; groups?: string[] } };
}

async function whoAmI(kc: Kubeconfig): Promise<string> {
  const client = new KubeClient(kc);
  try {
    const review = await client.request<Review>('POST', '/apis/authentication.k8s.io/v1/selfsubjectreviews', {
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
    });
    return review.status.userInfo.username;
  } finally {
    client.close();
  }
}

describe('Kubeconfig against the apiserver', () => {
  let namespace: string;
  let token: string;
  const dir = mkdtempSync(join(tmpdir(), 'kubeconfig-it-'));
  /** The test kubeconfig with its user replaced. */
  const withUser = (user: Record<string, unknown>) => {
    const doc = parse(readFileSync(testKubeconfigPath(), 'utf8')) as { users: { name: string; user: unknown }[] };
    for (const u of doc.users) u.user = user;
    const file = join(dir, `config-${Math.random().toString(36).slice(2)}`);
    writeFileSync(file, stringify(doc));
    return Kubeconfig.load(file, {});
  };

  beforeAll(async () => {
    namespace = await createTestNamespace('kubeconfig');
    const admin = new KubeClient(Kubeconfig.load(testKubeconfigPath(), {}));
    await admin.request('POST', `/api/v1/namespaces/${namespace}/serviceaccounts`, {
      body: { metadata: { name: 'robot' } },
    });
    const tr = await admin.request<{ status: { token: string } }>(
      'POST',
      `/api/v1/namespaces/${namespace}/serviceaccounts/robot/token`,
      {
        body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 600 } },
      },
    );
    token = tr.status.token;
    admin.close();
  });

  test('client certificate from the file the control plane wrote', async () => {
    expect(await whoAmI(Kubeconfig.load(testKubeconfigPath(), {}))).toBe('byok-admin');
  });

  test('a service-account token from a token file', async () => {
    writeFileSync(join(dir, 'token'), token);
    expect(await whoAmI(withUser({ tokenFile: join(dir, 'token') }))).toBe(`system:serviceaccount:${namespace}:robot`);
  });

  test('a token from an exec plugin (client.authentication.k8s.io/v1)', async () => {
    writeFileSync(
      join(dir, 'plugin.mjs'),
      `process.stdout.write(JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential', status: { token: process.env.T } }));`,
    );
    const kc = withUser({
      exec: {
        apiVersion: 'client.authentication.k8s.io/v1',
        command: process.execPath,
        args: [join(dir, 'plugin.mjs')],
        env: [{ name: 'T', value: token }],
        interactiveMode: 'Never',
      },
    });
    expect(await whoAmI(kc)).toBe(`system:serviceaccount:${namespace}:robot`);
  });
});
