// Durability of records, with real gateway processes and a real redis-server: spend is journaled before each response
// completes, so a gateway killed with kill -9 (Redis up, or in the middle of a Redis outage) loses no served request
// once it restarts and replays, and the replay counts nothing twice (records are idempotent by generation id). A
// Redis outage under load loses nothing either. The outage is Redis stopped with its data kept (redisDown). The same scenarios without a journal, and the 60 s outage, are in
// bench/ledger-faults.ts (docs/ledger.md, "Durability of records").

import { readdirSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  journalDir,
  kill9,
  load,
  redisDown,
  type SpendStack,
  settle,
  startSpendStack,
  stopGateway,
} from '../../support/gateway-fleet.ts';
import { sleep } from '../../support/until.ts';

const LANES = 8;

describe('spend survives the gateway: kill -9 and Redis outages', () => {
  let stack: SpendStack;
  beforeAll(async () => {
    stack = await startSpendStack('spend-kill');
  }, 90_000);
  afterAll(async () => {
    await stack?.close();
  });

  test('kill -9 under load with Redis up: after the restart replays its journal, every served request is recorded once', async () => {
    const dir = journalDir(stack, 'journal-a');
    const gw = await stack.gateway(dir);
    const traffic = load(gw, LANES);
    await sleep(3000);
    await kill9(gw);
    await traffic.stop();
    expect(traffic.served.length).toBeGreaterThan(50);
    const restarted = await stack.gateway(dir);
    const result = await settle(stack.redis.url, traffic.served, 30_000);
    process.stderr.write(`[gateway kill] Redis up: ${JSON.stringify(result)}\n`);
    expect(result.lost).toBe(0);
    expect(result.countedTwice).toBe(0);
    await stopGateway(restarted);
    // Everything landed: no segment is left, only the journal's id (and its lock went with the gateway).
    expect(readdirSync(dir)).toEqual(['journal.id']);
  }, 120_000);

  test('Redis down, load, kill -9, Redis back, restart: 0 lost, 0 counted twice', async () => {
    const dir = journalDir(stack, 'journal-b');
    const gw = await stack.gateway(dir);
    const traffic = load(gw, LANES);
    await sleep(500);
    await redisDown(stack.redis);
    await sleep(3000);
    await kill9(gw);
    await traffic.stop();
    await stack.redis.start();
    const restarted = await stack.gateway(dir);
    const result = await settle(stack.redis.url, traffic.served, 45_000);
    process.stderr.write(`[gateway kill] during a Redis outage: ${JSON.stringify(result)}\n`);
    expect(result.served).toBeGreaterThan(50);
    expect(result.lost).toBe(0);
    expect(result.countedTwice).toBe(0);
    await stopGateway(restarted);
  }, 150_000);

  test('a Redis outage under load (no kill): every served request recorded once when Redis is back', async () => {
    const gw = await stack.gateway(journalDir(stack, 'journal-c'));
    const traffic = load(gw, LANES);
    await sleep(500);
    await redisDown(stack.redis);
    await sleep(8000);
    await stack.redis.start();
    await sleep(1500);
    await traffic.stop();
    const result = await settle(stack.redis.url, traffic.served, 45_000);
    process.stderr.write(`[gateway kill] 8 s Redis outage under load: ${JSON.stringify(result)}\n`);
    expect(result.served).toBeGreaterThan(50);
    expect(result.lost).toBe(0);
    expect(result.countedTwice).toBe(0);
    await stopGateway(gw);
  }, 150_000);
});
