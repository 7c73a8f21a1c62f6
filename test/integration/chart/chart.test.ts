// The Helm chart renders objects the real apiserver accepts, and its RBAC is least-privilege: the operator
// may write status but never spec; only the API may create credentials.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, test } from '@jest/globals';
import { parse } from 'yaml';
import { CHART_DIR, helm, helmTemplate } from '../../support/helm.ts';
import { createTestNamespace, kubectl } from '../../support/kube.ts';

const repo = join(import.meta.dirname, '..', '..', '..');
const template = (namespace: string, ...set: string[]): Promise<string> => helmTemplate({ namespace, set });

describe('Helm chart', () => {
  let ns: string;
  beforeAll(async () => {
    ns = await createTestNamespace('chart');
  });

  test('helm lint passes', async () => {
    const stdout = await helm(['lint', CHART_DIR]);
    expect(stdout).toContain('0 chart(s) failed');
  });

  test('values.schema.json rejects a bad value', async () => {
    await expect(template(ns, 'operator.replicas=many')).rejects.toThrow(/replicas/);
  });

  test('rendered objects are accepted by the apiserver (server-side dry run)', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'chart-')), 'rendered.yaml');
    writeFileSync(file, await template(ns, 'networkPolicy.enabled=true'));
    // No -n: every namespaced template names its namespace, and the auth-reader RoleBinding lives in kube-system.
    const out = await kubectl('apply', '--dry-run=server', '-f', file);
    expect(out).toMatch(/deployment\.apps\/rel-byok-operator created \(server dry run\)/);
    expect(out).toMatch(/networkpolicy\.networking\.k8s\.io\/rel-byok created \(server dry run\)/);
    expect(out).toMatch(
      /apiservice\.apiregistration\.k8s\.io\/v1\.api\.byok\.gateway\.dev (created|configured|unchanged) \(server dry run\)/,
    );
    expect(out).toMatch(
      /rolebinding\.rbac\.authorization\.k8s\.io\/rel-byok-aggregated-api-auth-reader created \(server dry run\)/,
    );
  });

  // the aggregated port is reached through the kube-apiserver only. On by default; without a known apiserver
  // address (helm template sees no cluster) it admits no one rather than everyone.
  test('the NetworkPolicy is on by default and admits only the kube-apiserver to the aggregated port; Redis egress follows ledger.redisUrl', async () => {
    const policies = (rendered: string) =>
      Object.fromEntries(
        rendered
          .split('\n---\n')
          .map((d) => parse(d) as { kind?: string; metadata?: { name: string }; spec?: Record<string, unknown> } | null)
          .filter((d) => d?.kind === 'NetworkPolicy')
          .map((d) => [d!.metadata!.name, d!.spec!]),
      ) as Record<
        string,
        {
          ingress?: { from?: unknown[]; ports?: { port: number }[] }[];
          egress?: { to?: unknown[]; ports?: { port: number }[] }[];
        }
      >;
    const byDefault = policies(await template(ns));
    expect(byDefault['rel-byok-aggregated-api']?.ingress).toEqual([]);
    // The REST and metrics ports never admit the aggregated port's peers by accident: the main policy lists only them.
    expect(byDefault['rel-byok']?.ingress?.flatMap((r) => r.ports?.map((p) => p.port))).toEqual([8080, 8081]);
    const pinned = policies(
      await template(
        ns,
        'networkPolicy.kubeApiServerCidrs={192.0.2.10/32,2001:db8::1/128}',
        'ledger.redisUrl=rediss://:pw@redis.example:6380/0',
      ),
    );
    expect(pinned['rel-byok-aggregated-api']?.ingress).toEqual([
      {
        from: [{ ipBlock: { cidr: '192.0.2.10/32' } }, { ipBlock: { cidr: '2001:db8::1/128' } }],
        ports: [{ port: 8443, protocol: 'TCP' }],
      },
    ]);
    expect(pinned['rel-byok']?.egress).toContainEqual({
      to: [{ ipBlock: { cidr: '192.0.2.10/32' } }, { ipBlock: { cidr: '2001:db8::1/128' } }],
      ports: [
        { port: 443, protocol: 'TCP' },
        { port: 6443, protocol: 'TCP' },
      ],
    });
    expect(pinned['rel-byok']?.egress).toContainEqual({ ports: [{ port: 6380, protocol: 'TCP' }] });
    await expect(template(ns, 'networkPolicy.kubeApiServerCidrs={0.0.0.0}')).rejects.toThrow(/kubeApiServerCidrs/);
    // Direct bearer tokens are an explicit choice.
    expect(await template(ns)).not.toContain('--aggregated-accept-tokens');
    expect(await template(ns, 'aggregatedApi.acceptBearerTokens=true')).toContain('- --aggregated-accept-tokens');
  });

  test('the gateway NetworkPolicy allows HTTPS to public addresses and DNS only; egress.allow reaches all three processes', async () => {
    const rendered = await template(
      ns,
      'aggregatedApi.enabled=false',
      'gateway.enabled=true',
      'gateway.catalog.configMap=gw-catalog',
      'networkPolicy.enabled=true',
      'egress.allow={10.20.0.0/16,proxy.example.com}',
    );
    const policy = rendered
      .split('\n---\n')
      .find((d) => d.includes('name: rel-byok-gateway') && d.includes('kind: NetworkPolicy'))!;
    expect(policy).toContain(
      'except: [0.0.0.0/8, 10.0.0.0/8, 100.64.0.0/10, 127.0.0.0/8, 169.254.0.0/16, 172.16.0.0/12, 192.0.0.0/24, 192.0.2.0/24, 192.168.0.0/16, 198.18.0.0/15, 198.51.100.0/24, 203.0.113.0/24, 224.0.0.0/4, 240.0.0.0/4]',
    );
    // IPv6: global unicast (2000::/3) only, as the egress policy judges it.
    expect(policy).toContain('except: ["::/3", "4000::/2", "8000::/1", "2001:db8::/32"]');
    expect(policy).toContain('- { port: 443, protocol: TCP }');
    expect(policy).toContain('- { port: 53, protocol: UDP }');
    // Operator, API and gateway get the same allow-list.
    expect(rendered.match(/--egress-allow=10\.20\.0\.0\/16/g)).toHaveLength(3);
    expect(rendered.match(/--egress-allow=proxy\.example\.com/g)).toHaveLength(3);
    const file = join(mkdtempSync(join(tmpdir(), 'chart-')), 'gateway-netpol.yaml');
    writeFileSync(file, rendered);
    const out = await kubectl('apply', '--dry-run=server', '-n', ns, '-f', file);
    expect(out).toMatch(/networkpolicy\.networking\.k8s\.io\/rel-byok-gateway created \(server dry run\)/);
    await expect(template(ns, 'egress.allow={not a host}')).rejects.toThrow(/egress/);
  });

  test('gateway.enabled: the one catalog by default; a Deployment with the projected routing, bundle and key volumes, accepted by the apiserver', async () => {
    // Without a catalog ConfigMap of one's own, the gateway serves the chart's copy of the one catalog.
    const ownText = await template(ns, 'aggregatedApi.enabled=false', 'gateway.enabled=true');
    const own = ownText
      .split('\n---\n')
      .map((d) => parse(d) as { kind?: string; metadata?: { name?: string }; data?: Record<string, string> } | null);
    const catalogMap = own.find((d) => d?.kind === 'ConfigMap' && d.metadata?.name === 'rel-byok-gateway-catalog');
    expect(catalogMap?.data?.['catalog.json']).toBe(
      readFileSync(join(repo, 'config', 'catalog', 'catalog.json'), 'utf8'),
    );
    expect(
      JSON.stringify(own.find((d) => d?.kind === 'Deployment' && d.metadata?.name === 'rel-byok-gateway')),
    ).toContain('{"name":"catalog","configMap":{"name":"rel-byok-gateway-catalog"}}');
    const ownFile = join(mkdtempSync(join(tmpdir(), 'chart-')), 'gateway-own-catalog.yaml');
    writeFileSync(ownFile, ownText);
    expect(await kubectl('apply', '--dry-run=server', '-n', ns, '-f', ownFile)).toMatch(
      /configmap\/rel-byok-gateway-catalog created \(server dry run\)/,
    );
    // Without the aggregated API's cluster-wide and kube-system objects: this dry run is namespaced.
    const rendered = await template(
      ns,
      'aggregatedApi.enabled=false',
      'gateway.enabled=true',
      'gateway.catalog.configMap=gw-catalog',
      'gateway.sharedKeys.secret=gw-shared',
      'gateway.routingSlots=3',
      'gateway.bundleSlots=2',
    );
    expect(rendered).not.toContain('rel-byok-gateway-catalog');
    expect(rendered).toContain('configMap: { name: gw-catalog }');
    // Every volume the operator writes is optional (a pod starts before they exist), and such a pod restarts its
    // container after 5 s without a config, so the kubelet mounts them again.
    expect(rendered).toContain('- configMap: { name: byok-routing-index, optional: true }');
    expect(rendered).toContain('secret: { secretName: byok-bundle-key, defaultMode: 0400, optional: true }');
    expect(rendered).toContain('--restart-without-config-after=5');
    expect(
      await template(
        ns,
        'aggregatedApi.enabled=false',
        'gateway.enabled=true',
        'gateway.catalog.configMap=gw-catalog',
        'gateway.restartWithoutConfigSeconds=0',
      ),
    ).not.toContain('--restart-without-config-after');
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

  test("gateway.deliveryStream: on by default, every operator replica serves it to the gateway's own ServiceAccount only (projected token, TokenReview, NetworkPolicy), accepted by the apiserver; off, none of it", async () => {
    const gw = ['aggregatedApi.enabled=false', 'gateway.enabled=true', 'networkPolicy.enabled=true'];
    const off = await template(ns, ...gw, 'gateway.deliveryStream.enabled=false');
    expect(off).not.toContain('delivery-stream');
    expect(off).not.toContain('tokenreviews');
    // The gateway's own ServiceAccount either way: switching the stream off with helm upgrade must not leave the pod
    // template naming a deleted account (the apiserver keeps the deprecated serviceAccount field the name was copied to).
    const offDocs = off.split('\n---\n').map(
      (d) =>
        parse(d) as {
          kind?: string;
          metadata?: { name?: string };
          spec?: { template?: { spec: { serviceAccountName?: string } } };
        } | null,
    );
    expect(
      offDocs.find((d) => d?.kind === 'Deployment' && d.metadata?.name === 'rel-byok-gateway')?.spec?.template?.spec
        .serviceAccountName,
    ).toBe('rel-byok-gateway');
    expect(offDocs.some((d) => d?.kind === 'ServiceAccount' && d.metadata?.name === 'rel-byok-gateway')).toBe(true);
    const rendered = await template(ns, ...gw);
    const docs = rendered.split('\n---\n').map(
      (d) =>
        parse(d) as {
          kind?: string;
          metadata?: { name?: string };
          spec?: Record<string, unknown>;
          rules?: unknown[];
        } | null,
    );
    const find = (kind: string, name: string) => docs.find((d) => d?.kind === kind && d.metadata?.name === name);
    const podSpec = (name: string) =>
      (
        find('Deployment', name)!.spec as {
          template: {
            spec: {
              serviceAccountName?: string;
              automountServiceAccountToken?: boolean;
              containers: { args: string[] }[];
              volumes: unknown[];
            };
          };
        }
      ).template.spec;
    const operator = podSpec('rel-byok-operator');
    expect(operator.containers[0]!.args).toEqual(
      expect.arrayContaining([
        '--delivery-stream-port=8443',
        `--delivery-stream-service-accounts=${ns}/rel-byok-gateway`,
        '--delivery-stream-audience=byok-delivery',
      ]),
    );
    const gateway = podSpec('rel-byok-gateway');
    expect(gateway.serviceAccountName).toBe('rel-byok-gateway');
    expect(gateway.automountServiceAccountToken).toBe(false);
    expect(gateway.containers[0]!.args).toEqual(
      expect.arrayContaining([
        `--delivery-stream=http://rel-byok-delivery.${ns}.svc:8443`,
        '--delivery-stream-token-file=/var/run/byok/delivery-token/token',
      ]),
    );
    // `defaultMode: 0400` as the chart writes it everywhere: octal to the apiserver's YAML 1.1, 400 to this YAML 1.2 parser.
    expect(gateway.volumes).toContainEqual({
      name: 'delivery-token',
      projected: {
        defaultMode: 400,
        sources: [{ serviceAccountToken: { audience: 'byok-delivery', expirationSeconds: 3600, path: 'token' } }],
      },
    });
    // The gateway's ServiceAccount is bound to nothing; the operator may create TokenReviews and nothing more here.
    expect(rendered).not.toMatch(/kind: ServiceAccount, name: rel-byok-gateway/);
    expect(find('ClusterRole', 'rel-byok-delivery-tokenreview')?.rules).toEqual([
      { apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] },
    ]);
    type Policy = {
      podSelector: { matchLabels?: Record<string, string> };
      ingress: { from?: { podSelector?: { matchLabels?: Record<string, string> } }[]; ports: { port: number }[] }[];
    };
    // The stream's port admits gateway pods on the operator's pods only: the API pods, which the main policy also
    // selects, serve the aggregated API on the same port number by default, and that port admits the apiserver alone.
    const mainPolicy = find('NetworkPolicy', 'rel-byok')!.spec as Policy;
    expect(mainPolicy.ingress.flatMap((r) => r.ports.map((p) => p.port))).not.toContain(8443);
    const streamPolicy = find('NetworkPolicy', 'rel-byok-delivery-stream')!.spec as Policy;
    expect(streamPolicy.podSelector.matchLabels).toEqual(
      expect.objectContaining({ 'app.kubernetes.io/component': 'operator' }),
    );
    expect(streamPolicy.ingress).toEqual([
      {
        from: [{ podSelector: { matchLabels: expect.objectContaining({ 'app.kubernetes.io/component': 'gateway' }) } }],
        ports: [{ port: 8443, protocol: 'TCP' }],
      },
    ]);
    const file = join(mkdtempSync(join(tmpdir(), 'chart-')), 'delivery.yaml');
    writeFileSync(file, rendered);
    const out = await kubectl('apply', '--dry-run=server', '-f', file);
    expect(out).toMatch(/serviceaccount\/rel-byok-gateway created \(server dry run\)/);
    expect(out).toMatch(/service\/rel-byok-delivery created \(server dry run\)/);
    expect(out).toMatch(/deployment\.apps\/rel-byok-gateway created \(server dry run\)/);
  });

  test('ledger: several gateway replicas need the shared Redis ledger; with it, gateways and the operator get its URL', async () => {
    const gw = ['gateway.enabled=true', 'gateway.catalog.configMap=gw-catalog'];
    await expect(template(ns, ...gw, 'gateway.replicas=2')).rejects.toThrow(/ledger\.redisUrl/);
    await expect(template(ns, ...gw, 'ledger.redisUrl=http://not-redis')).rejects.toThrow(/redisUrl/);
    const single = await template(ns, ...gw);
    expect(single).not.toContain('--ledger-redis-url');
    const shared = await template(ns, ...gw, 'gateway.replicas=3', 'ledger.redisUrl=redis://redis.byok:6379');
    // The gateway Deployment and the operator (spend status) both point at it.
    expect(shared.match(/--ledger-redis-url=redis:\/\/redis\.byok:6379/g)).toHaveLength(2);
  });

  test('the gateway has minutes to start before its liveness probe counts (a startup probe on /healthz)', async () => {
    const rendered = await template(ns, 'gateway.enabled=true', 'gateway.catalog.configMap=gw-catalog');
    const gateway = rendered
      .split('\n---\n')
      .map(
        (d) =>
          parse(d) as {
            kind?: string;
            metadata?: { name?: string };
            spec?: {
              template: {
                spec: {
                  containers: {
                    startupProbe?: {
                      httpGet: { path: string; port: string };
                      periodSeconds: number;
                      failureThreshold: number;
                    };
                  }[];
                };
              };
            };
          } | null,
      )
      .find((d) => d?.kind === 'Deployment' && d.metadata?.name === 'rel-byok-gateway');
    const probe = gateway!.spec!.template.spec.containers[0]!.startupProbe!;
    expect(probe.httpGet).toEqual({ path: '/healthz', port: 'ops' });
    expect(probe.periodSeconds * probe.failureThreshold).toBeGreaterThanOrEqual(300);
  });

  test("networkPolicy.ledgerRedisPodLabels: a Redis in the namespace admits the operator and the gateways only, on the URL's port", async () => {
    const gw = ['gateway.enabled=true', 'gateway.catalog.configMap=gw-catalog', 'gateway.replicas=2'];
    const policyOf = (rendered: string) =>
      rendered
        .split('\n---\n')
        .map((d) => parse(d) as { kind?: string; metadata?: { name?: string }; spec?: Record<string, unknown> } | null)
        .find((d) => d?.kind === 'NetworkPolicy' && d.metadata?.name === 'rel-byok-ledger-redis')?.spec;
    expect(policyOf(await template(ns, ...gw, 'ledger.redisUrl=redis://redis.byok:6379'))).toBeUndefined();
    const rendered = await template(
      ns,
      ...gw,
      'ledger.redisUrl=rediss://:pw@ledger-redis:6380/0',
      'networkPolicy.ledgerRedisPodLabels.app=ledger-redis',
    );
    const component = (c: string) => ({
      podSelector: {
        matchLabels: {
          'app.kubernetes.io/name': 'byok-operator',
          'app.kubernetes.io/instance': 'rel',
          'app.kubernetes.io/component': c,
        },
      },
    });
    expect(policyOf(rendered)).toEqual({
      podSelector: { matchLabels: { app: 'ledger-redis' } },
      policyTypes: ['Ingress'],
      ingress: [{ from: [component('operator'), component('gateway')], ports: [{ port: 6380, protocol: 'TCP' }] }],
    });
    const file = join(mkdtempSync(join(tmpdir(), 'chart-')), 'ledger-redis.yaml');
    writeFileSync(file, rendered);
    expect(await kubectl('apply', '--dry-run=server', '-f', file)).toMatch(
      /networkpolicy\.networking\.k8s\.io\/rel-byok-ledger-redis created \(server dry run\)/,
    );
  });

  test('aggregatedApi.apiService.create=false renders everything but the APIService', async () => {
    const rendered = await template(ns, 'aggregatedApi.apiService.create=false');
    expect(rendered).not.toContain('kind: APIService');
    expect(rendered).toContain('name: rel-byok-aggregated-api');
    expect(rendered).toContain('--aggregated-port=8443');
    expect(await template(ns)).toContain('kind: APIService');
  });

  test('one value for the routing slots: the gateway mounts gateway.routingSlots and the shard alert measures against it', async () => {
    const slotsIn = (rendered: string) => ({
      mounted: rendered.match(/- configMap: \{ name: byok-routing-\d+, optional: true \}/g)?.length,
      operator: /--gateway-routing-slots=(\d+)/.exec(rendered)?.[1],
      alert: /byok_routing_shards\{[^}]*\}\) >= (\d+)/.exec(rendered)?.[1],
    });
    const on = ['gateway.enabled=true', 'monitoring.prometheusRule.enabled=true'];
    // Defaults: 16 slots, warning at 80 % of them.
    expect(slotsIn(await template(ns, ...on))).toEqual({ mounted: 16, operator: '16', alert: '12' });
    expect(slotsIn(await template(ns, ...on, 'gateway.routingSlots=40'))).toEqual({
      mounted: 40,
      operator: '40',
      alert: '32',
    });
    await expect(template(ns, ...on, 'monitoring.prometheusRule.gatewayShardSlots=32')).rejects.toThrow(
      /gatewayShardSlots/,
    );
  });

  test("status token: generated by default, the same for the operator and the gateways, kept across upgrades; a Secret of one's own or off", async () => {
    type Doc = {
      kind?: string;
      metadata?: { name?: string; annotations?: Record<string, string> };
      data?: Record<string, string>;
      spec?: {
        template: {
          metadata: { annotations?: Record<string, string> };
          spec: { containers: { args: string[] }[]; volumes: { name: string; secret?: { secretName: string } }[] };
        };
      };
    };
    const docs = (text: string) =>
      text
        .split('\n---\n')
        .map((d) => parse(d) as Doc | null)
        .filter((d): d is Doc => d !== null);
    const gw = ['aggregatedApi.enabled=false', 'gateway.enabled=true'];
    const rendered = docs(await template(ns, ...gw));
    const secret = rendered.find((d) => d.kind === 'Secret' && d.metadata?.name === 'rel-byok-gateway-status-token');
    const token = Buffer.from(secret?.data?.token ?? '', 'base64').toString();
    expect(token).toMatch(/^[A-Za-z0-9]{48}$/);
    for (const name of ['rel-byok-operator', 'rel-byok-gateway']) {
      const deployment = rendered.find((d) => d.kind === 'Deployment' && d.metadata?.name === name)!;
      expect(deployment.spec!.template.spec.containers[0]!.args).toContain(
        '--status-token-file=/etc/byok/status/token',
      );
      expect(deployment.spec!.template.spec.volumes).toContainEqual({
        name: 'status-token',
        secret: expect.objectContaining({ secretName: 'rel-byok-gateway-status-token' }),
      });
      // Both roll together if the token ever changes (each reads it once at start).
      expect(deployment.spec!.template.metadata.annotations?.['checksum/status-token']).toMatch(/^[0-9a-f]{16}$/);
    }
    expect(
      rendered.find((d) => d.kind === 'Deployment' && d.metadata?.name === 'rel-byok-operator')!.spec!.template.spec
        .containers[0]!.args,
    ).toContain(`--gateway-service=${ns}/rel-byok-gateway:ops`);
    expect(JSON.stringify(rendered.filter((d) => d.kind !== 'Secret'))).not.toContain(token);

    const own = await template(ns, ...gw, 'gateway.statusToken.secret=my-token');
    expect(own).not.toContain('rel-byok-gateway-status-token');
    expect(own.match(/secret: \{ secretName: my-token, defaultMode: 0400 \}/g)).toHaveLength(2);
    const off = await template(ns, ...gw, 'gateway.statusToken.enabled=false');
    expect(off).not.toContain('status-token');
    expect(off).not.toContain('--gateway-service');

    // A real install and upgrade: lookup keeps the token, so operator and gateways keep agreeing with each other.
    const release = `tok${ns.slice(-6)}`;
    const installed = [
      '-n',
      ns,
      '--skip-crds',
      '--set',
      `watchNamespaces[0]=${ns}`,
      '--set',
      'admissionPolicy.enabled=false',
      ...gw.flatMap((v) => ['--set', v]),
    ];
    const stored = async () =>
      (
        await kubectl('get', 'secret', `${release}-byok-gateway-status-token`, '-n', ns, '-o', 'jsonpath={.data.token}')
      ).trim();
    const checksum = async () =>
      (JSON.parse(await kubectl('get', 'deployment', `${release}-byok-gateway`, '-n', ns, '-o', 'json')) as Doc).spec!
        .template.metadata.annotations?.['checksum/status-token'];
    await helm(['install', release, CHART_DIR, ...installed]);
    try {
      const first = await stored();
      const firstChecksum = await checksum();
      expect(Buffer.from(first, 'base64').toString()).toMatch(/^[A-Za-z0-9]{48}$/);
      expect(firstChecksum).toMatch(/^[0-9a-f]{16}$/);
      await helm(['upgrade', release, CHART_DIR, ...installed, '--set', 'gateway.logLevel=debug']);
      expect(await stored()).toBe(first);
      expect(await checksum()).toBe(firstChecksum);
    } finally {
      await helm(['uninstall', release, '-n', ns]);
    }
  });

  // the export controller is opt-in; on, the operator gets the flags and a Role in the export namespace only.
  test('export: off by default; export.target adds the operator flags and a Role on the target kinds and Secrets in the export namespace only', async () => {
    const off = await template(ns);
    expect(off).not.toMatch(/--export-target|operator-export/);
    await expect(template(ns, 'export.target=kong')).rejects.toThrow(/export/);
    const exportNs = await createTestNamespace('chart-export');
    const file = join(mkdtempSync(join(tmpdir(), 'chart-')), 'export.yaml');
    writeFileSync(
      file,
      await template(
        ns,
        `watchNamespaces[0]=${ns}`,
        'aggregatedApi.enabled=false',
        'export.target=envoy-ai-gateway',
        `export.namespace=${exportNs}`,
        'export.gateway=gw/eg',
      ),
    );
    const rendered = readFileSync(file, 'utf8');
    expect(rendered).toContain('--export-target=envoy-ai-gateway');
    expect(rendered).toContain(`--export-namespace=${exportNs}`);
    expect(rendered).toContain('--export-gateway=gw/eg');
    expect(rendered).not.toContain('--export-allow-tenant-hosts');
    expect(await template(ns, 'export.target=envoy-ai-gateway', 'export.allowTenantHosts=true')).toContain(
      '--export-allow-tenant-hosts',
    );
    // No -n: the export Role and RoleBinding name the export namespace, the rest the release's.
    await kubectl('apply', '-f', file);
    // A SubjectAccessReview, not `kubectl auth can-i`: the target's CRDs are not installed here, and can-i resolves the
    // resource through discovery first.
    const can = async (verb: string, resourceAndGroup: string, namespace: string) => {
      const [resource, ...group] = resourceAndGroup.split('.');
      const review = {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec: {
          user: `system:serviceaccount:${ns}:rel-byok-operator`,
          groups: ['system:serviceaccounts', `system:serviceaccounts:${ns}`],
          resourceAttributes: { namespace, verb, resource, group: group.join('.') },
        },
      };
      const reviewFile = join(mkdtempSync(join(tmpdir(), 'sar-')), 'review.json');
      writeFileSync(reviewFile, JSON.stringify(review));
      const answer = JSON.parse(await kubectl('create', '-f', reviewFile, '-o', 'json')) as {
        status: { allowed: boolean };
      };
      return answer.status.allowed ? 'yes' : 'no';
    };
    expect(await can('patch', 'aigatewayroutes.aigateway.envoyproxy.io', exportNs)).toBe('yes');
    expect(await can('delete', 'backends.gateway.envoyproxy.io', exportNs)).toBe('yes');
    // The controller reads a shared object's name before it first takes it over.
    expect(await can('get', 'backends.gateway.envoyproxy.io', exportNs)).toBe('yes');
    expect(await can('get', 'aiservicebackends.aigateway.envoyproxy.io', exportNs)).toBe('yes');
    expect(await can('delete', 'secrets', exportNs)).toBe('yes');
    expect(await can('patch', 'aigatewayroutes.aigateway.envoyproxy.io', 'default')).toBe('no');
    expect(await can('delete', 'secrets', 'default')).toBe('no');
    expect(await can('patch', 'agentgatewaybackends.agentgateway.dev', exportNs)).toBe('no');
  });

  test('RBAC: the operator writes status only, the API writes credentials', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'chart-')), 'rbac.yaml');
    // Without the APIService: a real one is cluster-wide (test/integration/aggregated installs the chart's own).
    writeFileSync(file, await template(ns, `watchNamespaces[0]=${ns}`, 'aggregatedApi.enabled=false'));
    await kubectl('apply', '-n', ns, '-f', file);
    const can = async (sa: string, verb: string, target: string, namespace = ns) => {
      const [resource = '', subresource] = target.split('/');
      const args = [
        'auth',
        'can-i',
        verb,
        resource,
        '-n',
        namespace,
        `--as=system:serviceaccount:${ns}:${sa}`,
        ...(subresource ? [`--subresource=${subresource}`] : []),
      ];
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

  test("RBAC with the gateway and its delivery stream (the default): the gateway's ServiceAccount reads and watches nothing; the operator may review its tokens", async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'chart-')), 'rbac-gateway.yaml');
    writeFileSync(
      file,
      await template(
        ns,
        `watchNamespaces[0]=${ns}`,
        'aggregatedApi.enabled=false',
        'gateway.enabled=true',
        'gateway.catalog.configMap=gw-catalog',
      ),
    );
    expect(readFileSync(file, 'utf8')).toContain('--delivery-stream=');
    await kubectl('apply', '-f', file);
    const can = async (sa: string, verb: string, resource: string, namespace = ns) =>
      (
        await kubectl('auth', 'can-i', verb, resource, '-n', namespace, `--as=system:serviceaccount:${ns}:${sa}`).catch(
          (e: { stdout?: string }) => e.stdout ?? '',
        )
      ).trim();
    for (const [verb, resource] of [
      ['get', 'secrets'],
      ['list', 'secrets'],
      ['watch', 'secrets'],
      ['get', 'configmaps'],
      ['watch', 'configmaps'],
      ['list', 'pods'],
    ]) {
      expect({ verb, resource, answer: await can('rel-byok-gateway', verb!, resource!) }).toEqual({
        verb,
        resource,
        answer: 'no',
      });
    }
    expect(await can('rel-byok-operator', 'create', 'tokenreviews.authentication.k8s.io')).toBe('yes');
  });
});
