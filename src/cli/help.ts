// The CLI's help texts: one overview and one page per command (`byok-operator <command> --help`). Each page names
// its exit statuses; main.ts exits with them (a usage error is always 2, after the command's own page on stderr).

/** Exit statuses every command shares; validate and explain give 1 a more precise meaning on their pages. */
export const EXIT = { ok: 0, failed: 1, usage: 2 } as const;

const EXIT_DEFAULT = `exit status: 0 done; 1 the command failed (the cluster or a file refused it; the message says why); 2 usage error
            (unknown option, missing argument: this page is printed on stderr)`;

const KUBECONFIG_USER = `  --kubeconfig <path>         kubeconfig (default: $KUBECONFIG, ~/.kube/config, then a running dev stack's from
                              .dev/connection.json); stderr names the one used`;

const SERVE = `usage: byok-operator run | operator | api [options]

  run                 operator and API server in one process
  operator            the operator only (reconciler, compiler, leader election)
  api                 the API server only: REST /api/v1/byok (--api-port) and the aggregated
                      Kubernetes API api.byok.gateway.dev/v1 over HTTPS (--aggregated-port), one process

options:
  --kubeconfig <path>         kubeconfig (default: $KUBECONFIG, in-cluster, ~/.kube/config)
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
  --ledger-redis-url <url>    the gateways' shared spend ledger (Redis): the operator leader publishes spend into
                              Account, Workspace and Guardrail status (docs/ledger.md)
  --status-token-file <file>  shared token of GET /byok/status: the operator leader pulls it into UpstreamHealthy,
                              lastUsedTime and Delivered (docs/operator.md)
  --gateway-service <ns>/<name>[:<port>]
                              operator: find gateway pods through this Service's EndpointSlices (port name or number)
  --gateway-status-urls <a,b> operator: fixed gateway base URLs instead (dev)
  --export-target envoy-ai-gateway|agentgateway
                              operator: keep that data plane's objects and derived Secrets for every account in
                              --export-namespace, and an Exported condition on each BYOKCredential (docs/export.md)
  --export-namespace <ns>     where the exported objects go (default: the routing namespace)
  --export-gateway [<ns>/]<name>  the Gateway the exported routes attach to (default byok-gateway)
  --export-allow-tenant-hosts export hosts tenants name (export --allow-tenant-hosts; docs/export.md)
  --delivery-stream-port <n>  operator: push the routing ConfigMaps and bundle Secrets to gateway pods on this port
                              (every replica, from its cache; off by default; docs/operator.md, "Delivery stream")
  --delivery-stream-service-accounts <ns>/<name>[,...]
                              the gateway ServiceAccounts the stream serves (their projected tokens, TokenReview)
  --delivery-stream-audience <a>  audience of those tokens (default byok-delivery)
  --log-level <level>         pino level (default info)

exit status: 0 stopped by SIGTERM/SIGINT; 1 failed to start or stop; 2 usage error (this page is printed on stderr)
`;

const DEV = `usage: byok-operator dev [--api-port <port>] [--embedded-ledger] [--exit-when-ready] [--log-level <level>]

local control plane + CRDs + operator + API server + gateway + sample data; the ledger on a loopback redis-server
with AOF when installed. Writes .dev/connection.json. Ctrl-C stops.

options:
  --api-port <port>    REST API port (default: one picked at start)
  --embedded-ledger    keep the gateway's own ledger even when redis-server is installed
  --exit-when-ready    stop once the stack is up (for scripts)
  --log-level <level>  pino level (default warn)

${EXIT_DEFAULT}
`;

const GATEWAY = `usage: byok-operator gateway --config-dir <dir> --bundle-dir <dir> --key-dir <dir> [options]

the OpenAI-compatible reference gateway on the mounted routing config (docs/gateway.md); health, readiness,
metrics and the operator's status endpoint are on --ops-port only

options:
  --config-dir <dir>          the projected routing ConfigMaps (required)
  --bundle-dir <dir>          the projected bundle Secrets (required)
  --key-dir <dir>             the bundle key Secret (required)
  --catalog <file>            default: config/catalog/catalog.json (the one explain and the dev stack use)
  --shared-keys-dir <dir>     the gateway's own provider keys (shared capacity), one file per provider; without it
                              every shared attempt fails (explain --shared-keys-dir says which will)
  --port <port>               default 8080
  --ops-port <port>           default 8081
  --attempt-timeout-ms <ms>   default 60000
  --region <r>                the gateway's region (regional endpoints)
  --upstream-ca <pem>         extra CA for upstream TLS
  --ledger-redis-url <url>    meter into the shared spend ledger (Redis; docs/ledger.md)
  --ledger-snapshot <file>    without Redis: where the embedded ledger keeps the month across restarts
  --ledger-journal <dir|none> required with Redis: the spend journal's directory (an emptyDir; one gateway per
                              directory: a second is refused), so records survive kill -9 and Redis outages;
                              none runs without one (what was queued through an outage is lost on a kill)
  --ledger-journal-fsync <p>  none | batch (default: one fdatasync per 10 ms, off the request path) | record
  --status-token-file <file>  token of GET /byok/status that the operator presents
  --egress-allow <cidr|ip|host>  as for the operator and the API (docs/gateway.md, "Egress policy")
  --delivery-stream <url>     also take routing and bundles from the operator's delivery stream (the mount stays
                              the floor; docs/gateway.md, "Delivery stream")
  --delivery-stream-token-file <file>  the projected ServiceAccount token presented to it (re-read per connect)
  --delivery-stream-dir <dir> writable directory (an emptyDir) for what it delivers (default under the temp dir)
  --restart-without-config-after <s>  exit (75) if no routing config has loaded this many seconds after start, so
                              the kubelet restarts the container and mounts its volumes again (the chart: 5; 0 = never)
  --log-level <level>         pino level (default info)

exit status: 0 stopped by SIGTERM/SIGINT; 1 failed to start; 2 usage error (this page is printed on stderr);
             75 no routing config loaded within --restart-without-config-after
`;

const VALIDATE = `usage: byok-operator validate <path|-> [-o text|json|junit|sarif|github] [--strict]

check manifests offline against the CRD schemas and CEL rules (for GitOps CI); a folder is read recursively,
- reads stdin. A BYOKCredential's Secret among the files gets the operator's payload checks.

options:
  -o, --output <format>  text (default), json, junit, sarif (code scanning), github (Actions annotations)
  --strict               also fail on warnings (nothing checked, a referenced Secret not among the files)

exit status: 0 no problems (warnings allowed); 1 problems (or any warning with --strict); 2 usage error
            (this page is printed on stderr)
`;

const EXPLAIN = `usage: byok-operator explain --config-dir <dir> --request <json|file> [--catalog <file>] [--shared-keys-dir <dir>]
                            [--json] [--cluster | --manifests <path>]

explain a routing decision from mounted routing config: which credentials and shared endpoints a request would
try, in which order, and why the others are left out. The first line names the catalog.

options:
  --config-dir <dir>       the mounted routing config (required)
  --request <json|file>    e.g. '{"model":"openai/gpt-5","apiKeyHash":"<sha256>"}' (required)
  --catalog <file>         default: config/catalog/catalog.json, the one the gateway and the dev stack use
  --shared-keys-dir <dir>  the gateway's --shared-keys-dir: a shared attempt for a provider without a key there is
                           marked "will fail: no shared key", as the gateway would answer it
  --json                   machine-readable plan
  --cluster                also say why the account's credentials missing from the config are missing (Ready)
  --manifests <path>       the same from manifests on disk
${KUBECONFIG_USER}

exit status: 0 at least one attempt can succeed; 1 no attempt remains, none can succeed (no shared key), or no
            plan (unknown key, no workspace); 2 usage error (this page is printed on stderr)
`;

const MANAGEMENT_KEY = `usage: byok-operator management-key create --namespace <ns> [--name <name>]

create a management key (REST API) for the account <ns> and print it once on stdout; the Secret <name>
(default byok-management-key-<random>) holds only its SHA-256. What was done goes to stderr.

options:
  --namespace <ns>  the account namespace (required)
  --name <name>     the Secret's name
${KUBECONFIG_USER}

${EXIT_DEFAULT}
`;

const GATEWAY_KEY = `usage: byok-operator gateway-key create --namespace <ns> [--workspace <name>] [--guardrail <name>] [--name <name>]
                                  [--expires <duration|RFC3339>] [--models <a,b,...>] [--rpm <n>] [--tpm <n>] [--max-in-flight <n>]
       byok-operator gateway-key rotate --namespace <ns> --name <name> --overlap <duration>

create a gateway API key for the account <ns> (what an app sends as Authorization: Bearer <key>) and print it
once on stdout; the GatewayAPIKey <name> (default gateway-key-<random>) holds only its SHA-256, which stderr
also prints (for a credential's allowedApiKeyHashes). The key needs a workspace: --workspace, or the namespace's
default Workspace (otherwise it is Ready=False NoWorkspace and the gateway answers 403; stderr warns). Its
namespace needs an Account (otherwise it is Ready=False AccountMissing and the gateway answers 401; stderr warns).

options:
  --namespace <ns>     the account namespace (required)
  --workspace <name>   spec.workspace (default: the namespace's default Workspace)
  --guardrail <name>   spec.guardrail
  --name <name>        the GatewayAPIKey's name (rotate: the key to rotate)
  --expires <when>     spec.expiresAt: a duration from now (90s, 15m, 12h, 30d, 2w, 1h30m) or an RFC 3339 time with
                       its offset (2027-01-31T00:00:00Z); refused when in the past
  --models <a,b>       spec.models: the only models the key may request (others: 403 naming these)
  --rpm <n>            spec.limits.requestsPerMinute
  --tpm <n>            spec.limits.tokensPerMinute
  --max-in-flight <n>  spec.limits.maxInFlight
  --overlap <duration> rotate: how long the old secret keeps working (0s: refused at once), then 401

rotate gives the same GatewayAPIKey a new secret (printed once; hash and counts stay with the object) and moves
the old hash to spec.previousHash until the overlap ends.
${KUBECONFIG_USER}

${EXIT_DEFAULT}
`;

const BUNDLE_KEY = `usage: byok-operator bundle-key stage | activate <key-id> | rotate [--routing-namespace <ns>]

rotate the data key that seals credential bundles: stage, wait ~1 min (gateway pods load it), activate; rotate
does both at once. Prints the key id on stdout. activate and rotate return once the operator has recorded every
Account's resealed version (Delivered=False until the pods load it; at most 1 min), so a following
kubectl wait --for=condition=Delivered accounts --all -A waits for the new key.

options:
  --routing-namespace <ns>  where the bundle key Secret is (default: $POD_NAMESPACE or byok-system)
${KUBECONFIG_USER}

${EXIT_DEFAULT}
`;

/** Each command's own page; run, operator and api share one. */
const EXPORT = `usage: byok-operator export --target envoy-ai-gateway|agentgateway <path|-> | --cluster [options]

Compiles the accounts of a GitOps folder into another data plane's configuration: YAML objects on stdout, and on
stderr a report of every semantic the target keeps, approximates or drops, per account and per credential, with
the object counts. Needs no cluster (unless --cluster). Key material never reaches the output: each credential is referred to by a
derived Secret (byok-<hash of namespace/name>-<target>) that only the in-cluster controller writes.

options:
  --target <t>                  envoy-ai-gateway or agentgateway (required)
  --standalone                  agentgateway only: its standalone config file (llm.models, virtualModels) as YAML,
                                for one account (--account when the folder holds several)
  --account <namespace>         export this account only
  --cluster                     read the accounts and their Secrets from a cluster instead of a folder
  --kubeconfig <file>           with --cluster (default: kubectl's order, then a running \`npm run dev\` stack's)
  --per-request                 one object set per provider, the credential supplied per request by ext_authz
                                (Envoy AI Gateway's credentialOverride; docs/export.md)
  --namespace <ns>              namespace of the exported objects (default byok-export)
  --gateway [<ns>/]<name>       the Gateway the routes attach to (default byok-gateway)
  --catalog <file>              the gateway catalog (default config/catalog/catalog.json)
  --shared-vertex-project <id>  the platform's Google project for the shared google-vertex tier
  --allow-tenant-hosts          export hosts tenants name (an Azure deployment's endpoint_url outside the provider's
                                domain) although the target resolves them without our egress policy; without it
                                they are left out and the report says why
  -h, --help                    this page

exit status: 0 exported; 1 the folder has errors (unreadable YAML) or nothing to export; 2 usage error
docs: docs/export.md
`;

export const COMMAND_HELP: Record<string, string> = {
  run: SERVE,
  operator: SERVE,
  api: SERVE,
  dev: DEV,
  gateway: GATEWAY,
  validate: VALIDATE,
  export: EXPORT,
  explain: EXPLAIN,
  'management-key': MANAGEMENT_KEY,
  'gateway-key': GATEWAY_KEY,
  'bundle-key': BUNDLE_KEY,
};

export const USAGE = `usage: byok-operator <command> [options]
       byok-operator <command> --help     the command's own options and exit statuses

commands:
  run | operator | api          operator and/or API server (REST /api/v1/byok and the aggregated Kubernetes API)
  dev                           local control plane + CRDs + operator + API server + gateway + sample data
  gateway                       the OpenAI-compatible reference gateway on the mounted routing config
  validate <path|->             check manifests offline against the CRD schemas and CEL rules (GitOps CI)
  explain                       why a request would try which credentials, from mounted routing config
  export --target <t> <path|->  compile a GitOps folder into Envoy AI Gateway or agentgateway objects (docs/export.md)
  management-key create         create a management key (REST API) for an account and print it once
  gateway-key create | rotate   create a gateway API key for an app team and print it once; rotate it with an overlap
  bundle-key stage | activate | rotate
                                rotate the data key that seals credential bundles
  version                       print the version

Each command accepts only its own options: an option of another command is a usage error.

exit status: 0 done; 1 the command failed (validate: problems; explain: no attempt remains); 2 usage error (the
            command's page is printed on stderr)
`;
