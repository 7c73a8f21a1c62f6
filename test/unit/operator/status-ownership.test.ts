// One map says which status writer owns which fields and conditions (src/operator/status/ownership.ts); the
// writers and the reconcilers' comparison read it, so a field moved between writers moves everywhere at once.
import { describe, expect, test } from '@jest/globals';
import { FIELD_MANAGER } from '../../../src/kube/apply.ts';
import {
  HEALTH_CONDITION_TYPES,
  HEALTH_FIELD_MANAGER,
  HEALTH_STATUS_FIELDS,
} from '../../../src/operator/health/health-status-writer.ts';
import { SPEND_FIELD_MANAGER } from '../../../src/operator/spend/spend-status-writer.ts';
import { ownedStatus, STATUS_OWNERS, statusPartOf } from '../../../src/operator/status/ownership.ts';

const condition = (type: string) => ({ type, status: 'True', reason: type, message: '', lastTransitionTime: 't' });

describe('status field ownership', () => {
  test('every writer has its own field manager, and no field or condition has two owners', () => {
    const owners = Object.values(STATUS_OWNERS);
    const managers = [FIELD_MANAGER, ...owners.map((o) => o.fieldManager)];
    expect(new Set(managers).size).toBe(managers.length);
    const fields = owners.flatMap((o) => o.fields);
    const conditions = owners.flatMap((o) => o.conditions);
    expect(new Set(fields).size).toBe(fields.length);
    expect(new Set(conditions).size).toBe(conditions.length);
    // The reconcilers' own conditions are never another writer's.
    expect(conditions).not.toContain('Ready');
  });

  test('the writers take their field manager and fields from the map', () => {
    expect(SPEND_FIELD_MANAGER).toBe(STATUS_OWNERS.spend.fieldManager);
    expect(HEALTH_FIELD_MANAGER).toBe(STATUS_OWNERS.health.fieldManager);
    expect(HEALTH_STATUS_FIELDS).toBe(STATUS_OWNERS.health.fields);
    expect(HEALTH_CONDITION_TYPES).toBe(STATUS_OWNERS.health.conditions);
  });

  test("a stored status splits into the reconcilers' part and each writer's part, with nothing lost", () => {
    const stored = {
      id: 'a',
      conditions: [condition('Ready'), condition('UpstreamHealthy'), condition('Valid'), condition('Delivered')],
      lastUsedTime: 't',
      delivery: { loaded: 1 },
      spend: { blocked: false },
    };
    expect(ownedStatus(stored)).toEqual({ id: 'a', conditions: [condition('Ready'), condition('Valid')] });
    expect(statusPartOf('health', stored)).toEqual({
      lastUsedTime: 't',
      delivery: { loaded: 1 },
      conditions: [condition('UpstreamHealthy'), condition('Delivered')],
    });
    expect(statusPartOf('spend', stored)).toEqual({ spend: { blocked: false } });
    const parts = [
      ownedStatus(stored) as Record<string, unknown>,
      statusPartOf('health', stored),
      statusPartOf('spend', stored),
    ];
    const merged = Object.assign({}, ...parts.map(({ conditions: _c, ...rest }) => rest)) as Record<string, unknown>;
    const conditions = parts
      .flatMap((p) => (p.conditions as { type: string }[] | undefined) ?? [])
      .map((c) => c.type)
      .sort();
    expect({ ...merged, conditions }).toEqual({ ...stored, conditions: stored.conditions.map((c) => c.type).sort() });
  });

  test("a status with nothing of the other writers is the reconcilers' as it is", () => {
    const plain = { id: 'a', conditions: [condition('Ready')] };
    expect(ownedStatus(plain)).toBe(plain);
    expect(statusPartOf('health', plain)).toEqual({});
    expect(statusPartOf('spend', undefined)).toEqual({});
    expect(ownedStatus(undefined)).toBeUndefined();
  });
});
