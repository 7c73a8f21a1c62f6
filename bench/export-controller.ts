// What the export controller (src/operator/export) adds to the operator, without an apiserver: the CPU its pure part
// takes per compile run (the input digest of every account a run compiled, the desired objects of the changed ones,
// the merge of the shared objects) beside the compile itself, and how many writes one change costs (the controller's
// own diff: objects and Secrets whose applied digest moved, and Exported conditions whose text moved).
//
//   node scripts/bootstrap.mjs -- node bench/export-controller.ts [credentials...]   (default 1000 10000)
//
// Accounts of 3 plain-key credentials (openai, anthropic, groq), as bench/operator.ts and docs/export.md's
// measurements use. Timings are of this process on a shared machine: read them as ratios within one run.
import { join } from 'node:path';
import { compileAccount } from '../src/compiler/compile.ts';
import type { CompiledAccount } from '../src/domain/compiled.ts';
import { EXPORT_TARGETS, type ExportOptions, type ExportTarget } from '../src/export/index.ts';
import { loadCatalog } from '../src/gateway/catalog.ts';
import type { AccountSnapshot, SnapshotCredential } from '../src/operator/compile/pipeline.ts';
import { digestOf } from '../src/operator/export/controller.ts';
import { type AccountExport, desiredExport, exportInputDigest, SharedIndex } from '../src/operator/export/desired.ts';
import type { BYOKCredential } from '../src/schema/generated/types.ts';

const repo = join(import.meta.dirname, '..');
const gatewayCatalog = loadCatalog(join(repo, 'config', 'catalog', 'catalog.json'));
const catalog = {
  catalog: gatewayCatalog.catalog,
  upstream: (model: string, endpointId: string) => gatewayCatalog.upstream(model, endpointId),
};
const PROVIDERS = ['openai', 'anthropic', 'groq'] as const;

function credential(
  ns: string,
  name: string,
  provider: string,
  sortOrder: number,
  payload: string,
  spec: Partial<BYOKCredential['spec']> = {},
  generation = 1,
): SnapshotCredential {
  const resource = {
    apiVersion: 'byok.gateway.dev/v1alpha1',
    kind: 'BYOKCredential',
    metadata: { name, namespace: ns, generation },
    spec: { provider, secretRef: { name }, ...spec },
    status: {},
  } as unknown as BYOKCredential;
  return { resource, verdict: { valid: true, sortOrder, payload } };
}

function snapshot(i: number): AccountSnapshot {
  const ns = `acct-${String(i).padStart(6, '0')}`;
  const credentials = PROVIDERS.map((p, k) =>
    credential(
      ns,
      `${p}-key`,
      p,
      k,
      `${p === 'anthropic' ? 'sk-ant-api03-' : p === 'groq' ? 'gsk_' : 'sk-proj-'}${String(i).padStart(8, '0')}k${k}aaaaaaaaaaaaaaaa`,
    ),
  );
  return {
    namespace: ns,
    workspaces: [],
    guardrails: [],
    apiKeys: [],
    credentials,
    now: new Date('2026-01-01T00:00:00Z'),
  };
}

const ms = (t0: number) => performance.now() - t0;

/** Writes the controller would make going from one export of an account to the next. */
function writesBetween(
  before: AccountExport,
  after: AccountExport,
  generationMoved: ReadonlySet<string>,
): { applies: number; deletes: number; conditions: number } {
  const digests = (e: AccountExport) =>
    new Map([...e.objects, ...e.secrets].map((o) => [`${o.kind}/${o.metadata.name}`, digestOf(o)]));
  const a = digests(before);
  const b = digests(after);
  let applies = 0;
  for (const [k, d] of b) if (a.get(k) !== d) applies++;
  let deletes = 0;
  for (const k of a.keys()) if (!b.has(k)) deletes++;
  let conditions = 0;
  for (const [name, c] of after.conditions) {
    const was = before.conditions.get(name);
    // observedGeneration moves with the credential's generation: the condition is rewritten then too.
    if (!was || was.status !== c.status || was.message !== c.message || generationMoved.has(name)) conditions++;
  }
  return { applies, deletes, conditions };
}

function changes(snap: AccountSnapshot): Record<string, AccountSnapshot> {
  const [first, ...rest] = snap.credentials;
  const with0 = (c: SnapshotCredential) => ({ ...snap, credentials: [c, ...rest] });
  const r = first!.resource;
  return {
    'key rotation (new payload)': with0(
      credential(snap.namespace, r.metadata.name!, r.spec.provider, 0, `${first!.verdict.payload!}rotated`),
    ),
    'is_required on one credential': with0(
      credential(
        snap.namespace,
        r.metadata.name!,
        r.spec.provider,
        0,
        first!.verdict.payload!,
        { isRequired: true },
        2,
      ),
    ),
    'a credential added': {
      ...snap,
      credentials: [
        ...snap.credentials,
        credential(snap.namespace, 'mistral-key', 'mistral', 3, 'mistralcanary000000000000000001'),
      ],
    },
    'a credential deleted': { ...snap, credentials: snap.credentials.slice(0, -1) },
  };
}

function measure(target: ExportTarget, credentials: number): void {
  const options: ExportOptions = {
    target,
    mode: 'static',
    namespace: 'byok-export',
    gateway: { name: 'byok-gateway' },
  };
  const accounts = Math.ceil(credentials / PROVIDERS.length);
  const snaps = Array.from({ length: accounts }, (_, i) => snapshot(i));
  let t0 = performance.now();
  const compiled: CompiledAccount[] = snaps.map((s) => compileAccount(s));
  const compileMs = ms(t0);
  t0 = performance.now();
  for (let i = 0; i < snaps.length; i++) exportInputDigest(snaps[i]!, compiled[i]!);
  const digestMs = ms(t0);
  t0 = performance.now();
  const exports = snaps.map((s, i) => desiredExport(s, compiled[i]!, catalog, options));
  const buildMs = ms(t0);
  t0 = performance.now();
  const index = new SharedIndex();
  exports.forEach((e, i) => index.set(snaps[i]!.namespace, e.shared));
  const indexMs = ms(t0);
  t0 = performance.now();
  const shared = index.merged();
  const mergeMs = ms(t0);
  const objects = exports.reduce((n, e) => n + e.objects.length, 0);
  const secrets = exports.reduce((n, e) => n + e.secrets.length, 0);
  const line = (what: string, v: unknown) =>
    process.stdout.write(
      `${target.padEnd(17)} ${String(credentials).padStart(6)} creds  ${what.padEnd(44)} ${String(v)}\n`,
    );
  line('accounts / objects / Secrets / shared', `${accounts} / ${objects} / ${secrets} / ${shared.length}`);
  line('cold start: compile all (ms)', compileMs.toFixed(0));
  line(
    'cold start: export input digests (ms)',
    `${digestMs.toFixed(0)} (${((100 * digestMs) / compileMs).toFixed(0)} % of compile)`,
  );
  line(
    'cold start: desired objects of all (ms)',
    `${buildMs.toFixed(0)} (${((100 * buildMs) / compileMs).toFixed(0)} % of compile)`,
  );
  line('cold start: shared objects counted (ms)', indexMs.toFixed(1));
  line('shared objects merged, per drain (ms)', mergeMs.toFixed(2));
  // One account changes: the run compiles it, the controller digests and rebuilds it and merges the shares again.
  for (const [what, changed] of Object.entries(changes(snaps[0]!))) {
    t0 = performance.now();
    const c = compileAccount(changed);
    const oneCompile = ms(t0);
    t0 = performance.now();
    exportInputDigest(changed, c);
    const after = desiredExport(changed, c, catalog, options);
    index.set(changed.namespace, after.shared);
    index.merged();
    const oneExport = ms(t0);
    const moved = new Set(
      changed.credentials
        .filter((c, k) => c.resource.metadata.generation !== snaps[0]!.credentials[k]?.resource.metadata.generation)
        .map((c) => c.resource.metadata.name!),
    );
    const w = writesBetween(desiredExport(snaps[0]!, compiled[0]!, catalog, options), after, moved);
    index.set(changed.namespace, exports[0]!.shared);
    line(
      `${what}: writes`,
      `${w.applies} apply, ${w.deletes} delete, ${w.conditions} condition; export ${oneExport.toFixed(1)} ms vs compile ${oneCompile.toFixed(1)} ms`,
    );
  }
}

const sizes = process.argv
  .slice(2)
  .map(Number)
  .filter((n) => n > 0);
for (const target of EXPORT_TARGETS) for (const n of sizes.length > 0 ? sizes : [1000, 10000]) measure(target, n);
