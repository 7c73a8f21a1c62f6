// The aggregated door's registry pieces that need no server: continue tokens (client input, decoded as untrusted)
// and the discovery documents built from the served resources.
import { describe, expect, test } from '@jest/globals';
import { discoveryDocuments } from '../../../src/aggregated/discovery.ts';
import { compareCursor, decodeCursor as decode, encodeCursor } from '../../../src/aggregated/handlers/cursor.ts';
import { byokKeysResource } from '../../../src/aggregated/registry/byokkeys/index.ts';
import { byokKeysStrategy, listOrderKey } from '../../../src/aggregated/registry/byokkeys/strategy.ts';
import { StatusError } from '../../../src/aggregated/status.ts';
import { byokCredential } from '../../../src/schema/resources.ts';
import { compareKeys } from '../../../src/service/mapping.ts';
import type { CredentialEntry } from '../../../src/service/read-model.ts';

/** A byokkeys cursor: namespace, then the REST list order (provider, section, sort order, creation, id). */
const cursor = ['acme', 'openai', false, 3, '2026-11-23T10:29:16.000Z', 'b223a9a1-1a72-5eaf-91dd-120ddffc74f7'];
const decodeCursor = (token: string) => decode(token, byokKeysStrategy.listOrder.types);
const token = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

describe('continue tokens', () => {
  test('a token round-trips the cursor and carries nothing else', () => {
    const t = encodeCursor(cursor);
    expect(t).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodeCursor(t)).toEqual(cursor);
  });

  test('anything that is not exactly one of ours is 400 BadRequest, prototype keys and offsets included', () => {
    const bad = [
      '',
      'x',
      '%%%',
      'A'.repeat(2000),
      token({ o: 2 }),
      token([2, 'acme', 'openai', false, 3, 't', 'id']),
      token([1, 'acme', 'openai', false, '3', 't', 'id']),
      token([1, 'acme', 'openai', false, 1.5, 't', 'id']),
      token([1, 'acme', 'openai', 'no', 3, 't', 'id']),
      token([1, 'acme', 'openai', false, 3, 't']),
      token([1, null, 'openai', false, 3, 't', 'id']),
      Buffer.from('{"__proto__":{"o":1}}').toString('base64url'),
    ];
    for (const t of bad) {
      let caught: unknown;
      try {
        decodeCursor(t);
      } catch (err) {
        caught = err;
      }
      expect([t.slice(0, 30), caught instanceof StatusError ? [caught.code, caught.message] : caught]).toEqual([
        t.slice(0, 30),
        [400, 'continue: invalid continue token'],
      ]);
    }
    expect(({} as Record<string, unknown>).o).toBeUndefined();
  });
});

describe('discovery', () => {
  test('byokkeys is advertised with deletecollection, namespaced, in both discovery formats', () => {
    const { resourceList, aggregatedDiscovery } = discoveryDocuments([byokKeysResource]);
    expect(resourceList.resources).toEqual([
      {
        name: 'byokkeys',
        singularName: 'byokkey',
        namespaced: true,
        kind: 'BYOKKey',
        verbs: ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'],
        shortNames: ['bk'],
        categories: [],
      },
    ]);
    const v2 = aggregatedDiscovery.items[0]?.versions[0]?.resources[0];
    expect(v2).toMatchObject({ resource: 'byokkeys', scope: 'Namespaced', verbs: resourceList.resources[0]?.verbs });
  });

  test('byokkeys is not in the byok-all category: its BYOKCredential is, so kubectl get byok-all lists each credential once', () => {
    expect(byokKeysResource.categories).not.toContain('byok-all');
    expect(byokCredential.categories).toContain('byok-all');
  });
});

describe('list order', () => {
  test('the generic cursor order over the byokkeys key is the REST list order within a namespace, namespaces first', () => {
    const key = (
      namespace: string,
      provider: string,
      fallback: boolean,
      sortOrder: number,
      createdAt: string,
      id: string,
    ) => ({
      namespace,
      order: { provider, is_fallback: fallback, sort_order: sortOrder, created_at: createdAt, id },
    });
    const entries = [
      key('acme', 'openai', false, 2, '2026-01-01T00:00:00.000Z', 'b'),
      key('acme', 'openai', true, 0, '2026-01-01T00:00:00.000Z', 'a'),
      key('acme', 'anthropic', false, 10, '2026-01-02T00:00:00.000Z', 'c'),
      key('acme', 'openai', false, 2, '2026-01-01T00:00:00.000Z', 'a'),
      key('acme', 'openai', false, 2, '2025-12-31T00:00:00.000Z', 'z'),
      key('beta', 'anthropic', false, 0, '2026-01-01T00:00:00.000Z', 'd'),
      key('acme', 'openai', false, 10, '2026-01-01T00:00:00.000Z', 'e'),
    ];
    const tuple = (e: (typeof entries)[number]) =>
      listOrderKey({ namespace: e.namespace, key: e.order } as unknown as CredentialEntry);
    const generic = [...entries].sort((x, y) => compareCursor(tuple(x), tuple(y)));
    const rest = [...entries].sort((x, y) =>
      x.namespace !== y.namespace ? (x.namespace < y.namespace ? -1 : 1) : compareKeys(x.order, y.order),
    );
    expect(generic.map((e) => e.order.id)).toEqual(rest.map((e) => e.order.id));
    expect(generic.map((e) => e.order.id)).toEqual(['c', 'z', 'a', 'b', 'e', 'a', 'd']);
  });
});
