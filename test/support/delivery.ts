// The set-up the delivery-stream tests share: the files a gateway pod mounts besides its routing volumes (catalog,
// upstream CA, status token), the gateway's ServiceAccount and projected token, its command line, and the one-key
// tenant (Account, default Workspace, GatewayAPIKey, an OpenAI credential) whose Secret the tests rotate.

import type { ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { DEFAULT_DELIVERY_AUDIENCE } from '../../src/contract/delivery.ts';
import { kubeClient } from '../../src/kube/client.ts';
import { type Projector, startProjector } from '../../src/kube/projector.ts';
import { account, asDefault, credential, gatewayKey, secret, withSecret, workspace } from './builders.ts';
import { type GatewayMounts, type GatewayProcess, gatewayCommand, spawnGateway } from './gateway-process.ts';
import { createObjects, createTenant } from './tenant.ts';

/** The Secret name the delivery tenant's credential `oa` reads at `version`. */
export const deliverySecretName = (version: number | string) => `oa-key-v${version}`;

/** Creates ServiceAccount `name` in `namespace`. */
export async function createServiceAccount(kc: KubeConfig, namespace: string, name: string): Promise<void> {
  await kubeClient(kc).request('POST', `/api/v1/namespaces/${namespace}/serviceaccounts`, {
    body: { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name } },
  });
}

/** A token for ServiceAccount `namespace/sa` from the TokenRequest API (no audiences: the apiserver's own). */
export async function serviceAccountToken(
  kc: KubeConfig,
  namespace: string,
  sa: string,
  audiences: string[] | undefined,
): Promise<string> {
  const res = await kubeClient(kc).request<{ status: { token: string } }>(
    'POST',
    `/api/v1/namespaces/${namespace}/serviceaccounts/${sa}/token`,
    {
      body: {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: { expirationSeconds: 600, ...(audiences ? { audiences } : {}) },
      },
    },
  );
  return res.status.token;
}

/** A stream test's gateway command line: gatewayCommand with its own ledger snapshot `ledger-<ledger>.json`. */
export function gatewayArgs(root: string, mounts: GatewayMounts, ledger: string, more: string[] = []): string[] {
  return gatewayCommand(root, mounts, ['--ledger-snapshot', join(root, `ledger-${ledger}.json`), ...more]);
}

/** The stream flags of gateway `name`: `url` with the token file in `root`, its stream directory `root/stream-<name>`. */
export const streamArgs = (root: string, url: string, name: string | number): string[] => [
  '--delivery-stream',
  url,
  '--delivery-stream-token-file',
  join(root, 'token'),
  '--delivery-stream-dir',
  join(root, `stream-${name}`),
];

/**
 * The delivery tenant in `namespace`: Account `account`, default Workspace `main`, GatewayAPIKey `k` for `keyHash`
 * and OpenAI credential `oa` reading Secret `oa-key-v0` that holds `providerKey`.
 */
export async function createDeliveryTenant(namespace: string, keyHash: string, providerKey: string): Promise<void> {
  await createTenant(namespace, {
    account: account('account'),
    workspaces: [workspace('main', asDefault())],
    gatewayKeys: [gatewayKey('k', keyHash)],
    secrets: [secret(deliverySecretName(0), providerKey)],
    credentials: [credential('oa', withSecret(deliverySecretName(0)))],
  });
}

/** Points credential `oa` at a new Secret `oa-key-v<version>` holding `providerKey` (a key rotation). */
export async function rotateDeliveryKey(
  kc: KubeConfig,
  namespace: string,
  version: number,
  providerKey: string,
): Promise<void> {
  await createObjects(namespace, secret(deliverySecretName(version), providerKey));
  await kubeClient(kc).request('PATCH', `/apis/byok.gateway.dev/v1alpha1/namespaces/${namespace}/byokcredentials/oa`, {
    body: { spec: { secretRef: { name: deliverySecretName(version) } } },
    contentType: 'application/merge-patch+json',
  });
}

/**
 * The kubelet's one projection of the routing namespace into `mounts` at pod start; then it "sleeps" (the projector
 * is stopped), so the mounts stay frozen until the test syncs the returned projector again.
 */
export async function projectOnce(kc: KubeConfig, routingNamespace: string, mounts: GatewayMounts): Promise<Projector> {
  const projector = startProjector({ kubeConfig: kc, routingNamespace, ...mounts, pollMs: 3_600_000 });
  await projector.sync();
  await projector.stop();
  return projector;
}

/**
 * One gateway per stream url on the shared `mounts`, each with ServiceAccount `byok-gateway`'s delivery token and the
 * status token writeGatewayFiles put in `root`.
 */
export async function spawnStreamGateways(
  kc: KubeConfig,
  routingNamespace: string,
  root: string,
  mounts: GatewayMounts,
  urls: readonly string[],
  running: Set<ChildProcess>,
): Promise<GatewayProcess[]> {
  const token = await serviceAccountToken(kc, routingNamespace, 'byok-gateway', [DEFAULT_DELIVERY_AUDIENCE]);
  writeFileSync(join(root, 'token'), token);
  const gateways: GatewayProcess[] = [];
  for (const [i, url] of urls.entries()) {
    const more = [...streamArgs(root, url, i), '--status-token-file', join(root, 'status-token')];
    gateways.push(await spawnGateway(gatewayArgs(root, mounts, String(i), more), running));
  }
  return gateways;
}
