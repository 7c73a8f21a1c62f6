// The decisions of the status-only kinds (Workspace, GatewayAPIKey, Account, Guardrail), without a cluster.
import { describe, expect, test } from '@jest/globals';
import { evaluateAccount } from '../../../../src/operator/reconcile/account.ts';
import { type ApiKeyFacts, evaluateApiKey } from '../../../../src/operator/reconcile/gateway-api-key.ts';
import { evaluateGuardrail, missingGuardrails } from '../../../../src/operator/reconcile/guardrail.ts';
import { MAX_REQUEUE_MS, splitKey } from '../../../../src/operator/reconcile/objects.ts';
import { evaluateWorkspace } from '../../../../src/operator/reconcile/workspace.ts';

describe('Workspace', () => {
  const base = { name: 'w', isDefault: false, missingGuardrails: [], defaultWinner: undefined };
  test('Ready, with a message saying whether it is the default', () => {
    expect(evaluateWorkspace(base)).toEqual({
      type: 'Ready',
      status: 'True',
      reason: 'Ready',
      message: 'the workspace is valid',
    });
    expect(evaluateWorkspace({ ...base, isDefault: true, defaultWinner: 'w' })).toMatchObject({
      status: 'True',
      message: 'the default workspace',
    });
  });
  test('missing guardrails: GuardrailNotFound listing them', () => {
    expect(evaluateWorkspace({ ...base, missingGuardrails: ['a', 'b'] })).toEqual({
      type: 'Ready',
      status: 'False',
      reason: 'GuardrailNotFound',
      message: 'Guardrail(s) not found: a, b',
    });
  });
  test('an older default elsewhere: Conflicting, which wins over missing guardrails', () => {
    const c = evaluateWorkspace({ ...base, isDefault: true, defaultWinner: 'older', missingGuardrails: ['a'] });
    expect(c).toEqual({
      type: 'Ready',
      status: 'False',
      reason: 'Conflicting',
      message: 'Workspace "older" is already the default workspace of this namespace (oldest wins)',
    });
    expect(evaluateWorkspace({ ...base, isDefault: false, defaultWinner: 'older' }).status).toBe('True');
  });
});

describe('GatewayAPIKey', () => {
  const now = Date.parse('2025-01-01T00:00:00Z');
  const facts = (spec: Partial<ApiKeyFacts['spec']> = {}, over: Partial<ApiKeyFacts> = {}): ApiKeyFacts => ({
    namespace: 'team',
    spec: { hash: 'a'.repeat(64), ...spec } as ApiKeyFacts['spec'],
    now,
    workspaceExists: true,
    accountExists: true,
    hasDefaultWorkspace: true,
    missingGuardrails: [],
    ...over,
  });
  test('a key without expiry is Live and needs no requeue', () => {
    expect(evaluateApiKey(facts())).toEqual({
      live: true,
      ready: { type: 'Ready', status: 'True', reason: 'Ready', message: 'the API key record is valid' },
      liveCondition: { type: 'Live', status: 'True', reason: 'Live', message: 'the key does not expire' },
      requeueAfterMs: undefined,
    });
  });
  test('an expiring key requeues just after expiry, capped at an hour', () => {
    expect(evaluateApiKey(facts({ expiresAt: '2025-01-01T00:00:10Z' })).requeueAfterMs).toBe(10_050);
    expect(evaluateApiKey(facts({ expiresAt: '2026-01-01T00:00:00Z' })).requeueAfterMs).toBe(MAX_REQUEUE_MS);
  });
  test('disabled and expired keys are not Live', () => {
    expect(evaluateApiKey(facts({ disabled: true })).liveCondition).toEqual({
      type: 'Live',
      status: 'False',
      reason: 'Disabled',
      message: 'the key is disabled',
    });
    const expired = evaluateApiKey(facts({ expiresAt: '2024-12-31T00:00:00Z' }));
    expect(expired).toMatchObject({
      live: false,
      requeueAfterMs: undefined,
      liveCondition: { reason: 'Expired', message: 'the key expired at 2024-12-31T00:00:00Z' },
    });
  });
  test('a namespace without an Account: AccountMissing outranks every other verdict, naming the Account to create', () => {
    const { ready, live } = evaluateApiKey(
      facts(
        { workspace: 'gone' },
        { accountExists: false, workspaceExists: false, hashHeldBy: { sameAccount: false } },
      ),
    );
    expect(live).toBe(true);
    expect(ready).toMatchObject({ type: 'Ready', status: 'False', reason: 'AccountMissing' });
    expect(ready.message).toContain('namespace team has no Account');
    expect(ready.message).toContain('kind Account');
    expect(ready.message).toContain('(401)');
  });
  test('a missing workspace wins over a missing guardrail', () => {
    expect(
      evaluateApiKey(facts({ workspace: 'gone' }, { workspaceExists: false, missingGuardrails: ['g'] })).ready,
    ).toMatchObject({ type: 'Ready', status: 'False', reason: 'NoWorkspace' });
    expect(evaluateApiKey(facts({ guardrail: 'g' }, { missingGuardrails: ['g'] })).ready).toEqual({
      type: 'Ready',
      status: 'False',
      reason: 'GuardrailNotFound',
      message: 'Guardrail "g" not found in namespace team',
    });
  });
});

describe('GatewayAPIKey whose hash an older key holds', () => {
  const base = {
    namespace: 'team',
    now: Date.parse('2025-01-01T00:00:00Z'),
    accountExists: true,
    missingGuardrails: ['g'],
    spec: { hash: 'a'.repeat(64), workspace: 'gone' },
    workspaceExists: false,
    hasDefaultWorkspace: false,
  };
  test("another account's key: Conflicting, naming neither its namespace nor its key, and outranking the rest", () => {
    const { ready, live } = evaluateApiKey({ ...base, hashHeldBy: { sameAccount: false } });
    expect(live).toBe(true);
    expect(ready).toEqual({
      type: 'Ready',
      status: 'False',
      reason: 'Conflicting',
      message:
        "this hash is already held by another account's key (the key that named a hash first holds it): this key is not compiled and the gateway never routes it to this account",
    });
  });
  test('a key of the same account: Conflicting, naming it', () => {
    expect(evaluateApiKey({ ...base, hashHeldBy: { sameAccount: true, name: 'first' } }).ready).toMatchObject({
      status: 'False',
      reason: 'Conflicting',
      message: expect.stringContaining('GatewayAPIKey "first" of this namespace'),
    });
  });
});

describe('GatewayAPIKey without a usable workspace (the gateway would answer 403)', () => {
  const base = {
    namespace: 'team',
    now: Date.parse('2025-01-01T00:00:00Z'),
    accountExists: true,
    missingGuardrails: [] as string[],
  };
  test('no workspace named and no default Workspace: Ready=False NoWorkspace, saying what to do', () => {
    const { ready, live } = evaluateApiKey({
      ...base,
      spec: { hash: 'a'.repeat(64) },
      workspaceExists: true,
      hasDefaultWorkspace: false,
    });
    expect(live).toBe(true);
    expect(ready).toMatchObject({ status: 'False', reason: 'NoWorkspace' });
    expect(ready.message).toContain('spec.default: true');
    expect(ready.message).toContain('spec.workspace');
  });
  test('a named Workspace that does not exist: NoWorkspace, naming it', () => {
    const { ready } = evaluateApiKey({
      ...base,
      spec: { hash: 'a'.repeat(64), workspace: 'gone' },
      workspaceExists: false,
      hasDefaultWorkspace: true,
    });
    expect(ready).toMatchObject({ status: 'False', reason: 'NoWorkspace' });
    expect(ready.message).toContain('Workspace "gone" not found in namespace team');
  });
  test('a named existing Workspace needs no default', () => {
    expect(
      evaluateApiKey({
        ...base,
        spec: { hash: 'a'.repeat(64), workspace: 'ws' },
        workspaceExists: true,
        hasDefaultWorkspace: false,
      }).ready.status,
    ).toBe('True');
  });
});

describe('Account', () => {
  test('the elected account is Ready without a Compiled condition', () => {
    expect(evaluateAccount({ name: 'a', winner: 'a', quarantine: undefined })).toEqual({
      ready: { type: 'Ready', status: 'True', reason: 'Ready', message: 'the account is valid' },
      compiled: [],
    });
  });
  test('a younger second account is Conflicting, and a quarantine is not its business', () => {
    expect(evaluateAccount({ name: 'b', winner: 'a', quarantine: { message: 'refused' } })).toEqual({
      ready: {
        type: 'Ready',
        status: 'False',
        reason: 'Conflicting',
        message: 'Account "a" already defines this namespace\'s account (exactly one per namespace; oldest wins)',
      },
      compiled: [],
    });
  });
  test('quarantined: Compiled=False Quarantined, and Ready carries it', () => {
    expect(evaluateAccount({ name: 'a', winner: 'a', quarantine: { message: 'the apiserver refused' } })).toEqual({
      ready: { type: 'Ready', status: 'False', reason: 'Quarantined', message: 'Compiled: the apiserver refused' },
      compiled: [{ type: 'Compiled', status: 'False', reason: 'Quarantined', message: 'the apiserver refused' }],
    });
  });
});

describe('Guardrail and shared helpers', () => {
  test('a guardrail is Ready', () => {
    expect(evaluateGuardrail()).toEqual({
      type: 'Ready',
      status: 'True',
      reason: 'Ready',
      message: 'the guardrail is valid',
    });
  });
  test('missing guardrails: named ones that do not exist, deduplicated and sorted', () => {
    const have = new Set(['team/ok']);
    const cache = { get: (ns: string, name: string) => (have.has(`${ns}/${name}`) ? ({} as never) : undefined) };
    expect(missingGuardrails(cache, 'team', ['z', undefined, 'ok', 'a', 'z', ''])).toEqual(['a', 'z']);
  });
  test('keys split at the first slash', () => {
    expect(splitKey('team/name')).toEqual(['team', 'name']);
  });
});
