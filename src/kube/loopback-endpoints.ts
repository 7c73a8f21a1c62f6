// An EndpointSlice that points a Service at a server on this machine's loopback, for control planes without
// kube-proxy or kube-controller-manager (the dev stack and the integration tests write it themselves). IPv4 slices
// reject 127.0.0.0/8; an FQDN slice with the address 127.0.0.1 is accepted (FQDN validation checks DNS syntax only)
// and both the aggregator (--enable-aggregator-routing) and our own EndpointSlice readers dial it as is.
import type { V1EndpointSlice } from '@kubernetes/client-node';

export interface LoopbackEndpoint {
  namespace: string;
  /** The slice's own name. */
  name: string;
  /** The Service it belongs to (label kubernetes.io/service-name). */
  service: string;
  /** Must equal the Service port's name. */
  portName: string;
  port: number;
  /** The pod this endpoint stands for (targetRef), when readers count pods. */
  pod?: string;
}

export function loopbackEndpointSlice(e: LoopbackEndpoint): V1EndpointSlice & { apiVersion: string; kind: string } {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name: e.name,
      namespace: e.namespace,
      labels: { 'kubernetes.io/service-name': e.service, 'endpointslice.kubernetes.io/managed-by': 'byok-operator' },
    },
    addressType: 'FQDN',
    endpoints: [
      {
        addresses: ['127.0.0.1'],
        conditions: { ready: true },
        ...(e.pod ? { targetRef: { kind: 'Pod', name: e.pod, namespace: e.namespace } } : {}),
      },
    ],
    ports: [{ name: e.portName, port: e.port, protocol: 'TCP' }],
  };
}
