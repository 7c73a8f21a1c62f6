// The condition vocabulary is the one list of condition types and reasons: consistent with itself, documented,
// and used by the operator's reconcilers instead of string literals.
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import {
  ApiErrorReason,
  ConditionReason,
  ConditionType,
  EventReason,
  ExclusionReason,
  PendingReason,
  REASONS_BY_CONDITION,
} from '../../../src/schema/conditions.ts';

const root = resolve(import.meta.dirname, '..', '..', '..');
const src = join(root, 'src');
/** Files beyond the reconcilers that write or read condition types and reasons (src-relative). */
const CATALOG_USERS = [
  ...readdirSync(join(src, 'operator', 'health')).map((f) => `operator/health/${f}`),
  'operator/run.ts',
  'operator/metrics.ts',
  'service/service.ts',
  'service/mapping.ts',
  'compiler/compile.ts',
  'cli/validate.ts',
];
const docs = readdirSync(join(root, 'docs'))
  .filter((f) => f.endsWith('.md'))
  .map((f) => readFileSync(join(root, 'docs', f), 'utf8'))
  .join('\n');
const operatorDoc = readFileSync(join(root, 'docs', 'operator.md'), 'utf8');

describe('condition vocabulary', () => {
  test('each entry is spelled as its key (the key is what code names, the value what users see)', () => {
    for (const catalog of [
      ConditionType,
      ConditionReason,
      EventReason,
      PendingReason,
      ApiErrorReason,
      ExclusionReason,
    ]) {
      for (const [k, v] of Object.entries(catalog)) expect(v).toBe(k);
    }
  });

  test('every condition type has its reasons, and every reason belongs to some condition', () => {
    expect(Object.keys(REASONS_BY_CONDITION).sort()).toEqual(Object.values(ConditionType).sort());
    const used = new Set(Object.values(REASONS_BY_CONDITION).flatMap((byStatus) => Object.values(byStatus).flat()));
    expect([...used].filter((r) => !(r in ConditionReason))).toEqual([]);
    expect(Object.values(ConditionReason).filter((r) => !used.has(r))).toEqual([]);
  });

  test("Ready's False reasons are those of the conditions it summarises plus the other kinds' own", () => {
    const summarised = (['WithinQuota', 'SecretResolved', 'FiltersValid', 'PayloadValid', 'Compiled'] as const).flatMap(
      (t) => {
        const byStatus: { False?: readonly string[] } = REASONS_BY_CONDITION[t];
        return byStatus.False ?? [];
      },
    );
    const own = ['Conflicting', 'GuardrailNotFound', 'NoWorkspace', 'WorkspaceNotFound', 'AccountMissing'];
    expect([...REASONS_BY_CONDITION.Ready.False].sort()).toEqual([...new Set([...summarised, ...own])].sort());
  });

  test('the operator conditions table names every type and reason the reconcilers write', () => {
    const reconciled = [
      'Ready',
      'SecretResolved',
      'PayloadValid',
      'FiltersValid',
      'WithinQuota',
      'Live',
      'Compiled',
    ] as const;
    for (const t of reconciled) {
      expect(operatorDoc).toContain(`\`${t}\``);
      for (const reasons of Object.values(REASONS_BY_CONDITION[t]))
        for (const r of reasons) expect(operatorDoc).toContain(`\`${r}\``);
    }
  });

  test('every type and reason, Event reason and pending reason is documented somewhere in docs/', () => {
    const names = [
      ...Object.values(ConditionType),
      ...Object.values(ConditionReason),
      ...Object.values(EventReason),
      ...Object.values(PendingReason),
    ];
    expect(names.filter((n) => !new RegExp(`\\b${n}\\b`).test(docs))).toEqual([]);
  });

  test("the operator's reconcilers take types and reasons from the catalog, not string literals", () => {
    const files = [
      'operator/controllers.ts',
      'operator/conditions.ts',
      ...readdirSync(join(src, 'operator', 'reconcile')).map((f) => `operator/reconcile/${f}`),
      ...CATALOG_USERS.filter((f) => !f.startsWith('service/')),
    ];
    const literal = /\b(type|reason):\s*'[A-Z]|'(Warning|Normal)',\s*'[A-Z]/;
    // The service writes Secrets (`type: 'Opaque'`): the catalog test below covers it.
    expect(files.filter((f) => literal.test(readFileSync(join(src, f), 'utf8')))).toEqual([]);
  });

  test('the health writer, metrics, both API doors, the compiler and validate name no catalog entry as a literal', () => {
    const catalog = new Set<string>(
      [ConditionType, ConditionReason, EventReason, PendingReason, ApiErrorReason, ExclusionReason].flatMap((c) =>
        Object.values(c),
      ),
    );
    const literals = CATALOG_USERS.flatMap((f) =>
      [...readFileSync(join(src, f), 'utf8').matchAll(/'([A-Z][A-Za-z]+)'/g)]
        .filter((m) => catalog.has(m[1]!))
        .map((m) => `${f}: ${m[0]}`),
    );
    expect(literals).toEqual([]);
  });
});
