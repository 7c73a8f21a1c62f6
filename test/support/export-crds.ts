// The targets' CRDs for the export tests: Envoy AI Gateway's and agentgateway's unmodified at pinned commits (from
// the cache hack/export/fetch-third-party.sh fills), Envoy Gateway's and the Gateway API's from their Go modules
// (hack/export/fetch-crds.sh), installed into the test
// kube-apiserver so the objects the export writes are judged by their real schemas and CEL rules.
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { basename, join } from 'node:path';
import { kubectl, untilEstablished } from './kube.ts';
import { thirdPartyDir } from './third-party.ts';

const repo = join(import.meta.dirname, '..', '..');

const fetchedCrds = () =>
  execFileSync(join(repo, 'hack', 'export', 'fetch-crds.sh'), { encoding: 'utf8' })
    .trim()
    .split('\n')
    .at(-1)!;

/** The Gateway API's CRD files (its experimental channel, from its Go module) of these resources (plural names). */
export function gatewayApiCrdFiles(plurals: readonly string[]): string[] {
  const dir = join(fetchedCrds(), 'gateway-api');
  return readdirSync(dir)
    .filter((f) => plurals.some((k) => f.includes(`_${k}.`)))
    .map((f) => join(dir, f));
}

/** The CRD files of every kind an export writes (and of the kinds they reference). */
export function crdFiles(): string[] {
  const cache = fetchedCrds();
  const thirdParty = thirdPartyDir();
  const pick = (dir: string, names: string[]) => names.map((n) => join(dir, n));
  return [
    ...pick(join(thirdParty, 'envoy-ai-gateway'), [
      'aigateway.envoyproxy.io_aigatewayroutes.yaml',
      'aigateway.envoyproxy.io_aiservicebackends.yaml',
      'aigateway.envoyproxy.io_backendsecuritypolicies.yaml',
    ]),
    ...pick(join(thirdParty, 'agentgateway'), [
      'agentgateway.dev_agentgatewaybackends.yaml',
      'agentgateway.dev_agentgatewaypolicies.yaml',
    ]),
    ...pick(join(cache, 'envoy-gateway'), [
      'gateway.envoyproxy.io_backends.yaml',
      'gateway.envoyproxy.io_backendtrafficpolicies.yaml',
    ]),
    ...gatewayApiCrdFiles(['httproutes', 'gateways', 'backendtlspolicies', 'referencegrants']),
  ];
}

export const CRD_NAMES = [
  'aigatewayroutes.aigateway.envoyproxy.io',
  'aiservicebackends.aigateway.envoyproxy.io',
  'backendsecuritypolicies.aigateway.envoyproxy.io',
  'agentgatewaybackends.agentgateway.dev',
  'agentgatewaypolicies.agentgateway.dev',
  'backends.gateway.envoyproxy.io',
  'backendtrafficpolicies.gateway.envoyproxy.io',
  'httproutes.gateway.networking.k8s.io',
];

/**
 * Applies the CRD files the worker's control plane lacks (server-side apply); a CRD it already serves is left alone.
 * Files on one control plane share CRDs, and applying an unchanged CRD is not free: the apiserver validates the whole
 * schema and compiles every CEL rule again, about 3 CPU-s for the export's set.
 */
export async function applyMissingCrds(files: readonly string[], fieldManager: string): Promise<void> {
  const installed = new Set((await kubectl('get', 'crd', '-o', 'name')).split('\n').map((line) => line.trim()));
  for (const file of files) {
    // Each file is one CRD named by the kubebuilder convention `<group>_<plural>.yaml`; a name read wrongly only
    // costs an apply.
    const [group, plural] = basename(file, '.yaml').split('_');
    if (installed.has(`customresourcedefinition.apiextensions.k8s.io/${plural}.${group}`)) continue;
    await kubectl('apply', '--server-side', '--force-conflicts', `--field-manager=${fieldManager}`, '-f', file);
  }
}

/** Installs the export's CRDs and waits until the apiserver serves them. */
export async function installExportCrds(): Promise<void> {
  await applyMissingCrds(crdFiles(), 'byok-export-test');
  await untilEstablished(CRD_NAMES);
}
