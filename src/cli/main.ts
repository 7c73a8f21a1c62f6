#!/usr/bin/env node
// byok-operator command line: run the operator and/or API server, the local dev stack, offline validation,
// routing explanations and management keys.
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ParseArgsOptionsConfig, parseArgs } from 'node:util';
import type { Logger } from 'pino';
import { type EgressAllowList, parseEgressAllowList } from '../domain/egress.ts';
// Loaded by the commands that talk to a cluster: the gateway's process never parses a kubeconfig (nor loads yaml).
import type { Kubeconfig, loadKubeConfig } from '../kube/kubeconfig.ts';
import type { DeliveryStreamConfig } from '../operator/delivery/server.ts';
import type { GatewayStatusConfig } from '../operator/health/health-status-writer.ts';
import { createLogger } from '../operator/logger.ts';
import type { BundleKeyAction } from './bundle-key.ts';
import { hardenPrototypes } from './harden.ts';
import { COMMAND_HELP, EXIT, USAGE } from './help.ts';
import type { OutputFormat } from './validate.ts';

// Each subcommand imports its own module graph when it runs: the operator process then never loads the
// gateway's cloud SDKs or the dev stack's @kubernetes/client-node, which cost tens of MB of RSS.

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** The one catalog (src/cli/catalog.ts): the default of explain, the gateway and the dev stack. */
const DEFAULT_CATALOG = 'config/catalog/catalog.json';

/** The help page of the command being run (the overview before one is known): what fail() and --help print. */
let helpPage = USAGE;

/** A usage error: the message, then the command's own page, on stderr; the exit status its page names. */
function fail(message: string): never {
  process.stderr.write(`byok-operator: ${message}\n\n${helpPage}`);
  process.exit(EXIT.usage);
}

/**
 * The kubeconfig of a user-facing command: kubectl's order, then a running `npm run dev` stack's (no ~/.kube needed).
 * Says on stderr which one it used.
 */
async function userKubeConfig(explicit: string | undefined): Promise<Kubeconfig> {
  const { chooseKubeconfig } = await import('./kubeconfig-choice.ts');
  const { Kubeconfig } = await import('../kube/kubeconfig.ts');
  const choice = chooseKubeconfig({
    explicit,
    env: process.env,
    devConnectionFile: resolve(repoRoot, process.env.BYOK_DEV_DIR ?? '.dev', 'connection.json'),
  });
  process.stderr.write(`kubeconfig: ${choice.path ?? ''}${choice.path ? ' ' : ''}(${choice.source})\n`);
  return Kubeconfig.load(choice.path);
}

function readToken(file: string): string {
  const token = readFileSync(file, 'utf8').trim();
  if (token.length < 16) fail(`the status token in ${file} is shorter than 16 characters`);
  return token;
}

/** --delivery-stream-port with the gateway ServiceAccounts it serves: the operator's side of the delivery stream. */
function deliveryStreamOption(
  portValue: string | undefined,
  accounts: string | undefined,
  audience: string | undefined,
): { deliveryStream?: DeliveryStreamConfig } {
  if (portValue === undefined) {
    if (accounts !== undefined || audience !== undefined)
      fail('--delivery-stream-service-accounts and --delivery-stream-audience need --delivery-stream-port');
    return {};
  }
  const serviceAccounts = (accounts ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (serviceAccounts.length === 0)
    fail(
      '--delivery-stream-port needs --delivery-stream-service-accounts <namespace>/<name>[,...] (the gateway ServiceAccounts it serves)',
    );
  for (const sa of serviceAccounts)
    if (!/^[a-z0-9][-a-z0-9.]*\/[a-z0-9][-a-z0-9.]*$/.test(sa))
      fail(`--delivery-stream-service-accounts: ${sa} is not <namespace>/<name>`);
  return { deliveryStream: { port: port(portValue, 0), serviceAccounts, ...(audience ? { audience } : {}) } };
}

/** --delivery-stream <url> with its token file: the gateway's side. */
function gatewayDeliveryOption(
  url: string | undefined,
  tokenFile: string | undefined,
  dir: string | undefined,
): { deliveryStream?: { url: string; tokenFile: string; dir: string } } {
  if (url === undefined) {
    if (tokenFile !== undefined || dir !== undefined)
      fail('--delivery-stream-token-file and --delivery-stream-dir need --delivery-stream');
    return {};
  }
  if (!/^https?:\/\/[^/]+\/?$/.test(url)) fail(`--delivery-stream must be http(s)://<host>:<port>, got ${url}`);
  if (!tokenFile) fail('--delivery-stream needs --delivery-stream-token-file (the projected ServiceAccount token)');
  return { deliveryStream: { url, tokenFile, dir: dir ?? join(tmpdir(), `byok-delivery-${process.pid}`) } };
}

/** --gateway-service ns/name[:port] or --gateway-status-urls, with --status-token-file: the health writer's config. */
function gatewayStatusOption(
  tokenFile: string | undefined,
  service: string | undefined,
  urls: string | undefined,
): { gatewayStatus?: GatewayStatusConfig } {
  if (!service && !urls) return {};
  if (!tokenFile)
    fail('--gateway-service / --gateway-status-urls need --status-token-file (the token the gateways expect)');
  const token = readToken(tokenFile);
  if (urls)
    return {
      gatewayStatus: {
        token,
        urls: urls
          .split(',')
          .map((u) => u.trim())
          .filter(Boolean),
      },
    };
  const m = /^([a-z0-9-]+)\/([a-z0-9-]+)(?::([A-Za-z0-9-]+))?$/.exec(service!);
  if (!m) fail(`--gateway-service must be <namespace>/<service>[:<port>], got ${service}`);
  const portRef = m[3] === undefined ? undefined : /^\d+$/.test(m[3]) ? Number(m[3]) : m[3];
  return {
    gatewayStatus: {
      token,
      service: { namespace: m[1]!, name: m[2]!, ...(portRef !== undefined ? { port: portRef } : {}) },
    },
  };
}

function parseRateLimit(value: string): { max: number; timeWindowMs: number } | false {
  if (value === '0') return false;
  const m = /^(\d+)\/(\d+)ms$/.exec(value);
  if (!m || Number(m[1]) < 1 || Number(m[2]) < 1)
    fail(`invalid --rate-limit ${value}: use <requests>/<window>ms, e.g. 600/10000ms, or 0`);
  return { max: Number(m[1]), timeWindowMs: Number(m[2]) };
}

function waitForSignal(stop: () => Promise<void>): void {
  hardenPrototypes();
  const handler = () => {
    void stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
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
  'export-target': { type: 'string' },
  'export-namespace': { type: 'string' },
  'export-gateway': { type: 'string' },
  'delivery-stream-port': { type: 'string' },
  'delivery-stream-service-accounts': { type: 'string' },
  'delivery-stream-audience': { type: 'string' },
  'export-allow-tenant-hosts': { type: 'boolean', default: false },
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
  'ledger-journal': { type: 'string' },
  'ledger-journal-fsync': { type: 'string' },
  'status-token-file': { type: 'string' },
  'egress-allow': { type: 'string', multiple: true },
  'delivery-stream': { type: 'string' },
  'delivery-stream-token-file': { type: 'string' },
  'delivery-stream-dir': { type: 'string' },
  'restart-without-config-after': { type: 'string' },
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
  'shared-keys-dir': { type: 'string' },
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

const GATEWAY_KEY_OPTIONS = {
  ...COMMON_OPTIONS,
  kubeconfig: { type: 'string' },
  namespace: { type: 'string' },
  workspace: { type: 'string' },
  guardrail: { type: 'string' },
  name: { type: 'string' },
  expires: { type: 'string' },
  models: { type: 'string' },
  rpm: { type: 'string' },
  tpm: { type: 'string' },
  'max-in-flight': { type: 'string' },
  overlap: { type: 'string' },
} as const satisfies ParseArgsOptionsConfig;

const BUNDLE_KEY_OPTIONS = {
  ...COMMON_OPTIONS,
  kubeconfig: { type: 'string' },
  'routing-namespace': { type: 'string' },
} as const satisfies ParseArgsOptionsConfig;

function parseOptions<const O extends ParseArgsOptionsConfig>(args: string[], options: O, positionals: boolean) {
  // --help wins over anything else on the line, even an option the command does not take.
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write(helpPage);
    process.exit(EXIT.ok);
  }
  try {
    return parseArgs({ args, options, allowPositionals: positionals, strict: true });
  } catch (err) {
    // An unknown option or a missing value is a usage error (2), not a failure (1).
    fail(err instanceof Error ? err.message : String(err));
  }
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
  const [{ createServingCertificate }, { DEFAULT_SERVICE }] = await Promise.all([
    import('../controlplane/pki.ts'),
    import('../aggregated/register.ts'),
  ]);
  return createServingCertificate(DEFAULT_SERVICE);
}

/**
 * The two API doors of `api` and `run` over one service runtime (informers, write path, orphan sweep). The runtime
 * syncs in the background: the doors listen at once (liveness) and are ready once its caches have synced.
 */
async function serveApiDoors(
  values: ReturnType<typeof parseOptions<typeof SERVE_OPTIONS>>['values'],
  common: {
    kubeConfig: ReturnType<typeof loadKubeConfig>;
    logger: ReturnType<typeof createLogger>;
    watchNamespaces: string[] | undefined;
    maxCredentials: number | undefined;
    orphanGrace: number | undefined;
    egress: EgressAllowList | undefined;
  },
  stops: (() => Promise<void>)[],
): Promise<void> {
  const { kubeConfig, logger, watchNamespaces, maxCredentials, orphanGrace, egress } = common;
  const { startServiceRuntime } = await import('../service/runtime.ts');
  const runtime = startServiceRuntime({
    kubeConfig,
    logger: logger.child({ component: 'api' }),
    gitopsGuard: !values['no-gitops-guard'],
    ...(maxCredentials !== undefined ? { defaultMaxCredentials: maxCredentials } : {}),
    ...(orphanGrace !== undefined ? { orphanGraceMs: orphanGrace === 0 ? false : orphanGrace * 1000 } : {}),
    ...(egress ? { egress } : {}),
    ...(watchNamespaces ? { watchNamespaces } : {}),
  });
  const { startApiServer } = await import('../api/server.ts');
  const api = await startApiServer({
    runtime,
    host: values['api-host'] ?? '0.0.0.0',
    port: port(values['api-port'], 8080),
    ...(values['rate-limit'] !== undefined ? { rateLimit: parseRateLimit(values['rate-limit']) } : {}),
  });
  logger.info({ url: api.url }, 'API server listening');
  stops.push(() => api.close());
  if (!values['no-aggregated']) {
    const { startAggregatedServer } = await import('../aggregated/server.ts');
    const tlsDir = values['aggregated-tls-dir'];
    const tls = tlsDir
      ? {
          certPem: readFileSync(resolve(tlsDir, 'tls.crt'), 'utf8'),
          keyPem: readFileSync(resolve(tlsDir, 'tls.key'), 'utf8'),
        }
      : await devServingCertificate();
    if (!tlsDir)
      logger.warn('aggregated API: no --aggregated-tls-dir, serving a self-signed certificate (development only)');
    const aggregated = await startAggregatedServer({
      kubeConfig,
      runtime,
      tls,
      logger: logger.child({ component: 'aggregated-api' }),
      host: values['api-host'] ?? '0.0.0.0',
      port: port(values['aggregated-port'], 8443),
      acceptBearerTokens: values['aggregated-accept-tokens'],
    });
    stops.unshift(() => aggregated.close());
  }
  // Stopped after both doors (stops run in reverse).
  stops.unshift(() => runtime.close());
}

/** `--export-target` (with `--export-namespace`, `--export-gateway`): the operator's export controller (docs/export.md). */
async function exportOption(
  values: {
    'export-target'?: string;
    'export-namespace'?: string;
    'export-gateway'?: string;
    'export-allow-tenant-hosts'?: boolean;
  },
  routingNamespace: string,
): Promise<{ export?: import('../operator/export/controller.ts').ExportControllerConfig }> {
  const target = values['export-target'];
  if (target === undefined) {
    if (
      values['export-namespace'] !== undefined ||
      values['export-gateway'] !== undefined ||
      values['export-allow-tenant-hosts']
    )
      fail('--export-namespace, --export-gateway and --export-allow-tenant-hosts need --export-target');
    return {};
  }
  const { EXPORT_TARGETS } = await import('../export/index.ts');
  if (!(EXPORT_TARGETS as readonly string[]).includes(target))
    fail(`invalid --export-target ${target}: use ${EXPORT_TARGETS.join(' or ')}`);
  const gateway = /^(?:([a-z0-9-]+)\/)?([a-z0-9.-]+)$/.exec(values['export-gateway'] ?? 'byok-gateway');
  if (!gateway) fail(`--export-gateway must be [<namespace>/]<name>, got ${values['export-gateway']}`);
  const { loadCatalog } = await import('../gateway/catalog.ts');
  const catalog = loadCatalog(resolve(repoRoot, DEFAULT_CATALOG));
  return {
    export: {
      target: target as (typeof EXPORT_TARGETS)[number],
      namespace: values['export-namespace'] ?? routingNamespace,
      gateway: { name: gateway[2]!, ...(gateway[1] ? { namespace: gateway[1] } : {}) },
      ...(values['export-allow-tenant-hosts'] ? { allowTenantHosts: true } : {}),
      catalog: { catalog: catalog.catalog, upstream: (model, endpointId) => catalog.upstream(model, endpointId) },
    },
  };
}

const routingNamespaceOf = (value: string | undefined): string => value ?? process.env.POD_NAMESPACE ?? 'byok-system';

/** `management-key create`: the key on stdout, once; what was done on stderr. */
async function managementKeyCommand(rest: string[]): Promise<void> {
  const { values, positionals } = parseOptions(rest, MANAGEMENT_KEY_OPTIONS, true);
  if (positionals[0] !== 'create' || positionals.length > 1)
    fail('usage: management-key create --namespace <ns> [--name <name>]');
  const namespace = values.namespace ?? fail('management-key create needs --namespace');
  const { createManagementKey } = await import('../service/management-keys.ts');
  const { key, secretName } = await createManagementKey(
    await userKubeConfig(values.kubeconfig),
    namespace,
    values.name ? { name: values.name } : {},
  );
  process.stderr.write(
    `created Secret ${namespace}/${secretName} (it holds only the key's SHA-256). The key is shown once:\n`,
  );
  process.stdout.write(`${key}\n`);
}

/** `gateway-key create` (like management-key create, for the gateway's Authorization header) and `gateway-key rotate`. */
async function gatewayKeyCommand(rest: string[]): Promise<void> {
  const { values, positionals } = parseOptions(rest, GATEWAY_KEY_OPTIONS, true);
  if (positionals[0] === 'rotate' && positionals.length === 1) return gatewayKeyRotate(values);
  if (positionals[0] !== 'create' || positionals.length > 1) fail(`usage: ${GATEWAY_KEY_USAGE}`);
  const namespace = values.namespace ?? fail('gateway-key create needs --namespace');
  const { createGatewayKey, expiryTime } = await import('../service/gateway-keys.ts');
  const expiry = values.expires === undefined ? undefined : expiryTime(values.expires, Date.now());
  if (expiry && 'error' in expiry) fail(expiry.error);
  const limits = {
    ...(values.rpm !== undefined ? { requestsPerMinute: positive('rpm', values.rpm) } : {}),
    ...(values.tpm !== undefined ? { tokensPerMinute: positive('tpm', values.tpm) } : {}),
    ...(values['max-in-flight'] !== undefined
      ? { maxInFlight: positive('max-in-flight', values['max-in-flight']) }
      : {}),
  };
  const models = values.models
    ?.split(',')
    .map((m) => m.trim())
    .filter(Boolean);
  if (models !== undefined && models.length === 0) fail('--models needs at least one model slug (comma-separated)');
  const opts = {
    ...(values.name ? { name: values.name } : {}),
    ...(values.workspace ? { workspace: values.workspace } : {}),
    ...(values.guardrail ? { guardrail: values.guardrail } : {}),
    ...(expiry ? { expiresAt: expiry.at } : {}),
    ...(models ? { models } : {}),
    ...(Object.keys(limits).length > 0 ? { limits } : {}),
  };
  const created = await createGatewayKey(await userKubeConfig(values.kubeconfig), namespace, opts);
  const scope = `workspace ${values.workspace ?? '(the default Workspace)'}${values.guardrail ? `, guardrail ${values.guardrail}` : ''}${expiry ? `, expires ${expiry.at}` : ''}`;
  process.stderr.write(
    `created GatewayAPIKey ${namespace}/${created.name} (${scope}; it holds only the key's SHA-256, ${created.hash}).\n`,
  );
  for (const warning of created.warnings) process.stderr.write(`warning: ${warning}\n`);
  process.stderr.write('The key is shown once:\n');
  process.stdout.write(`${created.key}\n`);
}

const GATEWAY_KEY_USAGE =
  'gateway-key create --namespace <ns> [--workspace <name>] [--guardrail <name>] [--name <name>] [--expires <duration|RFC3339>] [--models <a,b>] [--rpm <n>] [--tpm <n>] [--max-in-flight <n>] | gateway-key rotate --namespace <ns> --name <name> --overlap <duration>';

function positive(flag: string, text: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(n) || n < 1)
    fail(`--${flag} must be a whole number of at least 1, not ${JSON.stringify(text)}`);
  return n;
}

/** `gateway-key rotate`: a new secret for the key, the old one accepted until --overlap has passed. */
async function gatewayKeyRotate(values: {
  namespace?: string | undefined;
  name?: string | undefined;
  overlap?: string | undefined;
  kubeconfig?: string | undefined;
}): Promise<void> {
  const namespace = values.namespace ?? fail('gateway-key rotate needs --namespace');
  const name = values.name ?? fail('gateway-key rotate needs --name (the GatewayAPIKey to rotate)');
  const { parseDuration, rotateGatewayKey } = await import('../service/gateway-keys.ts');
  const overlap =
    values.overlap === undefined
      ? fail('gateway-key rotate needs --overlap <duration> (how long the old secret keeps working: 0s, 15m, 1h, 7d)')
      : values.overlap === '0s' || values.overlap === '0'
        ? 0
        : parseDuration(values.overlap);
  if (overlap === undefined)
    fail(`--overlap ${JSON.stringify(values.overlap)} is not a duration (0s, 90s, 15m, 1h, 7d, 1h30m)`);
  const r = await rotateGatewayKey(await userKubeConfig(values.kubeconfig), namespace, name, overlap);
  process.stderr.write(
    `rotated GatewayAPIKey ${namespace}/${name}: new hash ${r.hash}; the previous secret (${r.previousHash}) works until ${r.previousUntil}, then the gateway refuses it (401).\n`,
  );
  if (r.cut)
    process.stderr.write(
      `warning: the secret before that one was still accepted until ${r.cut}; it is refused from now on\n`,
    );
  process.stderr.write(
    'Credential filters (allowedApiKeyHashes) name hashes: add the new hash where the old one is listed. The new key is shown once:\n',
  );
  process.stdout.write(`${r.key}\n`);
}

/** `run`, `operator`, `api`: the operator and/or the two API doors, until a signal stops them. */
async function serveCommand(command: 'run' | 'operator' | 'api', rest: string[]): Promise<void> {
  const { values } = parseOptions(rest, SERVE_OPTIONS, false);
  const logger = createLogger({ level: values['log-level'] });
  const routingNamespace = routingNamespaceOf(values['routing-namespace']);
  const watchNamespaces = values.namespaces
    ?.split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const maxCredentials = count('max-credentials', values['max-credentials']);
  const orphanGrace = count('orphan-grace-seconds', values['orphan-grace-seconds']);
  const egress = egressOption(values['egress-allow']);
  const { loadKubeConfig } = await import('../kube/kubeconfig.ts');
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
        ? {
            gatewaySlots: {
              routing: slots(values['gateway-routing-slots']),
              bundles: slots(values['gateway-bundle-slots']),
            },
          }
        : {}),
      ...(maxCredentials !== undefined ? { defaultMaxCredentials: maxCredentials } : {}),
      ...(egress ? { egress } : {}),
      ...(await exportOption(values, routingNamespace)),
      ...deliveryStreamOption(
        values['delivery-stream-port'],
        values['delivery-stream-service-accounts'],
        values['delivery-stream-audience'],
      ),
    });
    stops.push(() => operator.stop());
  }
  if (command !== 'operator')
    await serveApiDoors(values, { kubeConfig, logger, watchNamespaces, maxCredentials, orphanGrace, egress }, stops);
  waitForSignal(async () => {
    for (const stop of stops.reverse()) await stop();
  });
}

/** `gateway`: the data plane over the mounted routing config, bundles and key, with its spend gate. */
async function gatewayCommand(rest: string[]): Promise<void> {
  const { values } = parseOptions(rest, GATEWAY_OPTIONS, false);
  const logger = createLogger({ level: values['log-level'] });
  const egress = egressOption(values['egress-allow']);
  const { createGatewayMetrics, directAccessLog, startGateway } = await import('../gateway/index.ts');
  const { journalDirOf, openGatewaySpendGate } = await import('./gateway-ledger.ts');
  try {
    journalDirOf({ redisUrl: values['ledger-redis-url'], journalDir: values['ledger-journal'] });
  } catch (err) {
    fail(err instanceof Error ? err.message : String(err));
  }
  const timeout = Number(values['attempt-timeout-ms'] ?? 60_000);
  if (!Number.isInteger(timeout) || timeout < 1) fail(`invalid --attempt-timeout-ms ${values['attempt-timeout-ms']}`);
  // No path redaction and synchronous stdout on the request path: see createLogger.
  const gatewayLog = createLogger({ level: values['log-level'], redact: false, syncStdout: true }).child({
    component: 'gateway',
  });
  const catalogFile = resolve(values.catalog ?? resolve(repoRoot, DEFAULT_CATALOG));
  const metrics = createGatewayMetrics();
  const spendGate = await openGatewaySpendGate({
    ...(values['ledger-redis-url'] ? { redisUrl: values['ledger-redis-url'] } : {}),
    ...(values['ledger-snapshot'] ? { snapshotPath: values['ledger-snapshot'] } : {}),
    ...(values['ledger-journal'] !== undefined
      ? { journalDir: values['ledger-journal'], journalFsync: values['ledger-journal-fsync'] ?? 'batch' }
      : {}),
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
    ...gatewayDeliveryOption(
      values['delivery-stream'],
      values['delivery-stream-token-file'],
      values['delivery-stream-dir'],
    ),
  });
  logger.info({ url: gateway.url, opsUrl: gateway.opsUrl, catalog: catalogFile }, 'gateway listening');
  const stop = async () => {
    await gateway.close();
    await spendGate.close();
  };
  restartWithoutConfig(
    values['restart-without-config-after'],
    () => gateway.routing.current() !== undefined,
    stop,
    logger,
  );
  waitForSignal(stop);
}

/**
 * `--restart-without-config-after <s>`: a pod that started before the operator wrote its routing objects and bundle
 * key mounted empty (optional) volumes, which the kubelet refreshes only on its next pod sync, about a minute later.
 * If nothing has loaded by then, the process exits (75) so the kubelet restarts the container, and its sync mounts
 * the volumes again at once (the first restart is immediate; later ones back off).
 */
function restartWithoutConfig(
  value: string | undefined,
  loaded: () => boolean,
  stop: () => Promise<void>,
  logger: Logger,
): void {
  if (value === undefined) return;
  const seconds = Number(value);
  if (!Number.isFinite(seconds) || seconds < 0) fail(`invalid --restart-without-config-after ${value}`);
  if (seconds === 0) return;
  setTimeout(() => {
    if (loaded()) return;
    logger.warn(
      { seconds },
      'no routing config loaded since start (empty mounts, no delivery stream yet): exiting so the kubelet restarts the container and mounts its volumes again',
    );
    void stop().finally(() => process.exit(75));
  }, seconds * 1000).unref();
}

/** `explain`: the plan a request would get, offline or against the cluster's credentials. */
async function explainCommand(rest: string[]): Promise<void> {
  const { values } = parseOptions(rest, EXPLAIN_OPTIONS, false);
  const { credentialsFromCluster, credentialsFromManifests, explain } = await import('./explain.ts');
  const configDir = values['config-dir'] ?? fail('explain needs --config-dir (the mounted routing config)');
  const request = values.request ?? fail('explain needs --request <json|file.json>');
  const credentials = values.cluster
    ? credentialsFromCluster(await userKubeConfig(values.kubeconfig))
    : values.manifests
      ? credentialsFromManifests(values.manifests)
      : undefined;
  const result = await explain({
    configDir,
    catalogFile: resolve(values.catalog ?? resolve(repoRoot, DEFAULT_CATALOG)),
    request,
    json: values.json,
    ...(values['shared-keys-dir'] !== undefined ? { sharedKeysDir: values['shared-keys-dir'] } : {}),
    ...(credentials ? { credentials } : {}),
  });
  process.stdout.write(result.output);
  process.exitCode = result.exitCode;
}

/** `bundle-key stage | activate <key-id> | rotate`. */
async function bundleKeyCliCommand(rest: string[]): Promise<void> {
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
  const { keyId, unrecorded } = await bundleKeyCommand(
    await userKubeConfig(values.kubeconfig),
    routingNamespace,
    request,
  );
  process.stderr.write(
    `${action === 'stage' ? 'staged' : action === 'rotate' ? 'added and activated' : 'activated'} bundle key in ${routingNamespace}:\n`,
  );
  // Otherwise every Account moved to Delivered=False (Pending): `kubectl wait --for=condition=Delivered` now waits for the new key.
  if (unrecorded.length > 0)
    process.stderr.write(
      `the operator has not recorded the resealed versions of ${unrecorded.length} accounts yet (${unrecorded.slice(0, 5).join(', ')}${unrecorded.length > 5 ? ', …' : ''}): a kubectl wait for Delivered may still read the old key's True\n`,
    );
  process.stdout.write(`${keyId}\n`);
}

async function main(argv: string[]): Promise<void> {
  if (argv[0] === '--help' || argv[0] === '-h') argv = ['help', ...argv.slice(1)];
  if (argv[0] === '--version') argv = ['version'];
  const [command, ...rest] = argv;
  if (!command || command === 'help') {
    // `help <command>` is that command's page.
    process.stdout.write((rest[0] !== undefined ? COMMAND_HELP[rest[0]] : undefined) ?? USAGE);
    return;
  }
  helpPage = COMMAND_HELP[command] ?? USAGE;
  switch (command) {
    case 'run':
    case 'operator':
    case 'api':
      return serveCommand(command, rest);
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
    case 'gateway':
      return gatewayCommand(rest);
    case 'validate': {
      const { values, positionals } = parseOptions(rest, VALIDATE_OPTIONS, true);
      const { exitCode, formatReport, OUTPUT_FORMATS, validatePath } = await import('./validate.ts');
      const path = positionals[0] ?? fail('validate needs a file or folder (or - for stdin)');
      const format = values.output ?? 'text';
      if (!(OUTPUT_FORMATS as readonly string[]).includes(format))
        fail(`invalid --output ${format}: use ${OUTPUT_FORMATS.join(', ')}`);
      const report = validatePath(path);
      process.stdout.write(formatReport(report, format as OutputFormat));
      process.exitCode = exitCode(report, values.strict);
      return;
    }
    case 'explain':
      return explainCommand(rest);
    case 'export':
      process.exitCode = await (await import('./export.ts')).exportCommand(rest, repoRoot);
      return;
    case 'management-key':
      return managementKeyCommand(rest);
    case 'gateway-key':
      return gatewayKeyCommand(rest);
    case 'bundle-key':
      return bundleKeyCliCommand(rest);
    case 'version':
      process.stdout.write(
        `${(JSON.parse(readFileSync(resolve(repoRoot, 'package.json'), 'utf8')) as { version: string }).version}\n`,
      );
      return;
    default:
      fail(`unknown command ${command}`);
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`byok-operator: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
