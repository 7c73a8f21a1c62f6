// `byok-operator dev`: a real control plane, the CRDs, the operator, the API server and sample data in one
// command. Writes .dev/connection.json for scripts and stays up until Ctrl-C.

import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { CustomObjectsApi, DiscoveryV1Api, KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { AGG_GROUP, AGG_VERSION } from '../aggregated/group.ts';
import { APISERVICE_NAME, DEFAULT_SERVICE, registerLoopback, waitForAvailable } from '../aggregated/register.ts';
import { startAggregatedServer } from '../aggregated/server.ts';
import { startApiServer } from '../api/server.ts';
import { sha256Hex } from '../contract/routing.ts';
import { type ControlPlane, startControlPlane } from '../controlplane/control-plane.ts';
import { installCrds } from '../controlplane/install-crds.ts';
import { createServingCertificate } from '../controlplane/pki.ts';
import { publicId } from '../domain/ids.ts';
import { loopbackEndpointSlice } from '../kube/loopback-endpoints.ts';
import { startOperator } from '../operator/run.ts';
import { API_VERSION, GROUP, VERSION } from '../schema/resources.ts';
import { createManagementKey } from '../service/management-keys.ts';
import { applyObjects } from './apply.ts';
import { DEV_GATEWAY_SERVICE_ACCOUNT, startDevGateway } from './dev-gateway.ts';
import { devRedisDir, startDevRedis } from './dev-redis.ts';
import { hardenPrototypes } from './harden.ts';
import { loadManifests } from './manifests.ts';

export interface DevOptions {
  repoRoot: string;
  apiPort: number;
  logger: Logger;
  /** Start, print, and stop again once everything is ready (used by the smoke test). */
  exitWhenReady: boolean;
  /** Keep the gateway's embedded ledger instead of a loopback redis-server. */
  embeddedLedger?: boolean;
}

export interface DevConnection {
  kubeconfig: string;
  /** kubectl and helm as the bootstrap built them (docs' shell snippets put this on PATH). */
  binDir: string;
  server: string;
  kubernetesVersion: string;
  routingNamespace: string;
  accountNamespace: string;
  apiBaseUrl: string;
  managementKey: string;
  gatewayApiKey: string;
  gatewayApiKeyHash: string;
  operatorHttp: string;
  /** The aggregated API registered with the local kube-apiserver (kubectl get byokkeys). */
  aggregatedApi: { group: string; version: string; apiService: string; url: string };
  /** The reference gateway (OpenAI-compatible), on the projected routing config; see docs/gateway.md. */
  gatewayBaseUrl: string;
  /** The gateway's ops listener (never tenant-facing): GET /metrics, /healthz, /readyz, and the operator's /byok/status. */
  gatewayOpsUrl: string;
  /** Where spend is metered: the dev redis-server (AOF) or the gateway's embedded ledger. */
  ledger: { backend: 'redis'; url: string } | { backend: 'embedded' };
}

const ROUTING_NAMESPACE = 'byok-system';
const ACCOUNT_NAMESPACE = 'acme';

async function ensureNamespace(kc: KubeConfig, name: string): Promise<void> {
  await applyObjects(kc, [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name } }]);
}

async function waitForReadyCredentials(
  kc: KubeConfig,
  namespace: string,
  timeoutMs: number,
): Promise<{ name: string; ready: string; label: string }[]> {
  const api = kc.makeApiClient(CustomObjectsApi);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const list = (await api.listNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace,
      plural: 'byokcredentials',
    })) as {
      items: {
        metadata: { name: string };
        status?: { label?: string; conditions?: { type: string; status: string }[] };
      }[];
    };
    const rows = list.items.map((c) => ({
      name: c.metadata.name,
      ready: c.status?.conditions?.find((x) => x.type === 'Ready')?.status ?? 'Unknown',
      label: c.status?.label ?? '',
    }));
    if (rows.every((r) => r.ready === 'True') || Date.now() > deadline) return rows;
    await new Promise((r) => setTimeout(r, 200));
  }
}

export async function runDev(options: DevOptions): Promise<void> {
  const { logger } = options;
  const started = Date.now();
  const stoppers: (() => Promise<void>)[] = [];
  const devDir = resolve(options.repoRoot, process.env.BYOK_DEV_DIR ?? '.dev');
  const connectionFile = join(devDir, 'connection.json');
  let stopping = false;
  const stopAll = async () => {
    if (stopping) return;
    stopping = true;
    for (const stop of stoppers.reverse()) {
      try {
        await stop();
      } catch (err) {
        logger.warn({ err }, 'error while stopping');
      }
    }
    rmSync(connectionFile, { force: true });
  };
  const onSignal = () => {
    process.stderr.write('\nstopping...\n');
    void stopAll().then(() => process.exit(0));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  try {
    const controlPlane: ControlPlane = await startControlPlane({ log: (line) => logger.info(line) });
    stoppers.push(() => controlPlane.stop());
    await installCrds(controlPlane.kubeconfigPath);
    const kc = new KubeConfig();
    kc.loadFromFile(controlPlane.kubeconfigPath);
    await ensureNamespace(kc, ROUTING_NAMESPACE);

    // The shared ledger, as in the chart: a redis-server with AOF; the operator mirrors its spend into status.
    const redis = options.embeddedLedger ? undefined : await startDevRedis(devRedisDir(devDir));
    if (redis) stoppers.push(() => redis.stop());
    else if (!options.embeddedLedger)
      logger.warn(
        'redis-server is not installed: the dev gateway keeps the embedded ledger and no spend reaches status',
      );
    // Health and delivery: the operator finds the dev gateway through an FQDN EndpointSlice, as in a cluster.
    const statusToken = randomBytes(24).toString('hex');
    const operator = await startOperator({
      kubeConfig: kc,
      routingNamespace: ROUTING_NAMESPACE,
      logger: logger.child({ component: 'operator' }),
      httpPort: 0,
      ...(redis ? { spendStatus: { redisUrl: redis.url, intervalMs: 2000 } } : {}),
      gatewayStatus: {
        token: statusToken,
        service: { namespace: ROUTING_NAMESPACE, name: 'byok-gateway', port: 'ops' },
        pollMs: 2000,
        writeIntervalMs: 5000,
      },
      // The delivery stream, as the chart turns it on: the dev gateway presents a token of its own ServiceAccount.
      deliveryStream: {
        port: 0,
        host: '127.0.0.1',
        serviceAccounts: [`${ROUTING_NAMESPACE}/${DEV_GATEWAY_SERVICE_ACCOUNT}`],
      },
    });
    stoppers.push(() => operator.stop());
    const api = await startApiServer({
      kubeConfig: kc,
      port: options.apiPort,
      host: '127.0.0.1',
      logger: logger.child({ component: 'api' }),
    });
    stoppers.push(() => api.close());
    // The second door: served on loopback and registered through a Service + FQDN EndpointSlice (docs/aggregated-api.md).
    const serving = await createServingCertificate(DEFAULT_SERVICE);
    const aggregated = await startAggregatedServer({
      kubeConfig: kc,
      runtime: api.runtime,
      tls: serving,
      logger: logger.child({ component: 'aggregated-api' }),
      host: '127.0.0.1',
      port: 0,
    });
    stoppers.push(() => aggregated.close());
    await registerLoopback({ kubeConfig: kc, port: aggregated.port, caPem: serving.caPem });
    await waitForAvailable(kc, 60_000);

    const { manifests, parseErrors } = loadManifests(join(options.repoRoot, 'config', 'samples'));
    if (parseErrors.length > 0)
      throw new Error(
        `sample data does not parse: ${parseErrors.map((e) => `${e.file}:${e.position.line}: ${e.message}`).join('; ')}`,
      );
    await applyObjects(
      kc,
      manifests.map((m) => m.object as KubernetesObject),
    );

    const gatewayApiKey = `sk-gw-dev-${randomBytes(24).toString('hex')}`;
    const gatewayApiKeyHash = sha256Hex(gatewayApiKey);
    await applyObjects(kc, [
      {
        apiVersion: API_VERSION,
        kind: 'GatewayAPIKey',
        metadata: { name: 'dev-gateway-key', namespace: ACCOUNT_NAMESPACE },
        spec: { hash: gatewayApiKeyHash, displayName: 'dev gateway key' },
      } as KubernetesObject,
    ]);
    const { key: managementKey } = await createManagementKey(kc, ACCOUNT_NAMESPACE, { name: 'dev-management-key' });

    const credentials = await waitForReadyCredentials(kc, ACCOUNT_NAMESPACE, 30_000);
    // Budgets on a Redis ledger open once the operator's spend pass validated the account (docs/ledger.md, "Resets").
    await redis?.validated(publicId('Account', ACCOUNT_NAMESPACE, 'acme'), 30_000);
    // Gateway: loopback upstreams, kubelet-like projection of the compiled objects, the gateway on top.
    const devGateway = await startDevGateway({
      kubeConfig: kc,
      routingNamespace: ROUTING_NAMESPACE,
      devDir,
      logger,
      apiKeyHash: gatewayApiKeyHash,
      statusToken,
      ...(redis ? { redisUrl: redis.url } : {}),
      deliveryStream: { url: operator.deliveryUrl()!, serviceAccount: DEV_GATEWAY_SERVICE_ACCOUNT },
    });
    stoppers.push(() => devGateway.stop());
    await kc.makeApiClient(DiscoveryV1Api).createNamespacedEndpointSlice({
      namespace: ROUTING_NAMESPACE,
      // The status endpoint is on the gateway's ops port, never on the tenant-facing one.
      body: loopbackEndpointSlice({
        namespace: ROUTING_NAMESPACE,
        name: 'byok-gateway-dev',
        service: 'byok-gateway',
        portName: 'ops',
        port: Number(new URL(devGateway.opsUrl).port),
        pod: 'dev-gateway',
      }),
    });
    const connection: DevConnection = {
      kubeconfig: controlPlane.kubeconfigPath,
      binDir: controlPlane.binDir,
      server: controlPlane.server,
      kubernetesVersion: controlPlane.version,
      routingNamespace: ROUTING_NAMESPACE,
      accountNamespace: ACCOUNT_NAMESPACE,
      apiBaseUrl: api.url,
      managementKey,
      gatewayApiKey,
      gatewayApiKeyHash,
      operatorHttp: operator.httpAddress,
      aggregatedApi: { group: AGG_GROUP, version: AGG_VERSION, apiService: APISERVICE_NAME, url: aggregated.url },
      ledger: redis ? { backend: 'redis', url: redis.url } : { backend: 'embedded' },
      gatewayBaseUrl: devGateway.url,
      gatewayOpsUrl: devGateway.opsUrl,
    };
    mkdirSync(devDir, { recursive: true });
    writeFileSync(connectionFile, `${JSON.stringify(connection, null, 2)}\n`, { mode: 0o600 });

    const kubectl = join(controlPlane.binDir, 'kubectl');
    process.stdout.write(
      [
        '',
        `byok-operator dev stack is up in ${((Date.now() - started) / 1000).toFixed(1)} s (Kubernetes ${controlPlane.version}).`,
        '',
        `  kubeconfig:      ${controlPlane.kubeconfigPath}`,
        `  REST API:        ${api.url}   (apiBaseUrl; the port is picked at start, --api-port fixes it)`,
        `  operator:        ${operator.httpAddress}/metrics`,
        `  gateway:         ${devGateway.url}`,
        `  gateway ops:     ${devGateway.opsUrl}/metrics   (health: /healthz, /readyz; gatewayOpsUrl)`,
        `  catalog:         ${devGateway.catalogSource} (served as ${devGateway.catalogFile}, upstreams on loopback)`,
        `  connection file: ${connectionFile}`,
        '',
        'Sample credentials:',
        ...credentials.map((c) => `  ${c.name.padEnd(22)} Ready=${c.ready.padEnd(7)} ${c.label}`),
        '',
        'Try:',
        `  ${kubectl} --kubeconfig ${controlPlane.kubeconfigPath} get byok -n ${ACCOUNT_NAMESPACE}`,
        `  ${kubectl} --kubeconfig ${controlPlane.kubeconfigPath} get byokkeys -n ${ACCOUNT_NAMESPACE}      # the aggregated API (${APISERVICE_NAME})`,
        `  curl -s -H 'Authorization: Bearer ${managementKey}' ${api.url}/byok`,
        ...devGateway.lines(gatewayApiKey),
        `  npm run cli -- explain --config-dir ${join(devDir, 'gateway', 'routing')} --request '{"model":"anthropic/claude-sonnet-4","apiKeyHash":"${gatewayApiKeyHash}"}' --cluster --kubeconfig ${controlPlane.kubeconfigPath}`,
        '',
        'Press Ctrl-C to stop and clean up.',
        '',
      ].join('\n'),
    );
    if (options.exitWhenReady) await stopAll();
    else hardenPrototypes();
  } catch (err) {
    await stopAll();
    throw err;
  }
}
