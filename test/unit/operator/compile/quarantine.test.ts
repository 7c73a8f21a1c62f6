// The compile pipeline's quarantine book (src/operator/compile/quarantine.ts): which accounts are held back, what
// they keep, when they are released. Pure: the pipeline's integration test covers the apiserver's refusals.
import { describe, expect, test } from '@jest/globals';
import { KubeApiError } from '../../../../src/kube/client.ts';
import { isRefusal, QuarantineBook, refusalMessage } from '../../../../src/operator/compile/quarantine.ts';
import type { Quarantine } from '../../../../src/operator/compile/types.ts';

interface Entry {
  digest: string;
}

const refusal = (
  status = 422,
  message = 'ConfigMap "byok-routing-3" is invalid: data: Too long: must have at most 1048576 bytes',
) => new KubeApiError(status, { reason: status === 413 ? 'RequestEntityTooLarge' : 'Invalid', message }, 'apply');

function book() {
  const logs: string[] = [];
  const notes: [string, Quarantine | undefined][] = [];
  const log = {
    info: (_o: object, msg: string) => void logs.push(msg),
    warn: (_o: object, msg: string) => void logs.push(msg),
  };
  const q = new QuarantineBook<Entry>(
    (e) => e.digest,
    log as never,
    (ns, quarantine) => void notes.push([ns, quarantine]),
  );
  return { q, logs, notes };
}

describe('QuarantineBook', () => {
  test('an account refused with no last good state is left out; the notice is sent once per distinct message', () => {
    const { q, notes } = book();
    const kept: (Entry | undefined)[] = [];
    q.hold('a', { digest: 'd1' }, 'ConfigMap', 'byok-routing-3', refusal(), (good) => kept.push(good));
    expect(kept).toEqual([undefined]);
    expect(q.size).toBe(1);
    const held = q.snapshot().get('a')!;
    expect(held).toMatchObject({ kind: 'ConfigMap', status: 422, reason: 'Invalid', keptLastGood: false });
    expect(held.message).toContain('it is left out of routing');
    expect(held).not.toHaveProperty('refused');
    q.hold('a', { digest: 'd1' }, 'ConfigMap', 'byok-routing-3', refusal(), () => undefined);
    expect(notes).toHaveLength(1);
    expect(notes[0]![0]).toBe('a');
  });

  test('an account written before keeps its last good entry when the new one is refused', () => {
    const { q } = book();
    const good = { digest: 'g' };
    q.settle(
      new Set(['a']),
      () => true,
      () => good,
    );
    const kept: (Entry | undefined)[] = [];
    q.hold('a', { digest: 'bad' }, 'Secret', 'byok-bundle-0', refusal(413, 'too large'), (e) => kept.push(e));
    expect(kept).toEqual([good]);
    expect(q.snapshot().get('a')).toMatchObject({
      kind: 'Secret',
      status: 413,
      reason: 'RequestEntityTooLarge',
      keptLastGood: true,
    });
    expect(q.snapshot().get('a')!.message).toContain('the gateway keeps its last good routing');
  });

  test('a last good entry equal to the refused one is not kept (the same bytes would be refused again)', () => {
    const { q } = book();
    q.settle(
      new Set(['a']),
      () => true,
      () => ({ digest: 'same' }),
    );
    const kept: (Entry | undefined)[] = [];
    q.hold('a', { digest: 'same' }, 'ConfigMap', 'byok-routing-0', refusal(), (e) => kept.push(e));
    expect(kept).toEqual([undefined]);
  });

  test('the same input stays held back; a changed input is retried and released once a write including it lands', () => {
    const { q, notes } = book();
    const refused = { digest: 'r' };
    q.hold('a', refused, 'ConfigMap', 'byok-routing-0', refusal(), () => undefined);
    expect(q.holdsBack('a', 'r')).toBe(true);
    expect(q.refused('a', refused)).toBe(true);
    // Not retried: a write without it does not release it.
    q.settle(
      new Set(['b']),
      () => true,
      () => undefined,
    );
    expect(q.size).toBe(1);
    expect(q.holdsBack('a', 'fixed')).toBe(false);
    expect(q.holdsBack('b', 'anything')).toBe(false);
    const fixed = { digest: 'fixed' };
    q.settle(
      new Set(['a']),
      () => true,
      (ns) => (ns === 'a' ? fixed : undefined),
    );
    expect(q.size).toBe(0);
    expect(notes.at(-1)).toEqual(['a', undefined]);
    // The released entry is the new last good one.
    const kept: (Entry | undefined)[] = [];
    q.hold('a', { digest: 'worse' }, 'ConfigMap', 'byok-routing-0', refusal(), (e) => kept.push(e));
    expect(kept).toEqual([fixed]);
  });

  test('a retried account refused again is not released', () => {
    const { q } = book();
    q.hold('a', { digest: 'r1' }, 'ConfigMap', 'byok-routing-0', refusal(), () => undefined);
    expect(q.holdsBack('a', 'r2')).toBe(false);
    q.hold('a', { digest: 'r2' }, 'ConfigMap', 'byok-routing-0', refusal(), () => undefined);
    q.settle(
      new Set(['a']),
      () => true,
      () => ({ digest: 'r1' }),
    );
    expect(q.size).toBe(1);
  });

  test('an account that stopped being one is released and forgotten', () => {
    const { q, notes } = book();
    q.settle(
      new Set(['a']),
      () => true,
      () => ({ digest: 'g' }),
    );
    q.hold('a', { digest: 'x' }, 'ConfigMap', 'byok-routing-0', refusal(), () => undefined);
    q.settle(
      new Set(['a']),
      () => false,
      () => undefined,
    );
    expect(q.size).toBe(0);
    expect(notes.at(-1)).toEqual(['a', undefined]);
    const kept: (Entry | undefined)[] = [];
    q.hold('a', { digest: 'y' }, 'ConfigMap', 'byok-routing-0', refusal(), (e) => kept.push(e));
    expect(kept).toEqual([undefined]);
  });
});

describe('refusals', () => {
  test('only content refusals (400, 413, 422) isolate; other errors are retried', () => {
    for (const status of [400, 413, 422]) expect(isRefusal(refusal(status))).toBe(true);
    for (const status of [403, 409, 500, 503]) expect(isRefusal(refusal(status))).toBe(false);
    expect(isRefusal(new Error('socket hang up'))).toBe(false);
  });

  test('the message drops quoted values and is bounded', () => {
    expect(refusalMessage(refusal(422, 'spec.data["sk-live-secret"]: Invalid value: "sk-live-secret"'))).not.toContain(
      'sk-live-secret',
    );
    expect(refusalMessage(refusal(422, 'x'.repeat(1000))).length).toBeLessThanOrEqual(301);
  });
});
