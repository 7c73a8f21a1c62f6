// The export controller's pure part: what it wants in the export namespace for one account (objects, derived
// Secrets, Exported conditions) and the shared objects merged over accounts.
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { compileAccount } from '../../../../src/compiler/compile.ts';
import { derivedSecretName, type ExportOptions, type TargetObject } from '../../../../src/export/index.ts';
import { loadCatalog } from '../../../../src/gateway/catalog.ts';
import type { AccountSnapshot, SnapshotCredential } from '../../../../src/operator/compile/pipeline.ts';
import {
  ACCOUNT_LABEL,
  desiredExport,
  exportInputDigest,
  SHARED_LABEL,
  SharedIndex,
} from '../../../../src/operator/export/desired.ts';
import type { BYOKCredential } from '../../../../src/schema/generated/types.ts';
import { SHAPES } from '../../../support/fixtures/export.ts';

const gatewayCatalog = loadCatalog(
  join(import.meta.dirname, '..', '..', '..', '..', 'config', 'catalog', 'catalog.json'),
);
const catalog = {
  catalog: gatewayCatalog.catalog,
  upstream: (model: string, endpointId: string) => gatewayCatalog.upstream(model, endpointId),
};
const options = (target: ExportOptions['target']): ExportOptions => ({
  target,
  mode: 'static',
  namespace: 'byok-export',
  gateway: { name: 'byok-gateway' },
});

function snapshot(ns: string, valid = true, judged = true): AccountSnapshot {
  const credentials: SnapshotCredential[] = SHAPES.map((s, i) => ({
    resource: {
      apiVersion: 'byok.gateway.dev/v1alpha1',
      kind: 'BYOKCredential',
      metadata: { name: s.name, namespace: ns, generation: 1 },
      spec: { provider: s.provider, secretRef: { name: s.name } },
      status: judged
        ? {
            conditions: [
              {
                type: 'Ready',
                status: valid || i > 0 ? 'True' : 'False',
                reason: valid || i > 0 ? 'Ready' : 'SecretNotFound',
                message: '',
                lastTransitionTime: '2026-01-01T00:00:00Z',
                observedGeneration: 1,
              },
            ],
          }
        : {},
    } as unknown as BYOKCredential,
    verdict: { valid: valid || i > 0, sortOrder: i, ...(valid || i > 0 ? { payload: s.payload } : {}) },
  }));
  return {
    namespace: ns,
    workspaces: [],
    guardrails: [],
    apiKeys: [],
    credentials,
    now: new Date('2026-01-01T00:00:00Z'),
  };
}

describe.each(['envoy-ai-gateway', 'agentgateway'] as const)('desiredExport (%s)', (target) => {
  const snap = snapshot('team-a');
  const out = desiredExport(snap, compileAccount(snap), catalog, options(target));

  test("the account's objects carry its label, shared ones the shared label; no key material outside Secret data", () => {
    expect(out.objects.length).toBeGreaterThan(0);
    for (const o of out.objects) expect(o.metadata.labels?.[ACCOUNT_LABEL]).toBe('team-a');
    for (const o of out.shared) expect(o.metadata.labels?.[SHARED_LABEL]).toBe('true');
    expect(
      JSON.stringify([out.objects, out.shared, [...out.conditions.values()], out.secrets.map((s) => s.metadata)]),
    ).not.toMatch(/canary/i);
  });

  test('one derived Secret per credential (per Azure entry), holding the key as the target reads it', () => {
    const plain = out.secrets.find((s) => s.metadata.name === derivedSecretName(target, 'team-a', 'openai-plain'));
    expect(Buffer.from(plain!.data.apiKey!, 'base64').toString('utf8')).toBe(SHAPES[0]!.payload);
    expect(out.secrets.filter((s) => s.metadata.name.startsWith('byok-shared'))).toEqual([]);
    for (const s of out.secrets) expect(s.metadata.labels[ACCOUNT_LABEL]).toBe('team-a');
  });

  test('every credential gets Exported with the dropped semantics named', () => {
    expect([...out.conditions.keys()].sort()).toEqual(SHAPES.map((s) => s.name).sort());
    for (const c of out.conditions.values()) {
      expect(c).toMatchObject({ type: 'Exported', status: 'True', reason: 'Exported' });
      expect(c.message).toMatch(/dropped: .*fee/);
    }
  });

  test('a credential that is not Ready is NotExported, and the input digest moves with it', () => {
    const bad = snapshot('team-a', false);
    const e = desiredExport(bad, compileAccount(bad), catalog, options(target));
    expect(e.conditions.get(SHAPES[0]!.name)).toMatchObject({ status: 'False', reason: 'NotExported' });
    expect(e.conditions.get(SHAPES[0]!.name)?.message).toContain('SecretNotFound');
    // Not judged yet by the reconciler (a cold start): no condition rather than one to rewrite a moment later.
    const unjudged = snapshot('team-a', false, false);
    expect(
      desiredExport(unjudged, compileAccount(unjudged), catalog, options(target)).conditions.has(SHAPES[0]!.name),
    ).toBe(false);
    expect(exportInputDigest(bad, compileAccount(bad))).not.toBe(exportInputDigest(snap, compileAccount(snap)));
    expect(exportInputDigest(snap, compileAccount(snap))).toBe(
      exportInputDigest(snapshot('team-a'), compileAccount(snapshot('team-a'))),
    );
  });
});

describe('SharedIndex', () => {
  const policy = (name: string, refs: string[]): TargetObject => ({
    apiVersion: 'aigateway.envoyproxy.io/v1beta1',
    kind: 'BackendSecurityPolicy',
    metadata: { name, namespace: 'x', annotations: { 'byok.gateway.dev/source': 'shared:openai' } },
    spec: {
      type: 'APIKey',
      targetRefs: refs.map((r) => ({ group: 'aigateway.envoyproxy.io', kind: 'AIServiceBackend', name: r })),
    },
  });
  const backend: TargetObject = {
    apiVersion: 'gateway.envoyproxy.io/v1alpha1',
    kind: 'Backend',
    metadata: { name: 'api-openai-com', namespace: 'x' },
    spec: {},
  };
  const refsOf = (objects: TargetObject[]) =>
    objects
      .filter((o) => o.kind === 'BackendSecurityPolicy')
      .flatMap((o) => (o.spec.targetRefs as { name: string }[]).map((r) => r.name));

  test("a shared policy targets the union of every account's backends, re-chunked; an object lives while one account uses it", () => {
    const index = new SharedIndex();
    index.set('a', [backend, policy('byok-shared-openai', ['b1', 'b2'])]);
    index.set('b', [backend, policy('byok-shared-openai', ['b2', 'b3'])]);
    expect(refsOf(index.merged())).toEqual(['b1', 'b2', 'b3']);
    index.set('a', undefined);
    expect(refsOf(index.merged())).toEqual(['b2', 'b3']);
    expect(index.merged().some((o) => o.kind === 'Backend')).toBe(true);
    index.set('b', undefined);
    expect(index.merged()).toEqual([]);
    const many = Array.from({ length: 20 }, (_, i) => `b${String(i).padStart(2, '0')}`);
    index.set('c', [policy('byok-shared-openai', many.slice(0, 16)), policy('byok-shared-openai-2', many.slice(16))]);
    expect(index.merged().map((o) => o.metadata.name)).toEqual(['byok-shared-openai', 'byok-shared-openai-2']);
    expect(refsOf(index.merged())).toEqual(many);
  });

  test('two accounts that build one name with different content: neither copy is written, both accounts are named, in either order', () => {
    const host = (h: string): TargetObject => ({
      ...backend,
      spec: { endpoints: [{ fqdn: { hostname: h, port: 443 } }] },
    });
    for (const order of [
      ['a', 'b'],
      ['b', 'a'],
    ]) {
      const index = new SharedIndex();
      const shares: Record<string, TargetObject[]> = {
        a: [host('bedrock-runtime.eu-central-1.amazonaws.com')],
        b: [host('tenant.example.com')],
      };
      for (const ns of order) index.set(ns, shares[ns]);
      expect(index.merged()).toEqual([]);
      expect(index.conflicts()).toEqual([
        { key: 'gateway.envoyproxy.io/v1alpha1|Backend|api-openai-com', accounts: ['a', 'b'] },
      ]);
      // The conflict ends with the account that caused it; the other's copy is written again.
      index.set('b', undefined);
      expect(index.conflicts()).toEqual([]);
      expect(index.merged()).toEqual(shares['a']);
    }
  });
});
