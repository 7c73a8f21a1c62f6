#!/usr/bin/env node
// byok-operator command line: run the operator and/or API server, the local dev stack, offline validation,
// routing explanations and management keys.
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, type ParseArgsOptionsConfig } from 'node:util';
import { Kubeconfig, loadKubeConfig } from '../kube/kubeconfig.ts';
import { createLogger } from '../operator/logger.ts';
import type { GatewayStatusConfig } from '../operator/health-status.ts';
import type { BundleKeyAction } from './bundle-key.ts';
import type { OutputFormat } from './validate.ts';
import { hardenPrototypes } from './harden.ts';
import { parseEgressAllowList, type EgressAllowList } from '../domain/egress.ts';
// Each subcommand imports its own module graph when it runs: the operator process then never loads the
// gateway's cloud SDKs or the dev stack's @kubernetes/client-node, which cost tens of MB of RSS (issue 11).

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** The one catalog (src/cli/catalog.ts): the default of explain, the gateway and the dev stack. */
const DEFAULT_CATALOG = 'config/catalog/catalog.json';

const USAGE = `usage: byok-operator <command> [options]

commands:
  run                 operator and API server in one process
  operator            the operator only (reconciler, compiler, leader election)
  api                 the API server only: REST /api/v1/byok (--api-port) and the aggregated
                      Kubernetes API api.byok.gateway.dev/v1 over HTTPS (--aggregated-port), one process
  dev                 local control plane + CRDs + operator + API server + sample data; the ledger on a loopback
                      redis-server with AOF when installed (--embedded-ledger keeps the gateway's own)
  validate <path|->   check manifests offline against the CRD schemas and CEL rules (for GitOps CI)
                      [-o text|json|junit|sarif|github] [--strict: also fail on warnings, e.g. nothing checked
                      or a referenced Secret not among the files]; exit 0 clean, 1 problems, 2 usage
  explain --config-dir <dir> --request <json|file> [--catalog <file>] [--json] [--cluster | --manifests <path>]
                      explain a routing decision from mounted routing config (default catalog:
                      config/catalog/catalog.json, the one the gateway and the dev stack use; the first
                      line names it); --cluster / --manifests also say why credentials are not
                      compiled at all; exits 1 when no attempt remains
  management-key create --namespace <ns> [--name <name>]
                      create a management key for an account and print it once
  gateway --config-dir <dir> --bundle-dir <dir> --key-dir <dir> [--catalog <file>] [--shared-keys-dir <dir>]
          [--port 8080] [--ops-port 8081] [--attempt-timeout-ms 60000] [--region <r>] [--upstream-ca <pem>]
                      (health, readiness, metrics and the operator's status endpoint are on --ops-port only)
                      the OpenAI-compatible reference gateway on the mounted routing config (docs/gateway.md);
                      default catalog: config/catalog/catalog.json
  bundle-key stage | activate <key-id> | rotate [--routing-namespace <ns>]
                      rotate the data key that seals credential bundles (stage, wait ~1 min, activate)

options (each command accepts only the ones it uses; an option of another command is an error):
  --kubeconfig <path>         kubeconfig (default: $KUBECONFIG, in-cluster, ~/.kube/config; management-key,
                              bundle-key and explain --cluster then fall back to a running dev stack's, from
                              .dev/connection.json, and print which one they used)
  --routing-namespace <ns>    where compiled routing ConfigMaps go (default: $POD_NAMESPACE or byok-system)
  --namespaces <a,b>          only watch these namespaces (default: all)
  --http-port <port>          operator metrics/health port (default 8081)
  --api-port <port>           API server port (default 8080)
  --api-host <host>           API server bind address (default 0.0.0.0; dev: 127.0.0.1)
  --aggregated-port <port>    HTTPS port of the aggregated API (default 8443; 0 picks one)
  --aggregated-tls-dir <dir>  tls.crt and tls.key of the aggregated API's serving certificate
                              (default: a self-signed one, for development only)
  --no-aggregated             serve only the REST door
  --aggregated-accept-tokens  let clients send bearer tokens straight to the aggregated port (TokenReview); off by
                              default: it is reached through the kube-apiserver (docs/aggregated-api.md)
  --no-leader-election        run without a Lease (single replica only)
  --no-gitops-guard           let the API write credentials that Git manages
  --rate-limit <n>/<ms>ms     API requests per management key per window (default 600/10000ms; 0 disables)
  --gateway-routing-slots <n>, --gateway-bundle-slots <n>
                              shard/bundle slots gateway pods mount; the operator warns when the config needs more
  --max-credentials <n>       credentials per account unless its Account sets spec.limits.maxCredentials (default 1000)
  --egress-allow <cidr|ip|host>  (repeatable, or comma-separated) let tenant URLs (Azure endpoint_url, Vertex
                              token_uri) reach these despite the egress policy; give the same list to the
                              operator, the API and the gateway (docs/gateway.md, "Egress policy"). A CIDR is the
                              network address and a plain decimal prefix (10.0.0.0/8; not 10.1.2.3/8, 10.0.0.0/,
                              10.0.0.0/08); IPv4 in dotted decimal; anything else is refused
  --orphan-grace-seconds <s>  API: delete unreferenced API-managed key Secrets older than this (default 600; 0 disables)
  --log-level <level>         pino level (default info)
  --ledger-redis-url <url>    the gateways' shared spend ledger (Redis): the gateway meters into it; the operator
                              leader publishes spend into Account, Workspace and Guardrail status (docs/ledger.md)
  --ledger-snapshot <file>    gateway without Redis: where the embedded ledger keeps the month across restarts
  --status-token-file <file>  shared token of GET /byok/status: the gateway serves it, the operator leader pulls it
                              into UpstreamHealthy, lastUsedTime and Delivered (docs/operator.md)
  --gateway-service <ns>/<name>[:<port>]
                              operator: find gateway pods through this Service's EndpointSlices (port name or number)
  --gateway-status-urls <a,b> operator: fixed gateway base URLs instead (dev)
`;

function fail(message: string): never {
  process.stderr.write(`byok-operator: ${message}\n\n${USAGE}`);
  process.exit(2);
}

/**
 * The kubeconfig of a user-facing command: kubectl's order, then a running `npm run dev` stack's (no ~/.kube needed).
 * Says on stderr which one it used.
 */
async function userKubeConfig(explicit: string | undefined): Promise<Kubeconfig> {
  const { chooseKubeconfig } = await import('./kubeconfig-choice.ts');
  const choice = chooseKubeconfig({ explicit, env: process.env, devConnectionFile: resolve(repoRoot, process.env.BYOK_DEV_DIR ?? '.dev', 'connection.json') });
  process.stderr.write(`kubeconfig: ${choice.path ?? ''}${choice.path ? ' ' : ''}(${choice.source})\n`);
  return Kubeconfig.load(choice.path);
}

function readToken(file: string): string {
  const token = readFileSync(file, 'utf8').trim();
  if (token.length < 16) fail(`the status token in ${file} is shorter than 16 characters`);
  return token;
}

/** --gateway-service ns/name[:port] or --gateway-status-urls, with --status-token-file: the health writer's config. */
function gatewayStatusOption(tokenFile: string | undefined, service: string | undefined, urls: string | undefined): { gatewayStatus?: GatewayStatusConfig } {
  if (!service && !urls) return {};
  if (!tokenFile) fail('--gateway-service / --gateway-status-urls need --status-token-file (the token the gateways expect)');
  const token = readToken(tokenFile);
  if (urls) return { gatewayStatus: { token, urls: urls.split(',').map((u) => u.trim()).filter(Boolean) } };
  const m = /^([a-z0-9-]+)\/([a-z0-9-]+)(?::([A-Za-z0-9-]+))?$/.exec(service!);
  if (!m) fail(`--gateway-service must be <namespace>/<service>[:<port>], got ${service}`);
  const portRef = m[3] === undefined ? undefined : /^\d+$/.test(m[3]) ? Number(m[3]) : m[3];
  return { gatewayStatus: { token, service: { namespace: m[1]!, name: m[2]!, ...(portRef !== undefined ? { port: portRef } : {}) } } };
}

function parseRateLimit(value: string): { max: number; timeWindowMs: number } | false {
  if (value === '0') return false;
  const m = /^(\d+)\/(\d+)ms$/.exec(value);
  if (!m || Number(m[1]) < 1 || Number(m[2]) < 1) fail(`invalid --rate-limit ${value}: use <requests>/<window>ms, e.g. 600/10000ms, or 0`);
  return { max: Number(m[1]), timeWindowMs: Number(m[2]) };
}

function waitForSignal(stop: () => Promise<void>): void {
  hardenPrototypes();
  const handler = () => {
    void stop().then(() => process.exit(0), () => process.exit(1));
  };
  process.once('SIGTERM', handler);
  process.once('SIGINT', handler);
}

// One options type per command: each command parses only its own flags, so a flag another command takes is an
// error here rather than silently ignored, and each command's values are typed by what it accepts.
const COMMON_OPTIONS = {
  'log-level': { type: 'string', default: 'info' },
  help: { type: 'boolean', short: 'h', default: false },
} as const satisfies ParseArgsOptionsConfig;

/** run, operator and api: one process family, one set of flags (a chart passes the same args to each). */
const SERVE_OPTIONS = {
  ...COMMON_OPTIONS,
  kubeconfig: { type: 'string' },
  'routing-namespace': { type: 'string' },
  namespaces: { type: 'string' },
  'http-port': { type: 'string' },
  'api-port': { type: 'string' },
  'api-host': { type: 'string' },
  'no-leader-election': { type: 'boolean', default: false },
  'aggregated-port': { type: 'string' },
  'aggregated-tls-dir': { type: 'string' },
  'no-aggregated': { type: 'boolean', default: false },
  'aggregated-accept-tokens': { type: 'boolean', default: false },
  'no-gitops-guard': { type: 'boolean', default: false },
  'rate-limit': { type: 'string' },
  'max-credentials': { type: 'string' },
  'orphan-grace-seconds': { type: 'string' },
  'ledger-redis-url': { type: 'string' },
  'status-token-file': { type: 'string' },
  'egress-allow': { type: 'string', multiple: true },
  'gateway-service': { type: 'string' },
  'gateway-status-urls': { type: 'string' },
  'gateway-routing-slots': { type: 'string' },
  'gateway-bundle-slots': { type: 'string' },
} as const satisfies ParseArgsOptionsConfig;

const DEV_OPTIONS = {
  ...COMMON_OPTIONS,
  'api-port': { type: 'string' },
  'exit-when-ready': { type: 'boolean', default: false },
  'embedded-ledger': { type: 'boolean', default: false },
} as const satisfies ParseArgsOptionsConfig;

const GATEWAY_OPTIONS = {
  ...COMMON_OPTIONS,
  'config-dir': { type: 'string' },
  'bundle-dir': { type: 'string' },
  'key-dir': { type: 'string' },
  catalog: { type: 'string' },
  'shared-keys-dir': { type: 'string' },
  port: { type: 'string' },
  'ops-port': { type: 'string' },
  'attempt-timeout-ms': { type: 'string' },
  region: { type: 'string' },
  'upstream-ca': { type: 'string' },
  'ledger-redis-url': { type: 'string' },
  'ledger-snapshot': { type: 'string' },
  'status-token-file': { type: 'string' },
  'egress-allow': { type: 'string', multiple: true },
} as const satisfies ParseArgsOptionsConfig;

const VALIDATE_OPTIONS = {
  ...COMMON_OPTIONS,
  output: { type: 'string', short: 'o' },
  strict: { type: 'boolean', default: false },
} as const satisfies ParseArgsOptionsConfig;

const EXPLAIN_OPTIONS = {
  ...COMMON_OPTIONS,
  kubeconfig: { type: 'string' },
  'config-dir': { type: 'string' },
  catalog: { type: 'string' },
  request: { type: 'string' },
  cluster: { type: 'boolean', default: false },
  manifests: { type: 'string' },
  json: { type: 'boolean', default: false },
} as const satisfies ParseArgsOptionsConfig;

const MANAGEMENT_KEY_OPTIONS = {
  ...COMMON_OPTIONS,
  kubeconfig: { type: 'string' },
  namespace: { type: 'string' },
  name: { type: 'string' },
} as const satisfies ParseArgsOptionsConfig;

const BUNDLE_KEY_OPTIONS = {
  ...COMMON_OPTIONS,
  kubeconfig: { type: 'string' },
  'routing-namespace': { type: 'string' },
} as const satisfies ParseArgsOptionsConfig;

function parseOptions<const O extends ParseArgsOptionsConfig>(args: string[], options: O, positionals: boolean) {
  const parsed = parseArgs({ args, options, allowPositionals: positionals, strict: true });
  if ((parsed.values as { help?: boolean }).help) {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  return parsed;
}

function port(value: string | undefined, fallback: number): number {
  const n = value === undefined ? fallback : Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) fail(`invalid port ${value}`);
  return n;
}

function slots(value: string | undefined): number {
  const n = value === undefined ? Number.MAX_SAFE_INTEGER : Number(value);
  if (!Number.isInteger(n) || n < 0) fail(`invalid slot count ${value}`);
  return n;
}

function count(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n)) fail(`invalid --${flag} ${value}: use a whole number`);
  return n;
}

function egressOption(values: string[] | undefined): EgressAllowList | undefined {
  try {
    return values ? parseEgressAllowList(values) : undefined;
  } catch (err) {
    fail(err instanceof Error ? err.message : String(err));
  }
}

/** The dev PKI is loaded only here, never on the production path (--aggregated-tls-dir). */
async function devServingCertificate(): Promise<{ certPem: string; keyPem: string }> {
  const [{ createServingCertificate }, { DEFAULT_SERVICE }] = await Promise.all([import('../controlplane/pki.ts'), import('../aggregated/register.ts')]);
  return createServingCertificate(DEFAULT_SERVICE);
}

const routingNamespaceOf = (value: string | undefined): string => value ?? process.env.POD_NAMESPACE ?? 'byok-system';

async function main(argv: string[]): Promise<void> {
  if (argv[0] === '--help' || argv[0] === '-h') argv = ['help'];
  if (argv[0] === '--version') argv = ['version'];
  const [command, ...rest] = argv;
  if (!command || command === 'help') {
    process.stdout.write(USAGE);
    return;
  }
  switch (command) {
    case 'run':
    case 'operator':
    case 'api': {
      const { values } = parseOptions(rest, SERVE_OPTIONS, false);
      const logger = createLogger({ level: values['log-level'] });
      const routingNamespace = routingNamespaceOf(values['routing-namespace']);
      const watchNamespaces = values.namespaces?.split(',').map((s) => s.trim()).filter(Boolean);
      const maxCredentials = count('max-credentials', values['max-credentials']);
      const orphanGrace = count('orphan-grace-seconds', values['orphan-grace-seconds']);
      const egress = egressOption(values['egress-allow']);
      const kubeConfig = loadKubeConfig(values.kubeconfig);
      const stops: (() => Promise<void>)[] = [];
      if (command !== 'api') {
        const { startOperator } = await import('../operator/run.ts');
        const operator = await startOperator({
          kubeConfig,
          routingNamespace,
          watchNamespaces,
          logger: logger.child({ component: 'operator' }),
          httpPort: port(values['http-port'], 8081),
          leaderElection: { enabled: !values['no-leader-election'], leaseNamespace: routingNamespace },
          ...(values['ledger-redis-url'] ? { spendStatus: { redisUrl: values['ledger-redis-url'] } } : {}),
          ...gatewayStatusOption(values['status-token-file'], values['gateway-service'], values['gateway-status-urls']),
          ...(values['gateway-routing-slots'] !== undefined || values['gateway-bundle-slots'] !== undefined
            ? { gatewaySlots: { routing: slots(values['gateway-routing-slots']), bundles: slots(values['gateway-bundle-slots']) } }
            : {}),
          ...(maxCredentials !== undefined ? { defaultMaxCredentials: maxCredentials } : {}),
          ...(egress ? { egress } : {}),
        });
        stops.push(() => operator.stop());
      }
      if (command !== 'operator') {
        const { startApiServer } = await import('../api/server.ts');
        const api = await startApiServer({
          kubeConfig,
          host: values['api-host'] ?? '0.0.0.0',
          port: port(values['api-port'], 8080),
          logger: logger.child({ component: 'api' }),
          gitopsGuard: !values['no-gitops-guard'],
          ...(values['rate-limit'] !== undefined ? { rateLimit: parseRateLimit(values['rate-limit']) } : {}),
          ...(maxCredentials !== undefined ? { defaultMaxCredentials: maxCredentials } : {}),
          ...(orphanGrace !== undefined ? { orphanGraceMs: orphanGrace === 0 ? false : orphanGrace * 1000 } : {}),
          ...(egress ? { egress } : {}),
          watchNamespaces,
        });
        logger.info({ url: api.url }, 'API server listening');
        stops.push(() => api.close());
        if (!values['no-aggregated']) {
          const { startAggregatedServer } = await import('../aggregated/server.ts');
          const tlsDir = values['aggregated-tls-dir'];
          const tls = tlsDir
            ? { certPem: readFileSync(resolve(tlsDir, 'tls.crt'), 'utf8'), keyPem: readFileSync(resolve(tlsDir, 'tls.key'), 'utf8') }
            : await devServingCertificate();
          if (!tlsDir) logger.warn('aggregated API: no --aggregated-tls-dir, serving a self-signed certificate (development only)');
          const aggregated = await startAggregatedServer({
            kubeConfig,
            state: api.state,
            service: api.service,
            ready: api.ready,
            tls,
            logger: logger.child({ component: 'aggregated-api' }),
            host: values['api-host'] ?? '0.0.0.0',
            port: port(values['aggregated-port'], 8443),
            acceptBearerTokens: values['aggregated-accept-tokens'],
          });
          stops.unshift(() => aggregated.close());
        }
      }
      waitForSignal(async () => {
        for (const stop of stops.reverse()) await stop();
      });
      return;
    }
    case 'dev': {
      const { values } = parseOptions(rest, DEV_OPTIONS, false);
      const { runDev } = await import('./dev.ts');
      await runDev({
        repoRoot,
        apiPort: port(values['api-port'], 0),
        logger: createLogger({ level: values['log-level'] === 'info' ? 'warn' : values['log-level'] }),
        exitWhenReady: values['exit-when-ready'],
        embeddedLedger: values['embedded-ledger'],
      });
      return;
    }
    case 'gateway': {
      const { values } = parseOptions(rest, GATEWAY_OPTIONS, false);
      const logger = createLogger({ level: values['log-level'] });
      const egress = egressOption(values['egress-allow']);
      const { createGatewayMetrics, directAccessLog, startGateway } = await import('../gateway/index.ts');
      const { openGatewaySpendGate } = await import('./gateway-ledger.ts');
      const timeout = Number(values['attempt-timeout-ms'] ?? 60_000);
      if (!Number.isInteger(timeout) || timeout < 1) fail(`invalid --attempt-timeout-ms ${values['attempt-timeout-ms']}`);
      // No path redaction and synchronous stdout on the request path: see createLogger.
      const gatewayLog = createLogger({ level: values['log-level'], redact: false, syncStdout: true }).child({ component: 'gateway' });
      const catalogFile = resolve(values.catalog ?? resolve(repoRoot, DEFAULT_CATALOG));
      const metrics = createGatewayMetrics();
      const spendGate = await openGatewaySpendGate({
        ...(values['ledger-redis-url'] ? { redisUrl: values['ledger-redis-url'] } : {}),
        ...(values['ledger-snapshot'] ? { snapshotPath: values['ledger-snapshot'] } : {}),
        registry: metrics.registry,
        logger: gatewayLog,
      });
      const gateway = await startGateway({
        configDir: values['config-dir'] ?? fail('gateway needs --config-dir (the projected routing ConfigMaps)'),
        bundleDir: values['bundle-dir'] ?? fail('gateway needs --bundle-dir (the projected bundle Secrets)'),
        keyDir: values['key-dir'] ?? fail('gateway needs --key-dir (the bundle key Secret)'),
        catalogFile,
        ...(values['shared-keys-dir'] ? { sharedKeysDir: values['shared-keys-dir'] } : {}),
        ...(values.region ? { region: values.region } : {}),
        ...(values['upstream-ca'] ? { upstreamCaPem: readFileSync(values['upstream-ca'], 'utf8') } : {}),
        attemptTimeoutMs: timeout,
        ...(values['status-token-file'] ? { statusToken: readToken(values['status-token-file']) } : {}),
        port: port(values.port, 8080),
        opsPort: port(values['ops-port'], 8081),
        logger: gatewayLog,
        // createLogger's line shape: the per-request line is written without pino's serialisation (access-log.ts).
        accessLog: directAccessLog(gatewayLog),
        metrics,
        spendGate,
        ...(egress ? { egress } : {}),
      });
      logger.info({ url: gateway.url, opsUrl: gateway.opsUrl, catalog: catalogFile }, 'gateway listening');
      waitForSignal(async () => {
        await gateway.close();
        await spendGate.close();
      });
      return;
    }
    case 'validate': {
      const { values, positionals } = parseOptions(rest, VALIDATE_OPTIONS, true);
      const { exitCode, formatReport, OUTPUT_FORMATS, validatePath } = await import('./validate.ts');
      const path = positionals[0] ?? fail('validate needs a file or folder (or - for stdin)');
      const format = values.output ?? 'text';
      if (!(OUTPUT_FORMATS as readonly string[]).includes(format)) fail(`invalid --output ${format}: use ${OUTPUT_FORMATS.join(', ')}`);
      const report = validatePath(path);
      process.stdout.write(formatReport(report, format as OutputFormat));
      process.exitCode = exitCode(report, values.strict);
      return;
    }
    case 'explain': {
      const { values } = parseOptions(rest, EXPLAIN_OPTIONS, false);
      const { credentialsFromCluster, credentialsFromManifests, explain } = await import('./explain.ts');
      const configDir = values['config-dir'] ?? fail('explain needs --config-dir (the mounted routing config)');
      const request = values.request ?? fail('explain needs --request <json|file.json>');
      const credentials = values.cluster ? credentialsFromCluster(await userKubeConfig(values.kubeconfig)) : values.manifests ? credentialsFromManifests(values.manifests) : undefined;
      const result = await explain({
        configDir,
        catalogFile: resolve(values.catalog ?? resolve(repoRoot, DEFAULT_CATALOG)),
        request,
        json: values.json,
        ...(credentials ? { credentials } : {}),
      });
      process.stdout.write(result.output);
      process.exitCode = result.exitCode;
      return;
    }
    case 'management-key': {
      const { values, positionals } = parseOptions(rest, MANAGEMENT_KEY_OPTIONS, true);
      if (positionals[0] !== 'create') fail('usage: management-key create --namespace <ns> [--name <name>]');
      const namespace = values.namespace ?? fail('management-key create needs --namespace');
      const { createManagementKey } = await import('../service/management-keys.ts');
      const { key, secretName } = await createManagementKey(await userKubeConfig(values.kubeconfig), namespace, values.name ? { name: values.name } : {});
      process.stderr.write(`created Secret ${namespace}/${secretName} (it holds only the key's SHA-256). The key is shown once:\n`);
      process.stdout.write(`${key}\n`);
      return;
    }
    case 'bundle-key': {
      const { values, positionals } = parseOptions(rest, BUNDLE_KEY_OPTIONS, true);
      const routingNamespace = routingNamespaceOf(values['routing-namespace']);
      const action = positionals[0];
      const request: BundleKeyAction =
        action === 'stage' || action === 'rotate'
          ? { action }
          : action === 'activate' && positionals[1]
            ? { action, keyId: positionals[1] }
            : fail('usage: bundle-key stage | activate <key-id> | rotate');
      const { bundleKeyCommand } = await import('./bundle-key.ts');
      const keyId = await bundleKeyCommand(await userKubeConfig(values.kubeconfig), routingNamespace, request);
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
