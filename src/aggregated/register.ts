// Registration of the aggregated API with a kube-apiserver that has no kube-proxy and no controller-manager (the
// dev stack and the integration tests): a selector-less Service, an EndpointSlice the harness writes itself, and
// the APIService. With --enable-aggregator-routing=true the aggregator dials the slice's address directly; IPv4
// slices reject 127.0.0.0/8, so the slice is addressType FQDN with the address 127.0.0.1 (accepted: FQDN
// validation checks DNS syntax only). The chart registers the same APIService against a normal Service instead.
// Its serving certificate comes from the dev PKI (createServingCertificate in src/controlplane/pki.ts), which the
// production path (--aggregated-tls-dir) never loads.

import { KubeApiError, kubeClient } from '../kube/client.ts';
import type { KubeAccess } from '../kube/kubeconfig.ts';
import { loopbackEndpointSlice } from '../kube/loopback-endpoints.ts';
import { AGG_GROUP, AGG_VERSION } from './group.ts';

export const APISERVICE_NAME = `${AGG_VERSION}.${AGG_GROUP}`;
/** Not the chart's Service name (`byok-aggregated-api` for a release named byok): a chart installed beside the dev
 *  stack meets only the cluster-wide APIService, which docs/aggregated-api.md says how to adopt or leave. */
export const DEFAULT_SERVICE = { namespace: 'byok-system', name: 'byok-dev-aggregated-api' };
const PORT_NAME = 'https';
const SERVICE_PORT = 443;
const FIELD_MANAGER = 'byok-operator';

export interface LoopbackRegistration {
  kubeConfig: KubeAccess;
  /** The local port the aggregated server listens on (127.0.0.1). */
  port: number;
  caPem: string;
  service?: { namespace: string; name: string };
}

async function apply(kubeConfig: KubeAccess, path: string, obj: object): Promise<void> {
  await kubeClient(kubeConfig).request('PATCH', path, {
    body: obj,
    contentType: 'application/apply-patch+yaml',
    query: { fieldManager: FIELD_MANAGER, force: true },
  });
}

export async function registerLoopback(r: LoopbackRegistration): Promise<void> {
  const svc = r.service ?? DEFAULT_SERVICE;
  const ns = encodeURIComponent(svc.namespace);
  await apply(r.kubeConfig, `/api/v1/namespaces/${svc.namespace}`, {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: svc.namespace },
  });
  await apply(r.kubeConfig, `/api/v1/namespaces/${ns}/services/${svc.name}`, {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: svc.name, namespace: svc.namespace },
    spec: { type: 'ClusterIP', ports: [{ name: PORT_NAME, port: SERVICE_PORT, targetPort: r.port, protocol: 'TCP' }] },
  });
  await apply(
    r.kubeConfig,
    `/apis/discovery.k8s.io/v1/namespaces/${ns}/endpointslices/${svc.name}-loopback`,
    loopbackEndpointSlice({
      namespace: svc.namespace,
      name: `${svc.name}-loopback`,
      service: svc.name,
      portName: PORT_NAME,
      port: r.port,
    }),
  );
  await apply(r.kubeConfig, `/apis/apiregistration.k8s.io/v1/apiservices/${APISERVICE_NAME}`, {
    apiVersion: 'apiregistration.k8s.io/v1',
    kind: 'APIService',
    metadata: { name: APISERVICE_NAME },
    spec: {
      group: AGG_GROUP,
      version: AGG_VERSION,
      service: { namespace: svc.namespace, name: svc.name, port: SERVICE_PORT },
      caBundle: Buffer.from(r.caPem).toString('base64'),
      groupPriorityMinimum: 1000,
      versionPriority: 15,
    },
  });
}

export async function unregister(kubeConfig: KubeAccess): Promise<void> {
  try {
    await kubeClient(kubeConfig).request('DELETE', `/apis/apiregistration.k8s.io/v1/apiservices/${APISERVICE_NAME}`);
  } catch (err) {
    if (!(err instanceof KubeApiError && err.status === 404)) throw err;
  }
}

interface ApiServiceStatus {
  status?: { conditions?: { type: string; status: string; reason?: string; message?: string }[] };
}

/** Waits until the APIService reports Available=True; the error carries the last condition's message. */
export async function waitForAvailable(kubeConfig: KubeAccess, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    const s = await kubeClient(kubeConfig).request<ApiServiceStatus>(
      'GET',
      `/apis/apiregistration.k8s.io/v1/apiservices/${APISERVICE_NAME}`,
    );
    const c = s.status?.conditions?.find((x) => x.type === 'Available');
    // Available alone is not enough for kubectl: its client-side validation downloads the apiserver's merged
    // OpenAPI, which answers 503 until the aggregator has fetched ours. Wait for that too.
    if (c?.status === 'True' && (await openApiServed(kubeConfig))) return;
    last = c?.status === 'True' ? 'Available, OpenAPI not merged yet' : `${c?.reason ?? ''}: ${c?.message ?? ''}`;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`APIService ${APISERVICE_NAME} did not become Available (${last})`);
}

/** Whether the kube-apiserver serves our group's OpenAPI v3 document and its merged v2 document. */
async function openApiServed(kubeConfig: KubeAccess): Promise<boolean> {
  const client = kubeClient(kubeConfig);
  try {
    const root = await client.request<{ paths?: Record<string, { serverRelativeURL?: string }> }>('GET', '/openapi/v3');
    const entry = root.paths?.[`apis/${AGG_GROUP}/${AGG_VERSION}`];
    if (!entry?.serverRelativeURL) return false;
    await client.request('GET', entry.serverRelativeURL);
    await client.request('GET', '/openapi/v2');
    return true;
  } catch {
    return false;
  }
}
