// The rules that decide a BYOKCredential's Ready state, without a cluster: one test per check, the chain's
// order, and the whole chain against the decision the reconciler made before it was split into checks.
import { describe, expect, test } from '@jest/globals';
import { overQuota } from '../../../../src/compiler/elect.ts';
import {
  describePayloadIssues,
  maskLabel,
  parseEgressAllowList,
  patchFromSpec,
  resolveCredentialWrite,
  specFieldPath,
  validatePayload,
} from '../../../../src/domain/index.ts';
import { quotaMessage } from '../../../../src/domain/quota.ts';
import { bytesIssue } from '../../../../src/domain/text.ts';
import { type DesiredCondition, readyFrom } from '../../../../src/operator/conditions.ts';
import {
  CREDENTIAL_CHECKS,
  type CredentialFacts,
  evaluateCredential,
  filtersValid,
  keyPresent,
  payloadIsText,
  payloadValid,
  secretFound,
  withinQuota,
  workspaceFound,
} from '../../../../src/operator/reconcile/credential-checks.ts';
import type { BYOKCredential } from '../../../../src/schema/generated/types.ts';

const HASH = 'a'.repeat(64);
const text = (s: string) => ({ text: s, bytes: new TextEncoder().encode(s) });
const meta = (name: string, created: string) => ({
  metadata: { name, namespace: 'team', creationTimestamp: created as unknown as Date },
});

function facts(over: Partial<CredentialFacts> = {}, spec: Partial<BYOKCredential['spec']> = {}): CredentialFacts {
  return {
    namespace: 'team',
    name: 'c',
    spec: { provider: 'openai', secretRef: { name: 's' }, ...spec },
    secretKey: 'key',
    secret: { value: text('sk-test-1234567890') },
    liveApiKeyHashes: new Set(),
    workspaceExists: true,
    accountExists: true,
    quota: { credentials: [meta('c', '2024-01-01T00:00:00Z')], limit: 10 },
    ...over,
  };
}

describe('credential checks, one by one', () => {
  test('within quota: the oldest `limit` pass; a newer one fails with QuotaExceeded', () => {
    const credentials = [meta('old', '2024-01-01T00:00:00Z'), meta('c', '2024-01-02T00:00:00Z')];
    expect(withinQuota(facts({ quota: { credentials, limit: 2 } }))).toBeUndefined();
    expect(withinQuota(facts({ name: 'old', quota: { credentials, limit: 1 } }))).toBeUndefined();
    expect(withinQuota(facts({ quota: { credentials, limit: 1 } }))).toEqual({
      type: 'WithinQuota',
      status: 'False',
      reason: 'QuotaExceeded',
      message: quotaMessage(2, 1),
    });
  });

  test('secret found: fails with SecretNotFound naming the Secret and namespace', () => {
    expect(secretFound(facts())).toBeUndefined();
    expect(secretFound(facts({ secret: { value: undefined } }))).toBeUndefined();
    expect(secretFound(facts({ secret: undefined }))).toEqual({
      type: 'SecretResolved',
      status: 'False',
      reason: 'SecretNotFound',
      message: 'Secret "s" not found in namespace team',
    });
  });

  test('key present: fails with KeyNotFound; not its business when the Secret is missing', () => {
    expect(keyPresent(facts())).toBeUndefined();
    expect(keyPresent(facts({ secret: undefined }))).toBeUndefined();
    expect(keyPresent(facts({ secret: { value: undefined }, secretKey: 'apiKey' }))).toEqual({
      type: 'SecretResolved',
      status: 'False',
      reason: 'KeyNotFound',
      message: 'Secret "s" has no key "apiKey"',
    });
  });

  test('payload is UTF-8 text: invalid bytes fail with PayloadInvalid, the message never quoting them', () => {
    expect(payloadIsText(facts())).toBeUndefined();
    expect(payloadIsText(facts({ secret: undefined }))).toBeUndefined();
    const bad = payloadIsText(
      facts({ secret: { value: { text: 'sk-\ufffd', bytes: new Uint8Array([0x73, 0x6b, 0x2d, 0xff]) } } }),
    );
    expect(bad).toMatchObject({ type: 'PayloadValid', status: 'False', reason: 'PayloadInvalid' });
    expect(bad?.message).toBe(
      describePayloadIssues([{ field: '', message: bytesIssue(new Uint8Array([0x73, 0x6b, 0x2d, 0xff]))!.message }]),
    );
    expect(bad?.message).toContain('UTF-8');
  });

  test('payload valid: the provider rules, PayloadInvalid with field names and no values', () => {
    expect(payloadValid(facts())).toBeUndefined();
    expect(payloadValid(facts({ secret: { value: undefined } }))).toBeUndefined();
    const secretText = 'sk-secret\u0001value';
    const bad = payloadValid(facts({ secret: { value: text(secretText) } }));
    expect(bad).toMatchObject({ type: 'PayloadValid', status: 'False', reason: 'PayloadInvalid' });
    expect(bad?.message).not.toContain('secret');
    const vertex = payloadValid(facts({ secret: { value: text('{}') } }, { provider: 'google-vertex' }));
    expect(vertex).toMatchObject({ reason: 'PayloadInvalid' });
  });

  test('payload valid: tenant URLs are held to the egress policy, widened only by --egress-allow', () => {
    const azure = text(
      JSON.stringify([
        {
          api_key: 'k',
          model_slug: 'openai/gpt-4o',
          endpoint_url: 'https://[::1]:8443/openai/deployments/d/chat/completions?api-version=2024-10-21',
          model_id: 'd',
        },
      ]),
    );
    expect(payloadValid(facts({ secret: { value: azure } }, { provider: 'azure' }))).toMatchObject({
      reason: 'PayloadInvalid',
      message: expect.stringContaining('endpoint_url'),
    });
    expect(
      payloadValid(facts({ secret: { value: azure }, egress: parseEgressAllowList(['::1']) }, { provider: 'azure' })),
    ).toBeUndefined();
  });

  test('workspace found: only when spec.workspace names one that does not exist', () => {
    expect(workspaceFound(facts({ workspaceExists: false }))).toBeUndefined();
    expect(workspaceFound(facts({ workspaceExists: true }, { workspace: 'prod' }))).toBeUndefined();
    expect(workspaceFound(facts({ workspaceExists: false }, { workspace: 'prod' }))).toEqual({
      type: 'FiltersValid',
      status: 'False',
      reason: 'WorkspaceNotFound',
      message: 'Workspace "prod" not found in namespace team',
    });
  });

  test('filters valid: the REST rules; the first violation names the reason, the message lists them all', () => {
    expect(filtersValid(facts())).toBeUndefined();
    expect(filtersValid(facts({ liveApiKeyHashes: new Set([HASH]) }, { allowedApiKeyHashes: [HASH] }))).toBeUndefined();
    expect(filtersValid(facts({}, { allowedApiKeyHashes: [HASH] }))).toEqual({
      type: 'FiltersValid',
      status: 'False',
      reason: 'UnknownApiKeyHash',
      message: 'allowedApiKeyHashes[0]: does not match a live API key of this account',
    });
    expect(filtersValid(facts({}, { isByokOnly: true, isFallback: true }))).toMatchObject({
      reason: 'ConflictingFlags',
      message: expect.stringContaining('isByokOnly'),
    });
    expect(filtersValid(facts({}, { allowedModels: ['gpt\u0001'] }))).toMatchObject({
      reason: 'InvalidFilters',
      message: expect.stringContaining('allowedModels[0]'),
    });
    const two = filtersValid(facts({}, { allowedApiKeyHashes: [HASH], isByokOnly: true, isFallback: true }));
    expect(two).toMatchObject({ reason: 'UnknownApiKeyHash' });
    expect(two?.message.split('; ')).toHaveLength(2);
  });
});

describe('the check chain', () => {
  test('runs in status order: quota, secret, key, payload bytes, payload, workspace, filters', () => {
    expect(CREDENTIAL_CHECKS.map((c) => c.name)).toEqual([
      'within quota',
      'secret found',
      'key present',
      'payload is UTF-8 text',
      'payload valid',
      'workspace found',
      'filters valid',
    ]);
    expect(CREDENTIAL_CHECKS.map((c) => c.condition)).toEqual([
      'WithinQuota',
      'SecretResolved',
      'SecretResolved',
      'PayloadValid',
      'PayloadValid',
      'FiltersValid',
      'FiltersValid',
    ]);
  });

  test('a valid credential: Ready, three True conditions (no WithinQuota), the masked label', () => {
    const v = evaluateCredential(facts());
    expect(v.ready).toEqual({ type: 'Ready', status: 'True', reason: 'Ready', message: 'the credential is valid' });
    expect(v.conditions.map((c) => [c.type, c.status, c.reason])).toEqual([
      ['SecretResolved', 'True', 'Resolved'],
      ['PayloadValid', 'True', 'Valid'],
      ['FiltersValid', 'True', 'Valid'],
    ]);
    expect(v).toMatchObject({ payloadValid: true, overQuota: false, label: maskLabel('openai', 'sk-test-1234567890') });
  });

  test('a missing Secret wins over invalid filters; PayloadValid is Unknown, FiltersValid still judged', () => {
    const v = evaluateCredential(
      facts({ secret: undefined, workspaceExists: false }, { workspace: 'gone', isByokOnly: true, isFallback: true }),
    );
    expect(v.ready).toMatchObject({
      status: 'False',
      reason: 'SecretNotFound',
      message: 'SecretResolved: Secret "s" not found in namespace team',
    });
    expect(v.conditions.map((c) => [c.type, c.status, c.reason])).toEqual([
      ['SecretResolved', 'False', 'SecretNotFound'],
      ['PayloadValid', 'Unknown', 'SecretNotResolved'],
      ['FiltersValid', 'False', 'WorkspaceNotFound'],
    ]);
    expect(v).toMatchObject({ payloadValid: false, label: undefined });
  });

  test('a namespace without an Account: Ready=False AccountMissing over every check, the others still judged', () => {
    const v = evaluateCredential(facts({ accountExists: false, secret: undefined }));
    expect(v.ready).toMatchObject({ type: 'Ready', status: 'False', reason: 'AccountMissing' });
    expect(v.ready.message).toContain('namespace team has no Account');
    expect(v.ready.message).toContain(
      'create an Account (apiVersion byok.gateway.dev/v1alpha1, kind Account) in namespace team',
    );
    expect(v.conditions[0]).toMatchObject({ type: 'SecretResolved', status: 'False', reason: 'SecretNotFound' });
    // A valid payload keeps its label (status shows which key is held back), but Ready is not True: nothing compiles.
    const valid = evaluateCredential(facts({ accountExists: false }));
    expect(valid).toMatchObject({
      payloadValid: true,
      label: maskLabel('openai', 'sk-test-1234567890'),
      ready: { status: 'False', reason: 'AccountMissing' },
    });
  });

  test('the quota wins over everything and comes first in status', () => {
    const credentials = [meta('old', '2024-01-01T00:00:00Z'), meta('c', '2024-01-02T00:00:00Z')];
    const v = evaluateCredential(facts({ secret: undefined, quota: { credentials, limit: 1 } }));
    expect(v.ready.reason).toBe('QuotaExceeded');
    expect(v.conditions[0]).toMatchObject({ type: 'WithinQuota', status: 'False' });
    expect(v.overQuota).toBe(true);
  });

  test('a missing key or an invalid payload wins over invalid filters', () => {
    expect(
      evaluateCredential(facts({ secret: { value: text('bad\u0001') } }, { allowedApiKeyHashes: [HASH] })).ready.reason,
    ).toBe('PayloadInvalid');
    expect(
      evaluateCredential(facts({ secret: { value: undefined } }, { allowedApiKeyHashes: [HASH] })).ready.reason,
    ).toBe('KeyNotFound');
    expect(evaluateCredential(facts({}, { allowedApiKeyHashes: [HASH] })).ready.reason).toBe('UnknownApiKeyHash');
  });

  test('Ready is always the first failing check of the chain', () => {
    for (const f of ALL_CASES) {
      const v = evaluateCredential(f);
      const first = CREDENTIAL_CHECKS.map((c) => c.run(f)).find((c) => c !== undefined);
      if (!first) expect(v.ready.status).toBe('True');
      else
        expect(v.ready).toEqual({
          type: 'Ready',
          status: 'False',
          reason: first.reason,
          message: `${first.type}: ${first.message}`,
        });
    }
  });

  test('the same conditions, label and payload verdict as the reconciler before the split, for every combination', () => {
    expect(ALL_CASES.length).toBe(5 * 3 * 4 * 2);
    for (const f of ALL_CASES) {
      const v = evaluateCredential(f);
      const before = decideAsBefore(f);
      expect([v.ready, ...v.conditions]).toEqual([before.ready, ...before.conds]);
      expect({ label: v.label, payloadValid: v.payloadValid, overQuota: v.overQuota }).toEqual({
        label: before.label,
        payloadValid: before.payloadOk,
        overQuota: before.overQuota,
      });
    }
  });
});

// ---- the combinations, and the decision as src/operator/controllers.ts made it before the split ----

const SECRETS: CredentialFacts['secret'][] = [
  undefined,
  { value: undefined },
  { value: { text: 'sk-\ufffd', bytes: new Uint8Array([0x73, 0x6b, 0x2d, 0xff]) } },
  { value: text('bad\u0001') },
  { value: text('sk-test-1234567890') },
];
const WORKSPACES: [Partial<BYOKCredential['spec']>, boolean][] = [
  [{}, true],
  [{ workspace: 'gone' }, false],
  [{ workspace: 'prod' }, true],
];
const FILTERS: Partial<BYOKCredential['spec']>[] = [
  {},
  { allowedApiKeyHashes: [HASH] },
  { isByokOnly: true, isFallback: true },
  { allowedModels: ['gpt\u0001'] },
];
const QUOTAS: CredentialFacts['quota'][] = [
  { credentials: [meta('c', '2024-01-01T00:00:00Z')], limit: 1 },
  { credentials: [meta('old', '2024-01-01T00:00:00Z'), meta('c', '2024-01-02T00:00:00Z')], limit: 1 },
];
const ALL_CASES: CredentialFacts[] = SECRETS.flatMap((secret) =>
  WORKSPACES.flatMap(([ws, workspaceExists]) =>
    FILTERS.flatMap((filters) =>
      QUOTAS.map((quota) => facts({ secret, workspaceExists, quota }, { ...ws, ...filters })),
    ),
  ),
);

function decideAsBefore(f: CredentialFacts) {
  const { spec, namespace: ns, secretKey } = f;
  const conds: DesiredCondition[] = [];
  let label: string | undefined;
  let payloadOk = false;
  const raw = f.secret?.value?.text;
  if (!f.secret) {
    conds.push({
      type: 'SecretResolved',
      status: 'False',
      reason: 'SecretNotFound',
      message: `Secret "${spec.secretRef.name}" not found in namespace ${ns}`,
    });
    conds.push({
      type: 'PayloadValid',
      status: 'Unknown',
      reason: 'SecretNotResolved',
      message: 'the Secret is not resolved',
    });
  } else if (raw === undefined) {
    conds.push({
      type: 'SecretResolved',
      status: 'False',
      reason: 'KeyNotFound',
      message: `Secret "${spec.secretRef.name}" has no key "${secretKey}"`,
    });
    conds.push({
      type: 'PayloadValid',
      status: 'Unknown',
      reason: 'SecretNotResolved',
      message: 'the Secret is not resolved',
    });
  } else {
    conds.push({
      type: 'SecretResolved',
      status: 'True',
      reason: 'Resolved',
      message: `Secret "${spec.secretRef.name}" key "${secretKey}"`,
    });
    const badBytes = bytesIssue(f.secret.value?.bytes ?? new Uint8Array());
    const result = badBytes
      ? { ok: false as const, errors: [{ field: '', message: badBytes.message }] }
      : validatePayload(spec.provider, raw, {});
    if (result.ok) {
      payloadOk = true;
      label = maskLabel(spec.provider, raw);
      conds.push({ type: 'PayloadValid', status: 'True', reason: 'Valid', message: `valid ${spec.provider} payload` });
    } else {
      conds.push({
        type: 'PayloadValid',
        status: 'False',
        reason: 'PayloadInvalid',
        message: describePayloadIssues(result.errors),
      });
    }
  }
  if (spec.workspace && !f.workspaceExists) {
    conds.push({
      type: 'FiltersValid',
      status: 'False',
      reason: 'WorkspaceNotFound',
      message: `Workspace "${spec.workspace}" not found in namespace ${ns}`,
    });
  } else {
    const write = resolveCredentialWrite({
      mode: 'create',
      stored: null,
      patch: patchFromSpec(spec as unknown as Record<string, unknown>),
      liveApiKeyHashes: f.liveApiKeyHashes,
    });
    if (write.ok) {
      conds.push({ type: 'FiltersValid', status: 'True', reason: 'Valid', message: 'flags and filters are valid' });
    } else {
      const first = write.violations[0]!;
      const reason =
        first.code === 'unknown_api_key_hash'
          ? 'UnknownApiKeyHash'
          : first.code === 'byok_only_with_fallback'
            ? 'ConflictingFlags'
            : 'InvalidFilters';
      conds.push({
        type: 'FiltersValid',
        status: 'False',
        reason,
        message: write.violations.map((v) => `${specFieldPath(v.field)}: ${v.message}`).join('; '),
      });
    }
  }
  const over = overQuota(f.quota.credentials, f.quota.limit).has(f.name);
  if (over)
    conds.unshift({
      type: 'WithinQuota',
      status: 'False',
      reason: 'QuotaExceeded',
      message: quotaMessage(f.quota.credentials.length, f.quota.limit),
    });
  return { ready: readyFrom(conds, 'the credential is valid'), conds, label, payloadOk, overQuota: over };
}
