import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from '@jest/globals';
import type { KubeConfig, KubernetesObject } from '@kubernetes/client-node';
import pino from 'pino';
import { Registry } from 'prom-client';
import type { AccountSnapshot } from '../../../src/compiler/snapshot.ts';
import { INDEX_NAME, SHA_ANNOTATION } from '../../../src/contract/routing.ts';
import { addBundleKey, CompilePipeline } from '../../../src/operator/compile/pipeline.ts';
import type { RoutingStore, StoredKind } from '../../../src/operator/compile/store.ts';
import { advance, advanceUntil, useFakeClock, useRealClock } from '../../support/fake-clock.ts';
import { sizedSnapshot } from '../../support/fixtures/compiler.ts';
import { beforeCap } from '../../support/order.ts';
import { sleep } from '../../support/until.ts';

interface Op {
  op: 'apply' | 'delete';
  kind: string;
  name: string;
}

function fakeStore(failApplies = 0) {
  const objects = new Map<string, KubernetesObject>();
  const ops: Op[] = [];
  let fail = failApplies;
  const store: RoutingStore = {
    async list(kind: StoredKind) {
      return [...objects.values()]
        .filter((o) => o.kind === kind)
        .map((o) => ({ kind, name: o.metadata!.name!, sha256: o.metadata!.annotations?.[SHA_ANNOTATION] ?? '' }));
    },
    async apply(obj) {
      if (fail > 0) {
        fail--;
        throw new Error('apiserver unavailable');
      }
      ops.push({ op: 'apply', kind: obj.kind!, name: obj.metadata!.name! });
      objects.set(`${obj.kind}/${obj.metadata!.name}`, obj);
    },
    async delete(kind, name) {
      ops.push({ op: 'delete', kind, name });
      objects.delete(`${kind}/${name}`);
    },
    async readSecret(name) {
      return (objects.get(`Secret/${name}`) as { data?: Record<string, string> } | undefined)?.data;
    },
    async readSecretWithVersion(name) {
      const data = await store.readSecret(name);
      return data ? { data, resourceVersion: '1' } : undefined;
    },
    async createSecret(obj) {
      if (objects.has(`Secret/${obj.metadata!.name}`)) return 'exists';
      objects.set(`Secret/${obj.metadata!.name}`, obj);
      return 'created';
    },
    async updateSecretData(name, data) {
      const s = objects.get(`Secret/${name}`) as { data: Record<string, string> };
      s.data = { ...s.data, ...data };
    },
  };
  return { store, ops, objects };
}

function source(n: number, creds = 10) {
  const snaps = new Map<string, AccountSnapshot>();
  for (let i = 0; i < n; i++) snaps.set(`acct-${i}`, sizedSnapshot(`acct-${i}`, creds));
  return {
    snaps,
    accountNamespaces: () => [...snaps.keys()],
    snapshot: (ns: string) => snaps.get(ns)!,
  };
}

function make(src: ReturnType<typeof source>, store: RoutingStore, registry = new Registry()) {
  return new CompilePipeline({
    kubeConfig: {} as KubeConfig,
    routingNamespace: 'byok-system',
    source: src,
    logger: pino({ level: 'silent' }),
    registry,
    store,
    coalesceMs: 5,
    keyReloadMs: 0,
    shardOptions: { targetBytes: 32 * 1024 },
    bundleShardOptions: { targetBytes: 32 * 1024 },
  });
}

describe('compile pipeline', () => {
  // The scheduling tests below run on the test's clock (test/support/fake-clock.ts): the seconds of changes and
  // quiet they describe pass at once, and the waits they check are the scheduler's decisions, not stopwatch readings.
  afterEach(useRealClock);

  it('writes everything once at start, then one shard + index per change, index after shards', async () => {
    const { store, ops } = fakeStore();
    const src = source(60);
    const registry = new Registry();
    const p = make(src, store, registry);
    await p.start();
    const cms = p.current().configMaps;
    expect(cms.length).toBeGreaterThan(3);
    expect(ops.at(-1)).toEqual({ op: 'apply', kind: 'ConfigMap', name: INDEX_NAME });
    ops.length = 0;

    // A flag change: one shard and the index; the bundle is untouched (payloads did not change).
    src.snaps.get('acct-5')!.credentials[2]!.resource.spec.isRequired = true;
    p.markDirty('acct-5');
    const r = await p.flush();
    expect(r).toMatchObject({ shardWrites: 1, bundleWrites: 0, indexWritten: true, deleted: 0 });
    expect(ops.map((o) => o.kind)).toEqual(['ConfigMap', 'ConfigMap']);
    expect(ops.at(-1)!.name).toBe(INDEX_NAME);
    const writes = await registry.getSingleMetricAsString('byok_configmap_writes_total');
    expect(writes).toContain('byok_configmap_writes_total{op="apply",object="index"}');
    ops.length = 0;

    // A payload rotation: the bundle Secret of that account is rewritten, the ConfigMaps are not (same label).
    src.snaps.get('acct-5')!.credentials[2]!.verdict.payload = 'sk-rotated';
    p.markDirty('acct-5');
    expect(await p.flush()).toMatchObject({ shardWrites: 0, bundleWrites: 1, indexWritten: false });

    // Nothing changed: nothing written.
    ops.length = 0;
    p.markDirty('acct-9');
    await p.flush();
    expect(ops).toEqual([]);
    await p.stop();
  });

  it('coalesces a burst of changes into a bounded number of writes', async () => {
    const { store, ops } = fakeStore();
    const src = source(40);
    const p = make(src, store);
    await p.start();
    ops.length = 0;
    for (let round = 0; round < 50; round++) {
      src.snaps.get('acct-3')!.credentials[0]!.verdict.sortOrder = 1000 + round;
      p.markDirty('acct-3');
    }
    await p.flush();
    expect(ops.length).toBeLessThanOrEqual(2);
    await p.stop();
  });

  /** A pipeline over 40 accounts whose writes take 10 ms each, as on a real apiserver (changes arrive mid-run). */
  async function slowPipeline(coalesceMs: number) {
    const { store: fast } = fakeStore();
    const store: RoutingStore = {
      ...fast,
      apply: async (obj) => {
        await sleep(10);
        await fast.apply(obj);
      },
    };
    const src = source(40);
    const p = new CompilePipeline({
      kubeConfig: {} as KubeConfig,
      routingNamespace: 'byok-system',
      source: src,
      logger: pino({ level: 'silent' }),
      store,
      coalesceMs,
      maxBatchDelayMs: 1000,
      keyReloadMs: 60_000,
      shardOptions: { targetBytes: 32 * 1024 },
      bundleShardOptions: { targetBytes: 32 * 1024 },
    });
    await advanceUntil('the first run', p.start());
    const runs: number[] = [];
    p.onCompiled(() => runs.push(performance.now()));
    return { p, src, runs };
  }
  /** A change every 5 ms of the test's clock for `ms`, round-robin over the 40 accounts. */
  async function stream(p: CompilePipeline, src: ReturnType<typeof source>, ms: number, base: number) {
    for (let i = 0; i * 5 < ms; i++) {
      src.snaps.get(`acct-${i % 40}`)!.credentials[0]!.verdict.sortOrder = base + i;
      p.markDirty(`acct-${i % 40}`);
      await advance(5);
    }
  }
  /**
   * The delay of the next timer armed from now on, then the spy is gone: the wait the scheduler decides on for a
   * change, read as a decision (a loaded machine cannot change it), not measured with a stopwatch.
   */
  const nextTimerDelay = () =>
    new Promise<number | undefined>((resolve) => {
      const real = globalThis.setTimeout;
      globalThis.setTimeout = ((callback: () => void, ms?: number) => {
        globalThis.setTimeout = real;
        resolve(ms);
        return real(callback, ms);
      }) as typeof setTimeout;
    });
  /** Makes a change while the next run is still in flight (as it reports), so that it ends with work waiting. */
  const changeDuringNextRun = (p: CompilePipeline, change: () => void) =>
    new Promise<void>((resolve) => {
      const off = p.onCompiled(() => {
        off();
        change();
        resolve();
      });
    });
  const nextCompile = (p: CompilePipeline) =>
    new Promise<void>((resolve) => {
      const off = p.onCompiled(() => {
        off();
        resolve();
      });
    });

  it('batches a sustained stream of changes into fewer runs, and a later single change is compiled at once', async () => {
    useFakeClock();
    const { p, src, runs } = await slowPipeline(5);
    // A change every 5 ms for 1.2 s: without batching, a run right after each ~20 ms run (~50 runs).
    await stream(p, src, 1200, 2000);
    await advanceUntil('the flush', p.flush());
    expect(runs.length).toBeLessThan(20);
    const gaps = runs.slice(1).map((t, i) => t - runs[i]!);
    expect(Math.max(...gaps)).toBeGreaterThanOrEqual(150);
    // Quiet for longer than maxBatchDelayMs (a run the stream had timed is over): the next single change waits only
    // coalesceMs (5 ms); the trap waited the delay the stream built up (640 ms after 1.2 s of changes).
    await advance(1100);
    src.snaps.get('acct-7')!.credentials[0]!.verdict.sortOrder = 99_999;
    const compiled = nextCompile(p);
    const armed = nextTimerDelay();
    p.markDirty('acct-7');
    expect(await armed).toBe(5);
    await advanceUntil('the change alone', compiled);
    await advanceUntil('stop', p.stop());
  });

  it('after a cold-start burst, single changes every 700 ms are each compiled after coalesceMs, not the batch delay', async () => {
    // The operator's defaults: 20 ms coalescing, 1 s batch cap (the trap was 20 ms x 2^5 = 640 ms per change).
    useFakeClock();
    const { p, src, runs } = await slowPipeline(20);
    // Cold-start burst: a change every 5 ms for 2 s drives the batch delay up to its cap.
    await stream(p, src, 2000, 3000);
    await advanceUntil('the flush', p.flush());
    // The burst was batched (the precondition of the trap): far fewer runs than changes.
    expect(runs.length).toBeLessThan(20);
    // Steady state: one change every 700 ms, each finding the pipeline idle. Each waits coalesceMs (20 ms), then is
    // compiled; the trap waited the batch delay (>= 640 ms after this burst, up to the 1 s cap) for every change.
    const armed: (number | undefined)[] = [];
    // Past any run the burst had timed (maxBatchDelayMs).
    await advance(1100);
    for (let i = 0; i < 6; i++) {
      await advance(700);
      src.snaps.get(`acct-${(i * 7) % 40}`)!.credentials[1]!.verdict.sortOrder = 50_000 + i;
      const compiled = nextCompile(p);
      const delay = nextTimerDelay();
      p.markDirty(`acct-${(i * 7) % 40}`);
      armed.push(await delay);
      await advanceUntil(`change ${i}`, compiled);
    }
    expect(armed).toEqual(Array(6).fill(20));
    await advanceUntil('stop', p.stop());
  });

  /** 40 accounts behind a reconcile backlog (on until `reconcilers.backlog` turns false), capped at backlogDelayMs. */
  async function backloggedPipeline(backlogDelayMs: number) {
    const { store } = fakeStore();
    const src = source(40);
    const reconcilers = { backlog: true };
    const p = new CompilePipeline({
      kubeConfig: {} as KubeConfig,
      routingNamespace: 'byok-system',
      source: src,
      logger: pino({ level: 'silent' }),
      store,
      coalesceMs: 5,
      keyReloadMs: 60_000,
      backlog: () => reconcilers.backlog,
      backlogDelayMs,
      shardOptions: { targetBytes: 32 * 1024 },
      bundleShardOptions: { targetBytes: 32 * 1024 },
    });
    await advanceUntil('the first run', p.start());
    const changeAll = (v: number) => {
      for (let i = 0; i < 40; i++) {
        src.snaps.get(`acct-${i}`)!.credentials[0]!.verdict.sortOrder = v + i;
        p.markDirty(`acct-${i}`);
      }
    };
    return { p, reconcilers, changeAll };
  }

  it('while the reconcilers are backed up, runs wait for the backlog to clear, backlogDelayMs at most', async () => {
    useFakeClock();
    const { p, changeAll } = await backloggedPipeline(1500);
    const runs: number[] = [];
    p.onCompiled(() => runs.push(performance.now()));
    // A change arrives during the first run after start, so the pipeline is busy when it finishes: held back.
    const began = performance.now();
    changeAll(10_000);
    await advanceUntil(
      'the first run',
      changeDuringNextRun(p, () => changeAll(20_000)),
    );
    await advance(600);
    // Still backed up: nothing ran for 600 ms although changes were waiting.
    expect(runs.length).toBe(1);
    // The cap: a run happens by backlogDelayMs even while the backlog persists, and not before.
    await advanceUntil('the capped run', nextCompile(p));
    expect(performance.now() - runs[0]!).toBeGreaterThanOrEqual(1500);
    expect(performance.now() - began).toBeGreaterThanOrEqual(1500);
    await advanceUntil('stop', p.stop());
  });

  it('a run held for a reconcile backlog starts once the backlog clears, not at the cap', async () => {
    // A backlog cap of a minute: the held run must start on the backlog clearing (within the 250 ms poll), before
    // a cap of half that fires.
    useFakeClock();
    const { p, reconcilers, changeAll } = await backloggedPipeline(60_000);
    let runs = 0;
    p.onCompiled(() => runs++);
    // As above: changes arrive during a run, which then ends with work waiting: the next run is held.
    changeAll(10_000);
    await advanceUntil(
      'the first run',
      changeDuringNextRun(p, () => changeAll(20_000)),
    );
    await advance(300);
    expect(runs).toBe(1);
    const held = beforeCap(30_000, 'the backlog cap', () => nextCompile(p));
    reconcilers.backlog = false;
    await advanceUntil('the held run', held);
    expect(runs).toBe(2);
    await advanceUntil('stop', p.stop());
  });

  it('a change that arrives during the run ending a backlog hold is compiled after coalesceMs, not the batch delay', async () => {
    useFakeClock();
    const { store: fast } = fakeStore();
    let backlog = false;
    let onApply: (() => void) | undefined;
    const store: RoutingStore = {
      ...fast,
      apply: async (obj) => {
        onApply?.();
        await sleep(40);
        await fast.apply(obj);
      },
    };
    const src = source(40);
    const p = new CompilePipeline({
      kubeConfig: {} as KubeConfig,
      routingNamespace: 'byok-system',
      source: src,
      logger: pino({ level: 'silent' }),
      store,
      coalesceMs: 20,
      maxBatchDelayMs: 2000,
      keyReloadMs: 60_000,
      backlog: () => backlog,
      backlogDelayMs: 5000,
      shardOptions: { targetBytes: 32 * 1024 },
      bundleShardOptions: { targetBytes: 32 * 1024 },
    });
    await advanceUntil('the first run', p.start());
    // A sustained stream (a cold start): the batch delay climbs to its cap; then the reconcilers back up.
    await stream(p, src, 1500, 80_000);
    backlog = true;
    // Changes keep coming while backed up, until the run in progress (or the next) ends with work waiting: from then
    // on the next run is held, and it is the one that ends the hold.
    let holding = false;
    void nextCompile(p).then(() => (holding = true));
    for (let i = 0; !holding; i++) {
      src.snaps.get(`acct-${i % 40}`)!.credentials[0]!.verdict.sortOrder = 90_000 + i;
      p.markDirty(`acct-${i % 40}`);
      await advance(5);
    }
    // The backlog clears; while the held run writes, one more change arrives (the first change of normal traffic).
    let changedAt = 0;
    onApply = () => {
      onApply = undefined;
      changedAt = performance.now();
      src.snaps.get('acct-7')!.credentials[1]!.verdict.sortOrder = 99_999;
      p.markDirty('acct-7');
    };
    // The held run (every account) ends; the next timer armed is the wait before the run with the change alone.
    let armed: Promise<number | undefined> | undefined;
    const heldRunEnded = new Promise<void>((resolve) => {
      const off = p.onCompiled(() => {
        if (changedAt > 0) {
          off();
          armed = nextTimerDelay();
          resolve();
        }
      });
    });
    const followUp = new Promise<void>((resolve) => {
      const off = p.onCompiled((r) => {
        if (changedAt > 0 && r.accounts.includes('acct-7') && !r.accounts.includes('acct-8')) {
          off();
          resolve();
        }
      });
    });
    backlog = false;
    await advanceUntil('the held run', heldRunEnded);
    // coalesceMs (20 ms), then that run; the trap waited the batch delay the stream built up, or the held run's
    // length (each over a second here), first.
    expect(await armed).toBe(20);
    await advanceUntil('the change alone', followUp);
    await advanceUntil('stop', p.stop());
  });

  it('a run over many accounts lets timers and I/O run between accounts (the run after a cold start)', async () => {
    const { store } = fakeStore();
    const src = source(300);
    const p = make(src, store);
    await p.start();
    for (let i = 0; i < 300; i++) {
      src.snaps.get(`acct-${i}`)!.credentials[0]!.verdict.sortOrder = 70_000 + i;
      p.markDirty(`acct-${i}`);
    }
    // The fake store answers in microtasks, so without a yield the whole run (300 compiles, reseals and writes)
    // is one task and the timer below only fires after it.
    let finished = false;
    const run = p.flush().then((r) => {
      finished = true;
      return r;
    });
    const began = performance.now();
    const firedDuringRun = await new Promise<boolean>((resolve) => setTimeout(() => resolve(!finished), 1));
    const result = await run;
    expect(result?.accounts.length).toBe(300);
    // Only meaningful when the run was long enough to yield at all (10 ms slices).
    expect(performance.now() - began).toBeGreaterThan(20);
    expect(firedDuringRun).toBe(true);
    await p.stop();
  });

  it('deletes stale shards after the index when accounts go away, and a restart rewrites nothing', async () => {
    const { store, ops, objects } = fakeStore();
    const src = source(50);
    const p = make(src, store);
    await p.start();
    const before = p.current().configMaps.length;
    for (let i = 5; i < 50; i++) {
      src.snaps.delete(`acct-${i}`);
      p.markDirty(`acct-${i}`);
    }
    ops.length = 0;
    await p.flush();
    const deletes = ops.filter((o) => o.op === 'delete');
    expect(deletes.length).toBeGreaterThan(0);
    const indexAt = ops.findIndex((o) => o.name === INDEX_NAME);
    expect(ops.findIndex((o) => o.op === 'delete')).toBeGreaterThan(indexAt);
    expect(p.current().configMaps.length).toBeLessThan(before);
    expect([...objects.keys()].filter((k) => k.startsWith('ConfigMap/')).sort()).toEqual(
      p.current().configMaps.map((n) => `ConfigMap/${n}`),
    );
    await p.stop();

    ops.length = 0;
    const again = make(src, store);
    await again.start();
    expect(ops).toEqual([]);
    await again.stop();
  });

  it('retries after a failed write and converges', async () => {
    useFakeClock();
    const { store, objects } = fakeStore(3);
    const src = source(5);
    const p = make(src, store);
    await advanceUntil('start', p.start());
    // Three failed writes back off 200, 400 and 800 ms: the index is there within a few seconds of the clock.
    for (let waited = 0; !objects.has(`ConfigMap/${INDEX_NAME}`) && waited < 10_000; waited += 50) await advance(50);
    expect(objects.has(`ConfigMap/${INDEX_NAME}`)).toBe(true);
    await advanceUntil('stop', p.stop());
  });

  it('never writes a payload outside the bundle Secrets; rotation reseals under the new key', async () => {
    const { store, objects } = fakeStore();
    const canary = `CANARY-${randomBytes(6).toString('hex')}`;
    const src = source(3);
    src.snaps.set(
      'canary',
      sizedSnapshot('canary', 30, (i) => `${canary}-${i}`),
    );
    const p = make(src, store);
    await p.start();
    for (const o of objects.values()) {
      const text = JSON.stringify(o);
      expect(text).not.toContain(canary);
      for (const v of Object.values((o as { data?: Record<string, string> }).data ?? {}))
        expect(Buffer.from(v, 'base64').toString('latin1')).not.toContain(canary);
      for (const v of Object.values((o as { binaryData?: Record<string, string> }).binaryData ?? {}))
        expect(Buffer.from(v, 'base64').toString('latin1')).not.toContain(canary);
    }
    const kids = () =>
      new Set(
        [...objects.values()]
          .filter((o) => o.metadata!.name!.startsWith('byok-bundle-') && o.metadata!.name !== 'byok-bundle-key')
          .flatMap((o) =>
            Object.values((o as unknown as { data: Record<string, string> }).data).map(
              (v) => JSON.parse(Buffer.from(v, 'base64').toString('utf8')).kid as string,
            ),
          ),
      );
    const [oldKid] = [...kids()];
    const newKid = await addBundleKey(store, 'byok-bundle-key', { activate: true });
    p.markDirty('acct-0');
    await p.flush();
    expect(kids()).toEqual(new Set([newKid]));
    expect(newKid).not.toBe(oldKid);
    await p.stop();
  });
});
