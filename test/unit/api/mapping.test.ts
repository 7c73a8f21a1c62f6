import { describe, expect, test } from '@jest/globals';
import { publicId } from '../../../src/domain/ids.ts';
import type { BYOKCredential, GatewayAPIKey } from '../../../src/schema/generated/types.ts';
import {
  compareKeys,
  credentialStatus,
  effectiveSortOrder,
  LABEL_ANNOTATION,
  LABEL_SECRET_VERSION_ANNOTATION,
  pickLabel,
  toByokKey,
} from '../../../src/service/mapping.ts';
import { ApiState } from '../../../src/service/read-model.ts';
import { credential, gatewayKey, inNamespace, withMetadata, withSpec, withStatus } from '../../support/builders.ts';

function cred(
  name: string,
  spec: Partial<BYOKCredential['spec']> = {},
  extra: { status?: BYOKCredential['status']; meta?: Partial<BYOKCredential['metadata']> } = {},
): BYOKCredential {
  return credential(
    name,
    inNamespace('acct'),
    withMetadata({
      resourceVersion: '10',
      generation: 1,
      creationTimestamp: '2025-01-02T03:04:05Z' as unknown as Date,
    }),
    withMetadata({ ...extra.meta }),
    withSpec(spec),
    ...(extra.status ? [withStatus<BYOKCredential>(extra.status)] : []),
  );
}

describe('CR → BYOKKey', () => {
  test('every field, with nulls for absent optional ones', () => {
    expect(toByokKey(cred('a'))).toEqual({
      id: publicId('BYOKCredential', 'acct', 'a'),
      provider: 'openai',
      workspace_id: null,
      label: '',
      name: null,
      disabled: false,
      is_fallback: false,
      is_required: false,
      is_byok_only: false,
      allowed_models: null,
      allowed_api_key_hashes: null,
      allowed_user_ids: null,
      sort_order: 0,
      created_at: '2025-01-02T03:04:05.000Z',
      declared_zdr: null,
      status: {
        ready: null,
        reason: 'Reconciling',
        message: 'not reconciled by the operator yet',
        upstream: null,
        last_used_at: null,
        delivered: null,
        delivered_version: null,
      },
    });
  });

  test('status: Ready, UpstreamHealthy and Delivered of the current generation; a stale verdict is Reconciling', () => {
    const c = (
      type: string,
      status: 'True' | 'False' | 'Unknown',
      reason: string,
      message = '',
      observedGeneration = 1,
    ) => ({ type, status, reason, message, observedGeneration, lastTransitionTime: '2025-01-02T03:04:05Z' });
    const broken = cred(
      'h',
      {},
      {
        status: {
          conditions: [
            c('Ready', 'False', 'PayloadInvalid', 'PayloadValid: key must be a single line'),
            c('UpstreamHealthy', 'False', 'Unauthorized', 'refused'),
            c('Delivered', 'True', 'Delivered'),
          ],
          lastUsedTime: '2025-01-03T00:00:00Z',
          delivery: { loaded: 2, total: 2, configVersion: '0123456789abcdef' },
        },
      },
    );
    expect(credentialStatus(broken)).toEqual({
      ready: false,
      reason: 'PayloadInvalid',
      message: 'PayloadValid: key must be a single line',
      upstream: 'Unauthorized',
      last_used_at: '2025-01-03T00:00:00.000Z',
      delivered: true,
      delivered_version: '0123456789abcdef',
    });
    expect(toByokKey(broken).status.ready).toBe(false);
    expect(
      credentialStatus(cred('r', {}, { status: { conditions: [c('Ready', 'True', 'Ready', 'compiled')] } })),
    ).toMatchObject({ ready: true, reason: 'Ready', upstream: null, delivered: null });
    expect(
      credentialStatus(cred('u', {}, { status: { conditions: [c('Ready', 'Unknown', 'Pending')] } })),
    ).toMatchObject({ ready: null, reason: 'Pending' });
    // The spec moved on (generation 2) since the operator wrote its verdict: neither Ready nor Delivered is current.
    const stale = cred(
      's',
      {},
      {
        meta: { generation: 2 },
        status: { conditions: [c('Ready', 'True', 'Ready'), c('Delivered', 'True', 'Delivered')] },
      },
    );
    expect(credentialStatus(stale)).toMatchObject({ ready: null, reason: 'Reconciling', delivered: null });
    expect(credentialStatus(stale).message).toContain('generation 2');
  });

  test('workspace name → the workspace public id; spec fields map to their wire names', () => {
    const k = toByokKey(
      cred('b', {
        workspace: 'main',
        displayName: 'N',
        isFallback: true,
        declaredZdr: false,
        allowedModels: ['a/b'],
        sortOrder: 3,
      }),
    );
    expect(k).toMatchObject({
      workspace_id: publicId('Workspace', 'acct', 'main'),
      name: 'N',
      is_fallback: true,
      declared_zdr: false,
      allowed_models: ['a/b'],
      sort_order: 3,
    });
  });

  test('status.id wins over the computed id', () => {
    expect(toByokKey(cred('c', {}, { status: { id: '11111111-2222-3333-4444-555555555555' } })).id).toBe(
      '11111111-2222-3333-4444-555555555555',
    );
  });

  test('label: the API annotation until the operator has seen that Secret revision or a newer one', () => {
    const ann = (label: string, rv: string) => ({
      meta: { annotations: { [LABEL_ANNOTATION]: label, [LABEL_SECRET_VERSION_ANNOTATION]: rv } },
    });
    expect(pickLabel(cred('d', {}, ann('new', '20')))).toBe('new');
    expect(
      pickLabel(cred('d', {}, { ...ann('new', '20'), status: { label: 'old', secretResourceVersion: '10' } })),
    ).toBe('new');
    expect(
      pickLabel(cred('d', {}, { ...ann('api', '20'), status: { label: 'op', secretResourceVersion: '20' } })),
    ).toBe('op');
    expect(
      pickLabel(cred('d', {}, { ...ann('api', '20'), status: { label: 'op', secretResourceVersion: '30' } })),
    ).toBe('op');
    expect(pickLabel(cred('d', {}, { status: { label: 'op' } }))).toBe('op');
  });

  test('sort order: spec until the operator has observed this generation, then status', () => {
    expect(effectiveSortOrder(cred('e', { sortOrder: 4 }, { status: { sortOrder: 1, observedGeneration: 0 } }))).toBe(
      4,
    );
    expect(effectiveSortOrder(cred('e', { sortOrder: 4 }, { status: { sortOrder: 1, observedGeneration: 1 } }))).toBe(
      1,
    );
    expect(effectiveSortOrder(cred('e', {}, { status: { sortOrder: 7, observedGeneration: 0 } }))).toBe(7);
  });

  test('list order: provider, prioritized before fallback, sort_order, created_at, id', () => {
    const ks = [
      toByokKey(cred('z', { provider: 'openai', sortOrder: 0, isFallback: true })),
      toByokKey(cred('y', { provider: 'openai', sortOrder: 1 })),
      toByokKey(cred('x', { provider: 'anthropic', sortOrder: 9 })),
      toByokKey(cred('w', { provider: 'openai', sortOrder: 0 })),
    ].sort(compareKeys);
    expect(ks.map((k) => `${k.provider}/${k.is_fallback}/${k.sort_order}`)).toEqual([
      'anthropic/false/9',
      'openai/false/0',
      'openai/false/1',
      'openai/true/0',
    ]);
  });
});

describe('read model', () => {
  test('workspace views include global credentials; pages are cached and invalidated on change', () => {
    const s = new ApiState();
    s.upsertCredential(cred('g'));
    s.upsertCredential(cred('m', { workspace: 'main', sortOrder: 1 }));
    s.upsertCredential(cred('o', { workspace: 'other', sortOrder: 2 }));
    expect(s.listCredentials('acct', 'main').map((e) => e.name)).toEqual(['g', 'm']);
    expect(s.listCredentials('acct', 'other').map((e) => e.name)).toEqual(['g', 'o']);
    const page = s.listPage('acct', 'main', undefined, 0, 50);
    expect(s.listPage('acct', 'main', undefined, 0, 50)).toBe(page);
    s.upsertCredential(cred('m2', { workspace: 'main', sortOrder: 3 }));
    const next = JSON.parse(s.listPage('acct', 'main', undefined, 0, 50).toString()) as { total_count: number };
    expect(next.total_count).toBe(3);
    s.removeCredential(cred('m2'));
    expect(s.listCredentials('acct', 'main')).toHaveLength(2);
    expect(s.nextSortOrder('acct', 'openai')).toBe(3);
    expect(s.nextSortOrder('acct', 'groq')).toBe(0);
  });

  test('ids resolve only within their own account', () => {
    const s = new ApiState();
    s.upsertCredential(cred('a'));
    const id = publicId('BYOKCredential', 'acct', 'a');
    expect(s.credentialById('acct', id)?.name).toBe('a');
    expect(s.credentialById('other', id)).toBeUndefined();
  });

  test('live API keys: not disabled and not expired; hash lookups span accounts', () => {
    const s = new ApiState();
    const key = (name: string, ns: string, spec: Partial<GatewayAPIKey['spec']> & { hash: string }) =>
      gatewayKey(name, spec.hash, inNamespace(ns), withSpec(spec));
    s.upsertApiKey(key('live', 'a', { hash: '1'.repeat(64) }));
    s.upsertApiKey(key('off', 'a', { hash: '2'.repeat(64), disabled: true }));
    s.upsertApiKey(key('old', 'a', { hash: '3'.repeat(64), expiresAt: '2020-01-01T00:00:00Z' }));
    s.upsertApiKey(key('future', 'b', { hash: '4'.repeat(64), expiresAt: '2999-01-01T00:00:00Z' }));
    expect([...s.liveApiKeyHashes('a')]).toEqual(['1'.repeat(64)]);
    expect(s.isLiveApiKeyHash('4'.repeat(64))).toBe(true);
    expect(s.isLiveApiKeyHash('2'.repeat(64))).toBe(false);
    s.removeApiKey(key('live', 'a', { hash: '1'.repeat(64) }));
    expect(s.isLiveApiKeyHash('1'.repeat(64))).toBe(false);
  });
});
