// The chart's NOTES commands find what the operator actually writes: the routing objects written by the real
// compile pipeline are listed by the command NOTES prints (helm install --dry-run=server renders NOTES). The
// management-key step runs as printed with a namespace admin's own kubeconfig (no ServiceAccount of the chart).
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, test } from '@jest/globals';
import pino from 'pino';
import { API_PREFIX } from '../../../src/api/server.ts';
import { INDEX_NAME } from '../../../src/contract/routing.ts';
import { CompilePipeline } from '../../../src/operator/compile/pipeline.ts';
import { applyMissingCrds, gatewayApiCrdFiles } from '../../support/export-crds.ts';
import { CHART_DIR, helm } from '../../support/helm.ts';
import {
  createTestNamespace,
  kubeconfigFor,
  kubectl,
  testKubeConfig,
  testKubeconfigPath,
  untilEstablished,
} from '../../support/kube.ts';

const run = promisify(execFile);
const bin = process.env.BYOK_CONTROL_PLANE_BIN ?? '';
const cli = join(import.meta.dirname, '..', '..', '..', 'src', 'cli', 'main.ts');

async function installNotes(ns: string, ...sets: string[]): Promise<string> {
  // A release name of its own: cluster-scoped objects of other tests' releases must not collide.
  const stdout = await helm([
    'install',
    `n${ns.slice(-8)}`,
    CHART_DIR,
    '-n',
    ns,
    '--dry-run=server',
    ...sets.flatMap((s) => ['--set', s]),
  ]);
  return stdout.slice(stdout.indexOf('NOTES:'));
}

describe('chart NOTES', () => {
  let ns: string;
  let notes: string;
  beforeAll(async () => {
    ns = await createTestNamespace('notes');
    notes = await installNotes(ns, 'aggregatedApi.enabled=false');
  });

  test('the configmap command lists the compiled routing objects', async () => {
    const pipeline = new CompilePipeline({
      kubeConfig: testKubeConfig(),
      routingNamespace: ns,
      logger: pino({ level: 'silent' }),
      source: {
        accountNamespaces: () => [],
        snapshot: () => {
          throw new Error('no accounts');
        },
      },
    });
    await pipeline.start();
    await pipeline.stop();
    const line = notes.split('\n').find((l) => l.trim().startsWith('kubectl get configmap'));
    expect(line).toBeDefined();
    const args = line!.replace(/#.*$/, '').trim().split(/\s+/).slice(1);
    const listed = await kubectl(...args, '-o', 'name');
    expect(listed.trim().split('\n')).toContain(`configmap/${INDEX_NAME}`);
  });

  test('the management-key step works as printed for a user who may create Secrets there, with no RBAC of the chart', async () => {
    const account = await createTestNamespace('notes-acct');
    // Creating Secrets in the account namespace is all it needs (in a cluster, the namespace's admin role has it; the
    // test apiserver has no controller-manager to aggregate that role, so a Role of its own grants just this).
    await kubectl('create', 'role', 'secret-creator', '-n', account, '--verb=create', '--resource=secrets');
    await kubectl('create', 'rolebinding', 'alice-secrets', '-n', account, '--role=secret-creator', '--user=alice');
    const lines = notes.split('\n');
    const first = lines.findIndex((l) => l.trim().startsWith('NS='));
    const last = lines.findIndex((l) => l.trim() === 'echo "$KEY"');
    expect(first).toBeGreaterThan(0);
    expect(last).toBeGreaterThan(first);
    const script = lines
      .slice(first, last + 1)
      .join('\n')
      .replace('<account-namespace>', account);
    const { stdout } = await run('bash', ['-euo', 'pipefail', '-c', script], {
      encoding: 'utf8',
      env: { ...process.env, PATH: `${bin}:${process.env.PATH ?? ''}`, KUBECONFIG: await kubeconfigFor('alice') },
    });
    const key = stdout.trim().split('\n').at(-1)!;
    expect(key).toMatch(/^sk-byok-mgmt-v1-[0-9a-f]{64}$/);
    // What the REST API's management-key index reads: the label and the key's SHA-256 (never the key).
    const secrets = JSON.parse(
      await kubectl('get', 'secrets', '-n', account, '-l', 'byok.gateway.dev/management-key=true', '-o', 'json'),
    ) as { items: { data: Record<string, string> }[] };
    expect(secrets.items).toHaveLength(1);
    expect(Buffer.from(secrets.items[0]!.data.sha256 ?? '', 'base64').toString()).toBe(
      createHash('sha256').update(key).digest('hex'),
    );
    expect(JSON.stringify(secrets)).not.toContain(key);
  });

  test('with the gateway, NOTES say health and delivery are on and name the generated token Secret', async () => {
    const withGateway = await installNotes(ns, 'aggregatedApi.enabled=false', 'gateway.enabled=true');
    expect(withGateway).toContain(`with the status token in Secret n${ns.slice(-8)}-byok-gateway-status-token`);
  });

  test('with the gateway, NOTES print in-cluster URLs of the installed Services, the external URLs and a gateway-key line that works as printed', async () => {
    await applyMissingCrds(gatewayApiCrdFiles(['httproutes']), 'byok-chart-test');
    await untilEstablished(['httproutes.gateway.networking.k8s.io']);
    const release = `u${ns.slice(-8)}`;
    const sets = [
      'aggregatedApi.enabled=false',
      'admissionPolicy.enabled=false',
      `watchNamespaces[0]=${ns}`,
      'gateway.enabled=true',
      'gateway.service.type=LoadBalancer',
      'api.service.port=8080',
      'ingress.enabled=true',
      'ingress.hosts[0].host=llm.example.com',
      'ingress.hosts[0].paths[0].path=/',
      'ingress.hosts[0].paths[0].service=gateway',
      'ingress.tls[0].secretName=llm-tls',
      'ingress.tls[0].hosts={llm.example.com}',
      'httpRoute.enabled=true',
      'httpRoute.parentRefs[0].name=shared',
      'httpRoute.hostnames={api.example.com}',
      'httpRoute.paths[0].path=/api/v1/byok',
      'httpRoute.paths[0].service=api',
    ];
    // A real install: the Services the URLs name exist (no kubelet runs the pods; nothing here needs them).
    const stdout = await helm([
      'install',
      release,
      CHART_DIR,
      '-n',
      ns,
      '--skip-crds',
      ...sets.flatMap((v) => ['--set', v]),
    ]);
    try {
      const printed = stdout.slice(stdout.indexOf('NOTES:'));
      const inCluster = printed.slice(printed.indexOf('In the cluster:'), printed.indexOf('From outside:'));
      const urls = Object.fromEntries(
        [...inCluster.matchAll(/^ {2}(gateway|REST API): +(http:\/\/\S+)$/gm)].map((m) => [m[1]!, new URL(m[2]!)]),
      );
      expect(Object.keys(urls).sort()).toEqual(['REST API', 'gateway']);
      expect(urls.gateway!.pathname).toBe('/v1/chat/completions');
      expect(urls['REST API']!.pathname).toBe(`${API_PREFIX}/byok`);
      for (const url of Object.values(urls)) {
        const [service, namespace, svc] = url.hostname.split('.');
        expect([namespace, svc]).toEqual([ns, 'svc']);
        const spec = (
          JSON.parse(await kubectl('get', 'service', service!, '-n', ns, '-o', 'json')) as {
            spec: { ports: { name: string; port: number }[] };
          }
        ).spec;
        expect(spec.ports.find((p) => p.port === Number(url.port || 80))?.name).toBe('http');
      }
      expect(urls['REST API']!.port).toBe('8080');
      expect(printed).toContain(`gateway:  https://llm.example.com/v1/chat/completions (Ingress ${release}-byok)`);
      // The LoadBalancer line names the Service that has the load balancer, and the command that shows its address.
      const lb =
        /^ {2}gateway: +http:\/\/<address>\/v1\/chat\/completions \(LoadBalancer Service (\S+): kubectl (get service -n \S+ \S+)\)$/m.exec(
          printed,
        );
      expect(lb?.[1]).toBe(`${release}-byok-gateway-external`);
      expect(JSON.parse(await kubectl(...lb![2]!.split(' '), '-o', 'json'))).toMatchObject({
        spec: { type: 'LoadBalancer', ports: [{ name: 'http', port: 80 }] },
      });
      expect(printed).toMatch(
        new RegExp(`REST API: http\\(s\\)://api\\.example\\.com/api/v1/byok \\(HTTPRoute ${release}-byok`),
      );

      // The gateway-key line, run as printed (the CLI for `byok-operator`) with an admin's kubeconfig.
      const account = await createTestNamespace('notes-keys');
      const line = printed.split('\n').find((l) => l.includes('byok-operator gateway-key create'));
      expect(line).toBeDefined();
      const script = `byok-operator() { "${process.execPath}" "${cli}" "$@"; }\n${line!.trim().replace('<account-namespace>', account)}\nprintf %s "$GATEWAY_KEY"`;
      const { stdout: key } = await run('bash', ['-euo', 'pipefail', '-c', script], {
        encoding: 'utf8',
        env: { ...process.env, KUBECONFIG: testKubeconfigPath() },
      });
      expect(key).toMatch(/^sk-byok-gw-v1-[0-9a-f]{64}$/);
      const keys = JSON.parse(await kubectl('get', 'gatewayapikeys', '-n', account, '-o', 'json')) as {
        items: { spec: { hash: string } }[];
      };
      expect(keys.items.map((k) => k.spec.hash)).toEqual([createHash('sha256').update(key).digest('hex')]);
    } finally {
      await helm(['uninstall', release, '-n', ns]);
    }
  });
});
