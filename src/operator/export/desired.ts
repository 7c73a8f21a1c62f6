// What the export controller wants in the export namespace for ONE account, from the compile pipeline's output for
// it (its snapshot and compiled account): the target's objects (the account's own and its share of the shared tier),
// the derived Secrets' content and each BYOKCredential's Exported condition. Pure: the controller does the I/O.
// The payloads are read here for two things only: their non-secret facts (the export's input) and the derived
// Secrets' data, which goes nowhere but the Secret objects this returns.
import { createHash } from 'node:crypto';
import { credentialExclusion } from '../../compiler/compile.ts';
import type { CompiledAccount } from '../../domain/compiled.ts';
import { publicId } from '../../domain/ids.ts';
import { type ProviderPayload, validatePayload } from '../../domain/payloads.ts';
import type { ProviderSlug } from '../../domain/providers.ts';
import { ENVOY_LIMITS } from '../../export/envoy.ts';
import {
  type CredentialFacts,
  derivedSecretData,
  type ExportInput,
  type ExportOptions,
  exportAccounts,
  payloadFacts,
  type SemanticNote,
  type SkippedCredential,
  type TargetObject,
} from '../../export/index.ts';
import { objectName } from '../../export/names.ts';
import { ConditionReason, ConditionType } from '../../schema/conditions.ts';
import type { AccountSnapshot } from '../compile/pipeline.ts';
import type { DesiredCondition } from '../conditions.ts';

/** Every object the controller writes carries one of these (the account's namespace, or `true` for shared ones). */
export const ACCOUNT_LABEL = 'export.byok.gateway.dev/account';
export const SHARED_LABEL = 'export.byok.gateway.dev/shared';
/** A digest of what was applied, so a restarted controller rewrites only what changed (never on Secrets). */
export const DIGEST_ANNOTATION = 'export.byok.gateway.dev/digest';

/** The catalog part of ExportInput: loaded once by the caller (the gateway's catalog, which the operator cannot import). */
export type ExportCatalog = Pick<ExportInput, 'catalog' | 'upstream'>;

export interface SecretObject {
  apiVersion: 'v1';
  kind: 'Secret';
  metadata: { name: string; namespace: string; labels: Record<string, string> };
  type: 'Opaque';
  /** base64, keyed as the target reads them. */
  data: Record<string, string>;
}

export type ExportCondition = DesiredCondition<
  typeof ConditionType.Exported,
  typeof ConditionReason.Exported | typeof ConditionReason.NotExported
>;

export interface AccountExport {
  /** The account's own objects, labelled with ACCOUNT_LABEL. */
  objects: TargetObject[];
  /** Its share of the objects every account uses (host Backends, the shared tier), labelled with SHARED_LABEL. */
  shared: TargetObject[];
  secrets: SecretObject[];
  /** BYOKCredential name -> its Exported condition. */
  conditions: Map<string, ExportCondition>;
  /** Credentials whose NotExported is a refusal of what the tenant named (a host, a name): also a Warning Event. */
  refusals?: Set<string>;
}

const sha = (text: string): string => createHash('sha256').update(text).digest('hex');

/**
 * What decides an account's export: its compiled routing, each credential's generation, verdict and payload digest.
 * Unchanged: nothing to do (a compile run re-reads every dirty account, the export only the changed ones).
 */
export function exportInputDigest(snapshot: AccountSnapshot, account: CompiledAccount): string {
  const creds = snapshot.credentials.map(
    (c) =>
      `${c.resource.metadata.name}|${c.resource.metadata.generation ?? 0}|${c.verdict.valid}|${c.verdict.payload === undefined ? '' : sha(c.verdict.payload)}`,
  );
  return sha(`${JSON.stringify(account)}\n${creds.join('\n')}`);
}

type Resource = AccountSnapshot['credentials'][number]['resource'];

/** The reconciler's Ready for the credential's current generation; none while it has not judged that generation. */
function currentReady(resource: Resource): { status: string; reason: string } | undefined {
  const ready = (resource.status?.conditions ?? []).find((c) => c.type === ConditionType.Ready);
  return ready && ready.observedGeneration === resource.metadata.generation ? ready : undefined;
}

/** The account as the export's input: its compiled routing, the facts of its valid payloads, and what was left out. */
function inputOf(
  snapshot: AccountSnapshot,
  account: CompiledAccount,
  catalog: ExportCatalog,
): { input: ExportInput; payloads: Map<string, ProviderPayload> } {
  const ns = snapshot.namespace;
  const facts = new Map<string, CredentialFacts>();
  const payloads = new Map<string, ProviderPayload>();
  const skipped: SkippedCredential[] = [];
  const workspaces = new Set(snapshot.workspaces.map((w) => w.metadata.name ?? ''));
  const live = new Set(account.apiKeys.map((k) => k.hash));
  for (const entry of snapshot.credentials) {
    const name = entry.resource.metadata.name ?? '';
    const provider = entry.resource.spec.provider;
    const excluded = credentialExclusion(entry, workspaces, live);
    if (excluded !== null) {
      skipped.push({
        namespace: ns,
        name,
        provider,
        reason:
          excluded === 'NotValid'
            ? `not Ready (${currentReady(entry.resource)?.reason ?? 'not reconciled yet'})`
            : `not compiled: ${excluded}`,
      });
      continue;
    }
    const checked = validatePayload(provider as ProviderSlug, entry.verdict.payload!);
    if (!checked.ok) {
      skipped.push({ namespace: ns, name, provider, reason: 'PayloadInvalid' });
      continue;
    }
    facts.set(publicId('BYOKCredential', ns, name), payloadFacts(checked.payload));
    payloads.set(name, checked.payload);
  }
  return { input: { accounts: [account], facts, skipped, ...catalog }, payloads };
}

/** `dropped: fee, allowance, ...; approximated: ...`: the semantic names only (the report has the details). */
function summary(notes: readonly SemanticNote[], treatment: SemanticNote['treatment']): string {
  const names = [...new Set(notes.filter((n) => n.treatment === treatment).map((n) => n.semantic))];
  return names.length > 0 ? `${treatment}: ${names.join(', ')}` : '';
}

export function desiredExport(
  snapshot: AccountSnapshot,
  account: CompiledAccount,
  catalog: ExportCatalog,
  options: ExportOptions,
): AccountExport {
  const ns = snapshot.namespace;
  const { input, payloads } = inputOf(snapshot, account, catalog);
  const { objects, report } = exportAccounts(input, options);
  const out: AccountExport = { objects: [], shared: [], secrets: [], conditions: new Map() };
  // No credential exported: nothing to route (the export would still write an empty route per account).
  for (const o of input.facts.size > 0 ? objects : []) {
    const own = o.metadata.labels?.['byok.gateway.dev/account'] === ns;
    const labels = { ...o.metadata.labels, ...(own ? { [ACCOUNT_LABEL]: ns } : { [SHARED_LABEL]: 'true' }) };
    (own ? out.objects : out.shared).push({ ...o, metadata: { ...o.metadata, labels } });
  }
  for (const s of report.derivedSecrets) {
    const name = s.credential?.startsWith(`${ns}/`) ? s.credential.slice(ns.length + 1) : undefined;
    const payload = name === undefined ? undefined : payloads.get(name);
    // The platform's own keys (shared tier) are the platform's to write.
    if (payload === undefined) continue;
    const data = derivedSecretData(options.target, payload, s.part);
    out.secrets.push({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name: s.name,
        namespace: options.namespace,
        labels: { 'app.kubernetes.io/managed-by': 'byok-operator', [ACCOUNT_LABEL]: ns },
      },
      type: 'Opaque',
      data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v, 'utf8').toString('base64')])),
    });
  }
  const accountNotes = report.accounts.find((a) => a.namespace === ns)?.notes ?? [];
  for (const c of report.accounts.find((a) => a.namespace === ns)?.credentials ?? []) {
    const skipped = c.notes.find((n) => n.semantic === 'not exported');
    // Not judged yet (a cold start): no condition until the reconciler's verdict, which compiles the account again.
    const resource = snapshot.credentials.find((e) => e.resource.metadata.name === c.name)?.resource;
    if (skipped && resource && currentReady(resource) === undefined) continue;
    if (skipped) {
      out.conditions.set(c.name, {
        type: ConditionType.Exported,
        status: 'False',
        reason: ConditionReason.NotExported,
        message: `not exported to ${options.target}: ${skipped.detail}`,
      });
      continue;
    }
    // A host the target or the egress policy refuses: said with its reason, and NotExported when nothing else went.
    const hosts = c.notes.filter((n) => n.semantic === 'host').map((n) => n.detail);
    if (hosts.length > 0 && c.derivedSecrets.length === 0) {
      out.conditions.set(c.name, {
        type: ConditionType.Exported,
        status: 'False',
        reason: ConditionReason.NotExported,
        message: `not exported to ${options.target}: ${hosts.join('; ')}`,
      });
      (out.refusals ??= new Set()).add(c.name);
      continue;
    }
    const notes = [...c.notes, ...accountNotes];
    const parts = [summary(notes, 'dropped'), summary(notes, 'approximated'), ...hosts].filter(Boolean).join('; ');
    const secrets =
      c.derivedSecrets.length > 0
        ? ` with Secret ${c.derivedSecrets.map((s) => s.name).join(', ')}`
        : ' (in no model rule)';
    out.conditions.set(c.name, {
      type: ConditionType.Exported,
      status: 'True',
      reason: ConditionReason.Exported,
      message: `exported to ${options.target} in namespace ${options.namespace}${secrets}; ${parts || 'nothing dropped'} (details: byok-operator export --target ${options.target} --cluster --account ${ns})`,
    });
  }
  return out;
}

/**
 * What a shared object is, for comparing two accounts' copies. Plain JSON: one code path builds each kind, so equal
 * objects serialize alike; a difference in key order alone would be refused as a conflict, never merged (and it is
 * several times cheaper than sorting keys, on every object of every share of a cold start).
 */
const contentOf = (o: TargetObject): string => JSON.stringify(o);

/** The parts of a shared BackendSecurityPolicy that are not its name and targets: one per source, whatever the account. */
const policyTemplateOf = (o: TargetObject): TargetObject => ({
  ...o,
  metadata: { ...o.metadata, name: '' },
  spec: { ...o.spec, targetRefs: [] },
});

/** A shared object two accounts' shares hold with different content: none is written, each account is told. */
export interface SharedConflict {
  key: string;
  accounts: string[];
}

/**
 * The shared objects every account uses, kept from each account's share. An object is written only when every share
 * that names it holds the same content: two contents under one name (a collision, or a defect) are a conflict, and
 * none of them is written, so no account's copy ever replaces another's. The shared tier's BackendSecurityPolicies
 * (Envoy) are the exception by design: their targetRefs are the union over all accounts, re-chunked at the target's
 * limit, and their other fields come from the smallest template (sorted), never from the last account set. The
 * result depends on the set of shares only, not on the order they were set. Counted per use, so an account's change
 * costs its own share, and merged() is O(providers x hosts).
 */
export class SharedIndex {
  private readonly shares = new Map<string, readonly TargetObject[]>();
  /** key -> content digest -> the object and the accounts whose share holds it. */
  private readonly objects = new Map<string, Map<string, { object: TargetObject; accounts: Set<string> }>>();
  private readonly policies = new Map<
    string,
    {
      templates: Map<string, { template: TargetObject; users: number }>;
      refs: Map<string, { ref: unknown; users: number }>;
    }
  >();

  /** Replaces an account's share (undefined: the account is gone). */
  set(ns: string, share: readonly TargetObject[] | undefined): void {
    for (const o of this.shares.get(ns) ?? []) this.count(ns, o, -1);
    if (share === undefined || share.length === 0) this.shares.delete(ns);
    else this.shares.set(ns, share);
    for (const o of share ?? []) this.count(ns, o, 1);
  }

  clear(): void {
    this.shares.clear();
    this.objects.clear();
    this.policies.clear();
  }

  private count(ns: string, o: TargetObject, by: 1 | -1): void {
    const source = o.metadata.annotations?.['byok.gateway.dev/source'];
    if (o.kind !== 'BackendSecurityPolicy' || !source) {
      const key = `${o.apiVersion}|${o.kind}|${o.metadata.name}`;
      const variants = this.objects.get(key) ?? new Map<string, { object: TargetObject; accounts: Set<string> }>();
      const content = contentOf(o);
      const entry = variants.get(content) ?? { object: o, accounts: new Set<string>() };
      if (by > 0) entry.accounts.add(ns);
      else entry.accounts.delete(ns);
      if (entry.accounts.size > 0) variants.set(content, entry);
      else variants.delete(content);
      if (variants.size > 0) this.objects.set(key, variants);
      else this.objects.delete(key);
      return;
    }
    const p = this.policies.get(source) ?? { templates: new Map(), refs: new Map() };
    this.policies.set(source, p);
    // The first chunk keeps the base name; later chunks are `<base>-<n>`: the base is the shortest name.
    const template = policyTemplateOf(o);
    const tkey = `${String(o.metadata.name.length).padStart(4, '0')}|${o.metadata.name}|${JSON.stringify(template)}`;
    const t = p.templates.get(tkey) ?? { template: o, users: 0 };
    t.users += by;
    if (t.users > 0) p.templates.set(tkey, t);
    else p.templates.delete(tkey);
    for (const ref of (o.spec.targetRefs as { name: string }[] | undefined) ?? []) {
      const entry = p.refs.get(ref.name) ?? { ref, users: 0 };
      entry.users += by;
      if (entry.users > 0) p.refs.set(ref.name, entry);
      else p.refs.delete(ref.name);
    }
    if (p.refs.size === 0 || p.templates.size === 0) this.policies.delete(source);
  }

  /** Shared objects two shares hold with different content: refused, with the accounts involved. */
  conflicts(): SharedConflict[] {
    return [...this.objects]
      .filter(([, variants]) => variants.size > 1)
      .map(([key, variants]) => ({
        key,
        accounts: [...new Set([...variants.values()].flatMap((v) => [...v.accounts]))].sort(),
      }))
      .sort((a, b) => (a.key < b.key ? -1 : 1));
  }

  /** The accounts whose share holds the object with this key (for attributing its refusal). */
  users(key: string): string[] {
    return [...new Set([...(this.objects.get(key)?.values() ?? [])].flatMap((v) => [...v.accounts]))].sort();
  }

  merged(): TargetObject[] {
    const out: TargetObject[] = [];
    for (const variants of this.objects.values()) if (variants.size === 1) out.push([...variants.values()][0]!.object);
    const size = ENVOY_LIMITS.targetRefsPerPolicy;
    for (const { templates, refs } of this.policies.values()) {
      const template = templates.get([...templates.keys()].sort()[0]!)!.template;
      const sorted = [...refs.keys()].sort().map((n) => refs.get(n)!.ref);
      for (let i = 0; i * size < sorted.length; i++) {
        const name = i === 0 ? template.metadata.name : objectName(template.metadata.name, String(i + 1));
        out.push({
          ...template,
          metadata: { ...template.metadata, name },
          spec: { ...template.spec, targetRefs: sorted.slice(i * size, (i + 1) * size) },
        });
      }
    }
    return out;
  }
}
