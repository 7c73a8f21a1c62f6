// How apps reach the gateway and the REST API in a cluster: the Services' type, node port and annotations, an Ingress
// and a Gateway API HTTPRoute, judged by the real kube-apiserver (the Ingress by its built-in validation, the HTTPRoute
// by the Gateway API's own CRD with its OpenAPI schema and CEL rules, from hack/export/fetch-crds.sh). And the names of
// everything the chart makes: <fullname>-<part>, with the usual Helm convention for <fullname>.
//
// The generator attacks the name derivation (release names with and without the `byok` stem, near the length limit,
// fullnameOverride, nameOverride): a doubled stem (byok-byok-*), truncation that leaves a trailing '-' or overflows a
// Service's DNS label, two objects of one kind with one name, a chart object taking a name the operator writes, and
// every reference by name (the operator's --gateway-service and delivery-stream flags, ServiceAccounts of Deployments
// and bindings, the admission policy's users, the APIService's, the Ingress's and the HTTPRoute's backends, Secret
// volumes) drifting from the object it names.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, test } from '@jest/globals';
import fc from 'fast-check';
import { parseAllDocuments } from 'yaml';
import { applyMissingCrds, gatewayApiCrdFiles } from '../../support/export-crds.ts';
import { helmTemplate } from '../../support/helm.ts';
import { createTestNamespace, kubectl, untilEstablished } from '../../support/kube.ts';

interface Obj {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; annotations?: Record<string, string> };
  spec?: Record<string, unknown>;
  [k: string]: unknown;
}

/** Renders with these values; `string:a=b` is --set-string (annotation values that look like numbers). */
function template(release: string, namespace: string, ...sets: string[]): Promise<string> {
  const asString = (s: string) => s.startsWith('string:');
  return helmTemplate({
    release,
    namespace,
    set: sets.filter((s) => !asString(s)),
    setString: sets.filter(asString).map((s) => s.slice('string:'.length)),
  });
}

/**
 * Starts these renders a few at a time, ahead of the cases that read them: each is a helm process that mostly waits
 * on its own start-up, so they overlap. A case asks with the same arguments and gets the same render.
 */
function renderAhead(
  cases: readonly (readonly [release: string, namespace: string, sets: readonly string[]])[],
  concurrency = 4,
): void {
  let next = 0;
  const worker = async () => {
    while (next < cases.length) {
      const [release, namespace, sets] = cases[next++]!;
      // A refused render is read (and asserted) by its case; until then it must not count as unhandled.
      await template(release, namespace, ...sets).catch(() => undefined);
    }
  };
  for (let i = 0; i < concurrency; i++) void worker();
}
/** The rendered objects, read as YAML 1.1 as the apiserver's YAML reader does (a plain `yes` is a boolean there). */
const objects = (text: string) =>
  parseAllDocuments(text, { version: '1.1' })
    .map((d) => d.toJS() as Obj | null)
    .filter((o): o is Obj => o !== null);
/**
 * Where a rendered namespace, label or annotation is something other than a string (a plain `123`, `1e3`, `0x1f`,
 * `yes` or `null`): the apiserver refuses the object. Every `metadata` anywhere in the object counts (pod templates
 * too).
 */
function nonStringMetadata(all: readonly Obj[]): string[] {
  const found: string[] = [];
  const walk = (v: unknown, path: string): void => {
    if (Array.isArray(v)) v.forEach((x, i) => walk(x, `${path}[${i}]`));
    else if (typeof v === 'object' && v !== null)
      for (const [k, x] of Object.entries(v)) {
        if (k === 'metadata' && typeof x === 'object' && x !== null) {
          const m = x as {
            namespace?: unknown;
            labels?: Record<string, unknown>;
            annotations?: Record<string, unknown>;
          };
          if (m.namespace !== undefined && typeof m.namespace !== 'string') found.push(`${path}.metadata.namespace`);
          for (const field of ['labels', 'annotations'] as const)
            for (const [key, value] of Object.entries(m[field] ?? {}))
              if (typeof value !== 'string') found.push(`${path}.metadata.${field}.${key}`);
        }
        walk(x, `${path}.${k}`);
      }
  };
  all.forEach((o, i) => walk(o, `${o.kind}/${o.metadata.name}[${i}]`));
  return found;
}
const find = (all: Obj[], kind: string, name: string) => all.find((o) => o.kind === kind && o.metadata.name === name);

const ROUTE_ON = [
  'httpRoute.enabled=true',
  'httpRoute.parentRefs[0].name=shared',
  'httpRoute.parentRefs[0].namespace=gateway-system',
];
const EVERYTHING = [
  'gateway.enabled=true',
  'gateway.deliveryStream.enabled=true',
  'gateway.service.type=LoadBalancer',
  'api.service.type=NodePort',
  'ingress.enabled=true',
  ...ROUTE_ON,
  'serviceMonitor.enabled=true',
  'monitoring.grafanaDashboard.enabled=true',
];

async function dryRun(text: string, name: string): Promise<string> {
  const file = join(mkdtempSync(join(tmpdir(), 'chart-ingress-')), `${name}.yaml`);
  writeFileSync(file, text);
  return kubectl('apply', '--dry-run=server', '-f', file);
}

describe('chart: Services, Ingress, HTTPRoute and object names', () => {
  let ns: string;
  beforeAll(async () => {
    ns = await createTestNamespace('chart-ingress');
    await applyMissingCrds(gatewayApiCrdFiles(['httproutes']), 'byok-chart-test');
    await untilEstablished(['httproutes.gateway.networking.k8s.io']);
  });

  test('a release named byok makes byok-gateway, byok-api, byok-operator; other names get <release>-byok; fullnameOverride wins', async () => {
    const names = async (release: string, ...sets: string[]) =>
      objects(await template(release, ns, 'gateway.enabled=true', ...sets))
        .filter((o) => ['Deployment', 'Service'].includes(o.kind))
        .map((o) => `${o.kind}/${o.metadata.name}`)
        .sort();
    // Rendered side by side: each render is a helm process that mostly waits on its own start-up.
    const [byok, myByok, platform, full, stem, stemInRelease] = await Promise.all([
      names('byok'),
      names('my-byok'),
      names('platform'),
      names('platform', 'fullnameOverride=llm'),
      names('platform', 'nameOverride=keys'),
      names('keys', 'nameOverride=keys'),
    ]);
    expect(byok).toEqual([
      'Deployment/byok-api',
      'Deployment/byok-gateway',
      'Deployment/byok-operator',
      'Service/byok-aggregated-api',
      'Service/byok-api',
      'Service/byok-delivery',
      'Service/byok-gateway',
      'Service/byok-metrics',
    ]);
    expect(myByok).toContain('Service/my-byok-gateway');
    expect(platform).toContain('Service/platform-byok-gateway');
    expect(full).toEqual([
      'Deployment/llm-api',
      'Deployment/llm-gateway',
      'Deployment/llm-operator',
      'Service/llm-aggregated-api',
      'Service/llm-api',
      'Service/llm-delivery',
      'Service/llm-gateway',
      'Service/llm-metrics',
    ]);
    expect(stem).toContain('Service/platform-keys-gateway');
    expect(stemInRelease).toContain('Service/keys-gateway');
    await expect(template('byok', ns, 'fullnameOverride=Not_A_Name')).rejects.toThrow(/fullnameOverride/);
  });

  test('generated release names: names stay within limits, never double the stem, and every reference names a rendered object', async () => {
    const label = fc.stringMatching(/^[a-z][a-z0-9]{0,11}$/);
    const release = fc
      .oneof(
        fc.array(fc.oneof(label, fc.constant('byok')), { minLength: 1, maxLength: 6 }).map((parts) => parts.join('-')),
        // Near Helm's 53-character limit, with the stem where truncation may cut.
        fc
          .tuple(fc.stringMatching(/^[a-z][a-z0-9-]{30,44}[a-z0-9]$/), fc.constantFrom('', '-byok', 'byok'))
          .map(([a, b]) => `${a}${b}`.slice(0, 53).replace(/-+$/, '')),
      )
      .filter((r) => r.length > 0 && r.length <= 53 && !r.includes('--'));
    const override = fc.oneof(
      fc.constant(''),
      fc.stringMatching(/^[a-z][a-z0-9-]{0,43}[a-z0-9]$/).filter((s) => !s.includes('--')),
    );
    const stem = fc.constantFrom('', 'keys', 'byok');
    // Namespaces are DNS labels, and some of those read as numbers, booleans or null in YAML.
    const namespace = fc.oneof(
      { weight: 3, arbitrary: fc.constant(ns) },
      { weight: 1, arbitrary: fc.constantFrom('123', '1e3', '0x1f', '017', 'true', 'yes', 'on', 'null') },
    );
    const setsOf = (fullnameOverride: string, nameOverride: string) => [
      ...EVERYTHING,
      `fullnameOverride=${fullnameOverride}`,
      `nameOverride=${nameOverride}`,
      `networkPolicy.kubeApiServerCidrs={192.0.2.10/32}`,
    ];
    const RUNS = { numRuns: 60, seed: 43 };
    // The same seed draws the same cases: their renders start now, a few at a time, and each case reads its own.
    renderAhead(
      fc
        .sample(fc.tuple(release, override, stem, namespace), RUNS)
        .map(([rel, f, n, space]) => [rel, space, setsOf(f, n)] as const),
    );
    await fc.assert(
      fc.asyncProperty(release, override, stem, namespace, async (rel, fullnameOverride, nameOverride, space) => {
        const sets = setsOf(fullnameOverride, nameOverride);
        const all = objects(await template(rel, space, ...sets));
        // The generated status token's checksum (a pod annotation) is hex: now and then all digits, or `<n>e<n>`.
        expect(nonStringMetadata(all)).toEqual([]);
        const of = (kind: string) => all.filter((o) => o.kind === kind);
        const fullname = of('Deployment')
          .find((d) => d.metadata.name.endsWith('-api'))!
          .metadata.name.replace(/-api$/, '');
        const s = nameOverride || 'byok';
        // The convention: the override, else the release when it holds the stem, else <release>-<stem>.
        const expected = fullnameOverride || (rel.includes(s) ? rel : `${rel.slice(0, 40).replace(/-+$/, '')}-${s}`);
        expect(fullname).toBe(expected.slice(0, 45).replace(/-+$/, ''));
        expect(fullname).not.toMatch(/-$/);
        if (!rel.includes(`${s}-${s}`) && !fullnameOverride.includes(`${s}-${s}`))
          for (const o of all) expect(o.metadata.name).not.toContain(`${s}-${s}-`);
        for (const svc of of('Service')) expect(svc.metadata.name).toMatch(/^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/);
        for (const o of all) expect(o.metadata.name.length).toBeLessThanOrEqual(253);
        const keys = all.map((o) => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`);
        expect(new Set(keys).size).toBe(keys.length);
        // Nor one of the names the operator writes in the release namespace at run time.
        for (const o of [...of('ConfigMap'), ...of('Secret')])
          expect(o.metadata.name).not.toMatch(/^byok-(routing-index|bundle-key|(routing|bundle)-\d+)$/);

        const services = new Map(
          of('Service').map((svc) => [
            svc.metadata.name,
            (svc.spec as { ports: { name: string; port: number }[] }).ports,
          ]),
        );
        const accounts = new Set(of('ServiceAccount').map((a) => a.metadata.name));
        const secrets = new Set(of('Secret').map((x) => x.metadata.name));
        const text = JSON.stringify(all);
        const gatewayService = /--gateway-service=[^/]+\/([^:"]+):ops/.exec(text)?.[1];
        expect(services.get(gatewayService ?? '')?.some((p) => p.name === 'ops')).toBe(true);
        const stream = /--delivery-stream=http:\/\/([^.]+)\.[^.]+\.svc:(\d+)"/.exec(text);
        expect(services.get(stream?.[1] ?? '')?.some((p) => p.port === Number(stream?.[2]))).toBe(true);
        expect(accounts).toContain(/--delivery-stream-service-accounts=[^/]+\/([^",]+)/.exec(text)?.[1]);
        for (const d of of('Deployment')) {
          const pod = (
            d.spec as {
              template: { spec: { serviceAccountName?: string; volumes?: { secret?: { secretName: string } }[] } };
            }
          ).template.spec;
          if (pod.serviceAccountName) expect(accounts).toContain(pod.serviceAccountName);
          for (const v of pod.volumes ?? []) {
            const own = /-(aggregated-tls|gateway-status-token)$/.exec(v.secret?.secretName ?? '')?.[1];
            if (own) expect(secrets).toContain(`${fullname}-${own}`);
          }
        }
        for (const b of [...of('RoleBinding'), ...of('ClusterRoleBinding')]) {
          for (const subject of (b as { subjects?: { kind: string; name: string }[] }).subjects ?? [])
            if (subject.kind === 'ServiceAccount') expect(accounts).toContain(subject.name);
        }
        for (const user of text.match(/system:serviceaccount:[^:"]+:[a-z0-9-]+/g) ?? [])
          expect(accounts).toContain(user.split(':').at(-1));
        for (const api of of('APIService'))
          expect(services.has((api.spec as { service: { name: string } }).service.name)).toBe(true);
        const backends = [
          ...of('Ingress').flatMap((i) =>
            (
              i.spec as {
                rules: { http: { paths: { backend: { service: { name: string; port: { number: number } } } }[] } }[];
              }
            ).rules.flatMap((r) =>
              r.http.paths.map((p) => ({ name: p.backend.service.name, port: p.backend.service.port.number })),
            ),
          ),
          ...of('HTTPRoute').flatMap((r) =>
            (r.spec as { rules: { backendRefs: { name: string; port: number }[] }[] }).rules.flatMap(
              (x) => x.backendRefs,
            ),
          ),
        ];
        expect(backends).toHaveLength(4);
        for (const b of backends) expect(services.get(b.name)?.find((p) => p.port === b.port)?.name).toBe('http');
      }),
      RUNS,
    );
  }, 240_000);

  test("the Ingress and the HTTPRoute send /api/v1/byok to the REST API and the rest to the gateway's tenant port, accepted by the apiserver and the Gateway API CRD", async () => {
    const text = await template(
      'rel',
      ns,
      'gateway.enabled=true',
      'aggregatedApi.enabled=false',
      'admissionPolicy.enabled=false',
      'ingress.enabled=true',
      'ingress.className=nginx',
      'string:ingress.annotations.nginx\\.ingress\\.kubernetes\\.io/proxy-read-timeout=120',
      'ingress.hosts[0].host=llm.example.com',
      'ingress.hosts[0].paths[0].path=/api/v1/byok',
      'ingress.hosts[0].paths[0].service=api',
      'ingress.hosts[0].paths[1].path=/',
      'ingress.hosts[0].paths[1].service=gateway',
      'ingress.tls[0].secretName=llm-tls',
      'ingress.tls[0].hosts={llm.example.com}',
      ...ROUTE_ON,
      'httpRoute.parentRefs[0].sectionName=https',
      'httpRoute.hostnames={llm.example.com}',
    );
    const all = objects(text);
    expect(find(all, 'Ingress', 'rel-byok')?.spec).toEqual({
      ingressClassName: 'nginx',
      tls: [{ secretName: 'llm-tls', hosts: ['llm.example.com'] }],
      rules: [
        {
          host: 'llm.example.com',
          http: {
            paths: [
              {
                path: '/api/v1/byok',
                pathType: 'Prefix',
                backend: { service: { name: 'rel-byok-api', port: { number: 80 } } },
              },
              {
                path: '/',
                pathType: 'Prefix',
                backend: { service: { name: 'rel-byok-gateway', port: { number: 80 } } },
              },
            ],
          },
        },
      ],
    });
    expect(find(all, 'Ingress', 'rel-byok')?.metadata.annotations).toEqual({
      'nginx.ingress.kubernetes.io/proxy-read-timeout': '120',
    });
    expect(find(all, 'HTTPRoute', 'rel-byok')?.spec).toEqual({
      parentRefs: [{ name: 'shared', namespace: 'gateway-system', sectionName: 'https' }],
      hostnames: ['llm.example.com'],
      rules: [
        {
          matches: [{ path: { type: 'PathPrefix', value: '/api/v1/byok' } }],
          backendRefs: [{ name: 'rel-byok-api', port: 80 }],
        },
        {
          matches: [{ path: { type: 'PathPrefix', value: '/' } }],
          backendRefs: [{ name: 'rel-byok-gateway', port: 80 }],
        },
      ],
    });
    const out = await dryRun(text, 'ingress-route');
    expect(out).toMatch(/ingress\.networking\.k8s\.io\/rel-byok created \(server dry run\)/);
    expect(out).toMatch(/httproute\.gateway\.networking\.k8s\.io\/rel-byok created \(server dry run\)/);

    // The apiserver does judge them: what the chart's schema lets through, the Ingress validation and the CRD refuse.
    const only = async (kind: string, ...sets: string[]) =>
      objects(await template('rel', ns, 'gateway.enabled=true', ...sets))
        .filter((o) => o.kind === kind)
        .map((o) => JSON.stringify(o))
        .join('\n---\n');
    await expect(
      dryRun(await only('HTTPRoute', ...ROUTE_ON, 'httpRoute.parentRefs[0].sectionName=Not A Section'), 'bad-route'),
    ).rejects.toThrow(/sectionName/);
    await expect(
      dryRun(
        await only(
          'Ingress',
          'ingress.enabled=true',
          'ingress.hosts[0].host=Not_A_Host',
          'ingress.hosts[0].paths[0].path=/',
          'ingress.hosts[0].paths[0].service=gateway',
        ),
        'bad-ingress',
      ),
    ).rejects.toThrow(/spec\.rules\[0\]\.host/);
  });

  test('paths to a component that is off are left out; nothing left, no parentRefs or a node port on ClusterIP are refused with the value to fix', async () => {
    const gatewayOnly = objects(
      await template('rel', ns, 'gateway.enabled=true', 'api.enabled=false', 'ingress.enabled=true', ...ROUTE_ON),
    );
    expect(JSON.stringify(find(gatewayOnly, 'Ingress', 'rel-byok'))).not.toContain('rel-byok-api');
    expect(find(gatewayOnly, 'HTTPRoute', 'rel-byok')?.spec?.rules).toEqual([
      {
        matches: [{ path: { type: 'PathPrefix', value: '/' } }],
        backendRefs: [{ name: 'rel-byok-gateway', port: 80 }],
      },
    ]);
    // Off by default.
    expect(
      objects(await template('rel', ns, 'gateway.enabled=true')).filter((o) =>
        ['Ingress', 'HTTPRoute'].includes(o.kind),
      ),
    ).toEqual([]);
    await expect(template('rel', ns, 'api.enabled=false', 'ingress.enabled=true')).rejects.toThrow(
      /ingress\.enabled: no path of ingress\.hosts goes to a Service of this release/,
    );
    await expect(template('rel', ns, 'httpRoute.enabled=true')).rejects.toThrow(
      /httpRoute\.parentRefs: name the Gateway/,
    );
    await expect(
      template(
        'rel',
        ns,
        'gateway.enabled=true',
        'ingress.enabled=true',
        'ingress.hosts[0].paths[0].path=/',
        'ingress.hosts[0].paths[0].service=admin',
      ),
    ).rejects.toThrow(/service/);
    await expect(template('rel', ns, 'api.service.nodePort=30080')).rejects.toThrow(
      /api\.service\.nodePort needs api\.service\.type NodePort or LoadBalancer/,
    );
  });

  test('Service type, node port and annotations for the gateway and the REST API; a NodePort or LoadBalancer gateway exposes its tenant port alone', async () => {
    const text = await template(
      'rel',
      ns,
      'gateway.enabled=true',
      'aggregatedApi.enabled=false',
      'admissionPolicy.enabled=false',
      'gateway.service.type=NodePort',
      'gateway.service.nodePort=31080',
      'gateway.service.annotations.example\\.com/owner=llm',
      'api.service.type=LoadBalancer',
      'api.service.port=8080',
      'string:api.service.annotations.service\\.beta\\.kubernetes\\.io/aws-load-balancer-internal=true',
    );
    const all = objects(text);
    // The tenant port alone goes outside: the ops port (metrics, the status endpoint) stays on the ClusterIP Service.
    const gw = find(all, 'Service', 'rel-byok-gateway')!;
    expect(gw.metadata.annotations).toBeUndefined();
    expect(gw.spec).toMatchObject({
      type: 'ClusterIP',
      ports: [
        { name: 'http', port: 80, targetPort: 'http' },
        { name: 'ops', port: 8081, targetPort: 'ops' },
      ],
    });
    const external = find(all, 'Service', 'rel-byok-gateway-external')!;
    expect(external.metadata.annotations).toEqual({ 'example.com/owner': 'llm' });
    expect(external.spec).toMatchObject({
      type: 'NodePort',
      ports: [{ name: 'http', port: 80, targetPort: 'http', nodePort: 31080 }],
    });
    expect(find(all, 'NetworkPolicy', 'rel-byok-gateway')).toBeDefined();
    const api = find(all, 'Service', 'rel-byok-api')!;
    expect(api.metadata.annotations).toEqual({ 'service.beta.kubernetes.io/aws-load-balancer-internal': 'true' });
    expect(api.spec).toMatchObject({ type: 'LoadBalancer', ports: [{ name: 'http', port: 8080, targetPort: 'http' }] });
    const out = await dryRun(text, 'services');
    expect(out).toMatch(/service\/rel-byok-gateway created \(server dry run\)/);
    expect(out).toMatch(/service\/rel-byok-gateway-external created \(server dry run\)/);
    expect(out).toMatch(/service\/rel-byok-api created \(server dry run\)/);
    // By default: ClusterIP, no external Service; annotations of a ClusterIP type go on the one Service.
    const plain = objects(
      await template('rel', ns, 'gateway.enabled=true', 'gateway.service.annotations.example\\.com/owner=llm'),
    );
    expect(find(plain, 'Service', 'rel-byok-gateway')?.spec).toMatchObject({ type: 'ClusterIP' });
    expect(find(plain, 'Service', 'rel-byok-gateway')?.metadata.annotations).toEqual({ 'example.com/owner': 'llm' });
    expect(find(plain, 'Service', 'rel-byok-gateway-external')).toBeUndefined();
  });
});
