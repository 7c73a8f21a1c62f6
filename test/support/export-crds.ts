// The targets' CRDs for the export tests: Envoy AI Gateway's and agentgateway's unmodified at pinned commits (from
// the cache hack/export/fetch-third-party.sh fills), Envoy Gateway's and the Gateway API's from their Go modules
// (hack/export/fetch-crds.sh), installed into the test
// kube-apiserver so the objects the export writes are judged by their real schemas and CEL rules.
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
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

/** Installs the CRDs (idempotent: server-side apply) and waits until the apiserver serves them. */
export async function installExportCrds(): Promise<void> {
  for (const file of crdFiles())
    await kubectl('apply', '--server-side', '--force-conflicts', '--field-manager=byok-export-test', '-f', file);
  await untilEstablished(CRD_NAMES);
}
