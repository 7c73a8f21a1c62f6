import { describe, expect, it } from '@jest/globals';
import { compileAccount } from '../../../src/compiler/compile.ts';
import { canonicalJson } from '../../../src/contract/canonical-json.ts';
import { publicId } from '../../../src/domain/ids.ts';
import {
  account,
  apiKey,
  credential,
  guardrail,
  hashOf,
  sizedSnapshot,
  snapshot,
  workspace,
} from '../../support/fixtures/compiler.ts';

const NS = 'acme';

describe('compileAccount', () => {
  it('applies defaults when the namespace has no Account', () => {
    const out = compileAccount(snapshot(NS));
    expect(out).toEqual({
      namespace: NS,
      accountId: publicId('Account', NS, NS),
      plan: 'pay-as-you-go',
      privacy: { denyDataCollection: false, alwaysZdr: false },
      credentials: [],
      workspaces: [],
      guardrails: [],
      apiKeys: [],
    });
  });

  it('takes plan and privacy from the Account', () => {
    const out = compileAccount(
      snapshot(NS, { account: account(NS, { plan: 'enterprise', privacy: { alwaysZdr: true } }) }),
    );
    expect(out.plan).toBe('enterprise');
    expect(out.privacy).toEqual({ denyDataCollection: false, alwaysZdr: true });
    expect(out.accountId).toBe(publicId('Account', NS, 'account'));
  });

  it('is deterministic whatever the input order', () => {
    const snap = sizedSnapshot(NS, 60);
    const shuffled = {
      ...snap,
      credentials: [...snap.credentials].reverse(),
      apiKeys: [...snap.apiKeys].reverse(),
      workspaces: [...snap.workspaces].reverse(),
    };
    expect(canonicalJson(compileAccount(shuffled))).toBe(canonicalJson(compileAccount(snap)));
  });

  it('orders credentials by provider, section, sortOrder, id and fills every field', () => {
    const snap = snapshot(NS, {
      workspaces: [workspace(NS, 'ws')],
      credentials: [
        credential(NS, 'b-fallback', { provider: 'openai', isFallback: true }, { sortOrder: 0 }),
        credential(
          NS,
          'a-second',
          { provider: 'openai', declaredZdr: true, workspace: 'ws', allowedModels: ['z/m', 'a/m', 'a/m'] },
          { sortOrder: 2 },
        ),
        credential(NS, 'c-first', { provider: 'openai', isRequired: true, disabled: true }, { sortOrder: 1 }),
        credential(NS, 'anthropic', { provider: 'anthropic', isByokOnly: true }, { sortOrder: 9 }),
      ],
    });
    const out = compileAccount(snap);
    expect(out.credentials.map((c) => c.name)).toEqual(['anthropic', 'c-first', 'a-second', 'b-fallback']);
    const second = out.credentials[2]!;
    expect(second).toEqual({
      id: publicId('BYOKCredential', NS, 'a-second'),
      name: 'a-second',
      provider: 'openai',
      workspaceId: publicId('Workspace', NS, 'ws'),
      label: 'sk-...abcd',
      displayName: null,
      disabled: false,
      isFallback: false,
      isRequired: false,
      isByokOnly: false,
      declaredZdr: true,
      allowedModels: ['a/m', 'z/m'],
      allowedApiKeyHashes: null,
      allowedUserIds: null,
      sortOrder: 2,
      createdAt: '2025-06-01T00:00:00Z',
    });
    expect(out.credentials[1]).toMatchObject({ disabled: true, isRequired: true });
    expect(out.credentials[0]).toMatchObject({ isByokOnly: true });
  });

  it('compiles only valid, resolvable credentials', () => {
    const live = apiKey(NS, 'live');
    const disabled = apiKey(NS, 'off', { disabled: true });
    const expired = apiKey(NS, 'old', { expiresAt: '2025-12-31T23:59:59Z' });
    const snap = snapshot(NS, {
      apiKeys: [live, disabled, expired, apiKey(NS, 'future', { expiresAt: '2026-02-01T00:00:00Z' })],
      credentials: [
        credential(NS, 'ok', { allowedApiKeyHashes: [live.spec.hash] }),
        credential(NS, 'invalid', {}, { valid: false }),
        credential(NS, 'disabled-hash', { allowedApiKeyHashes: [live.spec.hash, disabled.spec.hash] }),
        credential(NS, 'expired-hash', { allowedApiKeyHashes: [expired.spec.hash] }),
        credential(NS, 'unknown-hash', { allowedApiKeyHashes: [hashOf('nope')] }),
        credential(NS, 'no-workspace', { workspace: 'gone' }),
        credential(NS, 'both-flags', { isFallback: true, isByokOnly: true }),
      ],
    });
    const out = compileAccount(snap);
    expect(out.credentials.map((c) => c.name)).toEqual(['ok']);
    expect(out.apiKeys.map((k) => k.hash).sort()).toEqual([live.spec.hash, hashOf(`${NS}/future`)].sort());
  });

  it('leaves out a key whose hash another key holds, and the filters that name only it', () => {
    const ns = 'copier';
    const copied = hashOf('someone else/key');
    const snap = snapshot(ns, {
      workspaces: [workspace(ns, 'main', { default: true })],
      apiKeys: [apiKey(ns, 'copy', { hash: copied }), apiKey(ns, 'own')],
      conflictingApiKeys: new Set(['copy']),
      credentials: [
        credential(ns, 'rides-copy', { allowedApiKeyHashes: [copied] }),
        credential(ns, 'own-filter', { allowedApiKeyHashes: [hashOf(`${ns}/own`)] }),
      ],
    });
    const out = compileAccount(snap);
    expect(out.apiKeys.map((k) => k.hash)).toEqual([hashOf(`${ns}/own`)]);
    expect(out.credentials.map((c) => c.name)).toEqual(['own-filter']);
  });

  it('keeps one default workspace (the oldest) and resolves references to ids', () => {
    const snap = snapshot(NS, {
      guardrails: [
        guardrail(NS, 'strict', {
          budget: { limitUsd: 5, includeByokInBudgets: true },
          dataPolicy: { requireZdr: true, ignoredProviders: ['xai', 'groq'] },
        }),
      ],
      workspaces: [
        workspace(NS, 'newer', { default: true }, '2025-07-01T00:00:00Z'),
        workspace(
          NS,
          'older',
          {
            default: true,
            budgets: { lifetime: 50, daily: 1 },
            includeByokInBudgets: true,
            defaultGuardrail: 'strict',
            members: [
              { userId: 'u2', guardrail: 'missing' },
              { userId: 'u1', guardrail: 'strict' },
            ],
          },
          '2025-05-01T00:00:00Z',
        ),
      ],
      apiKeys: [apiKey(NS, 'k', { guardrail: 'strict' })],
    });
    const out = compileAccount(snap);
    const strictId = publicId('Guardrail', NS, 'strict');
    expect(out.workspaces.map((w) => [w.name, w.isDefault])).toEqual([
      ['newer', false],
      ['older', true],
    ]);
    expect(out.workspaces[1]).toMatchObject({
      budgets: [
        { limitUsd: 1, interval: 'daily' },
        { limitUsd: 50, interval: 'lifetime' },
      ],
      includeByokInBudgets: true,
      defaultGuardrailId: strictId,
      members: [
        { userId: 'u1', guardrailId: strictId },
        { userId: 'u2', guardrailId: null },
      ],
    });
    expect(out.guardrails).toEqual([
      {
        id: strictId,
        name: 'strict',
        budget: { limitUsd: 5, resetInterval: 'monthly', includeByokInBudgets: true },
        dataPolicy: {
          requireZdr: true,
          denyDataCollection: false,
          allowedProviders: null,
          ignoredProviders: ['groq', 'xai'],
        },
      },
    ]);
    // A key without a workspace belongs to the default workspace.
    expect(out.apiKeys[0]).toMatchObject({
      workspaceId: publicId('Workspace', NS, 'older'),
      guardrailId: strictId,
      expiresAt: null,
    });
  });

  it('never puts a payload into the compiled document', () => {
    const canary = 'CANARY-sk-live-6f1b2c';
    const out = canonicalJson(
      compileAccount(snapshot(NS, { credentials: [credential(NS, 'c', {}, { payload: canary })] })),
    );
    expect(out).not.toContain(canary);
  });
});

describe('key controls in the compiled key', () => {
  const ws = workspace('ns', 'main', { default: true });

  it('carries the key name, its sorted allowlist and its limits', () => {
    const out = compileAccount(
      snapshot('ns', {
        workspaces: [ws],
        apiKeys: [
          apiKey('ns', 'app', {
            models: ['openai/gpt-4o', 'anthropic/claude-sonnet-4'],
            limits: { requestsPerMinute: 60 },
          }),
        ],
      }),
    );
    expect(out.apiKeys).toEqual([
      expect.objectContaining({
        name: 'app',
        models: ['anthropic/claude-sonnet-4', 'openai/gpt-4o'],
        limits: { requestsPerMinute: 60 },
      }),
    ]);
  });

  it('a rotated key compiles its previous hash until the overlap ends (or the key expires, if earlier), under the same name', () => {
    const previous = hashOf('old-secret');
    const rotated = (until: string, extra: Record<string, unknown> = {}) =>
      apiKey('ns', 'app', {
        previousHash: previous,
        previousHashExpiresAt: until,
        limits: { maxInFlight: 2 },
        ...extra,
      });
    const inside = compileAccount(snapshot('ns', { workspaces: [ws], apiKeys: [rotated('2026-01-01T01:00:00Z')] }));
    expect(
      inside.apiKeys.map((k) => [k.hash === previous ? 'previous' : 'current', k.name, k.expiresAt, k.limits]),
    ).toEqual(
      expect.arrayContaining([
        ['current', 'app', null, { maxInFlight: 2 }],
        ['previous', 'app', '2026-01-01T01:00:00Z', { maxInFlight: 2 }],
      ]),
    );
    const capped = compileAccount(
      snapshot('ns', {
        workspaces: [ws],
        apiKeys: [rotated('2026-01-01T01:00:00Z', { expiresAt: '2026-01-01T00:30:00Z' })],
      }),
    );
    expect(capped.apiKeys.find((k) => k.hash === previous)?.expiresAt).toBe('2026-01-01T00:30:00Z');
    const after = compileAccount(snapshot('ns', { workspaces: [ws], apiKeys: [rotated('2025-12-31T23:59:59Z')] }));
    expect(after.apiKeys.map((k) => k.hash)).not.toContain(previous);
    // An older key holding that hash keeps it: the rotated key's old secret is not compiled, its new one is.
    const held = compileAccount(
      snapshot('ns', {
        workspaces: [ws],
        apiKeys: [rotated('2026-01-01T01:00:00Z')],
        unheldPreviousHashes: new Set(['app']),
      }),
    );
    expect(held.apiKeys.map((k) => k.hash)).toEqual([hashOf('ns/app')]);
  });
});
