// Helpers for integration tests: clients for the shared test control plane and a namespace per test file.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ApiException, CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { loadCertificateAuthority } from '../../src/controlplane/pki.ts';
import { GROUP, VERSION } from '../../src/schema/resources.ts';

const execFileAsync = promisify(execFile);

export function testKubeconfigPath(): string {
  const path = process.env.BYOK_TEST_KUBECONFIG;
  if (!path)
    throw new Error(
      'BYOK_TEST_KUBECONFIG is not set: run integration tests through `npm test` or `npm run test:integration`',
    );
  return path;
}

export function testKubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(testKubeconfigPath());
  return kc;
}

export async function createTestNamespace(prefix: string): Promise<string> {
  const name = `${prefix}-${randomBytes(4).toString('hex')}`;
  await core().createNamespace({ body: { metadata: { name, labels: { 'byok.gateway.dev/test': 'true' } } } });
  return name;
}

/** The core API (Secrets, ConfigMaps, namespaces) of the worker's cluster, or of another kubeconfig's. */
export function core(kc: KubeConfig = testKubeConfig()): CoreV1Api {
  return kc.makeApiClient(CoreV1Api);
}

export function customObjects(): CustomObjectsApi {
  return testKubeConfig().makeApiClient(CustomObjectsApi);
}

export function crApi(plural: string, namespace: string) {
  const api = customObjects();
  const base = { group: GROUP, version: VERSION, namespace, plural };
  return {
    create: (body: object) => api.createNamespacedCustomObject({ ...base, body }),
    get: (name: string) => api.getNamespacedCustomObject({ ...base, name }),
    replace: (name: string, body: object) => api.replaceNamespacedCustomObject({ ...base, name, body }),
    delete: (name: string) => api.deleteNamespacedCustomObject({ ...base, name }),
  };
}

/** The apiserver's message for a rejected request, or throws if the request succeeded. */
export async function rejection(promise: Promise<unknown>): Promise<{ code: number; message: string }> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof ApiException) {
      const body =
        typeof err.body === 'string'
          ? (JSON.parse(err.body) as { message?: string })
          : (err.body as { message?: string });
      return { code: err.code, message: body?.message ?? String(err.body) };
    }
    throw err;
  }
  throw new Error('expected the apiserver to reject the request, but it was accepted');
}

/** The kubectl of the control-plane build (the one on PATH without it). */
export const kubectlBin = (): string =>
  process.env.BYOK_CONTROL_PLANE_BIN ? join(process.env.BYOK_CONTROL_PLANE_BIN, 'kubectl') : 'kubectl';

/** kubectl with this kubeconfig: its stdout, or a rejection on a non-zero exit. */
export async function kubectlWith(kubeconfig: string, ...args: string[]): Promise<string> {
  const { stdout } = await execFileAsync(kubectlBin(), ['--kubeconfig', kubeconfig, ...args], { encoding: 'utf8' });
  return stdout;
}

/** kubectl as the worker's cluster admin. */
export const kubectl = (...args: string[]): Promise<string> => kubectlWith(testKubeconfigPath(), ...args);

/**
 * A kubeconfig for a non-admin user (client certificate CN=user, O=groups), like ControlPlane.kubeconfigFor but
 * usable from test workers: it issues the certificate from the control plane's CA files in BYOK_TEST_WORKDIR.
 */
export async function kubeconfigFor(user: string, groups: string[] = []): Promise<string> {
  const workDir = process.env.BYOK_TEST_WORKDIR;
  if (!workDir)
    throw new Error(
      'BYOK_TEST_WORKDIR is not set: run integration tests through `npm test` or `npm run test:integration`',
    );
  const ca = await loadCertificateAuthority(
    readFileSync(join(workDir, 'ca.crt'), 'utf8'),
    readFileSync(join(workDir, 'ca.key'), 'utf8'),
  );
  const cert = await ca.issue({ commonName: user, organizations: groups, usage: 'client' });
  const admin = testKubeConfig();
  const server = admin.getCurrentCluster()?.server ?? '';
  const b64 = (s: string) => Buffer.from(s).toString('base64');
  const file = join(workDir, `kubeconfig-${user.replace(/[^a-z0-9-]/gi, '_')}-${randomBytes(3).toString('hex')}`);
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'byok-local', cluster: { server, 'certificate-authority-data': b64(ca.certPem) } }],
    users: [
      { name: user, user: { 'client-certificate-data': b64(cert.certPem), 'client-key-data': b64(cert.keyPem) } },
    ],
    contexts: [{ name: 'byok-local', context: { cluster: 'byok-local', user } }],
    'current-context': 'byok-local',
  };
  writeFileSync(file, stringify(config), { mode: 0o600 });
  return file;
}

/** kubectl with an explicit kubeconfig; resolves with exit code and both streams instead of throwing. */
export async function kubectlAs(
  kubeconfig: string,
  ...args: string[]
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await execFileAsync(kubectlBin(), ['--kubeconfig', kubeconfig, ...args], {
      encoding: 'utf8',
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : 1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

/**
 * Waits until the apiserver serves these CRDs (condition Established). Not `kubectl wait`: right after an apply a CRD
 * can have no status.conditions yet, and kubectl then fails at once ("accessor error: <nil>") instead of waiting.
 */
export async function untilEstablished(names: readonly string[], timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  // One kubectl per poll for all of them, printing only each name and its conditions (a CRD's full JSON passes
  // kubectl's output buffer); the conditions are absent until the apiserver sets them, where a jsonpath filter would
  // fail as kubectl wait does. Named alone, a CRD comes back as an object, not a List.
  const line = '{.metadata.name}{"\\t"}{.status.conditions}{"\\n"}';
  let waiting = [...names];
  for (;;) {
    const template = waiting.length === 1 ? line : `{range .items[*]}${line}{end}`;
    const text = await kubectl('get', 'crd', ...waiting, '-o', `jsonpath=${template}`);
    const established = new Set(
      text
        .split('\n')
        .map((row) => row.split('\t'))
        // A CRD just created prints no conditions, or `null`.
        .filter(([, conditions]) =>
          ((conditions?.trim() ? JSON.parse(conditions) : null) as { type: string; status: string }[] | null)?.some(
            (c) => c.type === 'Established' && c.status === 'True',
          ),
        )
        .map(([name]) => name),
    );
    waiting = waiting.filter((name) => !established.has(name));
    if (waiting.length === 0) return;
    if (Date.now() > deadline) throw new Error(`CRDs ${waiting.join(', ')} not Established after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
