#!/usr/bin/env node
// byok-operator command line: run the operator and/or API server, the local dev stack, offline validation,
// routing explanations and management keys.
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { loadKubeConfig } from '../kube/client.ts';
import { startApiServer } from '../api/server.ts';
import { createLogger } from '../operator/logger.ts';
import { startOperator } from '../operator/run.ts';
import { createManagementKey } from '../shared/management-keys.ts';
import { bundleKeyCommand, type BundleKeyAction } from './bundle-key.ts';
import { runDev } from './dev.ts';
import { explain } from './explain.ts';
import { validatePath } from './validate.ts';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

const USAGE = `usage: byok-operator <command> [options]

commands:
  run                 operator and API server in one process
  operator            the operator only (reconciler, compiler, leader election)
  api                 the REST API server only (/api/v1/byok)
  dev                 local control plane + CRDs + operator + API server + sample data
  validate <path>     check manifests offline against the CRD schemas and CEL rules (for GitOps CI)
  explain --config-dir <dir> --catalog <file> --request <json|file> [--json]
                      explain a routing decision from mounted routing config
  management-key create --namespace <ns> [--name <name>]
                      create a management key for an account and print it once
  bundle-key stage | activate <key-id> | rotate [--routing-namespace <ns>]
                      rotate the data key that seals credential bundles (stage, wait ~1 min, activate)

common options:
  --kubeconfig <path>         kubeconfig (default: $KUBECONFIG, in-cluster, ~/.kube/config)
  --routing-namespace <ns>    where compiled routing ConfigMaps go (default: $POD_NAMESPACE or byok-system)
  --namespaces <a,b>          only watch these namespaces (default: all)
  --http-port <port>          operator metrics/health port (default 8081)
  --api-port <port>           API server port (default 8080)
  --api-host <host>           API server bind address (default 0.0.0.0; dev: 127.0.0.1)
  --no-leader-election        run without a Lease (single replica only)
  --no-gitops-guard           let the API write credentials that Git manages
  --rate-limit <n>/<ms>ms     API requests per management key per window (default 600/10000ms; 0 disables)
  --max-credentials <n>       credentials per account unless its Account sets spec.limits.maxCredentials (default 1000)
  --orphan-grace-seconds <s>  API: delete unreferenced API-managed key Secrets older than this (default 600; 0 disables)
  --log-level <level>         pino level (default info)
`;

function fail(message: string): never {
  process.stderr.write(`byok-operator: ${message}\n\n${USAGE}`);
  process.exit(2);
}

function parseRateLimit(value: string): { max: number; timeWindowMs: number } | false {
  if (value === '0') return false;
  const m = /^(\d+)\/(\d+)ms$/.exec(value);
  if (!m || Number(m[1]) < 1 || Number(m[2]) < 1) fail(`invalid --rate-limit ${value}: use <requests>/<window>ms, e.g. 600/10000ms, or 0`);
  return { max: Number(m[1]), timeWindowMs: Number(m[2]) };
}

function waitForSignal(stop: () => Promise<void>): void {
  const handler = () => {
    void stop().then(() => process.exit(0), () => process.exit(1));
  };
  process.once('SIGTERM', handler);
  process.once('SIGINT', handler);
}

async function main(argv: string[]): Promise<void> {
  if (argv[0] === '--help' || argv[0] === '-h') argv = ['help'];
  const [command, ...rest] = argv;
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: {
      kubeconfig: { type: 'string' },
      'routing-namespace': { type: 'string' },
      namespaces: { type: 'string' },
      'http-port': { type: 'string' },
      'api-port': { type: 'string' },
      'api-host': { type: 'string' },
      'no-leader-election': { type: 'boolean', default: false },
      'no-gitops-guard': { type: 'boolean', default: false },
      'rate-limit': { type: 'string' },
      'max-credentials': { type: 'string' },
      'orphan-grace-seconds': { type: 'string' },
      'log-level': { type: 'string', default: 'info' },
      'exit-when-ready': { type: 'boolean', default: false },
      namespace: { type: 'string' },
      name: { type: 'string' },
      'config-dir': { type: 'string' },
      catalog: { type: 'string' },
      request: { type: 'string' },
      json: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (!command || values.help || command === 'help') {
    process.stdout.write(USAGE);
    return;
  }
  const logger = createLogger({ level: values['log-level'] });
  const port = (value: string | undefined, fallback: number) => {
    const n = value === undefined ? fallback : Number(value);
    if (!Number.isInteger(n) || n < 0 || n > 65535) fail(`invalid port ${value}`);
    return n;
  };
  const watchNamespaces = values.namespaces?.split(',').map((s) => s.trim()).filter(Boolean);
  const count = (flag: string, value: string | undefined): number | undefined => {
    if (value === undefined) return undefined;
    const n = Number(value);
    if (!/^\d+$/.test(value) || !Number.isSafeInteger(n)) fail(`invalid --${flag} ${value}: use a whole number`);
    return n;
  };
  const maxCredentials = count('max-credentials', values['max-credentials']);
  const orphanGrace = count('orphan-grace-seconds', values['orphan-grace-seconds']);
  const routingNamespace = values['routing-namespace'] ?? process.env.POD_NAMESPACE ?? 'byok-system';

  switch (command) {
    case 'run':
    case 'operator':
    case 'api': {
      const kubeConfig = loadKubeConfig(values.kubeconfig);
      const stops: (() => Promise<void>)[] = [];
      if (command !== 'api') {
        const operator = await startOperator({
          kubeConfig,
          routingNamespace,
          watchNamespaces,
          logger: logger.child({ component: 'operator' }),
          httpPort: port(values['http-port'], 8081),
          leaderElection: { enabled: !values['no-leader-election'], leaseNamespace: routingNamespace },
          ...(maxCredentials !== undefined ? { defaultMaxCredentials: maxCredentials } : {}),
        });
        stops.push(() => operator.stop());
      }
      if (command !== 'operator') {
        const api = await startApiServer({
          kubeConfig,
          host: values['api-host'] ?? '0.0.0.0',
          port: port(values['api-port'], 8080),
          logger: logger.child({ component: 'api' }),
          gitopsGuard: !values['no-gitops-guard'],
          ...(values['rate-limit'] !== undefined ? { rateLimit: parseRateLimit(values['rate-limit']) } : {}),
          ...(maxCredentials !== undefined ? { defaultMaxCredentials: maxCredentials } : {}),
          ...(orphanGrace !== undefined ? { orphanGraceMs: orphanGrace === 0 ? false : orphanGrace * 1000 } : {}),
          watchNamespaces,
        });
        logger.info({ url: api.url }, 'API server listening');
        stops.push(() => api.close());
      }
      waitForSignal(async () => {
        for (const stop of stops.reverse()) await stop();
      });
      return;
    }
    case 'dev':
      await runDev({ repoRoot, apiPort: port(values['api-port'], 0), logger: createLogger({ level: values['log-level'] === 'info' ? 'warn' : values['log-level'] }), exitWhenReady: values['exit-when-ready'] });
      return;
    case 'validate': {
      const path = positionals[0] ?? fail('validate needs a file or folder');
      const report = validatePath(path);
      for (const p of report.problems) process.stdout.write(`${p}\n`);
      process.stdout.write(`${report.checked} byok.gateway.dev resources checked, ${report.problems.length} problems\n`);
      process.exitCode = report.problems.length > 0 ? 1 : 0;
      return;
    }
    case 'explain': {
      const configDir = values['config-dir'] ?? fail('explain needs --config-dir (the mounted routing config)');
      const catalog = values.catalog ?? fail('explain needs --catalog <file.json> (shared endpoints per model)');
      const request = values.request ?? fail('explain needs --request <json|file.json>');
      process.stdout.write(explain({ configDir, catalogFile: catalog, request, json: values.json }));
      return;
    }
    case 'management-key': {
      if (positionals[0] !== 'create') fail('usage: management-key create --namespace <ns> [--name <name>]');
      const namespace = values.namespace ?? fail('management-key create needs --namespace');
      const { key, secretName } = await createManagementKey(loadKubeConfig(values.kubeconfig), namespace, values.name ? { name: values.name } : {});
      process.stderr.write(`created Secret ${namespace}/${secretName} (it holds only the key's SHA-256). The key is shown once:\n`);
      process.stdout.write(`${key}\n`);
      return;
    }
    case 'bundle-key': {
      const action = positionals[0];
      const request: BundleKeyAction =
        action === 'stage' || action === 'rotate'
          ? { action }
          : action === 'activate' && positionals[1]
            ? { action, keyId: positionals[1] }
            : fail('usage: bundle-key stage | activate <key-id> | rotate');
      const keyId = await bundleKeyCommand(loadKubeConfig(values.kubeconfig), routingNamespace, request);
      process.stderr.write(`${action === 'stage' ? 'staged' : action === 'rotate' ? 'added and activated' : 'activated'} bundle key in ${routingNamespace}:\n`);
      process.stdout.write(`${keyId}\n`);
      return;
    }
    case 'version':
      process.stdout.write(`${(JSON.parse(readFileSync(resolve(repoRoot, 'package.json'), 'utf8')) as { version: string }).version}\n`);
      return;
    default:
      fail(`unknown command ${command}`);
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`byok-operator: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
