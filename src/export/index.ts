// The export: compiled accounts (and the non-secret facts of their payloads) -> a target's objects and the report
// of what the target keeps, approximates and drops. Pure: no I/O; the CLI reads the folder and writes the YAML.
import { buildAgentgateway } from './agentgateway.ts';
import { type AccountAttempts, accountAttempts } from './attempt-order.ts';
import { buildEnvoy } from './envoy.ts';
import { accountNotes, credentialNotes } from './notes.ts';
import { buildOverride, shapeOf } from './override.ts';
import { buildStandalone } from './standalone.ts';
import type {
  AccountReport,
  CredentialReport,
  DerivedSecret,
  ExportInput,
  ExportOptions,
  ExportReport,
  ExportResult,
  SemanticNote,
  SkippedCredential,
  TargetObject,
} from './types.ts';

export { IDENTITY_ANNOTATION } from './envoy.ts';
export { payloadFacts } from './facts.ts';
export { derivedSecretName, sharedSecretName, targetObjectKey, tenantName } from './names.ts';
export { formatReport } from './report.ts';
export { derivedSecretData } from './secret-data.ts';
export type * from './types.ts';
export { EXPORT_TARGETS } from './types.ts';

import { targetObjectKey } from './names.ts';

function accountReport(
  plan: AccountAttempts,
  input: ExportInput,
  options: ExportOptions,
  objects: number,
  byCredential: ReadonlyMap<string, DerivedSecret[]>,
): AccountReport {
  const ns = plan.account.namespace;
  const notes: SemanticNote[] = accountNotes(plan, options.target, options.mode);
  for (const m of plan.models) {
    if (m.attempts.length === 0)
      notes.push({
        semantic: 'no attempt',
        treatment: 'kept',
        detail: `${m.model}: no attempt remains (is_required, is_byok_only or a data policy removed every one): its rule has no backend, so requests fail`,
      });
    for (const u of m.unplaced) {
      const who =
        u.credentialId === null
          ? `shared ${u.provider}`
          : (plan.account.credentials.find((c) => c.id === u.credentialId)?.name ?? u.credentialId);
      notes.push({ semantic: 'attempt left out', treatment: 'dropped', detail: `${m.model}: ${who}: ${u.reason}` });
    }
  }
  if (options.mode === 'override') {
    for (const m of plan.models)
      notes.push({ semantic: 'plan shape', treatment: 'kept', detail: `${m.model}: x-byok-plan ${shapeOf(m).id}` });
  }
  const credentials: CredentialReport[] = plan.account.credentials.map((c) => {
    return {
      namespace: ns,
      name: c.name,
      provider: c.provider,
      derivedSecrets: byCredential.get(`${ns}/${c.name}`) ?? [],
      notes: credentialNotes(c, plan, options.mode),
    };
  });
  for (const s of skippedIn(input, ns)) {
    credentials.push({
      namespace: ns,
      name: s.name,
      provider: s.provider,
      derivedSecrets: [],
      notes: [{ semantic: 'not exported', treatment: 'dropped', detail: s.reason }],
    });
  }
  credentials.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return { namespace: ns, models: plan.models.map((m) => m.model), objects, notes, credentials };
}

function byCredentialOf(secrets: readonly DerivedSecret[]): Map<string, DerivedSecret[]> {
  const out = new Map<string, DerivedSecret[]>();
  for (const s of secrets) if (s.credential !== undefined) out.set(s.credential, [...(out.get(s.credential) ?? []), s]);
  return out;
}

const skippedByInput = new WeakMap<ExportInput, Map<string, SkippedCredential[]>>();
/** The skipped credentials of one namespace (indexed once per input: exports have thousands of accounts). */
function skippedIn(input: ExportInput, ns: string): readonly SkippedCredential[] {
  let index = skippedByInput.get(input);
  if (index === undefined) {
    index = new Map();
    for (const s of input.skipped) index.set(s.namespace, [...(index.get(s.namespace) ?? []), s]);
    skippedByInput.set(input, index);
  }
  return index.get(ns) ?? [];
}

/** Accounts that have only skipped credentials still appear in the report. */
function skippedOnlyAccounts(input: ExportInput): AccountReport[] {
  const compiled = new Set(input.accounts.map((a) => a.namespace));
  const byNs = new Map<string, AccountReport>();
  for (const s of input.skipped) {
    if (compiled.has(s.namespace)) continue;
    const report = byNs.get(s.namespace) ?? {
      namespace: s.namespace,
      models: [],
      objects: 0,
      notes: [],
      credentials: [],
    };
    report.credentials.push({
      namespace: s.namespace,
      name: s.name,
      provider: s.provider,
      derivedSecrets: [],
      notes: [{ semantic: 'not exported', treatment: 'dropped', detail: s.reason }],
    });
    byNs.set(s.namespace, report);
  }
  return [...byNs.values()];
}

const ACCOUNT = 'byok.gateway.dev/account';

/**
 * Names two objects share: none is written, whoever built it, and each is reported (on its account when it has one).
 * Names are digests of what they stand for, so this finds only what a digest collision or a defect would make; it
 * is settled the same way whatever the order of the accounts.
 */
export function refuseSharedNames(
  shared: TargetObject[],
  perAccount: Map<string, TargetObject[]>,
): { conflicts: string[]; byAccount: Map<string, string[]> } {
  const count = new Map<string, number>();
  const all = [...shared, ...[...perAccount.values()].flat()];
  for (const o of all) count.set(targetObjectKey(o), (count.get(targetObjectKey(o)) ?? 0) + 1);
  const taken = new Set([...count].filter(([, n]) => n > 1).map(([k]) => k));
  const byAccount = new Map<string, string[]>();
  if (taken.size === 0) return { conflicts: [], byAccount };
  const conflicts = new Set<string>();
  for (const o of all) {
    if (!taken.has(targetObjectKey(o))) continue;
    const owner = o.metadata.labels?.[ACCOUNT];
    const line = `${o.kind} ${o.metadata.name}: ${count.get(targetObjectKey(o))} objects would share this name; none is written`;
    conflicts.add(`${line} (${owner ?? 'shared'})`);
    if (owner !== undefined) byAccount.set(owner, [...new Set([...(byAccount.get(owner) ?? []), line])]);
  }
  shared.splice(0, shared.length, ...shared.filter((o) => !taken.has(targetObjectKey(o))));
  for (const [ns, list] of perAccount)
    perAccount.set(
      ns,
      list.filter((o) => !taken.has(targetObjectKey(o))),
    );
  return { conflicts: [...conflicts].sort(), byAccount };
}

/** The target's objects for every account (Kubernetes CRDs of the target), and the report. */
export function exportAccounts(input: ExportInput, options: ExportOptions): ExportResult {
  const plans = input.accounts.map((a) => accountAttempts(a, input, options));
  if (options.mode === 'override' && options.target !== 'envoy-ai-gateway')
    throw new Error(
      'the per-request mode is built for envoy-ai-gateway only (docs/export.md, "Per-request credentials")',
    );
  const build =
    options.mode === 'override'
      ? buildOverride(plans, input, options)
      : options.target === 'envoy-ai-gateway'
        ? buildEnvoy(plans, options)
        : { ...buildAgentgateway(plans, options), shared: [] as TargetObject[] };
  const { conflicts, byAccount } = refuseSharedNames(build.shared, build.perAccount);
  const objects: TargetObject[] = [...build.shared];
  const secrets = byCredentialOf(build.secrets);
  const accounts: AccountReport[] = plans.map((plan) => {
    const own = build.perAccount.get(plan.account.namespace) ?? [];
    for (const o of own) objects.push(o);
    const report = accountReport(plan, input, options, own.length, secrets);
    for (const line of byAccount.get(plan.account.namespace) ?? [])
      report.notes.push({ semantic: 'conflict', treatment: 'dropped', detail: line });
    return report;
  });
  accounts.push(...skippedOnlyAccounts(input));
  accounts.sort((a, b) => (a.namespace < b.namespace ? -1 : a.namespace > b.namespace ? 1 : 0));
  const report: ExportReport = {
    target: options.target,
    mode: options.mode,
    accounts,
    sharedObjects: build.shared.length,
    derivedSecrets: build.secrets,
    limits: build.limits,
    conflicts,
    totalObjects: objects.length,
  };
  return { objects, report };
}

/** agentgateway's standalone config for one account, and the report (objects counts the config's models). */
export function exportStandalone(
  input: ExportInput,
  options: ExportOptions,
  namespace: string,
): { config: Record<string, unknown>; report: ExportReport } {
  const account = input.accounts.find((a) => a.namespace === namespace);
  if (account === undefined) throw new Error(`no compiled account ${namespace} in the input`);
  const plan = accountAttempts(account, input, options);
  const build = buildStandalone(plan, options);
  const count = build.config.llm.models.length + build.config.llm.virtualModels.length;
  const accountEntry = accountReport(plan, input, options, count, byCredentialOf(build.secrets));
  for (const n of build.notes)
    accountEntry.notes.push({ semantic: 'standalone auth', treatment: 'approximated', detail: n });
  accountEntry.notes.push({
    semantic: 'account selection',
    treatment: 'kept',
    detail: 'one account per standalone file: every request the proxy serves is this account',
  });
  accountEntry.notes = accountEntry.notes.filter(
    (n) => !(n.semantic === 'account selection' && n.treatment === 'approximated'),
  );
  const report: ExportReport = {
    target: 'agentgateway',
    mode: 'static',
    accounts: [accountEntry],
    sharedObjects: 0,
    derivedSecrets: build.secrets,
    limits: [],
    conflicts: [],
    totalObjects: count,
  };
  return { config: build.config, report };
}
