// `byok-operator export --target envoy-ai-gateway|agentgateway <folder>`: reads a GitOps folder with the loader of
// `validate`, checks every credential the way the reconciler would (schema, Secret, payload, filters), compiles
// each account with the operator's compiler, and writes the target's objects as YAML on stdout and the report on
// stderr. Payloads are read only to learn their shape, region, project and Azure resources (src/export/facts.ts).

import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { V1Secret } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import {
  type AccountSnapshot,
  accountMissingMessage,
  compileAccount,
  credentialExclusion,
  electAccount,
  isRoutedNamespace,
  keysNotHolding,
  previousHashesNotHeld,
  type SnapshotCredential,
} from '../compiler/index.ts';
import { hashesNamed } from '../domain/api-keys.ts';
import { describePayloadIssues } from '../domain/errors.ts';
import { publicId } from '../domain/ids.ts';
import { maskLabel } from '../domain/label.ts';
import { validatePayload } from '../domain/payloads.ts';
import { bytesIssue } from '../domain/text.ts';
import {
  type CredentialFacts,
  EXPORT_TARGETS,
  type ExportInput,
  type ExportOptions,
  type ExportTarget,
  exportAccounts,
  exportStandalone,
  formatReport,
  payloadFacts,
  type SkippedCredential,
} from '../export/index.ts';
import { loadCatalog } from '../gateway/catalog.ts';
import { kubeClient } from '../kube/client.ts';
import { type KubeAccess, Kubeconfig } from '../kube/kubeconfig.ts';
import { secretPayloadBytes } from '../kube/secret-payload.ts';
import { effectiveSortOrder } from '../operator/reconcile/sort-order.ts';
import { ConditionReason } from '../schema/conditions.ts';
import type { Account, BYOKCredential, GatewayAPIKey, Guardrail, Workspace } from '../schema/generated/types.ts';
import { GROUP, RESOURCES, VERSION } from '../schema/resources.ts';
import { validateManifest } from '../schema/validators.ts';
import { COMMAND_HELP } from './help.ts';
import { chooseKubeconfig } from './kubeconfig-choice.ts';
import { loadManifests } from './manifests.ts';

const EXPORT_HELP = COMMAND_HELP['export']!;

const OPTIONS = {
  target: { type: 'string' },
  standalone: { type: 'boolean', default: false },
  account: { type: 'string' },
  'per-request': { type: 'boolean', default: false },
  namespace: { type: 'string', default: 'byok-export' },
  gateway: { type: 'string', default: 'byok-gateway' },
  catalog: { type: 'string' },
  'shared-vertex-project': { type: 'string' },
  'allow-tenant-hosts': { type: 'boolean', default: false },
  cluster: { type: 'boolean', default: false },
  kubeconfig: { type: 'string' },
  help: { type: 'boolean', short: 'h', default: false },
} as const;

interface Resources {
  accounts: Account[];
  workspaces: Workspace[];
  guardrails: Guardrail[];
  apiKeys: GatewayAPIKey[];
  credentials: BYOKCredential[];
}

const KIND_FIELD = {
  Account: 'accounts',
  Workspace: 'workspaces',
  Guardrail: 'guardrails',
  GatewayAPIKey: 'apiKeys',
  BYOKCredential: 'credentials',
} as const;

/** The payload text of a credential's Secret, or why there is none (the reconciler's reasons). */
function payloadOf(
  cred: BYOKCredential,
  secrets: ReadonlyMap<string, V1Secret>,
  ns: string,
): { text: string } | { reason: string } {
  const ref = cred.spec.secretRef;
  // A Secret manifest without a namespace matches any (as validate does).
  const secret = secrets.get(`${ns}/${ref.name}`) ?? secrets.get(`/${ref.name}`);
  if (!secret) return { reason: `SecretNotFound: Secret ${ref.name} is not among the files` };
  const bytes = secretPayloadBytes(secret, ref.key ?? 'key');
  if (bytes === undefined) return { reason: `KeyNotFound: Secret ${ref.name} has no key ${ref.key ?? 'key'}` };
  const bad = bytesIssue(bytes);
  if (bad) return { reason: `PayloadInvalid: ${bad.message}` };
  return { text: Buffer.from(bytes).toString('utf8') };
}

/** Reads the folder into compiled accounts, payload facts and the credentials left out (with why). */
export function loadExportInput(path: string, catalogFile: string): { input: ExportInput; errors: string[] } {
  const { manifests, parseErrors } = loadManifests(path);
  const errors = parseErrors.map(
    (e) => `${e.file}:${e.position.line}:${e.position.column}: invalid YAML (document ${e.index}): ${e.message}`,
  );
  return {
    input: inputFromObjects(
      manifests.map((m) => ({ object: m.object, where: `${m.file}:${m.position.line}` })),
      catalogFile,
    ),
    errors,
  };
}

/**
 * The same from a cluster (--cluster): the five byok.gateway.dev kinds in every namespace the kubeconfig may list,
 * and the Secret of each credential (read, reduced to facts, dropped).
 */
export async function loadClusterInput(access: KubeAccess, catalogFile: string): Promise<ExportInput> {
  const client = kubeClient(access);
  const items: { object: unknown; where: string }[] = [];
  for (const resource of RESOURCES) {
    const list = await client.request<{ items: Record<string, unknown>[] }>(
      'GET',
      `/apis/${GROUP}/${VERSION}/${resource.plural}`,
    );
    // A list's items carry neither apiVersion nor kind.
    for (const item of list.items)
      items.push({ object: { apiVersion: `${GROUP}/${VERSION}`, kind: resource.kind, ...item }, where: 'cluster' });
  }
  // The operator routes only namespaces with an Account (src/compiler/gate.ts): the others' Secrets are not read.
  const routed = new Set(
    items
      .filter((i) => (i.object as { kind: string }).kind === 'Account')
      .map((i) => (i.object as Account).metadata.namespace ?? 'default'),
  );
  for (const { object } of items.filter((i) => (i.object as { kind: string }).kind === 'BYOKCredential')) {
    const c = object as BYOKCredential;
    const ns = c.metadata.namespace ?? 'default';
    if (!routed.has(ns)) continue;
    try {
      const secret = await client.request<V1Secret>(
        'GET',
        `/api/v1/namespaces/${encodeURIComponent(ns)}/secrets/${encodeURIComponent(c.spec.secretRef.name)}`,
      );
      items.push({ object: { apiVersion: 'v1', kind: 'Secret', ...secret }, where: 'cluster' });
    } catch {
      // Not found or not readable: the credential is reported as SecretNotFound.
    }
  }
  return inputFromObjects(items, catalogFile, { requireAccount: true });
}

/**
 * `requireAccount` (a cluster): a namespace without an Account is not routed by the operator, so its credentials are
 * reported as skipped with the operator's reason. A folder may hold a team's objects without the platform's Account.
 */
function inputFromObjects(
  items: readonly { object: unknown; where: string }[],
  catalogFile: string,
  gate: { requireAccount: boolean } = { requireAccount: false },
): ExportInput {
  const byNs = new Map<string, Resources>();
  const secrets = new Map<string, V1Secret>();
  const skipped: SkippedCredential[] = [];
  for (const m of items) {
    const o = m.object as { apiVersion?: unknown; kind?: unknown; metadata?: { name?: unknown; namespace?: unknown } };
    if (!o || typeof o !== 'object') continue;
    if (o.apiVersion === 'v1' && o.kind === 'Secret' && typeof o.metadata?.name === 'string') {
      const key = `${typeof o.metadata.namespace === 'string' ? o.metadata.namespace : ''}/${o.metadata.name}`;
      if (!secrets.has(key)) secrets.set(key, o as V1Secret);
    }
    const verdict = validateManifest(o);
    if (!verdict) continue;
    const ns = typeof o.metadata?.namespace === 'string' ? o.metadata.namespace : 'default';
    if (verdict.problems.length > 0) {
      if (verdict.kind === 'BYOKCredential')
        skipped.push({
          namespace: ns,
          name: verdict.name,
          provider: String((o as { spec?: { provider?: unknown } }).spec?.provider ?? '?'),
          reason: `invalid manifest (${m.where}): ${verdict.problems[0]!.path}: ${verdict.problems[0]!.message}`,
        });
      continue;
    }
    const resources = byNs.get(ns) ?? { accounts: [], workspaces: [], guardrails: [], apiKeys: [], credentials: [] };
    byNs.set(ns, resources);
    const field = KIND_FIELD[verdict.kind as keyof typeof KIND_FIELD];
    (resources[field] as unknown[]).push({ ...o, metadata: { ...o.metadata, namespace: ns } });
  }
  const facts = new Map<string, CredentialFacts>();
  // Who holds each key hash is decided across every account read, as the operator decides it across its caches.
  const naming = new Map<string, GatewayAPIKey[]>();
  for (const r of byNs.values()) {
    for (const k of r.apiKeys) for (const h of hashesNamed(k)) naming.set(h, [...(naming.get(h) ?? []), k]);
  }
  for (const [ns, r] of byNs) {
    if (!gate.requireAccount || isRoutedNamespace(r.accounts)) continue;
    for (const cred of r.credentials)
      skipped.push({
        namespace: ns,
        name: cred.metadata.name ?? '',
        provider: cred.spec.provider,
        reason: `${ConditionReason.AccountMissing}: ${accountMissingMessage(ns, 'credential')}`,
      });
    byNs.delete(ns);
  }
  const accounts = [...byNs]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .filter(([, r]) => r.credentials.length > 0)
    .map(([ns, r]) => {
      const credentials: SnapshotCredential[] = [];
      for (const cred of r.credentials) {
        const name = cred.metadata.name ?? '';
        const payload = payloadOf(cred, secrets, ns);
        const checked = 'text' in payload ? validatePayload(cred.spec.provider, payload.text) : undefined;
        if (!checked || !checked.ok) {
          skipped.push({
            namespace: ns,
            name,
            provider: cred.spec.provider,
            reason:
              'reason' in payload
                ? payload.reason
                : `PayloadInvalid: ${checked && !checked.ok ? describePayloadIssues(checked.errors) : ''}`,
          });
          continue;
        }
        facts.set(publicId('BYOKCredential', ns, name), payloadFacts(checked.payload));
        const text = (payload as { text: string }).text;
        credentials.push({
          resource: cred,
          verdict: {
            valid: true,
            label: maskLabel(cred.spec.provider, text),
            sortOrder: effectiveSortOrder(cred, r.credentials),
            payload: text,
          },
        });
      }
      const account = electAccount(r.accounts).winner;
      const snapshot: AccountSnapshot = {
        namespace: ns,
        ...(account ? { account } : {}),
        workspaces: r.workspaces,
        guardrails: r.guardrails,
        apiKeys: r.apiKeys,
        conflictingApiKeys: keysNotHolding(r.apiKeys, (h) => naming.get(h) ?? []),
        unheldPreviousHashes: previousHashesNotHeld(r.apiKeys, (h) => naming.get(h) ?? []),
        credentials,
        now: new Date(),
      };
      const compiled = compileAccount(snapshot);
      // The compiler leaves out what it cannot route (a filter naming a dead key, a missing workspace): say so.
      const live = new Set(compiled.apiKeys.map((k) => k.hash));
      const workspaceNames = new Set(r.workspaces.map((w) => w.metadata.name ?? ''));
      for (const entry of credentials) {
        const why = credentialExclusion(entry, workspaceNames, live);
        if (why !== null)
          skipped.push({
            namespace: ns,
            name: entry.resource.metadata.name ?? '',
            provider: entry.resource.spec.provider,
            reason: `not compiled: ${why}`,
          });
      }
      return compiled;
    });
  const gatewayCatalog = loadCatalog(catalogFile);
  return {
    accounts,
    facts,
    skipped,
    catalog: gatewayCatalog.catalog,
    upstream: (model, endpointId) => gatewayCatalog.upstream(model, endpointId),
  };
}

/** A usage error: exit status 2, the message and this page on stderr. */
class UsageError extends Error {}
function usage(message: string): never {
  throw new UsageError(message);
}

export interface ExportRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the command on its arguments without touching the process: what it would print, and its exit status. */
export async function runExport(args: string[], repoRoot: string): Promise<ExportRun> {
  try {
    return await runExportOrThrow(args, repoRoot);
  } catch (err) {
    if (err instanceof UsageError)
      return { code: 2, stdout: '', stderr: `byok-operator: ${err.message}\n\n${EXPORT_HELP}` };
    throw err;
  }
}

async function runExportOrThrow(args: string[], repoRoot: string): Promise<ExportRun> {
  let parsed;
  try {
    parsed = parseArgs({ args, options: OPTIONS, allowPositionals: true, strict: true });
  } catch (err) {
    usage(err instanceof Error ? err.message : String(err));
  }
  const { values, positionals } = parsed;
  if (values.help) return { code: 0, stdout: EXPORT_HELP, stderr: '' };
  const target = values.target ?? usage('export needs --target envoy-ai-gateway or --target agentgateway');
  if (!(EXPORT_TARGETS as readonly string[]).includes(target))
    usage(`invalid --target ${target}: use ${EXPORT_TARGETS.join(' or ')}`);
  if (values.standalone && target !== 'agentgateway') usage('--standalone is an agentgateway form');
  if (values.standalone && values['per-request']) usage('--standalone and --per-request do not combine');
  if (values['per-request'] && target !== 'envoy-ai-gateway')
    usage(
      '--per-request is built for envoy-ai-gateway only: agentgateway has no per-request credential source (docs/export.md, "Per-request credentials")',
    );
  if (values.cluster ? positionals.length !== 0 : positionals.length !== 1)
    usage(
      values.cluster
        ? 'export --cluster reads no folder'
        : 'export needs one file or folder (or - for stdin), or --cluster',
    );
  const gatewayMatch = /^(?:([a-z0-9-]+)\/)?([a-z0-9.-]+)$/.exec(values.gateway);
  if (!gatewayMatch) usage(`--gateway must be [<namespace>/]<name>, got ${values.gateway}`);
  const options: ExportOptions = {
    target: target as ExportTarget,
    mode: values['per-request'] ? 'override' : 'static',
    namespace: values.namespace,
    gateway: { name: gatewayMatch[2]!, ...(gatewayMatch[1] ? { namespace: gatewayMatch[1] } : {}) },
    ...(values['shared-vertex-project'] ? { sharedVertexProject: values['shared-vertex-project'] } : {}),
    ...(values['allow-tenant-hosts'] ? { allowTenantHosts: true } : {}),
  };
  const catalogFile = values.catalog ? resolve(values.catalog) : resolve(repoRoot, 'config/catalog/catalog.json');
  let all: ExportInput;
  let kubeconfigLine = '';
  if (values.cluster) {
    const choice = chooseKubeconfig({
      explicit: values.kubeconfig,
      env: process.env,
      devConnectionFile: resolve(repoRoot, process.env.BYOK_DEV_DIR ?? '.dev', 'connection.json'),
    });
    kubeconfigLine = `kubeconfig: ${choice.path ?? ''}${choice.path ? ' ' : ''}(${choice.source})\n`;
    all = await loadClusterInput(Kubeconfig.load(choice.path), catalogFile);
  } else {
    const loaded = loadExportInput(positionals[0]!, catalogFile);
    if (loaded.errors.length > 0) return { code: 1, stdout: '', stderr: loaded.errors.map((e) => `${e}\n`).join('') };
    all = loaded.input;
  }
  const input = values.account
    ? {
        ...all,
        accounts: all.accounts.filter((a) => a.namespace === values.account),
        skipped: all.skipped.filter((s) => s.namespace === values.account),
      }
    : all;
  if (input.accounts.every((a) => a.credentials.length === 0)) {
    const lines = [
      `byok-operator: no account with a credential to export${values.account ? ` (namespace ${values.account})` : ''}`,
      ...input.skipped.map((s) => `  ${s.namespace}/${s.name} (${s.provider}): ${s.reason}`),
    ];
    return { code: 1, stdout: '', stderr: `${lines.join('\n')}\n` };
  }
  if (values.standalone && input.accounts.length > 1)
    usage(
      `--standalone writes one account: the folder has ${input.accounts.length} (${input.accounts.map((a) => a.namespace).join(', ')}); choose one with --account`,
    );
  const rendered = renderExport(input, options, values.standalone);
  return { code: 0, stdout: rendered.stdout, stderr: `${kubeconfigLine}${rendered.stderr}` };
}

/** The command: prints what runExport says; returns the exit status. */
export async function exportCommand(args: string[], repoRoot: string): Promise<number> {
  const { code, stdout, stderr } = await runExport(args, repoRoot);
  process.stdout.write(stdout);
  process.stderr.write(stderr);
  return code;
}

/** What the command prints: the YAML (stdout) and the report (stderr). */
export function renderExport(
  input: ExportInput,
  options: ExportOptions,
  standalone: boolean,
): { stdout: string; stderr: string } {
  if (standalone) {
    const { config, report } = exportStandalone(input, options, input.accounts[0]!.namespace);
    return { stdout: stringify(config, { lineWidth: 0 }), stderr: formatReport(report) };
  }
  const { objects, report } = exportAccounts(input, options);
  return { stdout: objects.map((o) => stringify(o, { lineWidth: 0 })).join('---\n'), stderr: formatReport(report) };
}
