// The BYOKKey object ↔ REST body mapping, selectors, Table cells, patches and the watch hub: the pure parts of
// the aggregated API (the protocol itself is tested through the kube-aggregator in test/integration/aggregated).
import { describe, expect, test } from '@jest/globals';
import { openApiV3 as groupOpenApiV3 } from '../../../src/aggregated/discovery.ts';
import { matches, parseSelector, SelectorError } from '../../../src/aggregated/handlers/selection.ts';
import { jsonPatch, mergePatch, PatchError } from '../../../src/aggregated/patch.ts';
import { byokKeysDetails } from '../../../src/aggregated/registry/byokkeys/index.ts';
import { GLOBAL_WORKSPACE, toKubeObject } from '../../../src/aggregated/registry/byokkeys/object.ts';
import { KIND_DEF } from '../../../src/aggregated/registry/byokkeys/openapi.ts';
import { credentialChanges } from '../../../src/aggregated/registry/byokkeys/storage.ts';
import {
  createRequestFrom,
  kubeFieldOf,
  updateRequestFrom,
} from '../../../src/aggregated/registry/byokkeys/strategy.ts';
import { humanAge, TABLE_COLUMNS, tableCells } from '../../../src/aggregated/registry/byokkeys/table.ts';
import { InvalidObject } from '../../../src/aggregated/status.ts';
import { ExpiredError, WatchHub } from '../../../src/aggregated/watch.ts';
import { GLOBAL_WORKSPACE_SCOPE } from '../../../src/operator/reconcile/credential.ts';
import type { BYOKCredential } from '../../../src/schema/generated/types.ts';
import { byokCredential } from '../../../src/schema/resources.ts';
import { ApiState } from '../../../src/service/read-model.ts';
import { credential, inNamespace, withLabels, withMetadata, withSpec, withStatus } from '../../support/builders.ts';

const openApiV3 = () => groupOpenApiV3([byokKeysDetails]);

function cred(name: string, rv: string, spec: Partial<BYOKCredential['spec']> = {}): BYOKCredential {
  return credential(
    name,
    inNamespace('acct'),
    withMetadata({
      uid: `uid-${name}`,
      resourceVersion: rv,
      creationTimestamp: '2025-01-02T03:04:05Z' as unknown as Date,
    }),
    withLabels({ 'app.kubernetes.io/managed-by': 'byok-api' }),
    withSpec(spec),
    withStatus({ label: 'sk-...abcd' }),
  );
}

function entry(c: BYOKCredential) {
  const s = new ApiState();
  s.upsertCredential(c);
  const e = s.credential('acct', c.metadata.name ?? '');
  if (!e) throw new Error('no entry');
  return e;
}

describe('BYOKKey object', () => {
  test('carries every spec 2.1 field, standard metadata and synthesized labels; never a key', () => {
    const o = toKubeObject(entry(cred('a', '12', { workspace: 'main', displayName: 'N', allowedModels: ['a/b'] })));
    expect(o.metadata).toMatchObject({
      namespace: 'acct',
      uid: 'uid-a',
      resourceVersion: '12',
      creationTimestamp: '2025-01-02T03:04:05Z',
    });
    expect(o.metadata.labels).toEqual({
      'api.byok.gateway.dev/provider': 'openai',
      'api.byok.gateway.dev/workspace': 'main',
      'app.kubernetes.io/managed-by': 'byok-api',
    });
    expect(Object.keys(o.spec).sort()).toEqual(
      [
        'allowedApiKeyHashes',
        'allowedModels',
        'allowedUserIds',
        'declaredZdr',
        'disabled',
        'displayName',
        'isByokOnly',
        'isFallback',
        'isRequired',
        'provider',
        'sortOrder',
        'workspaceId',
      ].sort(),
    );
    expect(o.status).toMatchObject({ id: o.metadata.name, label: 'sk-...abcd', createdAt: '2025-01-02T03:04:05.000Z' });
    expect(tableCells(o, Date.parse('2025-01-02T04:04:05Z'))).toEqual([
      o.metadata.name,
      'a',
      'openai',
      'sk-...abcd',
      'main',
      false,
      0,
      false,
      'Unknown',
      'Reconciling',
      '<none>',
      '60m',
      '<none>',
      'Unknown',
      '<none>',
    ]);
    const global = toKubeObject(entry(cred('g', '13', { isFallback: true })));
    expect(global.metadata.labels).not.toHaveProperty(['api.byok.gateway.dev/workspace']);
    expect(tableCells(global, Date.parse('2025-01-02T03:04:35Z')).slice(4, 6)).toEqual(['GLOBAL', true]);
  });

  test('one vocabulary at both doors: kubectl get byokkeys names the scope and the section as kubectl get byok does, and names the backing BYOKCredential', () => {
    const crd = byokCredential.printerColumns.map((c) => c.name);
    const agg = TABLE_COLUMNS.map((c) => c.name);
    // The same column names for the same facts (Workspace / GLOBAL, Fallback true|false), never a second word.
    for (const name of ['Workspace', 'Fallback']) {
      expect([name, crd.includes(name), agg.includes(name)]).toEqual([name, true, true]);
      expect(TABLE_COLUMNS.find((c) => c.name === name)?.type).toBe(
        byokCredential.printerColumns.find((c) => c.name === name)?.type,
      );
    }
    for (const names of [crd, agg]) expect(names).not.toContain('Section');
    expect(GLOBAL_WORKSPACE).toBe(GLOBAL_WORKSPACE_SCOPE);
    for (const c of [...TABLE_COLUMNS, ...byokCredential.printerColumns])
      expect(c.description).not.toContain('(global)');
    // The Credential column: the BYOKCredential's metadata.name behind the key, next to the id.
    expect(agg.slice(0, 2)).toEqual(['ID', 'Credential']);
    const o = toKubeObject(entry(cred('openai-primary', '14')));
    expect(tableCells(o).slice(0, 2)).toEqual([o.metadata.name, 'openai-primary']);
  });

  test('status carries health and readiness; the Table shows READY, REASON, UPSTREAM and, wide, the delivery', () => {
    const c = (type: string, status: string, reason: string) => ({
      type,
      status,
      reason,
      message: `${type} says ${reason}`,
      observedGeneration: 1,
      lastTransitionTime: '2025-01-02T03:04:05Z',
    });
    const broken = cred('p', '20');
    broken.metadata.generation = 1;
    broken.status = {
      label: '',
      conditions: [
        c('Ready', 'False', 'PayloadInvalid'),
        c('UpstreamHealthy', 'True', 'Serving'),
        c('Delivered', 'False', 'Pending'),
      ] as never,
      lastUsedTime: '2025-01-02T04:00:05Z',
      delivery: { loaded: 1, total: 2, configVersion: 'feedc0de00112233' },
    };
    const o = toKubeObject(entry(broken));
    expect(o.status).toEqual({
      id: o.metadata.name,
      label: '',
      createdAt: '2025-01-02T03:04:05.000Z',
      ready: false,
      reason: 'PayloadInvalid',
      message: 'Ready says PayloadInvalid',
      upstream: 'Serving',
      lastUsedTime: '2025-01-02T04:00:05.000Z',
      delivered: false,
      deliveredVersion: 'feedc0de00112233',
    });
    expect(tableCells(o, Date.parse('2025-01-02T04:04:05Z')).slice(8)).toEqual([
      'False',
      'PayloadInvalid',
      'Serving',
      '60m',
      '4m',
      'False',
      'feedc0de00112233',
    ]);
    const props =
      (
        openApiV3() as {
          components: {
            schemas: Record<
              string,
              { properties: { status: { properties: Record<string, { description?: string }> } } }
            >;
          };
        }
      ).components.schemas[KIND_DEF]?.properties.status.properties ?? {};
    expect(Object.keys(props)).toEqual([
      'id',
      'label',
      'createdAt',
      'ready',
      'reason',
      'message',
      'upstream',
      'lastUsedTime',
      'delivered',
      'deliveredVersion',
    ]);
    expect(props.delivered?.description).toContain('deliveredVersion');
  });

  test('create: spec → REST body; sortOrder set apart; names and unknown fields rejected with the field path', () => {
    expect(
      createRequestFrom(
        {
          apiVersion: 'api.byok.gateway.dev/v1',
          kind: 'BYOKKey',
          metadata: { generateName: 'x-' },
          spec: { provider: 'openai', key: 'k', isFallback: true, workspaceId: null, sortOrder: 3 },
        },
        'acct',
      ),
    ).toEqual({
      body: { provider: 'openai', key: 'k', is_fallback: true, workspace_id: null },
      sortOrder: 3,
    });
    const fields = (f: () => unknown) => {
      try {
        f();
      } catch (err) {
        if (err instanceof InvalidObject) return err.causes.map((c) => c.field);
      }
      return [];
    };
    expect(
      fields(() => createRequestFrom({ metadata: { name: 'mine' }, spec: { provider: 'openai' } }, 'acct')),
    ).toEqual(['metadata.name']);
    expect(fields(() => createRequestFrom({ spec: { provider: 'openai', colour: 1 }, extra: true }, 'acct'))).toEqual([
      'extra',
      'spec.colour',
    ]);
    expect(fields(() => createRequestFrom({ kind: 'Secret', spec: {} }, 'acct'))).toEqual(['kind']);
    expect(fields(() => createRequestFrom({ metadata: { namespace: 'other' }, spec: {} }, 'acct'))).toEqual([
      'metadata.namespace',
    ]);
  });

  test('update: a full object → only the changed fields; absent filters clear, a present key rotates', () => {
    const e = entry(cred('b', '5', { allowedModels: ['a/b'], displayName: 'N' }));
    const o = toKubeObject(e);
    expect(updateRequestFrom(o, e, 'acct')).toEqual({});
    expect(updateRequestFrom({ ...o, spec: { ...o.spec, isRequired: true } }, e, 'acct')).toEqual({
      is_required: true,
    });
    const { allowedModels: _drop, ...withoutFilter } = o.spec;
    expect(updateRequestFrom({ ...o, spec: withoutFilter }, e, 'acct')).toEqual({ allowed_models: null });
    expect(updateRequestFrom({ ...o, spec: { ...o.spec, key: 'new' } }, e, 'acct')).toEqual({ key: 'new' });
    expect(updateRequestFrom({ ...o, spec: { ...o.spec, provider: 'anthropic' } }, e, 'acct')).toEqual({
      provider: 'anthropic',
    });
    expect(() => updateRequestFrom({ ...o, metadata: { ...o.metadata, name: 'other' } }, e, 'acct')).toThrow(
      InvalidObject,
    );
  });

  test('REST field names map to BYOKKey paths', () => {
    expect(kubeFieldOf('allowed_models[3]')).toBe('spec.allowedModels[3]');
    expect(kubeFieldOf('name')).toBe('spec.displayName');
    expect(kubeFieldOf('workspace_id')).toBe('spec.workspaceId');
    expect(kubeFieldOf('other')).toBe('other');
  });

  test('selectors: equality, inequality, existence; set-based ones are refused', () => {
    const labels = { 'api.byok.gateway.dev/provider': 'openai' };
    expect(matches(parseSelector('api.byok.gateway.dev/provider=openai'), labels)).toBe(true);
    expect(matches(parseSelector('api.byok.gateway.dev/provider==openai,!x'), labels)).toBe(true);
    expect(matches(parseSelector('api.byok.gateway.dev/provider!=openai'), labels)).toBe(false);
    expect(matches(parseSelector('api.byok.gateway.dev/workspace'), labels)).toBe(false);
    expect(() => parseSelector('env in (a,b)')).toThrow(SelectorError);
  });

  test('ages read like kubectl', () => {
    const t0 = Date.parse('2025-01-01T00:00:00Z');
    expect(humanAge('2025-01-01T00:00:00Z', t0 + 30_000)).toBe('30s');
    expect(humanAge('2025-01-01T00:00:00Z', t0 + 5 * 60_000 + 3000)).toBe('5m3s');
    expect(humanAge('2025-01-01T00:00:00Z', t0 + 3 * 86_400_000)).toBe('3d');
  });

  test('the OpenAPI schema documents the write-only key and carries the GVK kubectl explain looks for', () => {
    const schemas = (
      openApiV3().components as {
        schemas: Record<
          string,
          {
            properties: Record<string, { properties?: Record<string, { description?: string }> }>;
            'x-kubernetes-group-version-kind': unknown;
          }
        >;
      }
    ).schemas;
    const kind = schemas[KIND_DEF];
    expect(kind?.['x-kubernetes-group-version-kind']).toEqual([
      { group: 'api.byok.gateway.dev', version: 'v1', kind: 'BYOKKey' },
    ]);
    expect(kind?.properties.spec?.properties?.key?.description).toMatch(/Write-only/);
  });
});

describe('patches', () => {
  test('merge patch: null removes, objects merge, the input is untouched', () => {
    const base = { spec: { a: 1, b: [1], c: { d: 1 } } };
    expect(mergePatch(base, { spec: { a: null, b: [2], c: { e: 2 } } })).toEqual({
      spec: { b: [2], c: { d: 1, e: 2 } },
    });
    expect(base.spec.a).toBe(1);
  });

  test('JSON patch: add, remove, replace, test, move, copy; failures name the path', () => {
    const base = { spec: { list: ['a'], n: 1 } };
    expect(
      jsonPatch(base, [
        { op: 'add', path: '/spec/list/-', value: 'b' },
        { op: 'replace', path: '/spec/n', value: 2 },
        { op: 'test', path: '/spec/n', value: 2 },
        { op: 'copy', from: '/spec/n', path: '/spec/m' },
        { op: 'move', from: '/spec/m', path: '/spec/k' },
        { op: 'remove', path: '/spec/list/0' },
      ]),
    ).toEqual({ spec: { list: ['b'], n: 2, k: 2 } });
    expect(base.spec.list).toEqual(['a']);
    expect(() => jsonPatch(base, [{ op: 'replace', path: '/spec/missing/x', value: 1 }])).toThrow(PatchError);
    expect(() => jsonPatch(base, [{ op: 'test', path: '/spec/n', value: 9 }])).toThrow(/test failed/);
    expect(() => jsonPatch(base, { op: 'add' })).toThrow(PatchError);
  });
});

describe('watch hub', () => {
  test('replays what arrived after a list resourceVersion, including out-of-order arrivals; expired versions are refused', () => {
    const state = new ApiState();
    const hub = new WatchHub(credentialChanges(state), 3);
    state.upsertCredential(cred('a', '10'));
    const listRv = hub.currentRv();
    expect(listRv).toBe('10');
    state.upsertCredential(cred('b', '20'));
    // An own write observed ahead of the watch stream: 15 arrives after 20.
    state.upsertCredential(cred('c', '15'));
    const seen: string[] = [];
    const { replay, stop } = hub.subscribe(listRv, (e) => seen.push(`${e.type}:${e.entry.name}`));
    expect(replay.map((e) => e.entry.name)).toEqual(['b', 'c']);
    state.removeCredential(cred('a', '10'));
    expect(seen).toEqual(['DELETED:a']);
    // A delete observed with its last known version is given one after everything seen.
    expect(hub.currentRv()).toBe('21');
    stop();
    state.upsertCredential(cred('d', '30'));
    expect(() => hub.subscribe('10', () => undefined)).toThrow(ExpiredError);
    hub.close();
  });
});
