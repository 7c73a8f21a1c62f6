// The spend journal's faults, with real gateway processes and a real redis-server: the spend journal belongs to one process, a bad
// line in it never keeps a gateway down, and a record replayed after the ledger's id retention counts once.
// - A second gateway on the same --ledger-journal is refused at start (exit 1, the directory, the holder and the way
//   out on stderr) while the first keeps journaling into a segment that still exists; killed and restarted, the first
//   loses nothing and counts nothing twice.
// - Lines of the wrong shape (`null`, a hold missing fields) are skipped and counted, named by file and line in the
//   log; the gateway starts and replays the rest.
// - A record that landed in Redis while its gateway could no longer write the ack (Redis paused its writes, then the
//   gateway was frozen and killed), replayed after the id sets lapsed (deleted here, as 20-40 minutes would), counts
//   once: the journal's keep mark in Redis still names it.

import { appendFileSync, readdirSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { Redis } from 'ioredis';
import {
  type GatewayProcess,
  journalDir,
  kill9,
  load,
  REQUEST_MICROS,
  recorded,
  type SpendStack,
  settle,
  startSpendStack,
  stopGateway,
} from '../../support/gateway-fleet.ts';
import { sleep, until } from '../../support/until.ts';

const LANES = 4;
const segmentsOf = (dir: string) =>
  readdirSync(dir)
    .filter((f) => f.startsWith('spend-'))
    .sort();
/** Waits until `traffic` has been served at least `count` answers (not a fixed time: a loaded machine serves slower). */
const untilServed = (traffic: { served: string[] }, count: number) =>
  until(`${count} answers served`, () => traffic.served.length >= count, 30_000);
/** The spend segments a process has open, and whether each still exists (not "(deleted)"). */
const openSegments = (pid: number) =>
  readdirSync(`/proc/${pid}/fd`)
    .map((fd) => {
      try {
        return readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch {
        return '';
      }
    })
    .filter((l) => l.includes('/spend-'));
const metric = async (gw: GatewayProcess, name: string) => {
  const text = await (await fetch(`${gw.opsUrl}/metrics`)).text();
  return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
};

describe('the spend journal belongs to one process and survives bad lines and late replays', () => {
  let stack: SpendStack;
  let admin: Redis;
  beforeAll(async () => {
    stack = await startSpendStack('journal-faults');
    admin = new Redis(stack.redis.url);
  }, 90_000);
  afterAll(async () => {
    admin?.disconnect();
    await stack?.close();
  });

  test('a second gateway on the same journal directory refuses to start, naming it, the holder and the way out; the first keeps journaling', async () => {
    const dir = journalDir(stack, 'journal-two');
    const first = await stack.gateway(dir);
    const traffic = load(first, LANES);
    await untilServed(traffic, 25);
    let refusal = '';
    await stack.gateway(dir).then(
      (second) => {
        second.child.kill('SIGKILL');
        throw new Error('the second gateway started');
      },
      (err: unknown) => {
        refusal = (err as Error).message;
      },
    );
    expect(refusal).toContain('gateway exited (1)');
    expect(refusal).toContain(`spend journal ${dir} is in use by another gateway (pid ${first.child.pid} on `);
    expect(refusal).toContain(`remove ${join(dir, 'journal.lock')}`);
    // The first goes on serving and journaling into a segment that was not deleted under it.
    await untilServed(traffic, traffic.served.length + 10);
    const open = openSegments(first.child.pid!);
    expect(open.length).toBeGreaterThan(0);
    expect(open.filter((l) => l.endsWith('(deleted)'))).toEqual([]);
    expect(segmentsOf(dir).length).toBeGreaterThan(0);
    await kill9(first);
    await traffic.stop();
    const restarted = await stack.gateway(dir);
    const result = await settle(stack.redis.url, traffic.served, 30_000);
    process.stderr.write(
      `[journal faults] second opener refused, first killed and restarted: ${JSON.stringify(result)}\n`,
    );
    expect(result.served).toBeGreaterThan(20);
    expect(result.lost).toBe(0);
    expect(result.countedTwice).toBe(0);
    await stopGateway(restarted);
  }, 120_000);

  test('lines of the wrong shape are skipped and counted with their file and line, not a TypeError at every start', async () => {
    const dir = journalDir(stack, 'journal-bad');
    const gw = await stack.gateway(dir);
    const traffic = load(gw, LANES);
    await untilServed(traffic, 10);
    await kill9(gw);
    await traffic.stop();
    const file = join(dir, segmentsOf(dir).at(-1)!);
    appendFileSync(file, 'null\n{"h":{"id":"gen-bad-hold"}}\n');
    const restarted = await stack.gateway(dir);
    expect(await metric(restarted, 'byok_ledger_journal_unreadable_lines_total')).toBe(2);
    const result = await settle(stack.redis.url, traffic.served, 30_000);
    expect(result.lost).toBe(0);
    expect(result.countedTwice).toBe(0);
    const warning = restarted.output
      .join('')
      .split('\n')
      .find((l) => l.includes('unreadable lines skipped'));
    expect(warning).toBeDefined();
    const logged = JSON.parse(warning!) as { lines: number; first: { file: string; line: number; reason: string }[] };
    expect(logged.lines).toBe(2);
    expect(logged.first.map((s) => s.file)).toEqual([file, file]);
    expect(logged.first[0]!.reason).toBe('not a JSON object');
    expect(logged.first[1]!.line).toBe(logged.first[0]!.line + 1);
    expect(restarted.output.join('')).not.toContain('TypeError');
    await stopGateway(restarted);
  }, 120_000);

  test('a record that landed just before the kill, replayed after the id retention, counts once', async () => {
    const dir = journalDir(stack, 'journal-late');
    const gw = await stack.gateway(dir);
    // Warm (its first requests set up the upstream connection), and everything of the warm-up landed and acked.
    const warm = load(gw, LANES);
    await untilServed(warm, 10);
    await warm.stop();
    await settle(stack.redis.url, warm.served, 10_000);
    await sleep(100);
    // Redis holds the gateway's writes; the requests are answered (the record is journaled before the response).
    await admin.call('CLIENT', 'PAUSE', '2500', 'WRITE');
    const traffic = load(gw, LANES);
    const t0 = Date.now();
    while (traffic.served.length < 10 && Date.now() - t0 < 600) await sleep(20);
    // Frozen before its 1 s command timeout: it never sees the writes land, so it never writes their acks.
    gw.child.kill('SIGSTOP');
    const stopping = traffic.stop(); // requests in flight to the frozen gateway end with its kill
    await sleep(3000); // the pause ends: Redis runs the writes it held
    await kill9(gw);
    await stopping;
    const served = new Set(traffic.served);
    const landed = await recorded(stack.redis.url);
    const landedServed = [...served].filter((id) => landed.ids.has(id));
    expect(landedServed.length).toBeGreaterThan(0);
    // 20-40 minutes later: the id sets of that time have lapsed. The journal's keep marks have not.
    for (const key of await admin.keys('*:ids:*')) await admin.del(key);
    expect((await admin.keys('*:jids:*')).length).toBeGreaterThan(0);
    const restarted = await stack.gateway(dir);
    const deadline = Date.now() + 30_000;
    while ((await metric(restarted, 'byok_ledger_pending_records')) > 0 && Date.now() < deadline) await sleep(200);
    await sleep(500);
    const replayed = await metric(restarted, 'byok_ledger_journal_replayed_total');
    // What the replay applied anew: only records that had not landed (their ids are in the new id sets).
    const after = await recorded(stack.redis.url);
    const appliedAgain = [...after.ids].filter((id) => landed.ids.has(id));
    process.stderr.write(
      `[journal faults] late replay: ${served.size} served, ${landedServed.length} of them landed before the kill, ${replayed} replayed, ${after.ids.size} applied by the replay, ${appliedAgain.length} applied twice\n`,
    );
    expect(replayed).toBeGreaterThanOrEqual(landedServed.length);
    expect(appliedAgain).toEqual([]);
    expect(after.byokListMicros - landed.byokListMicros).toBe(after.ids.size * REQUEST_MICROS);
    expect([...served].filter((id) => !landed.ids.has(id) && !after.ids.has(id))).toEqual([]);
    await stopGateway(restarted);
  }, 120_000);
});
