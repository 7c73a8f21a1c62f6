// Cross-account identities, the export part. The generator draws many accounts whose namespaces are
// prefixes of each other (`team`, `team-a`, `team-a-b`), whose credential names read alike once joined by dashes
// (`team` + `a-x` against `team-a` + `x`, dots against dashes), and whose Azure deployment hosts overlap, collide or
// are respellings of each other (case, trailing dots, dots against dashes and underscores), with the platform's own
// Bedrock hosts among them. Among the fixed values are a host and a credential pair found by a search against the
// 24-bit names the export had before (`byok-host-bedrock-runtime-eu-central-1-amazonaws-com-dc2436`). It attacks:
//   - names: no two different inputs share an exported object name (per account and shared, both targets and the
//     per-request mode); a name two objects would share is refused and reported;
//   - hosts: every exported host passes the target's CRD rule (RFC 1123), a host from a tenant's URL is exported only
//     under the provider's domain or when the platform allows tenant hosts, and each refused host is reported on its
//     credential;
//   - the shared merge (the controller's SharedIndex): an account's copy of a shared object is never replaced by
//     another account's different content, a conflict names every account involved, and the merged result does not
//     depend on the order the accounts were exported, removed and exported again.
import { join } from 'node:path';
import { describe, test } from '@jest/globals';
import fc from 'fast-check';
import type { CompiledAccount, CompiledCredential } from '../../../src/domain/index.ts';
import {
  type CredentialFacts,
  type ExportInput,
  type ExportOptions,
  exportAccounts,
  type TargetObject,
} from '../../../src/export/index.ts';
import { loadCatalog } from '../../../src/gateway/catalog.ts';
import { SharedIndex } from '../../../src/operator/export/desired.ts';
import { expectEqual, expectIs, propertyRuns } from '../../support/properties.ts';

/** Fixed seed: a failure names its case, and every run checks the same cases. */
const SEED = 41_0503;
const RUNS = 1000;

const gatewayCatalog = loadCatalog(join(import.meta.dirname, '..', '..', '..', 'config', 'catalog', 'catalog.json'));
const catalog = {
  catalog: gatewayCatalog.catalog,
  upstream: (model: string, endpointId: string) => gatewayCatalog.upstream(model, endpointId),
};

/** Envoy Gateway's Backend rule for fqdn hostnames and SNI, and DNS's 63-character labels: the oracle, from the CRD. */
const CRD_HOST = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const crdHost = (h: string) => h.length <= 253 && CRD_HOST.test(h) && h.split('.').every((l) => l.length <= 63);
/** The provider's domains, as the catalog's Azure templates write them: one label in front. */
const PROVIDER_HOST = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\.(openai\.azure\.com|services\.ai\.azure\.com)$/;

/** Found against the old 24-bit names: this host's Backend was named like bedrock-runtime.eu-central-1's. */
const OLD_BEDROCK_TWIN = 'bedrock--runtime-------------eu-----central----------------1.amazonaws---------------com.';
/** Found against the old names: `team` + the first and `team-a` + the second gave one BackendSecurityPolicy name. */
const OLD_POLICY_TWINS = [
  ['team', 'a-p---q.r-s.t.u.v-w.y.z.k.m.n.o'],
  ['team-a', 'p--q--r--s--t--u.v.w.y.z.k.m.n.o'],
] as const;

const word = fc.stringMatching(/^[a-z0-9]{1,6}$/);
const sep = fc.constantFrom('-', '.', '--', '_', '-.');
const spelled = fc
  .tuple(fc.array(fc.tuple(word, sep), { maxLength: 3 }), word)
  .map(([parts, last]) => parts.map(([w, s]) => `${w}${s}`).join('') + last);

const namespaceArb = fc.oneof(
  fc.constantFrom('team', 'team-a', 'team-a-b', 'a', 'a-b', 'a-b-c', OLD_POLICY_TWINS[0][0], OLD_POLICY_TWINS[1][0]),
  fc
    .tuple(fc.constantFrom('team', 'a'), fc.array(word, { maxLength: 2 }))
    .map(([head, rest]) => [head, ...rest].join('-')),
);
/** Credential names: DNS subdomains, alike once slugged, and the old twins. */
const credentialNameArb = fc.oneof(
  fc.constantFrom('x', 'a-x', 'a.x', 'b-x', 'x-y', 'x.y', OLD_POLICY_TWINS[0][1], OLD_POLICY_TWINS[1][1]),
  spelled
    .map((s) => s.replace(/_/g, '-').replace(/-\./g, '.').replace(/\.-/g, '.'))
    .filter((s) => /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(s) && !s.includes('..')),
);
const hostArb = fc.oneof(
  fc.constantFrom(
    'bedrock-runtime.eu-central-1.amazonaws.com',
    'Bedrock-Runtime.EU-Central-1.amazonaws.com',
    'bedrock-runtime.eu-central-1.amazonaws.com.',
    'bedrock-runtime-eu-central-1.amazonaws.com',
    OLD_BEDROCK_TWIN,
    'team-x.openai.azure.com',
    'team.x-openai.azure.com',
    'team-x.openai.azure.com..',
    'TEAM-X.openai.azure.com',
    'team-x.services.ai.azure.com',
    'a_b.example.com',
    '169.254.169.254.nip.io',
    'localtest.me',
    'api.openai.com',
  ),
  fc
    .tuple(spelled, fc.constantFrom('.openai.azure.com', '.example.com', '.example.com.', '-openai.azure.com'))
    .map(([a, b]) => `${a}${b}`),
);

type CredentialCase = { name: string; kind: 'openai' | 'azure' | 'bedrock'; host: string; region: string };
const credentialArb: fc.Arbitrary<CredentialCase> = fc.record({
  name: credentialNameArb,
  kind: fc.constantFrom('openai', 'azure', 'azure', 'bedrock'),
  host: hostArb,
  region: fc.constantFrom('eu-central-1', 'us-east-1'),
});
const accountArb = fc.record({
  namespace: namespaceArb,
  credentials: fc.uniqueArray(credentialArb, { minLength: 1, maxLength: 3, selector: (c) => c.name }),
});
const caseArb = fc.record({
  accounts: fc.uniqueArray(accountArb, { minLength: 1, maxLength: 6, selector: (a) => a.namespace }),
  allowTenantHosts: fc.boolean(),
  order: fc.array(fc.nat(), { minLength: 12, maxLength: 12 }),
});
type Case = typeof caseArb extends fc.Arbitrary<infer T> ? T : never;

function compiled(c: Case): ExportInput {
  const facts = new Map<string, CredentialFacts>();
  const accounts = c.accounts.map(
    (a): CompiledAccount => ({
      namespace: a.namespace,
      accountId: a.namespace,
      plan: 'pay-as-you-go',
      privacy: { denyDataCollection: false, alwaysZdr: false },
      workspaces: [],
      guardrails: [],
      apiKeys: [],
      credentials: a.credentials.map((k, i): CompiledCredential => {
        const id = `${a.namespace}/${k.name}`;
        const provider = k.kind === 'bedrock' ? 'amazon-bedrock' : k.kind;
        facts.set(
          id,
          k.kind === 'azure'
            ? {
                kind: 'azure',
                entries: [
                  {
                    type: 'deployment',
                    modelSlug: 'openai/gpt-5',
                    endpointUrl: `https://${k.host}/openai/deployments/d/chat/completions?api-version=2024-10-21`,
                    modelId: 'd',
                  },
                ],
              }
            : k.kind === 'bedrock'
              ? { kind: 'bedrock-iam', region: k.region }
              : { kind: 'api-key' },
        );
        return {
          id,
          name: k.name,
          provider,
          workspaceId: null,
          label: '',
          displayName: null,
          disabled: false,
          isFallback: false,
          isRequired: false,
          isByokOnly: false,
          declaredZdr: null,
          allowedModels: [k.kind === 'bedrock' ? 'anthropic/claude-sonnet-4.5' : 'openai/gpt-5'],
          allowedApiKeyHashes: null,
          allowedUserIds: null,
          sortOrder: i,
          createdAt: '2026-01-01T00:00:00Z',
        };
      }),
    }),
  );
  return { accounts, facts, skipped: [], ...catalog };
}

const options = (
  target: ExportOptions['target'],
  mode: ExportOptions['mode'],
  allowTenantHosts: boolean,
): ExportOptions => ({
  target,
  mode,
  namespace: 'byok-export',
  gateway: { name: 'byok-gateway' },
  ...(allowTenantHosts ? { allowTenantHosts } : {}),
});
const keyOf = (o: TargetObject) => `${o.apiVersion}|${o.kind}|${o.metadata.name}`;
const ACCOUNT = 'byok.gateway.dev/account';
/** Two JSON values are equal, key order aside and undefined members as missing (what toEqual compares). */
function same(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (
    typeof a !== 'object' ||
    typeof b !== 'object' ||
    a === null ||
    b === null ||
    Array.isArray(a) !== Array.isArray(b)
  )
    return false;
  if (Array.isArray(a)) {
    const other = b as unknown[];
    return a.length === other.length && a.every((x, i) => same(x, other[i]));
  }
  const ra = a as Record<string, unknown>;
  const rb = b as Record<string, unknown>;
  const ka = Object.keys(ra).filter((k) => ra[k] !== undefined);
  const kb = Object.keys(rb).filter((k) => rb[k] !== undefined);
  return ka.length === kb.length && ka.every((k) => same(ra[k], rb[k]));
}

const byName = (list: readonly TargetObject[]) =>
  [...list].sort((x, y) => (keyOf(x) < keyOf(y) ? -1 : keyOf(x) > keyOf(y) ? 1 : 0));
/**
 * The two lists hold the same objects, whatever their order and their keys' order. Compared by hand, per case; on a
 * difference, toEqual says where.
 */
function expectSameObjects(actual: readonly TargetObject[], expected: readonly TargetObject[]): void {
  const a = byName(actual);
  const b = byName(expected);
  if (a.length !== b.length || !a.every((o, i) => same(o, b[i]))) expectEqual(a, b);
}

const HOST_FIELDS = new Set(['hostname', 'sni', 'host', 'endpoint']);
/** Every host an object sends to: Envoy Backends (fqdn, SNI), agentgateway providers (host, Azure endpoint, SNI). */
function hostsOf(o: TargetObject): string[] {
  const out: string[] = [];
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v !== null && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) {
        if (typeof x === 'string' && HOST_FIELDS.has(k)) out.push(x);
        walk(x);
      }
    }
  };
  walk(o.spec);
  return out;
}

/** Fisher-Yates driven by the case's numbers, so the order is part of the case. */
function shuffled<T>(items: readonly T[], seed: readonly number[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = seed[i % seed.length]! % (i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

const MODES = [
  ['envoy-ai-gateway', 'static'],
  ['agentgateway', 'static'],
  ['envoy-ai-gateway', 'override'],
] as const;

describe(`cross-account identities in the export (properties, seed ${SEED})`, () => {
  test.each(MODES)(
    '%s (%s): no two different inputs share an object name, and the order the accounts are read in changes nothing',
    (target, mode) => {
      fc.assert(
        fc.property(caseArb, (c) => {
          const input = compiled(c);
          const { objects, report } = exportAccounts(input, options(target, mode, c.allowTenantHosts));
          // One object per name; a name two would have shared is in the report instead.
          const byKey = new Map<string, TargetObject[]>();
          for (const o of objects) byKey.set(keyOf(o), [...(byKey.get(keyOf(o)) ?? []), o]);
          expectEqual(
            [...byKey].filter(([, list]) => list.length > 1).map(([k]) => k),
            [],
          );
          // A shared Backend stands for one host, and a host has one Backend: no host names another's.
          const backends = objects
            .filter((o) => o.kind === 'Backend')
            .map((o) => [o.metadata.name, hostsOf(o)[0]] as const);
          expectIs(new Set(backends.map(([, h]) => h)).size, backends.length);
          const again = exportAccounts(
            { ...input, accounts: shuffled(input.accounts, c.order) },
            options(target, mode, c.allowTenantHosts),
          );
          expectSameObjects(again.objects, objects);
          expectEqual(again.report.conflicts, report.conflicts);
        }),
        { seed: SEED, numRuns: propertyRuns(RUNS) },
      );
    },
  );

  test.each(MODES)(
    "%s (%s): every exported host passes the CRD, a tenant's host needs the provider's domain or the allow flag, each refusal is on its credential",
    (target, mode) => {
      fc.assert(
        fc.property(caseArb, (c) => {
          const input = compiled(c);
          const { objects, report } = exportAccounts(input, options(target, mode, c.allowTenantHosts));
          // Failures are collected and asserted once per case: an expect per host cost more than the export itself.
          const exportedHosts = objects.flatMap(hostsOf);
          expectEqual(
            exportedHosts.filter((h) => !crdHost(h)),
            [],
          );
          // The hosts the same accounts reach without any tenant-named host (Azure resource configs instead): the catalog's.
          const resource: CredentialFacts = {
            kind: 'azure',
            entries: [{ type: 'resource', resourceName: 'platform', resourceType: 'openai' }],
          };
          const withoutTenantHosts = {
            ...input,
            facts: new Map([...input.facts].map(([id, f]) => [id, f.kind === 'azure' ? resource : f])),
          };
          const platform = new Set(
            exportAccounts(withoutTenantHosts, options(target, mode, c.allowTenantHosts)).objects.flatMap(hostsOf),
          );
          const tenantHosts = new Set(
            c.accounts.flatMap((a) =>
              a.credentials.filter((k) => k.kind === 'azure').map((k) => k.host.toLowerCase().replace(/\.+$/, '')),
            ),
          );
          const outsideProviderDomain = c.allowTenantHosts
            ? []
            : exportedHosts.filter((h) => tenantHosts.has(h) && !platform.has(h) && !PROVIDER_HOST.test(h));
          expectEqual(outsideProviderDomain, []);
          const misreported: { credential: string; host: string; reported: boolean }[] = [];
          for (const a of c.accounts) {
            for (const k of a.credentials.filter((x) => x.kind === 'azure')) {
              const host = k.host.toLowerCase().replace(/\.+$/, '');
              const exported = crdHost(host) && (c.allowTenantHosts || PROVIDER_HOST.test(host));
              const notes = report.accounts
                .find((r) => r.namespace === a.namespace)!
                .credentials.find((r) => r.name === k.name)!.notes;
              const reported = notes.some((n) => n.semantic === 'host' && n.detail.includes(host));
              if (reported === exported) misreported.push({ credential: `${a.namespace}/${k.name}`, host, reported });
            }
          }
          expectEqual(misreported, []);
        }),
        { seed: SEED, numRuns: propertyRuns(RUNS) },
      );
    },
  );

  test("the shared merge: no account's copy is replaced by another's, conflicts name every account, the order changes nothing", () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        const input = compiled(c);
        const opts = options('envoy-ai-gateway', 'static', c.allowTenantHosts);
        // Each account's share as the controller's desiredExport builds it: the account exported alone, its objects
        // without the account's label.
        const shares = new Map(
          input.accounts.map((a) => [
            a.namespace,
            exportAccounts({ ...input, accounts: [a] }, opts).objects.filter(
              (o) => o.metadata.labels?.[ACCOUNT] === undefined,
            ),
          ]),
        );
        const merge = (order: readonly string[], churn: readonly string[]) => {
          const index = new SharedIndex();
          for (const ns of order) index.set(ns, shares.get(ns));
          // Accounts removed and exported again, as a leader's passes do.
          for (const ns of churn) index.set(ns, undefined);
          for (const ns of churn) index.set(ns, shares.get(ns));
          return { merged: index.merged(), conflicts: index.conflicts() };
        };
        const names = [...shares.keys()];
        const first = merge(names, []);
        const second = merge(shuffled(names, c.order), shuffled(names, [...c.order].reverse()).slice(0, 2));
        expectSameObjects(second.merged, first.merged);
        expectEqual(second.conflicts, first.conflicts);
        const merged = new Map(first.merged.map((o) => [keyOf(o), o]));
        const conflicted = new Map(first.conflicts.map((x) => [x.key, x.accounts]));
        const replaced: { account: string; object: string }[] = [];
        for (const [ns, share] of shares) {
          for (const o of share.filter((x) => x.kind !== 'BackendSecurityPolicy')) {
            const written = merged.get(keyOf(o));
            // Either this account's own copy is what is written, or the name is refused as a conflict naming it.
            const ok = written !== undefined ? same(written, o) : (conflicted.get(keyOf(o)) ?? []).includes(ns);
            if (!ok) replaced.push({ account: ns, object: keyOf(o) });
          }
        }
        expectEqual(replaced, []);
      }),
      { seed: SEED, numRuns: propertyRuns(RUNS) },
    );
  });
});
