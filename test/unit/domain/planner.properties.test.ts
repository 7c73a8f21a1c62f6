// Invariants of the route planner over random accounts, catalogs and requests.
import { describe, expect, test } from '@jest/globals';
import fc from 'fast-check';
import {
  type CatalogEndpoint,
  type CompiledAccount,
  type CompiledCredential,
  createCatalog,
  type ProviderSlug,
  planRoute,
  prepareAccount,
  type RouteRequest,
} from '../../../src/domain/index.ts';
import { account, cred, ep, guardrail, hash, workspace } from '../../support/fixtures/domain.ts';
import { expectEqual, expectIs, propertyRuns } from '../../support/properties.ts';

const PROVIDERS: ProviderSlug[] = ['openai', 'anthropic', 'azure', 'together', 'mistral'];
const MODELS = ['m/a', 'm/b', 'm/c'];
const KEYS = [hash(1), hash(2), hash(3)];
const USERS = ['u1', 'u2', 'u3'];
const WORKSPACES = ['w1', 'w2'];

const subset = <T>(items: T[]): fc.Arbitrary<T[] | null> => fc.option(fc.subarray(items), { nil: null, freq: 2 });

const credArb = (i: number): fc.Arbitrary<CompiledCredential> =>
  fc
    .record({
      provider: fc.constantFrom(...PROVIDERS),
      workspaceId: fc.option(fc.constantFrom(...WORKSPACES), { nil: null }),
      disabled: fc.boolean(),
      isFallback: fc.boolean(),
      isRequired: fc.boolean(),
      isByokOnly: fc.boolean(),
      declaredZdr: fc.option(fc.boolean(), { nil: null }),
      allowedModels: subset(MODELS),
      allowedApiKeyHashes: subset(KEYS),
      allowedUserIds: subset(USERS),
      sortOrder: fc.integer({ min: 0, max: 5 }),
    })
    .map((r) => cred(`c${i}`, r.provider, { ...r, isByokOnly: r.isByokOnly && !r.isFallback }));

const accountArb: fc.Arbitrary<CompiledAccount> = fc
  .record({
    n: fc.integer({ min: 0, max: 12 }),
    privacy: fc.record({ denyDataCollection: fc.boolean(), alwaysZdr: fc.boolean() }),
    g: fc.record({
      requireZdr: fc.boolean(),
      denyDataCollection: fc.boolean(),
      allowedProviders: subset(PROVIDERS as string[]),
      ignoredProviders: fc.subarray(PROVIDERS as string[]),
    }),
    keyGuard: fc.boolean(),
    defaultGuard: fc.boolean(),
  })
  .chain(({ n, privacy, g, keyGuard, defaultGuard }) =>
    fc.tuple(...Array.from({ length: n }, (_, i) => credArb(i))).map((creds) =>
      account(creds, {
        privacy,
        guardrails: [guardrail('g1', g)],
        workspaces: [workspace('w1', { defaultGuardrailId: defaultGuard ? 'g1' : null }), workspace('w2')],
        apiKeys: KEYS.map((h, i) => ({
          hash: h,
          workspaceId: 'w1',
          guardrailId: keyGuard && i === 0 ? 'g1' : null,
          expiresAt: null,
        })),
      }),
    ),
  );

const endpointsArb: fc.Arbitrary<CatalogEndpoint[]> = fc
  .uniqueArray(
    fc.record({
      provider: fc.constantFrom(...PROVIDERS),
      region: fc.option(fc.constantFrom('eu', 'us'), { nil: null, freq: 2 }),
      zdr: fc.boolean(),
      dataCollection: fc.boolean(),
    }),
    { selector: (e) => `${e.provider}/${e.region ?? ''}`, maxLength: 10 },
  )
  .map((list) => list.map((e) => ep(e.region === null ? e.provider : `${e.provider}/${e.region}`, e.provider, e)));

const requestArb: fc.Arbitrary<RouteRequest> = fc.record({
  model: fc.constantFrom(...MODELS),
  apiKeyHash: fc.constantFrom(...KEYS),
  userId: fc.option(fc.constantFrom(...USERS), { nil: null }),
  workspaceId: fc.constantFrom(...WORKSPACES),
  providerOrder: fc.option(fc.subarray([...PROVIDERS, 'openai/eu', 'azure/us', 'mistral/eu']), { nil: null }),
  providerOnly: fc.option(fc.subarray([...PROVIDERS, 'openai/eu', 'azure/us']), { nil: null, freq: 3 }),
  requireZdr: fc.boolean(),
  denyDataCollection: fc.boolean(),
  baseAddress: fc.oneof(fc.constant('global' as const), fc.constantFrom({ region: 'eu' }, { region: 'us' })),
  isVideoGeneration: fc.boolean(),
});

const scenario = fc.record({ account: accountArb, endpoints: endpointsArb, request: requestArb });

function applies(c: CompiledCredential, r: RouteRequest): boolean {
  return (
    !c.disabled &&
    (c.workspaceId === null || c.workspaceId === r.workspaceId) &&
    (c.allowedApiKeyHashes === null || c.allowedApiKeyHashes.includes(r.apiKeyHash)) &&
    (c.allowedUserIds === null || (r.userId !== null && c.allowedUserIds.includes(r.userId)))
  );
}

function plan(s: { account: CompiledAccount; endpoints: CatalogEndpoint[]; request: RouteRequest }) {
  const catalog = createCatalog(MODELS.map((model) => ({ model, endpoints: s.endpoints })));
  return planRoute(s.account, catalog, s.request);
}

const runs = { numRuns: propertyRuns(400) };

describe('route planner invariants', () => {
  test('no disabled, out-of-scope or filtered-out credential is ever attempted', () => {
    fc.assert(
      fc.property(scenario, (s) => {
        const byId = new Map(s.account.credentials.map((c) => [c.id, c]));
        for (const a of plan(s).attempts) {
          if (a.kind !== 'credential') continue;
          const c = byId.get(a.credentialId) as CompiledCredential;
          expectIs(applies(c, s.request), true);
          expectIs(c.allowedModels === null || c.allowedModels.includes(s.request.model), true);
          expectIs(a.provider, c.provider);
          expectIs(a.endpoint.provider, c.provider);
        }
      }),
      runs,
    );
  });

  test('sections are in order: prioritized credentials, shared endpoints, fallbacks (never before shared)', () => {
    fc.assert(
      fc.property(scenario, (s) => {
        const phase = plan(s).attempts.map((a) => (a.kind === 'shared' ? 1 : a.section === 'prioritized' ? 0 : 2));
        expectEqual(
          phase,
          [...phase].sort((x, y) => x - y),
        );
      }),
      runs,
    );
  });

  test('no shared endpoint of a provider with an applicable byok-only credential, or of a required model', () => {
    fc.assert(
      fc.property(scenario, (s) => {
        const blocked = new Set(
          s.account.credentials
            .filter(
              (c) =>
                applies(c, s.request) &&
                (c.isByokOnly ||
                  (c.isRequired && (c.allowedModels === null || c.allowedModels.includes(s.request.model)))),
            )
            .map((c) => c.provider),
        );
        for (const a of plan(s).attempts) if (a.kind === 'shared') expectIs(blocked.has(a.provider), false);
      }),
      runs,
    );
  });

  test('every credential and every catalog endpoint is either attempted or explained exactly once', () => {
    fc.assert(
      fc.property(scenario, (s) => {
        const p = plan(s);
        const credIds = [
          ...p.attempts.flatMap((a) => (a.kind === 'credential' ? [a.credentialId] : [])),
          ...p.excluded.flatMap((x) => (x.subject.kind === 'credential' ? [x.subject.credentialId] : [])),
        ].sort();
        expectEqual(credIds, s.account.credentials.map((c) => c.id).sort());
        const epIds = [
          ...p.attempts.flatMap((a) => (a.kind === 'shared' ? [a.endpoint.id] : [])),
          ...p.excluded.flatMap((x) => (x.subject.kind === 'shared' ? [x.subject.endpointId] : [])),
        ].sort();
        expectEqual(epIds, s.endpoints.map((e) => e.id).sort());
        expectIs(p.attempts.length === 0, p.error !== undefined);
      }),
      runs,
    );
  });

  test('data policies hold for every attempt (declared ZDR only for credentials, never for video)', () => {
    fc.assert(
      fc.property(scenario, (s) => {
        const acc = s.account;
        const g = acc.guardrails[0]!.dataPolicy;
        const guarded =
          acc.apiKeys.find((k) => k.hash === s.request.apiKeyHash)?.guardrailId === 'g1' ||
          (s.request.workspaceId === 'w1' && acc.workspaces[0]!.defaultGuardrailId === 'g1');
        const zdr = s.request.requireZdr === true || acc.privacy.alwaysZdr || (guarded && g.requireZdr);
        const noDc =
          s.request.denyDataCollection === true || acc.privacy.denyDataCollection || (guarded && g.denyDataCollection);
        const byId = new Map(acc.credentials.map((c) => [c.id, c]));
        for (const a of plan(s).attempts) {
          if (noDc) expectIs(a.endpoint.dataCollection, false);
          if (guarded && g.allowedProviders !== null) expect(g.allowedProviders).toContain(a.provider);
          if (guarded) expect(g.ignoredProviders).not.toContain(a.provider);
          if (zdr && !a.endpoint.zdr) {
            expectIs(a.kind, 'credential');
            expectIs(s.request.isVideoGeneration, false);
            if (a.kind === 'credential') expectIs(byId.get(a.credentialId)?.declaredZdr, true);
          }
        }
      }),
      runs,
    );
  });

  test('regional endpoints: in-region only on regional addresses; on the global API only targeted, or for prioritized credentials of a provider without a standard endpoint', () => {
    fc.assert(
      fc.property(scenario, (s) => {
        const r = s.request;
        const targets = [...(r.providerOrder ?? []), ...(r.providerOnly ?? [])];
        for (const a of plan(s).attempts) {
          if (r.baseAddress !== 'global') {
            expectIs(a.endpoint.region, r.baseAddress.region);
            continue;
          }
          if (a.endpoint.region === null || targets.includes(a.endpoint.id)) continue;
          expectIs(a.kind, 'credential');
          if (a.kind === 'credential') {
            expectIs(a.section, 'prioritized');
            expectIs(
              s.endpoints.some((e) => e.provider === a.provider && e.region === null),
              false,
            );
          }
        }
      }),
      runs,
    );
  });

  test('plans are deterministic, whether the account is prepared, re-prepared from a copy, or planned twice', () => {
    fc.assert(
      fc.property(scenario, (s) => {
        const catalog = createCatalog(MODELS.map((model) => ({ model, endpoints: s.endpoints })));
        const first = planRoute(s.account, catalog, s.request);
        const again = planRoute(prepareAccount(s.account), catalog, s.request);
        const copy = planRoute(
          structuredClone(s.account),
          createCatalog(MODELS.map((model) => ({ model, endpoints: structuredClone(s.endpoints) }))),
          structuredClone(s.request),
        );
        expectEqual(again, first);
        expectEqual(copy, first);
      }),
      { numRuns: propertyRuns(200) },
    );
  });

  test('plan objects are frozen, so sharing them between plans is safe', () => {
    const catalog = createCatalog([{ model: 'm/a', endpoints: [ep('openai', 'openai')] }]);
    const p = planRoute(account([cred('c', 'openai'), cred('d', 'openai', { disabled: true })]), catalog, {
      model: 'm/a',
      apiKeyHash: KEYS[0]!,
      userId: null,
      workspaceId: 'w1',
      baseAddress: 'global',
      isVideoGeneration: false,
    });
    for (const a of p.attempts) expectIs(Object.isFrozen(a), true);
    for (const x of p.excluded) expectIs(Object.isFrozen(x), true);
  });
});
