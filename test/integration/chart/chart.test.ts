// The Helm chart renders objects the real apiserver accepts, and its RBAC is least-privilege: the operator
// may write status but never spec; only the API may create credentials.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, test } from '@jest/globals';
import { parse } from 'yaml';
import { createTestNamespace, kubectl } from '../../support/kube.ts';

const run = promisify(execFile);
const bin = (name: string) => join(process.env.BYOK_CONTROL_PLANE_BIN ?? '', name);
const repo = join(import.meta.dirname, '..', '..', '..');
const chart = join(repo, 'charts', 'byok-operator');

async function helmTemplate(namespace: string, ...sets: string[]): Promise<string> {
  const args = ['template', 'rel', chart, '-n', namespace, '--kube-version', '1.34.4', ...sets.flatMap((s) => ['--set', s])];
  return (await run(bin('helm'), args, { encoding: 'utf8' })).stdout;
}

describe('Helm chart', () => {
  let ns: string;
  beforeAll(async () => {
    ns = await createTestNamespace('chart');
  });

  test('helm lint passes', async () => {
    const { stdout } = await run(bin('helm'), ['lint', chart], { encoding: 'utf8' });
    expect(stdout).toContain('0 chart(s) failed');
  });

  test('values.schema.json rejects a bad value', async () => {
    await expect(helmTemplate(ns, 'operator.replicas=many')).rejects.toThrow(/replicas/);
  });

  test('rendered objects are accepted by the apiserver (server-side dry run)', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'chart-')), 'rendered.yaml');
    writeFileSync(file, await helmTemplate(ns, 'networkPolicy.enabled=true'));
    // No -n: every namespaced template names its namespace, and the auth-reader RoleBinding lives in kube-system.
    const out = await kubectl('apply', '--dry-run=server', '-f', file);
    expect(out).toMatch(/deployment\.apps\/rel-byok-operator created \(server dry run\)/);
    expect(out).toMatch(/networkpolicy\.networking\.k8s\.io\/rel-byok created \(server dry run\)/);
    expect(out).toMatch(/apiservice\.apiregistration\.k8s\.io\/v1\.api\.byok\.gateway\.dev (created|configured|unchanged) \(server dry run\)/);
    expect(out).toMatch(/rolebinding\.rbac\.authorization\.k8s\.io\/rel-byok-aggregated-api-auth-reader created \(server dry run\)/);
  });

  test('the gateway NetworkPolicy allows HTTPS to public addresses and DNS only; egress.allow reaches all three processes', async () => {
    const rendered = await helmTemplate(ns, 'aggregatedApi.enabled=false', 'gateway.enabled=true', 'gateway.catalog.configMap=gw-catalog', 'networkPolicy.enabled=true', 'egress.allow={10.20.0.0/16,proxy.example.com}');
    const policy = rendered.split('\n---\n').find((d) => d.includes('name: rel-byok-gateway') && d.includes('kind: NetworkPolicy'))!;
    expect(policy).toContain('except: [10.0.0.0/8, 100.64.0.0/10, 127.0.0.0/8, 169.254.0.0/16, 172.16.0.0/12, 192.168.0.0/16]');
    expect(policy).toContain('- { port: 443, protocol: TCP }');
    expect(policy).toContain('- { port: 53, protocol: UDP }');
    // Operator, API and gateway get the same allow-list.
    expect(rendered.match(/--egress-allow=10\.20\.0\.0\/16/g)).toHaveLength(3);
    expect(rendered.match(/--egress-allow=proxy\.example\.com/g)).toHaveLength(3);
    const file = join(mkdtempSync(join(tmpdir(), 'chart-')), 'gateway-netpol.yaml');
    writeFileSync(file, rendered);
    const out = await kubectl('apply', '--dry-run=server', '-n', ns, '-f', file);
    expect(out).toMatch(/networkpolicy\.networking\.k8s\.io\/rel-byok-gateway created \(server dry run\)/);
    await expect(helmTemplate(ns, 'egress.allow={not a host}')).rejects.toThrow(/egress/);
  });

  test('gateway.enabled: the one catalog by default; a Deployment with the projected routing, bundle and key volumes, accepted by the apiserver', async () => {
    // Without a catalog ConfigMap of one's own, the gateway serves the chart's copy of the one catalog.
    const ownText = await helmTemplate(ns, 'aggregatedApi.enabled=false', 'gateway.enabled=true');
    const own = ownText.split('\n---\n').map((d) => parse(d) as { kind?: string; metadata?: { name?: string }; data?: Record<string, string> } | null);
    const catalogMap = own.find((d) => d?.kind === 'ConfigMap' && d.metadata?.name === 'rel-byok-gateway-catalog');
    expect(catalogMap?.data?.['catalog.json']).toBe(readFileSync(join(repo, 'config', 'catalog', 'catalog.json'), 'utf8'));
    expect(JSON.stringify(own.find((d) => d?.kind === 'Deployment' && d.metadata?.name === 'rel-byok-gateway'))).toContain('{"name":"catalog","configMap":{"name":"rel-byok-gateway-catalog"}}');
    const ownFile = join(mkdtempSync(join(tmpdir(), 'chart-')), 'gateway-own-catalog.yaml');
    writeFileSync(ownFile, ownText);
    expect(await kubectl('apply', '--dry-run=server', '-n', ns, '-f', ownFile)).toMatch(/configmap\/rel-byok-gateway-catalog created \(server dry run\)/);
    // Without the aggregated API's cluster-wide and kube-system objects: this dry run is namespaced.
    const rendered = await helmTemplate(ns, 'aggregatedApi.enabled=false', 'gateway.enabled=true', 'gateway.catalog.configMap=gw-catalog', 'gateway.sharedKeys.secret=gw-shared', 'gateway.routingSlots=3', 'gateway.bundleSlots=2');
    expect(rendered).not.toContain('rel-byok-gateway-catalog');
    expect(rendered).toContain('configMap: { name: gw-catalog }');
    expect(rendered).toContain('- configMap: { name: byok-routing-index }');
    expect(rendered).toContain('- configMap: { name: byok-routing-2, optional: true }');
    expect(rendered).not.toContain('byok-routing-3');
    expect(rendered).toContain('- secret: { name: byok-bundle-1, optional: true }');
    expect(rendered).toContain('--gateway-routing-slots=3');
    expect(rendered).toContain('--shared-keys-dir=/etc/byok/shared-keys');
    const file = join(mkdtempSync(join(tmpdir(), 'chart-')), 'gateway.yaml');
    writeFileSync(file, rendered);
    const out = await kubectl('apply', '--dry-run=server', '-n', ns, '-f', file);
    expect(out).toMatch(/deployment\.apps\/rel-byok-gateway created \(server dry run\)/);
    expect(out).toMatch(/service\/rel-byok-gateway created \(server dry run\)/);
  });

  test('ledger: several gateway replicas need the shared Redis ledger; with it, gateways and the operator get its URL', async () => {
    const gw = ['gateway.enabled=true', 'gateway.catalog.configMap=gw-catalog'];
    await expect(helmTemplate(ns, ...gw, 'gateway.replicas=2')).rejects.toThrow(/ledger\.redisUrl/);
    await expect(helmTemplate(ns, ...gw, 'ledger.redisUrl=http://not-redis')).rejects.toThrow(/redisUrl/);
    const single = await helmTemplate(ns, ...gw);
    expect(single).not.toContain('--ledger-redis-url');
    const shared = await helmTemplate(ns, ...gw, 'gateway.replicas=3', 'ledger.redisUrl=redis://redis.byok:6379');
    // The gateway Deployment and the operator (spend status) both point at it.
    expect(shared.match(/--ledger-redis-url=redis:\/\/redis\.byok:6379/g)).toHaveLength(2);
  });

  test('RBAC: the operator writes status only, the API writes credentials', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'chart-')), 'rbac.yaml');
    // Without the APIService: a real one is cluster-wide (test/integration/aggregated installs the chart's own).
    writeFileSync(file, await helmTemplate(ns, `watchNamespaces[0]=${ns}`, 'aggregatedApi.enabled=false'));
    await kubectl('apply', '-n', ns, '-f', file,);
    const can = async (sa: string, verb: string, target: string, namespace = ns) => {
      const [resource = '', subresource] = target.split('/');
      const args = ['auth', 'can-i', verb, resource, '-n', namespace, `--as=system:serviceaccount:${ns}:${sa}`, ...(subresource ? [`--subresource=${subresource}`] : [])];
      // can-i exits 1 when the answer is "no"; the answer is on stdout either way.
      return (await kubectl(...args).catch((e: { stdout?: string }) => e.stdout ?? '')).trim();
    };
    expect(await can('rel-byok-operator', 'patch', 'byokcredentials.byok.gateway.dev/status')).toBe('yes');
    expect(await can('rel-byok-operator', 'patch', 'byokcredentials.byok.gateway.dev')).toBe('no');
    expect(await can('rel-byok-operator', 'create', 'configmaps')).toBe('yes');
    expect(await can('rel-byok-operator', 'create', 'configmaps', 'default')).toBe('no');
    expect(await can('rel-byok-operator', 'create', 'leases.coordination.k8s.io')).toBe('yes');
    expect(await can('rel-byok-api', 'create', 'byokcredentials.byok.gateway.dev')).toBe('yes');
    expect(await can('rel-byok-api', 'patch', 'byokcredentials.byok.gateway.dev/status')).toBe('no');
    expect(await can('rel-byok-api', 'create', 'workspaces.byok.gateway.dev')).toBe('no');
    expect(await can('rel-byok-api', 'list', 'secrets', 'default')).toBe('no');
  });
});
